"""Does a 64 x 64 solve resolve Navier-Stokes at nu = 1e-4? The "ns4" data against 128^2 and 256^2 solves.

    python -m neurodyn_lab run operators/ns_resolution            # 4 trajectories, t <= 20 (about 40 CPU min)
    python -m neurodyn_lab run operators/ns_resolution --report   # the report of the recorded JSON

The "ns4" comparison (:mod:`neurodyn_lab.geomano.table1`) trains on nu = 1e-4 trajectories simulated at 64^2 with
dt = 2e-3 and stored at 32^2 (frames t = 1..20). Here the same initial vorticity is integrated with the
generator's solver (``solve_vorticity``: pseudo-spectral, 2/3 dealiasing, Crank-Nicolson / explicit Euler) at
64^2 / dt 2e-3 (the data), 64^2 / dt 5e-4 (its time error alone), 128^2 / dt 1e-3, 128^2 / dt 2.5e-4, and
256^2 / dt 5e-4, the reference. Every solve stores the 32^2 grid the models see; the error of a solve at time t is
``||w(t) - w_ref(t)|| / ||w_ref(t)||`` over that grid.

Two initial conditions per trajectory:

* ``same field``: the 64^2 draw of the generator, spectrally zero-padded to 128^2 / 256^2 (every solve starts
  from the same function): the discretisation error of the 64^2 solve alone.
* ``own draw``: each grid's own draw of the generator (``nested_normals_2d`` keeps the large scales of a sample
  the same on every grid, the finer grid adds its smaller scales): how far the 64^2 data are from the
  trajectories a 256^2 simulation of the same law (FNO's) would give.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from neurodyn.data.generators import get_generator, sample_rng
from neurodyn.data.generators.navier_stokes import SpectralForcing, li_forcing, solve_vorticity
from neurodyn_lab.paths import records
from neurodyn_lab.records import write_json, write_text

OUT = records("operators/ns_resolution")
STORED = 32  # the grid the models see
NU, T_FINAL = 1e-4, 20
#: (label, grid, dt) of every solve; the last is the reference
SOLVES = (
    ("64^2, dt 2e-3 (the data)", 64, 2e-3),
    ("64^2, dt 5e-4", 64, 5e-4),
    ("128^2, dt 1e-3", 128, 1e-3),
    ("128^2, dt 2.5e-4", 128, 2.5e-4),
    ("256^2, dt 5e-4 (reference)", 256, 5e-4),
)


def pad_spectrum(w: torch.Tensor, n: int) -> torch.Tensor:
    """(B, m, m) periodic field -> (B, n, n), the same trigonometric polynomial sampled on the finer grid
    (``n >= m``; the coarse grid's Nyquist modes are split evenly between +m/2 and -m/2)."""
    m = w.shape[-1]
    if n == m:
        return w.clone()
    c = torch.fft.fft2(w) / m**2
    out = torch.zeros(w.shape[0], n, n, dtype=c.dtype)
    h = m // 2
    for sx in (slice(0, h), slice(-h, None)):
        for sy in (slice(0, h), slice(-h, None)):
            out[:, sx, sy] = c[:, sx, sy]
    # Nyquist row / column of the coarse grid: half to +m/2, half to -m/2 (keeps the field real and equal on
    # the coarse points)
    out[:, h, :h], out[:, -h, :h] = 0.5 * c[:, h, :h], 0.5 * c[:, h, :h]
    out[:, h, -h:], out[:, -h, -h:] = 0.5 * c[:, h, -h:], 0.5 * c[:, h, -h:]
    out[:, :h, h], out[:, :h, -h] = 0.5 * c[:, :h, h], 0.5 * c[:, :h, h]
    out[:, -h:, h], out[:, -h:, -h] = 0.5 * c[:, -h:, h], 0.5 * c[:, -h:, h]
    for a in (h, -h):
        for b in (h, -h):
            out[:, a, b] = 0.25 * c[:, h, h]
    return torch.fft.ifft2(out * n**2).real


def initial_fields(n: int, samples: int, seed: int) -> torch.Tensor:
    """(samples, n, n) float64: the navier_stokes generator's initial vorticity of samples 0.. on an n^2 grid."""
    g = get_generator("navier_stokes")
    cfg = g.make_config(resolution=STORED, sim_resolution=n, nu=NU, dt=1e-3, t_final=1.0)
    return g.initial_vorticity(cfg, [sample_rng(seed, i) for i in range(samples)], torch.device("cpu"))


def solve(w0: torch.Tensor, dt: float) -> torch.Tensor:
    """(B, T_FINAL + 1, 32, 32): the generator's forcing and solver from ``w0`` (B, n, n), frames every 1.0."""
    n = w0.shape[-1]
    x = torch.arange(n, dtype=torch.float64) / n
    forcing = SpectralForcing(torch.fft.rfft2(li_forcing(x, x))[None])
    per = round(1.0 / dt)
    return solve_vorticity(w0, NU, forcing, dt, per * T_FINAL, per, stride=n // STORED)


def rel_errors(w: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """(B, T): ``||w(t) - ref(t)|| / ||ref(t)||`` per trajectory and frame."""
    return (w - ref).flatten(2).norm(dim=-1) / ref.flatten(2).norm(dim=-1)


def measure(samples: int, seed: int) -> dict:
    """The per-frame errors against the reference: every solve of ``SOLVES`` from the same field, and the data's
    solve and the 128^2 / dt 1e-3 one from each grid's own draw."""
    base = initial_fields(64, samples, seed)
    out: dict = {"nu": NU, "t_final": T_FINAL, "stored": STORED, "samples": samples, "seed": seed, "cases": {}}
    for case, solves in (("same field", SOLVES), ("own draw", (SOLVES[0], SOLVES[2], SOLVES[-1]))):
        sols, seconds = {}, {}
        for label, n, dt in solves:
            w0 = pad_spectrum(base, n) if case == "same field" else initial_fields(n, samples, seed)
            t0 = time.perf_counter()
            sols[label] = solve(w0, dt)
            seconds[label] = time.perf_counter() - t0
            print(f"{case}: {label} solved in {seconds[label]:.0f} s", flush=True)
        ref = sols.pop(solves[-1][0])
        out["cases"][case] = {
            label: {"rel_err": rel_errors(w, ref)[:, 1:].tolist(), "seconds": seconds[label]}
            for label, w in sols.items()
        }
    return out


def report(rec: dict) -> str:
    """Markdown: per solve and case, the error at t = 1, 5, 10, 20 (mean and max over trajectories) and the
    largest over the horizon."""
    frames = (1, 5, 10, 20)
    lines = [
        f"Navier-Stokes nu = {rec['nu']:g}, {rec['samples']} trajectories (generator seed {rec['seed']}), "
        f"errors on the stored {rec['stored']}^2 grid against the 256^2 / dt 5e-4 solve, "
        "``||w - w_ref|| / ||w_ref||`` (mean over trajectories; max in brackets):",
        "",
        "| initial field | solve | " + " | ".join(f"t = {t}" for t in frames) + " | max over t <= 20 |",
        "|---|---|" + "---:|" * (len(frames) + 1),
    ]
    for case, solves in rec["cases"].items():
        for label, r in solves.items():
            err = torch.tensor(r["rel_err"])  # (B, T)
            cells = [f"{err[:, t - 1].mean():.2%} ({err[:, t - 1].max():.2%})" for t in frames]
            lines.append(f"| {case} | {label} | " + " | ".join(cells) + f" | {err.max():.2%} |")
    return "\n".join(lines)


def plot(rec: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rec["cases"]), figsize=(5.5 * len(rec["cases"]), 3.8), sharey=True)
    for ax, (case, solves) in zip(axes, rec["cases"].items()):
        for label, r in solves.items():
            err = torch.tensor(r["rel_err"])
            t = range(1, err.shape[1] + 1)
            ax.plot(t, err.mean(0), marker="o", ms=3, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("time t")
        ax.set_title(f"initial field: {case}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("rel. L2 error vs 256^2 (mean over trajectories)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=4, help="trajectories (default 4)")
    ap.add_argument("--seed", type=int, default=0, help="the generator's data seed (default 0)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report", action="store_true", help="only the report of the recorded results.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    path = a.out / "results.json"
    if a.report:
        rec = json.loads(path.read_text())
    else:
        rec = measure(a.samples, a.seed)
        write_json(path, rec)
    plot(rec, a.out / "errors.png")
    text = report(rec)
    write_text(
        a.out / "report.md",
        f"<!-- made by `python -m neurodyn_lab run operators/ns_resolution` -->\n\n"
        f"{text}\n\n![errors over time](errors.png)\n",
    )
    print(text)
    return (
        0
        if all(math.isfinite(v) for s in rec["cases"].values() for r in s.values() for row in r["rel_err"] for v in row)
        else 1
    )


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run operators/ns_resolution`` entry point (one protocol: the scale does not change
    it)."""
    return main(list(argv))


if __name__ == "__main__":
    sys.exit(main())
