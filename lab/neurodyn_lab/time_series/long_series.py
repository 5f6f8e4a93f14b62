"""Long archive series: how the sequence presets shorten them, chosen on validation, then tested once.

    # the archive files ship inside the aeon and sktime wheels (ACSF1 and OSULeaf in aeon's, PLAID in sktime's):
    python -m neurodyn_lab run time_series/long_series --archive $AEON_DATA $SKTIME_DATA --select   # (resumes)
    python -m neurodyn_lab run time_series/long_series --archive $AEON_DATA $SKTIME_DATA --baselines
    python -m neurodyn_lab run time_series/long_series --archive $AEON_DATA $SKTIME_DATA --test     # once
    python -m neurodyn_lab run time_series/long_series --report

The files: ACSF1 (100 + 100 series of length 1,460, 10 classes), OSULeaf (200 + 242, length 427, 6 classes), PLAID
(537 + 537, lengths 100-1,344, 11 classes), converted with ``neurodyn convert`` into ``--stores`` (untracked;
``<stores>`` in the records).

``--select``: every candidate of ``CANDIDATES`` (how the series reach the core: average-pooled to at most 256 steps,
the former silent default; or the raw series shortened by the conv front end's strides, with or without each series
standardised over its own steps) behind each core of
``CORES`` (the ``cpu`` scale of ``gru/sequence`` and ``nac/sequence``: three 64-wide convs of kernel 7, batch norm,
the mean over steps) trains once (seed 0) on the *training* file, of which 20 % validates. The budget is the
floor's: ``THREADS`` torch threads, ``train.time_limit=TIME_LIMIT`` s of training (at most the preset's 400 epochs,
early stopping after 100 epochs without a better validation accuracy), so that the whole run takes at most
15 minutes. No test file is read: a record holds validation accuracies, the run's wall time, the load average and
the CPU seconds of this process. The choice per core (written before any test read, :func:`choose`): the
candidate with the highest mean over the three files of the best validation accuracy (ties: the later one listed).

``--test`` (after every selection run is recorded): the chosen candidate of each core is evaluated once on each
file's test file, with the checkpoint ``neurodyn evaluate --which auto`` takes (``best.pt`` when 50 or more cases
validated it, else ``last.pt``), into ``test_reads/<run>.json``; an evaluation already recorded is never repeated.
The floor of issue 58 per file: the best trained preset (the core with the higher validation accuracy on that
file) at or above 1-NN Euclidean's test accuracy, in at most 15 minutes of wall clock on 2 threads.

``--baselines``: 1-NN Euclidean (``knn/sequence``) and MiniRocket (``minirocket/sequence``) fitted on the whole
training file (their published protocol) on the raw series (``data.max_steps=0``, the presets' default) and, to
show what the former silent default did to them, average-pooled to at most 256 steps (``data.max_steps=256``).
Nothing is chosen from them.

Records: ``lab/records/time_series/long_series/`` (``runs/<run>/result.json`` per run, ``test_reads/<run>.json``,
``report.md``); run folders in ``lab/runs/time_series/long_series`` (untracked; ``--test`` needs the selection's
checkpoints there).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spinning OpenMP threads on a loaded machine cost 5-20x

import argparse
import json
import math
import resource
import statistics
import sys
from pathlib import Path

from neurodyn_lab.paths import RUNS, records, runs_for
from neurodyn_lab.records import load_results, with_placeholders, write_json, write_text
from neurodyn_lab.time_series import uea as uea_sequences  # conversion and the 20 % validation split

OUT = "time_series/long_series"
STORES = RUNS / "time_series" / "long_series_stores"  # converted archive files (untracked; "<stores>" in records)
DATASETS = ("ACSF1", "OSULeaf", "PLAID")
#: label -> preset: the sequence presets whose cpu scale is chosen here
CORES = {"gru": "gru/sequence", "nac": "nac/sequence"}
#: label -> overrides: how a series reaches the core. pool256: average-pooled in time to at most 256 steps (the
#: former data.max_steps=auto); strideS: the raw series, each of the three front-end convs of stride S (the core
#: reads T / S^3 steps: a learned shortening)
#: strideS-series: the same with each series standardised over its own steps and the log of its standard deviation
#: appended as a channel (model.input_norm=series), added after the first three's validation accuracies were seen
#: (PLAID, whose amplitudes span five orders of magnitude, did not fit its training split), before any test read
CANDIDATES = {
    "pool256": ("data.max_steps=256", "model.conv_stride=1"),
    "stride2": ("data.max_steps=0", "model.conv_stride=2"),
    "stride4": ("data.max_steps=0", "model.conv_stride=4"),
    "stride2-series": ("data.max_steps=0", "model.conv_stride=2", "model.input_norm=series"),
    "stride4-series": ("data.max_steps=0", "model.conv_stride=4", "model.input_norm=series"),
}
THREADS = 2
TIME_LIMIT = 840  # s of training (epochs with their evaluations); data, model and summary fit in the last minute
FLOOR_SECONDS = 900  # issue 58: 15 minutes of wall clock, the whole training
#: the fitted baselines on the whole training file: raw series (their published protocol), and pooled as before
BASELINES = {"1-NN ED": "knn/sequence", "MiniRocket": "minirocket/sequence"}
BASELINE_STEPS = {"raw": "data.max_steps=0", "pool256": "data.max_steps=256"}
TEST = "test_reads"  # one <run>.json per test-file evaluation of a chosen run


def stores(args, name: str, splits=("TRAIN",)) -> list[Path]:
    return [
        uea_sequences.convert(uea_sequences.archive_folder(args.archive, name, s), name, Path(args.stores), (s,))[0]
        for s in splits
    ]


def core_steps(t_max: int, candidate: str) -> int:
    """The steps the core reads of a series of ``t_max`` steps under ``candidate``."""
    if candidate.startswith("pool"):
        limit = int(candidate[4:])
        k = max(1, math.ceil(t_max / limit))
        return math.ceil(t_max / k)
    s = int(candidate[len("stride") :].split("-")[0])
    for _ in range(3):
        t_max = math.ceil(t_max / s)
    return t_max


def _cpu_clock():
    """A closure returning the CPU seconds (user + system) this process spent since its previous call."""
    last = [resource.getrusage(resource.RUSAGE_SELF)]

    def delta() -> float:
        now = resource.getrusage(resource.RUSAGE_SELF)
        spent = (now.ru_utime + now.ru_stime) - (last[0].ru_utime + last[0].ru_stime)
        last[0] = now
        return round(spent, 1)

    return delta


def longest(store: Path) -> int:
    """The longest series of a store (its padded length)."""
    import h5py

    with h5py.File(store, "r") as f:
        return int(f["fields/x"].shape[1])


def selection_name(core: str, candidate: str, dataset: str) -> str:
    return f"{core}-{candidate}-{dataset}"


def selection_jobs(args) -> list:
    from neurodyn_lab.queue import Job

    jobs = []
    for dataset in args.datasets:
        train = stores(args, dataset)[0]
        data = [f"data.path={train}", f"data.n_val={uea_sequences.n_val(train)}", f"train.time_limit={TIME_LIMIT}"]
        for core, preset in CORES.items():
            for candidate, overrides in CANDIDATES.items():
                jobs.append(
                    Job(
                        name=selection_name(core, candidate, dataset),
                        preset=preset,
                        seed=0,
                        overrides=[*data, *overrides],
                        keys={"core": core, "candidate": candidate, "dataset": dataset, "t_max": longest(train)},
                        label=f"{core} {candidate} {dataset}",
                    )
                )
    return jobs


def selection_record(cpu):
    from neurodyn_lab.time_series.uea_tuning import validation_scores

    def evaluate(run) -> dict:
        return {**validation_scores(run), "cpu_seconds": cpu()}

    return evaluate


def run_select(args) -> None:
    from neurodyn_lab.queue import run_jobs

    cpu = _cpu_clock()
    run_jobs(
        selection_jobs(args),
        args.out,
        "cpu",
        evaluate=selection_record(cpu),
        runs_dir=args.runs,
        tag="long-series",
        placeholders={args.stores: "<stores>"},
        threads=args.threads,
        metric="accuracy",
        summary=lambda r: (
            f"val best {r['val_best']:.3f} at epoch {r['best_epoch']}, {r['epochs_run']} epochs, "
            f"{r['wall_seconds']:.0f} s wall, load {r['load_avg'][0]:.1f}"
        ),
    )


def baseline_jobs(args) -> list:
    from neurodyn_lab.queue import Job

    jobs = []
    for dataset in args.datasets:
        train, test = stores(args, dataset, ("TRAIN", "TEST"))
        for label, preset in BASELINES.items():
            for steps, override in BASELINE_STEPS.items():
                jobs.append(
                    Job(
                        name=f"{preset.split('/')[0]}-{steps}-{dataset}",
                        preset=preset,
                        seed=0,
                        overrides=[f"data.path={train}", f"data.test_path={test}", "data.n_val=0", override],
                        keys={"baseline": label, "steps": steps, "dataset": dataset},
                        label=f"{label} {steps} {dataset}",
                    )
                )
    return jobs


def run_baselines(args) -> None:
    from neurodyn.train.runs import read_test_file_metrics
    from neurodyn_lab.queue import run_jobs

    cpu = _cpu_clock()

    def evaluate(run) -> dict:
        (metrics,) = read_test_file_metrics(run.run_dir).values()
        return {"test_accuracy": metrics["accuracy"], "cpu_seconds": cpu()}

    run_jobs(
        baseline_jobs(args),
        args.out,
        "cpu",
        evaluate=evaluate,
        runs_dir=args.runs,
        tag="long-series",
        placeholders={args.stores: "<stores>"},
        threads=args.threads,
        metric="accuracy",
        summary=lambda r: f"test {r['test_accuracy']:.3f}, {r['wall_seconds']:.0f} s",
    )


def selection_records(records: list[dict]) -> list[dict]:
    return [r for r in records if "candidate" in r]


def choose(records: list[dict], core: str, datasets) -> tuple[list[tuple], str | None]:
    """``(rows, choice)``: per candidate ``(candidate, mean best validation accuracy, {dataset: value})`` over the
    candidates recorded on every file, and the chosen candidate (None until every candidate has every file): the
    highest mean, ties to the later in ``CANDIDATES``."""
    rows = []
    for candidate in CANDIDATES:
        got = {
            r["dataset"]: r["val_best"]
            for r in selection_records(records)
            if r["core"] == core and r["candidate"] == candidate
        }
        if all(d in got for d in datasets):
            rows.append((candidate, statistics.fmean(got[d] for d in datasets), got))
    if len(rows) < len(CANDIDATES):
        return rows, None
    order = list(CANDIDATES)
    return rows, max(rows, key=lambda row: (row[1], order.index(row[0])))[0]


def read_tests(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / TEST).glob("*.json"))]


def run_test(args) -> None:
    """The chosen candidate of each core evaluated once on each test file (module doc)."""
    from neurodyn.train.predict import load_run

    out = Path(args.out)
    records = load_results(out)
    seen = {r["run"] for r in read_tests(out)}
    for core in CORES:
        _, choice = choose(records, core, args.datasets)
        if choice is None:
            raise SystemExit(f"{core}: not every candidate is recorded on every file; run --select first")
        for dataset in args.datasets:
            name = selection_name(core, choice, dataset)
            if name in seen:
                continue
            test = stores(args, dataset, ("TEST",))[0]
            run = load_run(Path(args.runs) / name, "auto")
            metrics = run.evaluate({"test": test})["test"]
            entry = {
                "run": name,
                "core": core,
                "candidate": choice,
                "dataset": dataset,
                "checkpoint": run.checkpoint.name,
                "test_accuracy": metrics["accuracy"],
                "test_file": str(test),
            }
            write_json(
                out / TEST / f"{name}.json", with_placeholders(entry, {str(Path(args.stores).absolute()): "<stores>"})
            )
            print(
                f"[long-series] {core} {choice} {dataset}: test {metrics['accuracy']:.3f} ({run.checkpoint.name})",
                flush=True,
            )


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (
        ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
        + ["| " + " | ".join(row) + " |" for row in rows]
        + [""]
    )


def report(args) -> str:
    out = Path(args.out)
    records = load_results(out)
    sel = {(r["core"], r["candidate"], r["dataset"]): r for r in selection_records(records)}
    base = {(r["baseline"], r["steps"], r["dataset"]): r for r in records if "baseline" in r}
    tests = {(r["core"], r["dataset"]): r for r in read_tests(out)}
    lengths = {r["dataset"]: r.get("t_max") for r in records if r.get("t_max")}
    lines = [
        "# Long archive series: pooling or a strided front end, chosen on validation",
        "",
        "Generated by `python -m neurodyn_lab run time_series/long_series --report` from the records. "
        f"Selection: one seed (0) per candidate and file, {args.threads} torch threads, "
        f"`train.time_limit={TIME_LIMIT}` s, 20 % of each training file validates, no test file read; cell: the "
        "best validation accuracy; score: the mean over the files; the highest score is chosen per core (ties: "
        "the later one listed). Wall: the whole run (data, model, training); load: the "
        "1-minute load average of the 2-core machine when the run ended (other work shared it).",
        "",
    ]
    for core, preset in CORES.items():
        rows_, choice = choose(records, core, args.datasets)
        rows = []
        for candidate in CANDIDATES:
            cells = []
            for d in args.datasets:
                r = sel.get((core, candidate, d))
                cells.append(
                    "—"
                    if r is None
                    else f"{r['val_best']:.3f} ({r['epochs_run']} ep, {r['wall_seconds'] / 60:.1f} min, "
                    f"load {r['load_avg'][0]:.1f})"
                )
            score = next((f"{s:.3f}" for c, s, _ in rows_ if c == candidate), "—")
            rows.append([f"{candidate}{' **chosen**' if candidate == choice else ''}", *cells, score])
        lines += [f"## {core} ({preset}, cpu scale)", "", *_table(["candidate", *args.datasets, "score"], rows)]
    lines += [
        "## Test accuracy, once, of the chosen candidates",
        "",
        "The checkpoint `neurodyn evaluate --which auto` takes (best.pt with 50 or more validation cases, else "
        "last.pt). Best trained: the core with the higher validation accuracy on the file. 1-NN ED and "
        "MiniRocket: fitted on the whole training file, raw series.",
        "",
    ]
    rows = []
    for d in args.datasets:
        got = {c: tests.get((c, d)) for c in CORES}
        best = max(
            (c for c in CORES if got[c] is not None),
            key=lambda c: sel[(c, got[c]["candidate"], d)]["val_best"],
            default=None,
        )
        knn = base.get(("1-NN ED", "raw", d))
        rocket = base.get(("MiniRocket", "raw", d))
        cells = [
            (
                "—"
                if got[c] is None
                else f"{got[c]['test_accuracy']:.3f} ({got[c]['candidate']}, "
                f"{sel[(c, got[c]['candidate'], d)]['wall_seconds'] / 60:.1f} min)"
            )
            for c in CORES
        ]
        verdict = "—"
        if best is not None and knn is not None:
            r = sel[(best, got[best]["candidate"], d)]
            met = got[best]["test_accuracy"] >= knn["test_accuracy"] and r["wall_seconds"] <= FLOOR_SECONDS
            verdict = f"{best}: {'met' if met else 'not met'}"
        rows.append(
            [
                d,
                *cells,
                "—" if knn is None else f"{knn['test_accuracy']:.3f}",
                "—" if rocket is None else f"{rocket['test_accuracy']:.3f}",
                verdict,
            ]
        )
    lines += _table(["file", *(f"{c} (test)" for c in CORES), "1-NN ED", "MiniRocket", "floor (1 seed)"], rows)
    lines += [
        "## The fitted baselines, raw and pooled",
        "",
        "Fitted on the whole training file; test accuracy. pool256: average-pooled in time to at most 256 "
        "steps, what `data.max_steps=auto` did to every preset before (silently).",
        "",
    ]
    rows = [
        [
            d,
            *(
                f"{base[(b, s, d)]['test_accuracy']:.3f}" if (b, s, d) in base else "—"
                for b in BASELINES
                for s in BASELINE_STEPS
            ),
        ]
        for d in args.datasets
    ]
    lines += _table(["file", *(f"{b} {s}" for b in BASELINES for s in BASELINE_STEPS)], rows)
    steps = [[d, *(str(core_steps(lengths[d], c)) if d in lengths else "—" for c in CANDIDATES)] for d in args.datasets]
    if lengths:
        lines += ["Steps the core reads (longest training series):", "", *_table(["file", *CANDIDATES], steps)]
    cpu = sum(r.get("cpu_seconds", 0) for r in records)
    lines += [f"CPU time of the recorded runs (user + system of the driver's process): {cpu / 3600:.2f} h.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--archive",
        nargs="*",
        type=Path,
        default=[],
        help="folders holding <NAME>/<NAME>_TRAIN.ts (aeon's and sktime's datasets/data)",
    )
    ap.add_argument("--datasets", nargs="*", default=list(DATASETS))
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--stores", default=str(STORES), help="where the archive files are converted to")
    ap.add_argument("--runs", default=None, help="run folders (default lab/runs/<out>, untracked)")
    ap.add_argument("--out", default=OUT, help="the claim the records go to (lab/records/<out>), or a folder")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--select", action="store_true", help="the candidates on validation (no test file read)")
    what.add_argument("--baselines", action="store_true", help="1-NN ED and MiniRocket, raw and pooled")
    what.add_argument("--test", action="store_true", help="the chosen candidates on the test files, once")
    what.add_argument("--report", action="store_true", help="only the report of what is recorded")
    args = ap.parse_args(argv)
    args.out = str(records(args.out))
    args.runs = args.runs or str(runs_for(args.out))
    import torch

    torch.set_num_threads(args.threads)
    if args.select:
        run_select(args)
    elif args.baselines:
        run_baselines(args)
    elif args.test:
        run_test(args)
    text = report(args)
    print(text)
    write_text(Path(args.out) / "report.md", text)
    return 0


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run time_series/long_series`` entry point (the presets' cpu scale; ``scale`` is not
    used)."""
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
