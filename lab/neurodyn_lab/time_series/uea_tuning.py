"""The sequence presets' training settings, chosen on validation only, on UEA/UCR archive files.

    python -m neurodyn_lab run time_series/uea_tuning --uea-dir $UEA --threads 1     # every grid point (resumes)
    python -m neurodyn_lab run time_series/uea_tuning --models nac-paper nac-tuned   # some models' grids only
    python -m neurodyn_lab run time_series/uea_tuning --report                       # the table and each choice

Every grid point of a model (``GRIDS``: learning rate, width, pooling over time) trains once (seed 0) with the one
recipe ``RECIPE`` on the *training* file of each classification set of ``uea.DATASETS``, of which 20 %
(at least 4 cases) is held out to validate. The test files are never converted, read or scored here: a run has no
test split, and its record holds only validation accuracies. A grid point's score is its mean over the files of
the best validation accuracy a run reached (the model ``best.pt`` keeps); the choice per model is the grid point
with the highest score (ties: the smaller learning rate, then the smaller width, then ``last`` pooling), and the
``cpu`` scale of ``<model>/sequence`` is set to it by hand, its comment pointing here.

Records: ``lab/records/time_series/uea_tuning/`` (one per model, grid point and file: ``runs/<run>/result.json``, and
``results.json`` for the runs recorded before runs had their own file; a recorded one is not trained again) and
``report.md``. Run folders (checkpoints included) go to ``--runs``, by default ``lab/runs/time_series/uea_tuning``
(untracked).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import itertools
import statistics
import sys
from pathlib import Path

from neurodyn_lab.paths import records, runs_for
from neurodyn_lab.records import load_results
from neurodyn_lab.time_series import uea as uea_sequences  # the archive files and their conversion

OUT = "time_series/uea_tuning"

#: one recipe for every model and grid point: a constant learning rate, validation every 5 epochs, early stopping
#: after 20 evaluations (100 epochs) without a better validation accuracy, at most 400 epochs
RECIPE = (
    "train.schedule.name=none",
    "train.grad_clip=1.0",
    "train.batch_size=32",
    "train.eval_every=5",
    "train.early_stop=20",
    "train.epochs=400",
)

#: label -> (preset, its own overrides, {key: values}); NAC keeps the paper's 32-d width (Table 4, PAR column)
GRIDS = {
    "nac-paper": (
        "nac/sequence",
        ("model.compat=paper",),
        {"train.lr": (0.01, 0.003, 0.001), "model.pool": ("last", "mean")},
    ),
    "nac-tuned": (
        "nac/sequence",
        ("model.compat=tuned",),
        {"train.lr": (0.01, 0.003, 0.001), "model.pool": ("last", "mean")},
    ),
    "mha": ("mha/sequence", (), {"train.lr": (0.01, 0.003), "model.hidden": (32, 64), "model.pool": ("last", "mean")}),
    "gru": ("gru/sequence", (), {"train.lr": (0.01, 0.003), "model.hidden": (32, 64)}),
    "lstm": ("lstm/sequence", (), {"train.lr": (0.01, 0.003), "model.hidden": (32, 64)}),
    "cfc": ("cfc/sequence", (), {"train.lr": (0.01, 0.003), "model.hidden": (32, 64)}),
    "odernn": ("odernn/sequence", (), {"train.lr": (0.01, 0.003), "model.hidden": (32, 64)}),
    "ltc": ("ltc/sequence", (), {"train.lr": (0.01, 0.003), "model.hidden": (32, 64)}),
}


def grid_points(label: str) -> list[dict[str, object]]:
    """Every combination of the model's grid values, ``[{key: value}]``."""
    keys, values = zip(*GRIDS[label][2].items())
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def point_name(point: dict[str, object]) -> str:
    """``lr0.003-hidden64-mean``: a grid point as a run-name part."""
    return "-".join(f"{k.split('.')[-1]}{v}" for k, v in point.items())


def validation_scores(run) -> dict[str, object]:
    """The run's validation accuracies (its history only; the run has no test split): the best, the last, and the
    epoch of the best."""
    from neurodyn.train.runs import read_history

    curve = [
        (h["epoch"], h["val"]["accuracy"]) for h in read_history(run.run_dir) if "val" in h and "accuracy" in h["val"]
    ]
    if not curve:
        raise SystemExit(f"{run.run_dir}: no validation accuracy recorded (a classification file was expected)")
    best_epoch, best = max(curve, key=lambda c: (c[1], -c[0]))  # the first epoch that reached the best
    return {"val_best": best, "val_last": curve[-1][1], "best_epoch": best_epoch, "epochs_run": curve[-1][0] + 1}


def jobs_for(label: str, dataset: str, train_store: Path):
    from neurodyn_lab.queue import Job

    preset, own, _ = GRIDS[label]
    data = [f"data.path={train_store}", f"data.n_val={uea_sequences.n_val(train_store)}"]
    return [
        Job(
            name=f"{label}-{dataset}-{point_name(p)}",
            preset=preset,
            seed=0,
            overrides=[*data, *RECIPE, *own, *(f"{k}={v}" for k, v in p.items())],
            keys={"model": label, "dataset": dataset, "point": point_name(p)},
            label=f"{label} {dataset}",
        )
        for p in grid_points(label)
    ]


def run_all(args) -> None:
    import torch

    from neurodyn_lab.queue import run_jobs

    torch.set_num_threads(args.threads)
    uea = Path(args.uea_dir) if args.uea_dir else uea_sequences.default_uea_dir()
    if uea is None:
        raise SystemExit("no UEA folder: install sktime, or give --uea-dir (see neurodyn_lab.time_series.uea)")
    for label in args.models:
        jobs = [
            j
            for d in args.datasets
            for j in jobs_for(label, d, uea_sequences.convert(uea, d, Path(args.stores), ("TRAIN",))[0])
        ]
        run_jobs(
            jobs,
            args.out,
            "cpu",
            evaluate=validation_scores,
            runs_dir=args.runs,
            tag="uea-tuning",
            placeholders={args.stores: "<stores>"},
            summary=lambda r: f"val best {r['val_best']:.3f} at epoch {r['best_epoch']}, last {r['val_last']:.3f}",
        )


def choose(records: list[dict], label: str, datasets: list[str]) -> tuple[list[tuple], tuple | None]:
    """``(rows, choice)``: per grid point ``(point, mean best validation accuracy, per-file values)`` over the
    points recorded on every file, and the chosen row (None until one point has every file)."""
    rows = []
    for p in grid_points(label):
        name = point_name(p)
        got = {r["dataset"]: r["val_best"] for r in records if r.get("model") == label and r.get("point") == name}
        if all(d in got for d in datasets):
            rows.append((p, statistics.fmean(got[d] for d in datasets), [got[d] for d in datasets]))
    if not rows:
        return rows, None

    def order(row):
        p = row[0]
        return (
            -row[1],
            p.get("train.lr", 0),
            p.get("model.hidden", p.get("model.d_model", 0)),
            p.get("model.pool", "last") != "last",
        )

    return rows, min(rows, key=order)


def report(args) -> str:
    records = load_results(args.out)
    lines = [
        "# Sequence presets: training settings chosen on validation (UEA/UCR training files)",
        "",
        "Generated by `python -m neurodyn_lab run time_series/uea_tuning --report` from the records. One seed "
        "(0) per grid point and "
        f"file; recipe: {', '.join(f'`{o}`' for o in RECIPE)}; 20 % of each training file validates; the "
        "test files are not read. Cell: the best validation accuracy of the run; score: the mean over files; the "
        "highest score is chosen (ties: the smaller lr, then the smaller width, then the last step).",
        "",
    ]
    # every model with records, not only those --models trains now: report.md is the whole table
    for label in [m for m in GRIDS if m in args.models or any(r["model"] == m for r in records)]:
        rows, choice = choose(records, label, args.datasets)
        lines += [
            f"## {label} ({GRIDS[label][0]}{'; ' + ', '.join(GRIDS[label][1]) if GRIDS[label][1] else ''})",
            "",
            "| grid point | " + " | ".join(args.datasets) + " | score |",
            "|---|" + "---:|" * (len(args.datasets) + 1),
        ]
        for p, score, values in sorted(rows, key=lambda r: -r[1]):
            mark = " **chosen**" if choice is not None and p == choice[0] else ""
            lines.append(f"| {point_name(p)}{mark} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {score:.3f} |")
        missing = len(grid_points(label)) - len(rows)
        lines += (
            ["", f"{missing} of {len(grid_points(label))} grid points not yet recorded on every file."]
            if missing
            else []
        ) + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uea-dir", default=None, help="folder holding <NAME>/<NAME>_TRAIN.ts (default: sktime's)")
    ap.add_argument("--datasets", nargs="*", default=list(uea_sequences.DATASETS))
    ap.add_argument("--models", nargs="*", default=list(GRIDS), choices=list(GRIDS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stores", default=str(uea_sequences.STORES), help="where the archive files are converted to")
    ap.add_argument("--runs", default=None, help="run folders (default lab/runs/<out>, untracked)")
    ap.add_argument("--out", default=OUT, help="the claim the records go to (lab/records/<out>), or a folder")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args(argv)
    args.out = str(records(args.out))
    args.runs = args.runs or str(runs_for(args.out))
    return uea_sequences.run_and_report(args, run_all, report)


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run time_series/uea_tuning`` entry point (the presets' cpu scale; ``scale`` is not
    used)."""
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
