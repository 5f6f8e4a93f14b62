"""Generation speed of neurodyn's dataset generators on this machine, and the projected time of each dataset.

    neurodyn bench generators                          # every case, cpu and paper scale, 2 threads
    neurodyn bench generators --only poisson order1d --scales paper --runs 5

Method: for each case and scale the generator's ``generate`` is called on a chunk of ``chunk`` samples
(the same call the store makes), once to warm up, then ``--runs`` times on fresh sample ids; the
median time of a chunk divided by its size gives seconds per sample. The projected time of a dataset
is that per-sample time times the dataset's sample count (linear extrapolation from a small chunk;
it leaves out HDF5 writing, which is negligible next to the solvers). Cases whose full samples take
minutes (the Navier-Stokes solvers: up to 5e5 time steps) time a shortened run and multiply by
``time_scale`` (full / timed number of steps; the cost per step is constant). ``torch.set_num_threads`` is
``--threads`` (default 2); the machine may be shared, so the table also prints the load average.

To add a generator, append a ``Case`` to ``CASES`` (keep the file's structure; other entries belong
to other generators).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Case:
    label: str  # row name
    generator: str  # registered generator name
    options: dict  # {"cpu": {...}, "paper": {...}} generator options per scale
    n_samples: dict  # {"cpu": n, "paper": n} dataset sizes of the presets (for the projection)
    chunk: dict = field(default_factory=lambda: {"cpu": 8, "paper": 8})  # samples per timed call
    # {"cpu": k, "paper": k}: the timed options are a shortened run (e.g. fewer time steps) and a full
    # sample costs k times as much (linear extrapolation; 1 when the timed options are the real ones)
    time_scale: dict = field(default_factory=lambda: {"cpu": 1.0, "paper": 1.0})


CASES: list[Case] = [
    # --- Darcy (FNO protocol: solved at 421, stored every 5th point = 85; direct 32 for the demo) -----------
    Case(
        "darcy 421->85 (FNO protocol)",
        "darcy",
        {"cpu": dict(resolution=32, solve_resolution=63), "paper": dict(resolution=85, solve_resolution=421)},
        {"cpu": 1200, "paper": 1224},
        {"cpu": 50, "paper": 4},
    ),
    # --- CHONN generators ----------------------------------------------------------------------------
    Case(
        "poisson K=16 (ID)",
        "poisson",
        {"cpu": dict(resolution=64, K=16), "paper": dict(resolution=64, K=16)},
        {"cpu": 1408, "paper": 1408},
        {"cpu": 256, "paper": 256},
    ),
    Case(
        "poisson K=20 (OOD)",
        "poisson",
        {"cpu": dict(resolution=64, K=20), "paper": dict(resolution=64, K=20)},
        {"cpu": 256, "paper": 256},
        {"cpu": 256, "paper": 256},
    ),
    Case(
        "shallow_water rdb",
        "shallow_water",
        {"cpu": dict(resolution=64), "paper": dict(resolution=128)},
        {"cpu": 200, "paper": 1000},
        {"cpu": 8, "paper": 4},
    ),
    Case(
        "order1d T4",
        "order1d",
        {"cpu": dict(order=4), "paper": dict(order=4)},
        {"cpu": 3500, "paper": 16000},
        {"cpu": 1000, "paper": 1000},
    ),
    # --- ST-SSM 1D generators (presets data/burgers, data/ks) -------------------------------------------
    Case(
        "burgers nu=0.001 (PDEBench)",
        "burgers",
        {"cpu": dict(resolution=128, solve_resolution=1024), "paper": dict(resolution=1024)},
        {"cpu": 640, "paper": 3048},
        {"cpu": 16, "paper": 16},
    ),
    Case(
        "ks nu=0.075",
        "ks",
        {"cpu": dict(resolution=64, solve_resolution=512, nu=0.075), "paper": dict(resolution=512, nu=0.075)},
        {"cpu": 640, "paper": 2304},
        {"cpu": 64, "paper": 64},
    ),
    Case(
        "ks nu=0.1",
        "ks",
        {"cpu": dict(resolution=64, solve_resolution=512, nu=0.1), "paper": dict(resolution=512, nu=0.1)},
        {"cpu": 640, "paper": 2304},
        {"cpu": 64, "paper": 64},
    ),
    Case(
        "ks nu=0.125",
        "ks",
        {"cpu": dict(resolution=64, solve_resolution=512, nu=0.125), "paper": dict(resolution=512, nu=0.125)},
        {"cpu": 640, "paper": 2304},
        {"cpu": 64, "paper": 64},
    ),
    # --- torus Navier-Stokes (presets data/navier_stokes*, data/torus_vis*) ---------------------------
    # A full sample is 2e4 (cpu) to 5e5 (paper) solver steps, so a shortened run is timed (t_final below;
    # paper: 100 steps of dt = 1e-4 at 256^2) and multiplied by time_scale = full steps / timed steps.
    Case(
        "navier_stokes V1e-5 T20 (TorusLi)",
        "navier_stokes",
        {
            "cpu": dict(resolution=32, sim_resolution=32, nu=1e-3, dt=2e-3, t_final=2.0),
            "paper": dict(t_final=0.01, record_every=0.01),
        },
        {"cpu": 240, "paper": 1200},
        {"cpu": 16, "paper": 2},
        {"cpu": 10.0, "paper": 2000.0},
    ),
    Case(
        "navier_stokes V1e-3 T50",
        "navier_stokes",
        {
            "cpu": dict(resolution=32, sim_resolution=32, nu=1e-3, dt=2e-3, t_final=2.0),
            "paper": dict(nu=1e-3, t_final=0.01, record_every=0.01),
        },
        {"cpu": 240, "paper": 1200},
        {"cpu": 16, "paper": 2},
        {"cpu": 25.0, "paper": 5000.0},
    ),
    Case(
        "navier_stokes V1e-4 T30",
        "navier_stokes",
        {
            "cpu": dict(resolution=32, sim_resolution=64, nu=1e-4, dt=2e-3, t_final=2.0),
            "paper": dict(nu=1e-4, t_final=0.01, record_every=0.01),
        },
        {"cpu": 120, "paper": 1200},
        {"cpu": 8, "paper": 2},
        {"cpu": 15.0, "paper": 3000.0},
    ),
    Case(
        "torus_vis",
        "torus_vis",
        {
            "cpu": dict(resolution=32, sim_resolution=32, nu_min=3e-4, nu_max=3e-3, dt=2e-3, t_final=2.0),
            "paper": dict(t_final=0.01, record_every=0.01),
        },
        {"cpu": 280, "paper": 1400},
        {"cpu": 16, "paper": 2},
        {"cpu": 10.0, "paper": 2000.0},
    ),
    Case(
        "torus_vis_force",
        "torus_vis_force",
        {
            "cpu": dict(resolution=32, sim_resolution=32, nu_min=3e-4, nu_max=3e-3, dt=2e-3, t_final=2.0),
            "paper": dict(t_final=0.01, record_every=0.01),
        },
        {"cpu": 280, "paper": 1400},
        {"cpu": 16, "paper": 2},
        {"cpu": 10.0, "paper": 2000.0},
    ),
    # --- LaMO geometry benchmarks (presets data/elasticity, data/pipe; scikit-fem, one core) ------------
    Case(
        "elasticity (Geo-FNO-like, P=972)",
        "elasticity",
        {"cpu": dict(n_theta=64, n_rings=6, n_modes=8), "paper": dict()},
        {"cpu": 600, "paper": 1200},
        {"cpu": 16, "paper": 8},
    ),
    Case(
        "pipe Stokes (Geo-FNO-like, 129x129)",
        "pipe",
        {"cpu": dict(resolution_x=65, resolution_y=65), "paper": dict()},
        {"cpu": 600, "paper": 1200},
        {"cpu": 8, "paper": 4},
    ),
]


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--runs", type=int, default=3, help="timed chunks per case and scale (median reported)")
    p.add_argument("--scales", nargs="+", default=["cpu", "paper"], choices=["cpu", "paper"])
    p.add_argument("--only", nargs="+", default=None, help="generator names to time (default: all cases)")
    return p.parse_args(argv)


def fmt_time(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def main(argv=None) -> int:
    args = parse(argv)
    import numpy as np
    import torch

    from neurodyn.data.generators import get_generator

    torch.set_num_threads(args.threads)
    print(
        f"# generators.py  {datetime.date.today()}  torch {torch.__version__}  threads {args.threads}  "
        f"{platform.processor() or platform.machine()}  load {os.getloadavg()[0]:.1f}"
    )
    print("| case | scale | options | s/sample | samples/s | dataset n | projected |")
    print("|---|---|---|---:|---:|---:|---:|")
    for case in CASES:
        if args.only and case.generator not in args.only:
            continue
        gen = get_generator(case.generator)
        for scale in args.scales:
            cfg = gen.make_config(**case.options[scale])
            n = case.chunk[scale]
            gen.generate(cfg, np.arange(n), 0, "cpu")  # warm-up
            times = []
            for r in range(args.runs):
                ids = np.arange((r + 1) * n, (r + 2) * n)
                t0 = time.perf_counter()
                gen.generate(cfg, ids, 0, "cpu")
                times.append(time.perf_counter() - t0)
            per = statistics.median(times) / n * case.time_scale.get(scale, 1.0)
            opts = ", ".join(f"{k}={v}" for k, v in case.options[scale].items())
            print(
                f"| {case.label} | {scale} | {opts} | {per:.3g} | {1 / per:.3g} | {case.n_samples[scale]} | "
                f"{fmt_time(per * case.n_samples[scale])} |",
                flush=True,
            )
    return 0


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench generators`` entry point (the scale does not change the shapes; ``--scales cpu paper``
    chooses the dataset scales timed)."""
    return main(list(argv)) or 0


if __name__ == "__main__":
    sys.exit(main())
