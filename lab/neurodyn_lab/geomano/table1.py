"""GeoMaNO vs LaMO vs Transolver vs FNO on Darcy and Navier-Stokes at cpu scale, through the experiment API.

    # everything (each run = one `neurodyn train <preset> --scale cpu train.seed=S train.epochs=E`)
    python -m neurodyn_lab run geomano/table1 --bench darcy ns --seeds 0 1 2 --jobs 2
    # Darcy baselines already trained by neurodyn_lab.operators.darcy (same presets, data, epochs, seeds)
    python -m neurodyn_lab run geomano/table1 --bench darcy --reuse operators/darcy
    # the table of what is recorded
    python -m neurodyn_lab run geomano/table1 --report --reuse operators/darcy

Runs (cpu scale of each model's own preset; ``--epochs`` (default 10) for all, so every model gets the same
data, epochs and seeds; each model keeps its preset's loss, batch size, lr and schedule):

* ``geomano-eq6``: the GeoMaNO preset with ``model.assign_prior=0`` (the soft assignment of Eq. 6 literally, no
  locality prior).
* darcy: ``geomano/darcy``, ``lamo/darcy``, ``transolver/darcy``, ``fno/darcy`` (32 x 32 grid solved at
  63 x 63, 1000 train / 200 test).
* ns: ``geomano/navier_stokes``, ``lamo/ns``, ``transolver/ns`` and FNO = the ``lamo/ns`` data and training with
  the ``fno/darcy`` cpu model section (there is no fno/ns preset): nu = 1e-3, 32 x 32, 200 / 40 trajectories,
  10 -> 10 frames, teacher forcing, 10-step rollout evaluation.

Every run trains in its own process (:func:`neurodyn_lab.queue.run_jobs`: ``OMP_WAIT_POLICY=PASSIVE``,
``torch.set_num_threads(--threads)``) in ``lab/runs/geomano/table1/<scale>`` and is recorded in
``lab/records/geomano/table1/runs/<run>/result.json`` (``--out``; a run recorded with the same epochs is skipped,
``--force`` redoes it). ``--reuse CLAIM`` reads records of another driver with the same label, seed, preset and
epochs (``neurodyn_lab.operators.darcy`` writes ``lamo`` / ``transolver`` / ``fno`` records for the Darcy presets)
instead of training them again. The report gives the final-epoch test relative
L2 (mean +- std over seeds) beside the papers' numbers (GeoMaNO Table 1; LaMO's Table 1 for LaMO).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import statistics
import sys
from pathlib import Path

from neurodyn_lab.geomano.table3 import model_job
from neurodyn_lab.paths import records, runs_for
from neurodyn_lab.records import load_results

OUT = "geomano/table1"
FNO_SMALL = ["model.width=14", "model.modes=[6,6]"]  # about the parameter count of the cpu-scale SSM models
FNO_SMALL_NS = FNO_SMALL  # on "ns4" (10 input frames) 119,255 parameters against LaMO's 122,304
GEOMANO_EQP_NS = ["model.width=49"]  # GeoMaNO (ours) on "ns4" at LaMO's size: 122,271 parameters (width 32: 65,857)
GEOMANO_PAPER_EQP_NS = ["model.width=52"]  # the paper's GeoMaNO on "ns4" at LaMO's size
# the learning rate and slice count chosen on the Darcy validation split (neurodyn_lab.protocol's transolver-tuning,
# 15 settings, best validation rel. L2 0.0886: lab/records/operators/transolver_tuning_protocol/)
TRANSOLVER_TUNED = ["train.lr=2e-3", "model.n_slices=16"]
LITERAL = "model.assign_prior=0.0"  # Eq. 6 literally: no locality prior on the soft assignment
# the paper's model (GeoMaNO's docstring table): Eq. 6 (no prior), Eq. 9's correction, Algorithm 1's shared gate
PAPER_MODE = [LITERAL, "model.ssm.correction_form=eq9", "model.ssm.gate=shared"]

# LaMO's paper configuration at the cpu preset's size (the preset's paper scale: Table 6's 1 head on Darcy, Remark 3.2's
# corner scans, Algorithm 1's SSM block without a norm before the gate); the cpu scale otherwise follows the authors'
# code (4 heads on Darcy / 16 on NS, the cross-scan, LayerNorm), whose head counts were chosen on test splits
LAMO_PAPER = ["model.directions=corners", "model.ssm.heads=1", "model.ssm.norm=none"]
#: bench -> label -> (preset, model section from another preset or None, overrides)
RUNS = {
    "darcy": {
        "geomano": ("geomano/darcy", None, []),
        "geomano-eq6": ("geomano/darcy", None, [LITERAL]),
        "geomano-paper": ("geomano/darcy", None, PAPER_MODE),
        # at LaMO's parameter count (108,480): width 50 -> 108,965 (ours), 53 -> 107,761 (the paper's model)
        "geomano-eqp": ("geomano/darcy", None, ["model.width=50"]),
        "geomano-paper-eqp": ("geomano/darcy", None, [*PAPER_MODE, "model.width=53"]),
        "lamo": ("lamo/darcy", None, []),
        "lamo-h1": ("lamo/darcy", None, ["model.ssm.heads=1"]),
        "lamo-paper": ("lamo/darcy", None, LAMO_PAPER),
        "transolver": ("transolver/darcy", None, []),
        "fno": ("fno/darcy", None, []),
        "fno-small": ("fno/darcy", None, FNO_SMALL),
    },
    "ns": {
        "geomano": ("geomano/navier_stokes", None, []),
        "geomano-eq6": ("geomano/navier_stokes", None, [LITERAL]),
        "geomano-paper": ("geomano/navier_stokes", None, PAPER_MODE),
        "lamo": ("lamo/ns", None, []),
        "transolver": ("transolver/ns", None, []),
        "fno": ("lamo/ns", "fno/darcy", []),
        "fno-small": ("lamo/ns", "fno/darcy", FNO_SMALL),
    },
    # the protocol-scaled Navier-Stokes runs: the lowest viscosity our solver resolves on a grid this machine
    # trains (NS4_DATA; the presets' data sections are the same, so every model reads one file)
    "ns4": {
        "lamo": ("lamo/ns", None, []),
        "lamo-h4": ("lamo/ns", None, ["model.ssm.heads=4"]),
        "lamo-paper": ("lamo/ns", None, LAMO_PAPER),
        "geomano-eqp": ("geomano/navier_stokes", None, GEOMANO_EQP_NS),
        "geomano-paper-eqp": ("geomano/navier_stokes", None, [*PAPER_MODE, *GEOMANO_PAPER_EQP_NS]),
        "transolver": ("transolver/ns", None, TRANSOLVER_TUNED),
        "fno": ("lamo/ns", "fno/darcy", []),
        "fno-small": ("lamo/ns", "fno/darcy", FNO_SMALL_NS),
    },
}
#: data and evaluation of the "ns4" runs: nu = 1e-4 simulated at 64^2 (dt 2e-3; within 0.15 % of a 256^2 solve to
#: t = 12, 1.4 % at t = 20: `operators/ns_resolution`) and stored 32^2, frames 1..10 -> 11..20; 250 training,
#: 50 validation (every epoch: the learning curve and best.pt) and 200 test trajectories (the FNO protocol's count)
NS4_DATA = [
    "data.nu=1e-4",
    "data.sim_resolution=64",
    "data.resolution=32",
    "data.dt=2e-3",
    "data.n_train=250",
    "data.n_val=50",
    "data.n_test=200",
    "train.eval_every=1",
]
BENCH_COMMON = {"ns4": NS4_DATA}
#: published relative L2 (paper scale): GeoMaNO Table 1 (FNO, Transolver, GeoMaNO); LaMO Table 1 (LaMO)
PAPER = {
    ("darcy", "geomano"): 0.0036,
    ("darcy", "geomano-eq6"): 0.0036,
    ("darcy", "geomano-paper"): 0.0036,
    ("darcy", "geomano-eqp"): 0.0036,
    ("darcy", "geomano-paper-eqp"): 0.0036,
    ("ns", "geomano-paper"): 0.0370,
    ("ns", "geomano-eq6"): 0.0370,
    ("darcy", "transolver"): 0.0057,
    ("darcy", "fno"): 0.0108,
    ("darcy", "lamo"): 0.0039,
    ("darcy", "lamo-h1"): 0.0039,
    ("darcy", "lamo-paper"): 0.0039,
    ("ns4", "lamo-h4"): 0.0460,
    ("ns4", "lamo-paper"): 0.0460,
    ("ns4", "geomano-paper-eqp"): 0.0370,
    ("ns", "geomano"): 0.0370,
    ("ns", "transolver"): 0.0900,
    ("ns", "fno"): 0.1556,
    ("ns", "lamo"): 0.0460,
    ("darcy", "fno-small"): "-",
    ("ns", "fno-small"): "-",
    # nu = 1e-5 at the papers' scale: LaMO Table 1 (LaMO, Transolver, FNO), GeoMaNO Table 1 (GeoMaNO)
    ("ns4", "lamo"): 0.0460,
    ("ns4", "geomano-eqp"): 0.0370,
    ("ns4", "transolver"): 0.0957,
    ("ns4", "fno"): 0.1556,
    ("ns4", "fno-small"): "-",
}


def _records(dirs) -> dict:
    """(bench, model, seed) -> record, own results first, then the --reuse directories."""
    out = {}
    for d in dirs:
        for r in load_results(records(d)):
            bench = r.get("bench") or (
                "darcy" if r["preset"].endswith("/darcy") else "ns" if r["preset"].endswith("/ns") else None
            )
            if bench is None or r["label"] not in RUNS.get(bench, {}):
                continue
            want_preset, want_model, _ = RUNS[bench][r["label"]]
            if r["preset"] != want_preset or (
                want_model and want_model not in " ".join(r.get("overrides", [])) and r.get("model_from") != want_model
            ):
                continue
            r.setdefault("source", str(d))
            out.setdefault((bench, r["label"], r["seed"]), r)
    return out


def report(dirs, epochs: int | None = None) -> str:
    recs = _records(dirs)
    lines = [
        "| bench | model | params | epochs | seeds | test rel. L2 (ours, cpu), mean +- std | per seed | paper "
        "(paper scale) | train s/epoch | source |",
        "|---|---|---:|---:|---|---|---|---:|---:|---|",
    ]
    for bench in RUNS:
        for model in RUNS[bench]:
            rs = sorted(
                (
                    r
                    for (b, m, _), r in recs.items()
                    if b == bench and m == model and (epochs is None or r["epochs"] == epochs)
                ),
                key=lambda r: r["seed"],
            )
            if not rs:
                continue
            finals = [r["final_rel_l2"] for r in rs]
            std = f" +- {statistics.stdev(finals):.4f}" if len(finals) > 1 else ""
            src = sorted({Path(r["source"]).name for r in rs})
            lines.append(
                f"| {bench} | {model} | {rs[0]['params']:,} | {rs[0]['epochs']} | "
                f"{','.join(str(r['seed']) for r in rs)} | {statistics.mean(finals):.4f}{std} | "
                f"{' '.join(f'{v:.4f}' for v in finals)} | {PAPER[(bench, model)]} | "
                f"{statistics.mean(r['train_seconds'] / r['epochs'] for r in rs):.0f} | {', '.join(src)} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="*", default=["darcy", "ns"], choices=sorted(RUNS))
    ap.add_argument("--models", nargs="*", default=["geomano", "geomano-eq6", "lamo", "transolver", "fno"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--common", nargs="*", default=[], help="overrides applied to every run")
    ap.add_argument(
        "--reuse",
        nargs="*",
        default=[],
        help="claims (or records folders) of other drivers to take runs from, e.g. operators/darcy",
    )
    ap.add_argument(
        "--runs-dir", default=None, help="where the run folders train (default lab/runs/<out>/<scale>, untracked)"
    )
    ap.add_argument("--out", default=OUT, help="the claim the records go to (lab/records/<out>), or a folder")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument(
        "--plot-curves",
        metavar="OUT.png",
        default=None,
        help="also plot the validation rel. L2 per epoch (mean over seeds) of --models on the first --bench",
    )
    ap.add_argument(
        "--estimate",
        action="store_true",
        help="only time a few training steps of each --models run (at --threads) and print the CPU "
        "hours of --epochs x --seeds",
    )
    args = ap.parse_args(argv)
    dirs = [args.out, *args.reuse]
    if args.estimate:
        print(estimate(args))
        return
    if not args.report:
        from neurodyn_lab.queue import run_jobs

        have = _records(dirs)
        jobs = []
        for seed in args.seeds:
            for bench in args.bench:
                for model in args.models:
                    prev = have.get((bench, model, seed))
                    if prev is not None and prev["epochs"] == args.epochs and not args.force:
                        continue
                    jobs.append(compare_job(bench, model, seed, args))
        if jobs:  # chosen above (a record with other epochs is trained again and replaced)
            run_jobs(
                jobs,
                records(args.out),
                args.scale,
                tag="geomano-compare",
                retrain=True,
                resume=not args.force,
                runs_dir=Path(args.runs_dir) if args.runs_dir else runs_for(records(args.out)) / args.scale,
                workers=max(1, args.jobs),
                threads=args.threads,
                summary=lambda r: f"test rel. L2 {r['final_rel_l2']:.5f}, {r['train_seconds']:.0f} s",
            )
        print(f"\ncommand: {' '.join([Path(sys.executable).name] + sys.argv)}\n")
    print(report(dirs, args.epochs))
    if args.plot_curves:
        plot_curves(dirs, args.bench[0], args.models, args.plot_curves)


def compare_job(bench: str, model: str, seed: int, args):
    """The :class:`~neurodyn_lab.queue.Job` of one ``bench`` x ``model`` x ``seed`` run of the comparison."""
    preset, model_from, extra_ov = RUNS[bench][model]
    return model_job(
        f"{bench}-{model}-s{seed}",
        preset,
        [*BENCH_COMMON.get(bench, []), *args.common, *extra_ov, f"train.epochs={args.epochs}"],
        seed,
        {"label": model, "bench": bench},
        model_from,
    )


def estimate(args) -> str:
    """The parameters, seconds per epoch and CPU hours of ``--epochs`` x ``--seeds`` of each ``--bench`` /
    ``--models`` run, from a few timed training steps at ``--threads`` (:func:`neurodyn.compare.estimate_table`)."""
    import torch

    from neurodyn.compare import estimate_table
    from neurodyn_lab.queue import job_config

    torch.set_num_threads(args.threads)
    cfgs = {
        f"{bench} {model}": job_config(compare_job(bench, model, args.seeds[0], args), args.scale)
        for bench in args.bench
        for model in args.models
    }
    return estimate_table(cfgs, args.epochs, len(args.seeds))


def plot_curves(dirs, bench: str, models, path: str) -> None:
    """Validation rel. L2 per epoch, mean over the recorded seeds, one line per model (records that hold a
    validation ``curve``: those trained with a validation split)."""
    from neurodyn.plots import plot_seed_mean_curves

    recs = _records(dirs)
    groups = {
        m: [r["curve"] for (b, mm, _), r in sorted(recs.items()) if b == bench and mm == m and "n_val" in r]
        for m in models
    }
    plot_seed_mean_curves(groups, path, "validation rel. L2", f"{bench} (cpu), mean over seeds", log=True)
    print(f"-> {path}")


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run geomano/table1`` entry point: ``--scale`` is the presets' scale."""
    return main(["--scale", scale, *argv]) or 0


if __name__ == "__main__":
    main()
