"""LaMO vs Transolver vs FNO at cpu scale through the experiment API (same data, same epochs, several seeds).

    # the Darcy comparison of LaMO, Transolver and FNO (each run is one `neurodyn train <preset> --scale cpu`
    # with the overrides)
    python -m neurodyn_lab run operators/darcy --epochs 10 --seeds 0 1 2 \
        --runs lamo=lamo/darcy transolver=transolver/darcy fno=fno/darcy
    # an investigation variant: label=preset followed by ;-separated overrides
    python -m neurodyn_lab run operators/darcy --epochs 10 --seeds 0 --runs "lamo-bi=lamo/darcy;model.directions=bi"
    # another model on a preset's data and training: "@model=<preset>" takes that preset's model section
    python -m neurodyn_lab run operators/darcy --tag operators/pipe --runs "fno=lamo/pipe;@model=fno/darcy"
    # the table of everything recorded under --tag
    python -m neurodyn_lab run operators/darcy --report

Every run calls ``neurodyn.train.experiment.run_experiment`` on the preset at ``--scale`` (default cpu)
with ``train.epochs``, ``train.seed`` and the run's own overrides (plus ``--common`` overrides applied to
every run), so the models see the same generated data file and split. ``train.seed`` changes the
initialisation and the batch order, not the data. The final-epoch test relative L2 (the number the
papers report) and the best epoch are recorded, one record per run,
``lab/records/<tag>/runs/<run>/result.json`` (``--tag``: a claim, ``<paper>/<claim>``), so runs can go in parallel
processes; the run folders train in ``lab/runs/<tag>`` (untracked; a run resumes there). ``--report`` prints
mean +- std over seeds. Runs are skipped when their JSON exists (``--force`` redoes them). Threads: 2
(``torch.set_num_threads``) with ``OMP_WAIT_POLICY=PASSIVE`` (spinning OpenMP workers slow 2-thread runs on a
shared machine).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import datetime as _dt
import statistics
import sys
from pathlib import Path

import torch

from neurodyn_lab.paths import records, runs_for
from neurodyn_lab.records import read_run_records, write_run_record


def parse_run(text: str) -> tuple[str, str, list[str]]:
    label, _, rest = text.partition("=")
    parts = [p for p in rest.split(";") if p]
    if not label or not parts:
        raise SystemExit(f"--runs entries look like label=preset[;key=value...], got {text!r}")
    return label, parts[0], parts[1:]


def run_one(label, preset, overrides, seed, args, out: Path) -> dict:
    """Train one run (:func:`neurodyn_lab.queue.train_preset`) and write its record to ``out``."""
    from neurodyn_lab.queue import train_preset

    swap = [o.split("=", 1)[1] for o in overrides if o.startswith("@model=")]
    overrides = [o for o in overrides if not o.startswith("@model=")]
    ov = list(args.common) + [o for o in overrides if not o.startswith("model.")] + [f"train.seed={seed}"]
    if args.epochs:
        ov.append(f"train.epochs={args.epochs}")
    model_ov = [o for o in overrides if o.startswith("model.")]
    # with a swap: the model section of another preset (same scale), then the run's model overrides
    runs_dir = Path(args.runs_dir) if args.runs_dir else runs_for(records(args.tag))
    r = train_preset(
        preset,
        args.scale,
        runs_dir / f"{label}-s{seed}",
        ov,
        seed=seed,
        model_overrides=model_ov,
        model_from=swap[0] if swap else None,
        resume=not args.force,
    )
    res = r.record()
    rec = {
        "label": label,
        "preset": preset,
        "scale": args.scale,
        "seed": seed,
        "overrides": ov + [f"@model={s}" for s in swap[:1]] + model_ov,
        **{
            k: res.get(k)
            for k in (
                "final_rel_l2",
                "best_val_rel_l2",
                "test_rel_l2_at_best_val",
                "epochs",
                "train_seconds",
                "wall_seconds",
                "params",
                "n_train",
                "n_val",
                "n_test",
                "final_train_loss",
            )
        },
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "load_avg": os.getloadavg(),
        "final_metrics": {k: v for k, v in r.final.items() if isinstance(v, (int, float))},
        "curve": r.curve,
    }
    write_run_record(out.parent.parent.parent, out.parent.name, rec, run_dir=r.run_dir)
    return rec


def report(tag: str) -> None:
    rows: dict[str, list[dict]] = {}
    for r in read_run_records(records(tag)):
        rows.setdefault(r["label"], []).append(r)
    if not rows:
        print(f"no runs recorded under lab/records/{tag}")
        return
    print(
        "| run | preset (scale) | params | epochs | seeds | test rel. L2 (final), mean +- std | per seed | "
        "best validation rel. L2 (older records: best test epoch †) | train s/epoch |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, rs in rows.items():
        rs.sort(key=lambda r: r["seed"])
        finals = [r["final_rel_l2"] for r in rs]
        best = [r["best_val_rel_l2"] if r.get("best_val_rel_l2") is not None else r["best_rel_l2"] for r in rs]
        dagger = "" if all(r.get("best_val_rel_l2") is not None for r in rs) else " †"
        std = statistics.stdev(finals) if len(finals) > 1 else 0.0
        extra = [o for o in rs[0]["overrides"] if not o.startswith(("train.seed", "train.epochs"))]
        name = label + (f" (`{' '.join(extra)}`)" if extra else "")
        print(
            f"| {name} | {rs[0]['preset']} ({rs[0]['scale']}) | {rs[0]['params']:,} | {rs[0]['epochs']} | "
            f"{','.join(str(r['seed']) for r in rs)} | {statistics.mean(finals):.4f} +- {std:.4f} | "
            f"{' '.join(f'{v:.4f}' for v in finals)} | {statistics.mean(best):.4f}{dagger} | "
            f"{statistics.mean(r['train_seconds'] / r['epochs'] for r in rs):.0f} |"
        )


def plot_curves(tag: str, out: str, extra: list[str]) -> None:
    """Test rel. L2 per epoch, mean over seeds, of every label recorded under ``tag`` plus ``extra`` entries
    ``label=<paper>/<claim>/<glob of run names>`` (e.g. another claim's FNO runs), on one log axis."""
    from neurodyn.plots import plot_seed_mean_curves

    groups: dict[str, list[dict]] = {}
    for r in read_run_records(records(tag)):
        groups.setdefault(r["label"], []).append(r)
    for item in extra:
        label, _, pattern = item.partition("=")
        paper, claim, runs = (pattern.split("/", 2) + ["", ""])[:3]
        groups[label] = read_run_records(records(f"{paper}/{claim}"), runs or "*")
    curves = {label: [r["curve"] for r in rs if r.get("curve")] for label, rs in groups.items()}
    means = plot_seed_mean_curves(
        curves, out, "validation rel. L2 (older records: test)", f"{tag}: mean over seeds", log=True
    )
    for label, m in means.items():
        print(f"{label} ({len(curves[label])} seeds): " + " / ".join(f"{v:.4f}" for v in m))
    print("->", out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", default=["lamo=lamo/darcy", "transolver=transolver/darcy", "fno=fno/darcy"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=0, help="train.epochs for every run (0: the preset's)")
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--common", nargs="*", default=[], help="overrides applied to every run")
    ap.add_argument("--tag", default="operators/darcy", help="the claim the records go to: lab/records/<tag>")
    ap.add_argument("--runs-dir", default=None, help="where the run folders train (default lab/runs/<tag>, untracked)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument(
        "--plot-curves",
        metavar="OUT.png",
        default=None,
        help="plot the per-epoch test rel. L2 (mean over seeds) of the runs under --tag, and --extra",
    )
    ap.add_argument(
        "--extra",
        nargs="*",
        default=[],
        metavar="LABEL=GLOB",
        help="with --plot-curves: more records, e.g. fno=geomano/table1/ns-fno-s*",
    )
    args = ap.parse_args(argv)
    if args.report:
        report(args.tag)
        return
    if args.plot_curves:
        plot_curves(args.tag, args.plot_curves, args.extra)
        return
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        for item in args.runs:
            label, preset, overrides = parse_run(item)
            out = records(args.tag) / "runs" / f"{label}-s{seed}" / "result.json"
            if out.exists() and not args.force:
                print(f"{label} seed {seed}: recorded already ({out})")
                continue
            rec = run_one(label, preset, overrides, seed, args, out)
            best = rec["best_val_rel_l2"]
            print(
                f"{label} seed {seed}: test rel. L2 {rec['final_rel_l2']:.4f} (best validation "
                f"{'-' if best is None else format(best, '.4f')}), "
                f"{rec['params']:,} parameters, {rec['train_seconds']:.0f} s",
                flush=True,
            )
    print(f"\ncommand: {' '.join([Path(sys.executable).name] + sys.argv)}\n")
    report(args.tag)


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run operators/darcy`` entry point: ``--scale`` is the presets' scale."""
    return main(["--scale", scale, *argv]) or 0


if __name__ == "__main__":
    main()
