"""The command line of the CHONN experiments (paper 000, Figs. 3-5; the paper reports figures only, so these are our
own measurements): ``python -m neurodyn_lab run chonn/<experiment> [--scale cpu] [options]``.

* ``chonn/order`` (Fig. 3, :mod:`~neurodyn_lab.chonn.order`), ``chonn/poisson`` (Fig. 4g,
  :mod:`~neurodyn_lab.chonn.poisson`), ``chonn/darcy`` (Fig. 4c-d, :mod:`~neurodyn_lab.chonn.darcy`),
  ``chonn/rollout`` (Fig. 5b-f, :mod:`~neurodyn_lab.chonn.rollout`): train what is not recorded, then the tables and
  plots of every recorded run of the claim (``--out``, default ``lab/records/chonn/<experiment>``); ``--report``
  only rebuilds them.
* helpers, no training: ``gain [--merges sum mean norm]`` prints the scale of freshly built Cascaded Kirchhoff
  Blocks per stage (:mod:`~neurodyn_lab.chonn.gain`); ``curves OUT.png TITLE LABEL=RUN_DIR ...`` plots the training
  losses of finished runs; ``compare-order BEFORE AFTER`` puts two order-benchmark records side by side.

Timing and threads: ``--threads`` (default 1) is set with ``torch.set_num_threads`` before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from neurodyn_lab.chonn import darcy, order, poisson, rollout
from neurodyn_lab.chonn.common import WORKERS, plot_training_curves
from neurodyn_lab.chonn.gain import gain_table
from neurodyn_lab.chonn.order import compare_order
from neurodyn_lab.paths import records
from neurodyn_lab.records import load_results

#: experiment -> (trains, reports, default seeds, one line)
EXPERIMENTS = {
    "order": (
        order.run_order_benchmark,
        order.report_order,
        (0, 1, 2),
        "CHONN Fig. 3: order-n CKB vs n stacked first-order blocks on T1-T4 (point/spectral/derivative RelL2)",
    ),
    "poisson": (
        poisson.run_poisson_benchmark,
        poisson.report_poisson,
        (0, 1),
        "CHONN Fig. 4g: Poisson order ablation, U-Net (order 0) vs CKB orders 1-4, ID K=16 / OOD K=20",
    ),
    "darcy": (
        darcy.run_darcy_benchmark,
        darcy.report_darcy,
        (0, 1),
        "CHONN Fig. 4c-d: CHONN-UNet vs U-Net vs FNO on Darcy, PDEBench metric table, relative gains",
    ),
    "rollout": (
        rollout.run_rollout_benchmark,
        rollout.report_rollout,
        (0, 1),
        "CHONN Fig. 5: CHONN-FNO vs FNO, shallow-water rollout and NS 40-step rollout from 3/5/10 frames",
    ),
}


def run(scale: str, argv: Sequence[str]) -> int:
    """``run(scale, [EXPERIMENT, *options])``: one of the four CHONN experiments (order, poisson, darcy,
    rollout), then its tables and plots."""
    argv = list(argv)
    sub = argv.pop(0).removeprefix("chonn-") if argv and not argv[0].startswith("-") else ""
    if sub == "curves":  # learning curves of finished runs: curves OUT.png TITLE LABEL=RUN_DIR ...
        if len(argv) < 3:
            print("usage: chonn curves OUT.png TITLE LABEL=RUN_DIR [...]", file=sys.stderr)
            return 2
        plot_training_curves({k: Path(v) for k, v in (a.split("=", 1) for a in argv[2:])}, Path(argv[0]), argv[1])
        return 0
    if sub == "compare-order":  # compare-order BEFORE AFTER: two finished order benchmarks (claims or folders)
        print(compare_order(load_results(records(argv[0])), load_results(records(argv[1]))))
        return 0
    if sub == "gain":  # no training: the cascade's scale at initialisation
        p = argparse.ArgumentParser(prog="chonn gain", description=gain_table.__doc__)
        p.add_argument("--merges", nargs="+", default=["sum", "mean"], help="merge modes of the block")
        p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
        p.add_argument("--discretization", default="zoh")
        a = p.parse_args(argv)
        torch.set_num_threads(1)
        print(gain_table(a.merges, seeds=a.seeds, discretization=a.discretization))
        return 0
    if sub not in EXPERIMENTS:
        print(f"usage: chonn {{{','.join(EXPERIMENTS)}}} [--scale S] [options]", file=sys.stderr)
        return 2
    run_fn, report_fn, default_seeds, description = EXPERIMENTS[sub]
    p = argparse.ArgumentParser(prog=f"python -m neurodyn_lab run chonn/{sub}", description=description)
    p.add_argument("--seeds", type=int, nargs="+", default=list(default_seeds), help="training seeds")
    p.add_argument("--out", default=None, help=f"the claim the records go to (default chonn/{sub}), or a folder")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--report", action="store_true", help="only rebuild tables and plots from finished runs")
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="subset: order: TARGET:MODEL pairs (e.g. 3:o3 3:d3); poisson: orders; darcy: models; "
        "rollout: swe and/or ns-<m> (with --models)",
    )
    p.add_argument("--models", nargs="+", default=None, help="rollout only: chonn_fno and/or fno")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="train this many runs at a time, each in its own process with --threads threads (default 0: "
        "one at a time in this process)",
    )
    p.add_argument("overrides", nargs="*", help="key.path=value overrides applied to every run")
    a = p.parse_args(argv)
    torch.set_num_threads(int(a.threads))
    WORKERS.update(n=int(a.workers), threads=int(a.threads))
    out = records(a.out or f"chonn/{sub}")
    kw: dict[str, Any] = {"overrides": a.overrides, "train": not a.report}
    if a.only:
        if sub == "order":
            kw["grid"] = [(int(t), m) for t, m in (x.split(":") for x in a.only)]
        elif sub == "poisson":
            kw["orders"] = [int(x) for x in a.only]
        elif sub == "darcy":
            kw["models"] = list(a.only)
        else:
            kw["shallow_water"] = "swe" in a.only
            hist = [int(x.split("-")[1]) for x in a.only if x.startswith("ns-")]
            kw["navier_stokes"] = bool(hist)
            if hist:
                kw["histories"] = hist
    if a.models and sub == "rollout":
        kw["models"] = list(a.models)
    run_fn(scale, a.seeds, out, **kw)
    results = load_results(out)  # the tables cover every recorded run of the folder, whatever the subset
    if not results:
        print(f"no finished runs in {out}", file=sys.stderr)
        return 1
    print(report_fn(results, out, scale, sorted({r["seed"] for r in results})))
    return 0


if __name__ == "__main__":
    from neurodyn_lab.cli import script_main

    sys.exit(script_main(run))
