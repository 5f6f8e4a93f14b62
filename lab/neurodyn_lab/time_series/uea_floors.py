"""The UEA/UCR floors rerun under its pre-registered protocol, ``lab/protocols/time_series/uea_floors.yaml``: its plan
and cost, and the folds of its selection rule.

    python -m neurodyn_lab run time_series/uea_floors --dry-run          # the runs per file and candidate, the cost
    python -m neurodyn_lab run time_series/uea_floors --dry-run --runs   # ... and every run, one line each

The protocol names the files (development and confirmation), the candidates, the selection rule (repeated stratified
k-fold on the training file), the refit rule, the seeds and the floors, and states the CPU-hours before launching.
:func:`plan` lists every run the protocol makes, each with its estimated seconds from the records of the 29 Nov
comparisons (``lab/records/time_series/uea``): the median seconds per epoch of the same entry on the same file times
the mean epochs its runs trained, the work of an epoch scaled by the training cases (and, for a confirmation file,
from its ``cost_like`` development file by training cases x longest series), plus the median seconds a run spent
outside training. :func:`fold_split` is the selection rule's split of a training file: the held-out fold, and the
inner validation carved from the other folds.

The rerun itself (:mod:`.uea_floors_rerun`: the files checked and converted, each fold's stores, the stamped
``compare`` records of every stage) and its selection, floors and report (:mod:`.uea_floors_verdicts`):

    python -m neurodyn_lab run time_series/uea_floors --archive $AEON $SKTIME   # one per core; each resumes
    python -m neurodyn_lab run time_series/uea_floors --report                  # <records>/report.md

The jobs (:func:`jobs`) are named here, where both read them: one records folder per fold of the selection
(``<file>-cv-r<r>-f<k>``), per file's fits (``<file>-fit``) and per refit (``<file>-refit-<label>``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from neurodyn.errors import DataError
from neurodyn_lab import protocols
from neurodyn_lab.paths import records

PROTOCOL = "time_series/uea_floors"
#: the records whose seconds per epoch estimate the cost: the 29 Nov comparisons and their validation draws
COST_RECORDS = records("time_series/uea")
COST_BUDGETS = ("400ep", *(f"400ep-draw{k}" for k in (1, 2, 3, 4)))


# ------------------------------------------------------------------------------------------------
# the selection rule's folds


def stratified_folds(y: np.ndarray, k: int, seed: int, regression: bool = False) -> list[np.ndarray]:
    """``k`` folds of the cases ``0..len(y)-1``, stratified: each class's cases (a regression target's quintile) in a
    random order of ``seed``, dealt to the folds in turn, each class starting where the last one stopped (so the
    folds' sizes differ by at most one). Every case is in exactly one fold; each fold's indices are sorted."""
    y = np.asarray(y)
    if regression:
        ranks = np.argsort(np.argsort(y, kind="stable"), kind="stable")
        strata = np.minimum(ranks * 5 // max(len(y), 1), 4)
    else:
        strata = y
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    at = 0
    for s in sorted(set(strata.tolist())):
        cases = np.flatnonzero(strata == s)
        for i in rng.permutation(cases):
            folds[at % k].append(int(i))
            at += 1
    return [np.sort(np.asarray(f, dtype=int)) for f in folds]


def fold_split(
    y: np.ndarray, k: int, seed: int, fold: int, regression: bool = False, inner: float = 0.2, min_val: int = 4
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The selection rule's split of a training file for fold ``fold`` of the repeat drawn with ``seed``:
    ``(train, val, held_out)`` case indices. ``held_out`` is the fold (it scores the final model); the other folds
    train, with ``inner`` of them (at least ``min_val`` cases, stratified the same way, the same seed) validating
    inside the run (early stopping, best.pt). A fold's training store lists ``train`` then ``val``, so that
    ``data.n_val=len(val)`` carves exactly ``val`` from its end."""
    y = np.asarray(y)
    folds = stratified_folds(y, k, seed, regression)
    held_out = folds[fold]
    rest = np.sort(np.concatenate([f for i, f in enumerate(folds) if i != fold]))
    inner_folds = stratified_folds(y[rest], round(1 / inner), seed, regression)
    val = list(inner_folds[0])
    for extra in inner_folds[1:]:
        if len(val) >= min_val:
            break
        val += list(extra[: min_val - len(val)])
    val_idx = np.sort(rest[np.asarray(val, dtype=int)])
    train = np.setdiff1d(rest, val_idx)
    return train, val_idx, held_out


# ------------------------------------------------------------------------------------------------
# the rerun's jobs: one records folder each

HELD_OUT = "heldout"  # the held-out fold's store name: its key in a cv record's "sets"
#: the whole test file's store name: its key in a fit's or refit's record's "sets"
TEST = "test"


class Job(NamedTuple):
    """One records folder's worth of runs: ``stage`` ``cv`` (``repeat``, ``fold``), ``fit`` or ``refit``
    (``label``) of ``file``."""

    file: str
    stage: str
    repeat: int | None = None
    fold: int | None = None
    label: str | None = None

    @property
    def folder(self) -> str:
        """The job's records folder under the protocol's: ``<file>-cv-r<r>-f<k>``, ``<file>-fit``,
        ``<file>-refit-<label>`` (one level, as every comparison of several archive files lays out its records)."""
        if self.stage == "cv":
            return f"{self.file}-cv-r{self.repeat}-f{self.fold}"
        return f"{self.file}-{self.stage}" + (f"-{self.label}" if self.label else "")


def records_dir(protocol: protocols.Protocol) -> Path:
    """The protocol's records folder (its ``records:``, under ``lab/records``)."""
    return records(protocol.spec["records"].rstrip("/").removeprefix("lab/records/"))


def jobs(protocol: protocols.Protocol) -> list[Job]:
    """The cv and fit jobs of every file, in the protocol's order (refits: :func:`refit_jobs`)."""
    sel = protocol.spec["selection"]
    out = []
    for f in protocol.files():
        out += [Job(f["name"], "cv", r, k) for r in range(int(sel["repeats"])) for k in range(int(sel["k"]))]
        out.append(Job(f["name"], "fit"))
    return out


def entry(protocol: protocols.Protocol, label: str) -> str:
    """The compare entry of the candidate or reference ``label``."""
    for item in [*protocol.candidates(), *protocol.spec["references"]]:
        if item["label"] == label:
            return item["entry"]
    raise DataError(f"protocol {protocol.name} has no candidate or reference {label!r}")


def references(protocol: protocols.Protocol, file: dict[str, Any]) -> list[dict[str, Any]]:
    """The file's references: the training mean for a regression file, 1-NN ED for a classification file."""
    regression = file["task"] == "regression"
    return [r for r in protocol.spec["references"] if (r["label"] == "training mean") == regression]


def job_runs(protocol: protocols.Protocol, job: Job) -> tuple[list[str], list[int]]:
    """``(entries, seeds)`` a job trains, each entry once per seed: a fold every candidate at the training seed; a
    fit the fitted candidates and the file's reference at every seed; a refit its candidate at every seed."""
    spec = protocol.spec
    if job.stage == "cv":
        return [c["entry"] for c in protocol.candidates()], [int(spec["selection"]["training_seed"])]
    seeds = [int(s) for s in spec["seeds"]]
    if job.stage == "refit":
        return [entry(protocol, job.label)], seeds
    file = next(f for f in protocol.files() if f["name"] == job.file)
    fitted = [c for c in protocol.candidates() if "fitted" in c.get("group", [])]
    return [c["entry"] for c in fitted + references(protocol, file)], seeds


# ------------------------------------------------------------------------------------------------
# the plan and its cost


class Run(NamedTuple):
    file: str
    role: str  # development | confirmation
    stage: str  # cv (a fold of the selection) | refit (a chosen neural candidate) | fit (fitted, references)
    label: str
    repeat: int | None
    fold: int | None
    seed: int
    seconds: float  # estimated
    basis: str  # what the estimate rests on


class Cost(NamedTuple):
    seconds_per_epoch: float
    epochs: float
    overhead: float  # seconds of a run outside training (start, evaluation, recording)
    n_train: int  # the training cases of the recorded runs


def _label(entry: str) -> str:
    return entry.split(";")[0].split("=")[0]


def cost_table(dataset: str, root: Path = COST_RECORDS) -> dict[str, Cost]:
    """``label -> Cost`` of every entry recorded in the 29 Nov comparisons of ``dataset`` (the regular 400-epoch
    comparison and its four validation draws): median seconds per epoch, mean epochs trained, median seconds outside
    training, the runs' training cases."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for budget in COST_BUDGETS:
        path = Path(root) / f"{dataset}-regular-{budget}" / "results.json"
        if path.exists():
            for r in json.loads(path.read_text()):
                runs[r["preset"]].append(r)
    return {
        label: Cost(
            statistics.median(r["seconds_per_epoch"] for r in rs),
            statistics.mean(r["epochs"] for r in rs),
            statistics.median(max(0.0, r["wall_seconds"] - r["train_seconds"]) for r in rs),
            int(statistics.median(r["n_train"] for r in rs)),
        )
        for label, rs in runs.items()
    }


def _fold_train_cases(n: int, k: int, inner: float = 0.2, min_val: int = 4) -> int:
    rest = n - n // k
    return rest - max(min_val, round(inner * rest))


def plan(protocol: protocols.Protocol | None = None, root: Path = COST_RECORDS) -> list[Run]:
    """Every run of the protocol with its estimated seconds: the selection's fold runs (every candidate, every file,
    ``k x repeats`` folds, the training seed), the fits on the whole training file (the fitted candidates and the
    references, every seed) and the refits. Which neural candidates are chosen is not known before the selection, so
    the refits listed are an upper bound: per classification file the three costliest neural candidates (best, best
    neural, NAC), per regression file the costliest one, every seed."""
    p = protocol or protocols.load(PROTOCOL)
    sel, seeds = p.spec["selection"], list(p.spec["seeds"])
    k, repeats, train_seed = int(sel["k"]), int(sel["repeats"]), int(sel["training_seed"])
    dev = {f["name"]: f for f in p.files("development")}
    out: list[Run] = []
    for f in p.files():
        role = "development" if f["name"] in dev else "confirmation"
        like = dev[f.get("cost_like", f["name"])]
        table = cost_table(like["name"], root)
        size = (f["train_cases"] * f["length"]) / (like["train_cases"] * like["length"])
        basis = "measured" if like is f else f"scaled from {like['name']} (cases x length {size:.2f})"
        n_fold, n_whole = _fold_train_cases(f["train_cases"], k), f["train_cases"]

        def seconds(item: dict[str, Any], cases: int, table=table, size=size, like=like) -> float:
            c = table[item["cost_from"]]
            factor = item.get("cost_factor", 1)
            per_case = size * like["train_cases"] / f["train_cases"]  # the work of one case's epoch, scaled
            return factor * c.seconds_per_epoch * c.epochs * per_case * cases / c.n_train + c.overhead

        for cand in p.candidates():
            for r in range(repeats):
                for fold in range(k):
                    out.append(
                        Run(f["name"], role, "cv", cand["label"], r, fold, train_seed, seconds(cand, n_fold), basis)
                    )
        fitted = [c for c in p.candidates() if "fitted" in c.get("group", [])]
        refs = [r for r in p.spec["references"] if (r["label"] == "training mean") == (f["task"] == "regression")]
        for item in fitted + refs:
            for s in seeds:
                out.append(Run(f["name"], role, "fit", item["label"], None, None, s, seconds(item, n_whole), basis))
        neural = sorted(
            (c for c in p.candidates() if "neural" in c.get("group", [])), key=lambda c: -seconds(c, n_whole)
        )[: 3 if f["task"] == "classification" else 1]
        for cand in neural:
            for s in seeds:
                out.append(
                    Run(
                        f["name"],
                        role,
                        "refit",
                        cand["label"],
                        None,
                        None,
                        s,
                        seconds(cand, n_whole),
                        f"{basis}; upper bound (the chosen ones are not known before the selection)",
                    )
                )
    return out


def estimate(runs: list[Run]) -> dict[str, float]:
    """CPU-hours of ``runs`` per stage and in total (``cross_validation``, ``refits``, ``fits``, ``total``)."""
    hours = defaultdict(float)
    for r in runs:
        hours[{"cv": "cross_validation", "refit": "refits", "fit": "fits"}[r.stage]] += r.seconds / 3600
    hours["total"] = sum(hours.values())
    return {k: hours[k] for k in ("cross_validation", "refits", "fits", "total")}


def report(protocol: protocols.Protocol, runs: list[Run], every_run: bool = False) -> str:
    """The plan as text: per file and candidate the runs and their hours, the totals against the protocol's stated
    budget and estimate."""
    lines = [
        f"protocol {protocol.name} (sha256 {protocol.sha256[:12]}, status {protocol.spec['status']}): {len(runs)} runs",
        "",
    ]
    by = defaultdict(list)
    for r in runs:
        by[(r.file, r.role, r.stage, r.label)].append(r)
    lines += [
        "| file | role | stage | label | runs | s / run | CPU-h | basis |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for (file, role, stage, label), rs in by.items():
        lines.append(
            f"| {file} | {role} | {stage} | {label} | {len(rs)} | {rs[0].seconds:.1f} | "
            f"{sum(r.seconds for r in rs) / 3600:.3f} | {rs[0].basis} |"
        )
    est = estimate(runs)
    stated = protocol.spec["budget"]
    lines += [
        "",
        "estimated CPU-hours: " + ", ".join(f"{k} {v:.2f}" for k, v in est.items()),
        f"stated in the protocol: budget {stated['cpu_hours']} CPU-h; estimate "
        + ", ".join(f"{k} {v}" for k, v in (stated.get("estimate") or {}).items()),
        "(1 thread per run as the records measured them; two runs at a time on 2 cores halves the wall time)",
    ]
    if every_run:
        lines += ["", "every run:"] + [
            f"{r.file} {r.stage} {r.label} repeat={r.repeat} fold={r.fold} seed={r.seed} {r.seconds:.1f} s"
            for r in runs
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default=PROTOCOL, help="the protocol (a name under lab/protocols, or a file)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its cost; train nothing")
    ap.add_argument("--runs", action="store_true", help="with --dry-run: every run, one line each")
    ap.add_argument(
        "--archive",
        nargs="+",
        type=Path,
        help="the archive folders holding <NAME>/<NAME>_TRAIN.ts (the aeon 1.6.0 and sktime 1.2.0 wheels' data)",
    )
    ap.add_argument("--report", action="store_true", help="write <records>/report.md from what is recorded")
    args = ap.parse_args(argv)
    p = protocols.load(args.protocol)
    if args.dry_run:
        print(report(p, plan(p), args.runs))
        if not p.frozen:
            print(
                f"\nstatus {p.spec['status']}: nothing may be recorded under this protocol until it is frozen and "
                "committed (neurodyn_lab.protocols.require_registered)"
            )
        return 0
    from neurodyn_lab.time_series.uea_floors_verdicts import write_report

    if args.report:
        print(write_report(p, records_dir(p)))
        return 0
    if not args.archive:
        print("give --archive (the folders of the archive files), --report or --dry-run", file=sys.stderr)
        return 2
    from neurodyn_lab.time_series.uea_floors_rerun import rerun

    status = rerun(p, args.archive)
    write_report(p, records_dir(p))
    return status


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run time_series/uea_floors`` (the presets' cpu scale; ``scale`` is not used)."""
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
