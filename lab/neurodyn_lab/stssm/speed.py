"""ST-SSM speed: a training step of ST-SSM vs FFNO on 64 x 64 fields, and the cost of one S4D layer as the
sequence grows.

    python -m neurodyn_lab run stssm/speed                                        # both parts
    python -m neurodyn_lab run stssm/speed --part layer --lengths 64 1024

Part ``step``: one optimizer step (forward, relative-L2 loss, backward, AdamW) at the paper's settings
(width 64, 64 x 64 grid, one field channel): ST-SSM on a window of K = 4 frames -> the next frame
(369,665 parameters; also -VM and -FF), S4-FFNO on the same window, the Markovian FFNO on one frame
(2,239,682), Multi-Input FNO2D-R on 4 frames as channels. Batch ``--batch`` (4). Part ``layer``: one S4D
block (H = N = 64, ``neurodyn.nn.s4d.S4D``) forward + backward on ``(B, L, 64)`` for growing ``L``, with
the same number of tokens ``B * L`` (``--tokens``) at every length, so the per-token cost shows the
``log L`` of the FFT and the ``N L`` of the Vandermonde kernel; beside it the recurrent ``step`` used for
streaming inference (forward only, per token). Every number is the median of ``--repeats`` timed calls
after a warm-up, wall clock and the process's CPU time (``time.process_time``; on a shared machine the
wall clock also counts waiting for a core). Threads: ``--threads`` (2), ``OMP_WAIT_POLICY=PASSIVE``.
Results go to ``lab/records/stssm/speed/stssm_speed.json`` and are printed as Markdown tables.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import datetime as _dt
import json
from pathlib import Path

import torch

from neurodyn_lab.paths import records
from neurodyn_lab.records import write_json


def timed(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn()`` over ``repeats`` calls after one warm-up (neurodyn.bench.timed)."""
    from neurodyn.bench.measure import timed as bench_timed

    t = bench_timed(fn, repeats=repeats, warmup=1)
    return t["median"], t["cpu_median"]


def step_part(args) -> list[dict]:
    from neurodyn.models import build, count_parameters

    B, n, K = args.batch, args.grid, 4
    cases = [
        ("ST-SSM", "stssm", dict(dims=2), (B, K, n, n, 1)),
        ("ST-SSM-VM", "stssm", dict(dims=2, factorization="zigzag"), (B, K, n, n, 1)),
        ("ST-SSM-FF", "stssm", dict(dims=2, factorization="parallel"), (B, K, n, n, 1)),
        ("FFNO (1 frame)", "ffno", dict(modes=(0, 0), grid_size=(n, n)), (B, n, n, 1)),
        ("S4-FFNO (K = 4)", "s4_ffno", dict(modes=(0, 0), grid_size=(n, n)), (B, K, n, n, 1)),
        ("FNO2D-R (4 frames)", "fno2d_r", dict(grid_size=(n, n), in_channels=K), (B, n, n, K)),
    ]
    rows = []
    for label, name, kw, shape in cases:
        if args.only and label.split()[0] not in args.only:
            continue
        torch.manual_seed(0)
        model = build(name, **kw)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
        x = torch.randn(*shape)
        y = torch.randn(B, 1, n, n, 1) if len(shape) == 5 else torch.randn(B, n, n, 1)

        def step():
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = ((out - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean()
            loss.backward()
            opt.step()

        wall, cpu = timed(step, args.repeats)
        rows.append(
            {"model": label, "params": count_parameters(model), "input": list(shape), "wall_s": wall, "cpu_s": cpu}
        )
        print(f"  {label}: {wall:.3f} s wall, {cpu:.3f} s CPU", flush=True)
    return rows


def layer_part(args) -> list[dict]:
    from neurodyn.nn.s4d import S4D

    rows = []
    for L in args.lengths:
        B = max(1, args.tokens // L)
        torch.manual_seed(0)
        m = S4D(64, 64)
        u = torch.randn(B, L, 64, requires_grad=True)

        def fwd_bwd():
            m.zero_grad(set_to_none=True)
            m(u).square().mean().backward()

        def kernel_only():
            m.kernel(L).sum().backward()

        wall, cpu = timed(fwd_bwd, args.repeats)
        kwall, kcpu = timed(kernel_only, args.repeats)
        row = {
            "L": L,
            "B": B,
            "tokens": B * L,
            "fwd_bwd_wall_s": wall,
            "fwd_bwd_cpu_s": cpu,
            "kernel_wall_s": kwall,
            "kernel_cpu_s": kcpu,
        }
        if L <= args.max_recurrent:
            with torch.no_grad():
                steps = min(L, 256)
                state = m.initial_state(B)
                ut = u.detach()

                def rec():
                    s = state
                    for t in range(steps):
                        _, s = m.step(ut[:, t], s)

                rwall, rcpu = timed(rec, max(3, args.repeats // 2))
            row.update({"step_wall_s_per_token": rwall / (steps * B), "step_cpu_s_per_token": rcpu / (steps * B)})
        rows.append(row)
        print(
            f"  L = {L}: {wall * 1e3:.1f} ms fwd+bwd ({cpu * 1e3:.1f} ms CPU), kernel {kwall * 1e3:.2f} ms", flush=True
        )
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["step", "layer", "both"], default="both")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--grid", type=int, default=64)
    ap.add_argument("--only", nargs="*", default=None, help="step part: model labels' first words")
    ap.add_argument("--lengths", nargs="*", type=int, default=[64, 256, 1024, 4096, 16384])
    ap.add_argument("--tokens", type=int, default=16384, help="layer part: B * L at every length")
    ap.add_argument("--max-recurrent", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(records("stssm/speed") / "stssm_speed.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    meta = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_avg_start": os.getloadavg(),
        "repeats": args.repeats,
    }
    res: dict = {"meta": meta}
    if args.part in ("step", "both"):
        print(f"training step, batch {args.batch}, {args.grid} x {args.grid}:")
        res["step"] = step_part(args)
    if args.part in ("layer", "both"):
        print(f"S4D layer (H = N = 64), {args.tokens} tokens per call:")
        res["layer"] = layer_part(args)
    meta["load_avg_end"] = os.getloadavg()
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    old.update(res)
    write_json(out, old)

    print(
        f"\nload average {meta['load_avg_start'][0]:.1f} -> {meta['load_avg_end'][0]:.1f}, "
        f"{meta['threads']} threads, median of {args.repeats}\n"
    )
    if "step" in res:
        ref = next((r for r in res["step"] if r["model"].startswith("FFNO")), None)
        print("| model | params | input | step wall (s) | step CPU (s) | CPU vs FFNO |")
        print("|---|---:|---|---:|---:|---:|")
        for r in res["step"]:
            rel = f"{r['cpu_s'] / ref['cpu_s']:.1f}x" if ref else "-"
            print(
                f"| {r['model']} | {r['params']:,} | {tuple(r['input'])} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} "
                f"| {rel} |"
            )
    if "layer" in res:
        print(
            "\n| L | B | fwd+bwd wall (ms) | fwd+bwd CPU (ms) | CPU us / token | kernel CPU (ms) | "
            "recurrent step CPU us / token |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in res["layer"]:
            rec = f"{r['step_cpu_s_per_token'] * 1e6:.1f}" if "step_cpu_s_per_token" in r else "-"
            print(
                f"| {r['L']} | {r['B']} | {r['fwd_bwd_wall_s'] * 1e3:.1f} | {r['fwd_bwd_cpu_s'] * 1e3:.1f} | "
                f"{r['fwd_bwd_cpu_s'] / r['tokens'] * 1e6:.2f} | {r['kernel_cpu_s'] * 1e3:.2f} | {rec} |"
            )


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run stssm/speed`` entry point (the scale does not change the shapes)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    main()
