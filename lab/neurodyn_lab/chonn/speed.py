"""CHONN speed: time per training step (forward + backward + AdamW step) of Cascaded Kirchhoff Blocks of
order 1-4 against the same backbone without them.

    python -m neurodyn_lab run chonn/speed [--threads 1] [--repeats 7] [--only chain unet fno]

Backbones (the cpu-scale experiment shapes):

* ``chain``: chonn1d, width 16, d_state 8, bidirectional, batch 32 x 256 points; "no CKB" is the lift and
  projection alone; order n = one n-cell block; exact ZOH and Euler cells.
* ``unet``: chonn_unet on 64 x 64 (Poisson), init_features 8, batch 16, CKBs (d_state 16, cross scan) at
  the bottleneck and the deepest decoder stage; order 0 = the U-Net.
* ``fno``: chonn_fno on 32 x 32 with 10 input frames (Navier-Stokes), width 20, modes 12, batch 20, the
  w0 branch replaced by a CKB (d_state 8, bi scan, as the cpu preset); order 0 = the FNO.

Median over ``--repeats`` steps after two warm-up steps; results printed as a table and written to
``lab/records/chonn/speed/chonn_speed.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import neurodyn.models as ndm
from neurodyn_lab.paths import records
from neurodyn_lab.records import write_json


def step_time(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, repeats: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(repeats + 2):
        t0 = time.perf_counter()
        loss = (model(x) - y).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


class _LiftProj(torch.nn.Module):
    """chonn1d without blocks: Linear(1 -> w) then Linear(w -> 1)."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.lift, self.proj = torch.nn.Linear(1, width), torch.nn.Linear(width, 1)

    def forward(self, x):
        return self.proj(self.lift(x))


def cases(only):
    out = []
    if "chain" in only:
        x, y = torch.randn(32, 256, 1), torch.randn(32, 256, 1)
        out.append(("chain", "no CKB", 0, "-", lambda: _LiftProj(), x, y))
        for disc in ("zoh", "euler"):
            for n in (1, 2, 3, 4):
                out.append(
                    (
                        "chain",
                        f"order {n}",
                        n,
                        disc,
                        lambda n=n, disc=disc: ndm.build("chonn1d", orders=(n,), ssm={"discretization": disc}),
                        x,
                        y,
                    )
                )
    if "unet" in only:
        x, y = torch.randn(16, 64, 64, 1), torch.randn(16, 64, 64, 1)
        for n in range(5):
            out.append(
                (
                    "unet",
                    "U-Net" if n == 0 else f"order {n}",
                    n,
                    "zoh",
                    lambda n=n: ndm.build("chonn_unet", init_features=8, order=n),
                    x,
                    y,
                )
            )
    if "fno" in only:
        x, y = torch.randn(20, 32, 32, 10), torch.randn(20, 32, 32, 1)
        cfg = dict(in_channels=10, modes=(12, 12), width=20)
        out.append(("fno", "FNO", 0, "-", lambda: ndm.build("fno", **cfg), x, y))
        for n in (1, 2, 3, 4):
            out.append(
                (
                    "fno",
                    f"order {n}",
                    n,
                    "zoh",
                    lambda n=n: ndm.build("chonn_fno", **cfg, order=n, ssm=dict(d_state=8), scan="bi"),
                    x,
                    y,
                )
            )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--only", nargs="+", default=["chain", "unet", "fno"])
    p.add_argument("--out", type=Path, default=records("chonn/speed") / "chonn_speed.json")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rows = []
    base = {}
    print(f"torch {torch.__version__}, {a.threads} thread(s), median of {a.repeats} steps")
    print(f"{'backbone':8s} {'model':8s} {'cells':>6s} {'params':>10s} {'s/step':>8s} {'x backbone':>10s}")
    for backbone, label, n, disc, make, x, y in cases(a.only):
        torch.manual_seed(0)
        model = make()
        t = step_time(model, x, y, a.repeats)
        if n == 0:
            base[backbone] = t
        rel = t / base[backbone] if backbone in base else float("nan")
        params = ndm.count_parameters(model)
        rows.append(
            {
                "backbone": backbone,
                "model": label,
                "order": n,
                "discretization": disc,
                "params": params,
                "seconds_per_step": t,
                "relative_to_backbone": rel,
            }
        )
        print(f"{backbone:8s} {label:8s} {disc:>6s} {params:>10,d} {t:8.4f} {rel:10.2f}", flush=True)
    write_json(
        a.out,
        {
            "threads": a.threads,
            "repeats": a.repeats,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "rows": rows,
        },
    )
    return 0


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run chonn/speed`` entry point (the scale does not change the shapes)."""
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
