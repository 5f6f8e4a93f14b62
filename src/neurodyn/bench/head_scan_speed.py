"""Speed of ``ops.head_scan`` (one step and decay per head, time-major layout) on its fused kernel against the same
scan folded into channels for ``ops.selective_scan`` (the path LatentSSM took before), at LaMO's shapes.

    OMP_WAIT_POLICY=PASSIVE neurodyn bench head-scan-speed [--threads 1] [--repeats 7]

Shapes (batch, directions S, tokens L, heads H, channels per head P, groups G, states N): LaMO Darcy at the cpu
preset (8, 4, 256, 4, 16, 1, 16) and at the paper preset (4, 4, 1936, 4, 32, 1, 64), float32. Implementations:
``heads`` = the fused head kernel (``backend="heads"``), ``folded`` = channels ``(b, S H P, L)`` on the fused
selective-scan kernel (``backend="cpp"``, including the layout copies around it), ``torch`` = folded onto the
pure-PyTorch chunked scan. Forward and forward + backward of a random projection of the output; all
implementations of a shape are timed interleaved (one call each per round) after a warm-up round; medians of
``--repeats`` rounds. Results: ``bench-results/head_scan_speed.json`` and a Markdown table.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import statistics
import time
from pathlib import Path

import torch  # noqa: E402

SHAPES = {"lamo cpu": (8, 4, 256, 4, 16, 1, 16), "lamo paper": (4, 4, 1936, 4, 32, 1, 64)}
BACKENDS = {"heads": "heads", "folded": "cpp", "torch": "torch"}


def inputs(b, S, L, H, P, G, N, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return [
        r(b, S, L, H * P),
        0.01 + 0.5 * torch.rand(b, S, L, H, generator=g),
        -(0.1 + 2 * torch.rand(S, H, generator=g)),
        r(b, S, L, G, N),
        r(b, S, L, G, N),
        r(S, H * P),
    ]


def one_call(backend: str, args, gy, backward: bool) -> float:
    from neurodyn.ops import head_scan

    leaves = [a.detach().requires_grad_(backward) for a in args]
    t0 = time.perf_counter()
    y = head_scan(*leaves, backend=backend)
    if backward:
        torch.autograd.grad((y * gy).sum(), leaves)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--skip-torch", action="store_true", help="leave out the pure-PyTorch fallback")
    ap.add_argument("--out", default=str(Path("bench-results") / "head_scan_speed.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    names = [n for n in BACKENDS if not (a.skip_torch and n == "torch")]
    rows = []
    for label in a.shapes:
        args = inputs(*SHAPES[label])
        gy = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(1))
        times = {(n, m): [] for n in names for m in ("fwd", "f+b")}
        for rnd in range(a.repeats + 1):
            for n in names:
                for m in ("fwd", "f+b"):
                    dt = one_call(BACKENDS[n], args, gy, m == "f+b")
                    if rnd:  # round 0 warms up
                        times[(n, m)].append(dt)
        med = {k: statistics.median(v) for k, v in times.items()}
        for m in ("fwd", "f+b"):
            row = {"shape": label, "dims": SHAPES[label], "mode": m, "threads": a.threads}
            row.update({f"{n}_ms": 1e3 * med[(n, m)] for n in names})
            row.update({f"{n}/heads": med[(n, m)] / med[("heads", m)] for n in names if n != "heads"})
            rows.append(row)
    print(
        "| shape (b, S, L, H, P, G, N) | mode | "
        + " | ".join(f"{n} ms" for n in names)
        + " | "
        + " | ".join(f"{n} / heads" for n in names if n != "heads")
        + " |"
    )
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for r in rows:
        print(
            f"| {r['shape']} {tuple(r['dims'])} | {r['mode']} | "
            + " | ".join(f"{r[n + '_ms']:.2f}" for n in names)
            + " | "
            + " | ".join(f"{r[n + '/heads']:.1f}x" for n in names if n != "heads")
            + " |"
        )
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=1))
    return 0


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench head-scan-speed`` entry point (the scale does not change the shapes)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    raise SystemExit(main())
