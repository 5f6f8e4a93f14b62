"""The UEA/UCR floors rerun's selection, refit epochs, floors and report, computed from its stamped records
(:mod:`.uea_floors_rerun` writes them) by the rules of ``lab/protocols/time_series/uea_floors.yaml``.

    python -m neurodyn_lab run time_series/uea_floors --report     # <records>/report.md from what is recorded

Selection (per file, from the ``cv`` records only; no test file takes part): a candidate's score is the mean over
the ``k x repeats`` folds of its final model's metric on the held-out fold (accuracy, higher is better; RMSE, lower
is better); ties (to 1e-9) go to the better mean final inner-validation metric (the last value of the run's
validation curve), then to the order the protocol lists. Choices: ``best`` (every candidate), ``best neural``
(group ``neural``) and ``NAC`` (group ``nac``) on a classification file, ``best`` on a regression file; the neural
ones among them are refitted. A refit trains for the mean over its fold runs of the epochs they trained, rounded,
at least 1.

Floors (the protocol's F1-F4), per role (development, confirmation), on the means over seeds of the test scores of
the refits (neural) and fits (fitted, references). A verdict is ``met`` / ``not met`` only through
:func:`neurodyn_lab.protocols.verdict`: every record it reads stamped by the protocol as it is now, and every job
of the role recorded; otherwise exploratory, with the reasons.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, NamedTuple

from neurodyn_lab import protocols
from neurodyn_lab.records import load_results, write_text
from neurodyn_lab.time_series.uea_floors import HELD_OUT, TEST, Job, job_runs, jobs

TIE = 1e-9


def entry_label(entry: str) -> str:
    """The label a compare record carries for a protocol entry (``label=preset;...`` -> ``label``)."""
    return entry.split(";")[0].split("=")[0]


def _items(protocol: protocols.Protocol) -> list[dict[str, Any]]:
    return [*protocol.candidates(), *protocol.spec["references"]]


def _by_record_label(protocol: protocols.Protocol) -> dict[str, str]:
    return {entry_label(i["entry"]): i["label"] for i in _items(protocol)}


def expected_runs(protocol: protocols.Protocol, job) -> set[tuple[str, int]]:
    """``{(record label, seed)}`` that a job's folder holds once it is complete."""
    entries, seeds = job_runs(protocol, job)
    return {(entry_label(e), s) for e in entries for s in seeds}


def _records(protocol: protocols.Protocol, root: Path, job) -> list[dict[str, Any]]:
    """The records of a job's folder, each with ``label``: the protocol's label of its entry."""
    names = _by_record_label(protocol)
    return [{**r, "label": names.get(r["preset"], r["preset"])} for r in load_results(Path(root) / job.folder)]


def recorded(protocol: protocols.Protocol, root: Path, job) -> bool:
    """Whether a job's folder holds every run it makes (by record label and seed)."""
    have = {(r["preset"], r["seed"]) for r in load_results(Path(root) / job.folder)}
    return expected_runs(protocol, job) <= have


def cpu_hours(root: Path) -> float:
    """CPU-hours of every record under ``root``: wall seconds x threads."""
    total = 0.0
    for path in sorted(Path(root).glob("*/results.json")):
        total += sum(r["wall_seconds"] * r.get("threads", 1) for r in load_results(path.parent))
    return total / 3600


# ------------------------------------------------------------------------------------------------
# selection


class Selection(NamedTuple):
    """A file's selection: ``scores`` label -> (mean held-out metric, mean final inner-validation metric, folds),
    the labels in rank order, and the choices (None where the file's task has none)."""

    higher: bool
    scores: dict[str, tuple[float, float, int]]
    ranked: list[str]
    best: str
    best_neural: str | None
    nac: str | None
    refits: list[str]


def cv_jobs(protocol: protocols.Protocol, file: dict[str, Any]):
    return [j for j in jobs(protocol) if j.file == file["name"] and j.stage == "cv"]


def fold_mean(values: list[float | None], strict: bool = False) -> float:
    """The mean of the values; ``strict``: NaN when one is missing or NaN (a fold whose run diverged ranks its
    candidate last, never on its other folds alone), else the mean of those present."""
    present = [v for v in values if v is not None and not math.isnan(v)]
    if not present or (strict and len(present) < len(values)):
        return math.nan
    return statistics.fmean(present)


def selection(protocol: protocols.Protocol, file: dict[str, Any], root: Path) -> Selection | None:
    """The selection of ``file`` from its cv records; None until every fold of every candidate is recorded."""
    folds = cv_jobs(protocol, file)
    if not all(recorded(protocol, root, j) for j in folds):
        return None
    held, inner = {}, {}
    for job in folds:
        for r in _records(protocol, root, job):
            held.setdefault(r["label"], []).append(r["sets"][HELD_OUT])
            curve = r.get("curve_rel_l2") or []
            inner.setdefault(r["label"], []).append(curve[-1] if curve else None)
    higher = file["task"] == "classification"
    order = protocol.labels()
    scores = {
        label: (fold_mean(held[label], strict=True), fold_mean(inner[label]), len(held[label])) for label in order
    }
    ranked = rank(scores, order, higher)
    groups = {c["label"]: c.get("group", []) for c in protocol.candidates()}
    best = ranked[0]
    if not higher:
        return Selection(higher, scores, ranked, best, None, None, [best] if "neural" in groups[best] else [])
    best_neural = next(label for label in ranked if "neural" in groups[label])
    nac = next(label for label in ranked if "nac" in groups[label])
    refits = list(dict.fromkeys(label for label in (best, best_neural, nac) if "neural" in groups[label]))
    return Selection(higher, scores, ranked, best, best_neural, nac, refits)


def rank(scores: dict[str, tuple[float, float, int]], order: list[str], higher: bool) -> list[str]:
    """Labels best first: by score, a tie (to :data:`TIE`) broken by the inner-validation metric, then by ``order``."""
    sign = 1.0 if higher else -1.0

    def key(label: str):
        score, tie, _ = scores[label]
        tie = -math.inf if math.isnan(tie) else sign * tie
        return (-round(sign * score / TIE) if not math.isnan(score) else math.inf, -tie, order.index(label))

    return sorted(order, key=key)


def file_refits(protocol: protocols.Protocol, file: dict[str, Any], root: Path) -> list[Job] | None:
    """The refit jobs of ``file``'s chosen neural candidates; None until its selection is complete."""
    chosen = selection(protocol, file, root)
    return None if chosen is None else [Job(file["name"], "refit", label=label) for label in chosen.refits]


def refit_epochs(protocol: protocols.Protocol, file: dict[str, Any], label: str, root: Path) -> int:
    """The epochs of ``label``'s refit: the mean over its fold runs of the epochs they trained, rounded, >= 1."""
    epochs = [r["epochs"] for j in cv_jobs(protocol, file) for r in _records(protocol, root, j) if r["label"] == label]
    if not epochs:
        raise ValueError(f"{file['name']}: no fold run of {label} is recorded")
    return max(1, round(statistics.fmean(epochs)))


# ------------------------------------------------------------------------------------------------
# test scores and floors


def test_scores(protocol: protocols.Protocol, file: dict[str, Any], root: Path) -> dict[str, float]:
    """label -> the mean over seeds of its test score, for every fitted candidate and reference (fit) and refitted
    neural candidate recorded."""
    out: dict[str, list[float]] = {}
    folders = [Job(file["name"], "fit")]
    folders += [Job(file["name"], "refit", label=c["label"]) for c in protocol.candidates()]
    for job in folders:
        for r in _records(protocol, root, job):
            out.setdefault(r["label"], []).append(r["sets"][TEST])
    return {label: statistics.fmean(v) for label, v in out.items()}


def missing_jobs(protocol: protocols.Protocol, role: str, root: Path) -> list[str]:
    """The jobs of ``role``'s files not completely recorded (a refit counted once its selection is known)."""
    names = {f["name"] for f in protocol.files(role)}
    missing = [j.folder for j in jobs(protocol) if j.file in names and not recorded(protocol, root, j)]
    for f in protocol.files(role):
        refits = file_refits(protocol, f, root)
        if refits is None:
            missing.append(f"{f['name']}-refit (the selection is not complete)")
        else:
            missing += [j.folder for j in refits if not recorded(protocol, root, j)]
    return missing


class FloorResult(NamedTuple):
    verdict: protocols.Verdict
    detail: str


def floors(protocol: protocols.Protocol, role: str, root: Path) -> list[FloorResult]:
    """F1-F4 on ``role``'s files (F3 only where a published mean exists), each with its verdict's status."""
    files = protocol.files(role)
    records = [r for f in files for j in _all_jobs(protocol, f, root) for r in load_results(Path(root) / j.folder)]
    incomplete = [f"incomplete: {m}" for m in missing_jobs(protocol, role, root)]
    classification = [f for f in files if f["task"] == "classification"]
    regression = [f for f in files if f["task"] == "regression"]
    sel = {f["name"]: selection(protocol, f, root) for f in files}
    tests = {f["name"]: test_scores(protocol, f, root) for f in files}
    out = []

    def at_or_above(f, label):
        s, t = sel[f["name"]], tests[f["name"]]
        if s is None or label not in t or "1-NN ED" not in t:
            return None
        return t[label] >= t["1-NN ED"]

    f1 = [at_or_above(f, sel[f["name"]].best if sel[f["name"]] else None) for f in classification]
    f2 = [at_or_above(f, sel[f["name"]].nac if sel[f["name"]] else None) for f in classification]
    need = max(1, math.floor(0.8 * len(classification)))  # 4 of 5, 1 of 2 (and never none)
    f1_reached = None if not f1 or None in f1 else all(f1)
    out.append(_floor(protocol, records, "F1", f1_reached, incomplete, _detail(classification, f1)))
    f2_reached = None if not f2 or None in f2 else sum(f2) >= need
    out.append(
        _floor(
            protocol,
            records,
            "F2",
            f2_reached,
            incomplete,
            f"{sum(bool(x) for x in f2)} of {len(classification)} files (needs {need}): " + _detail(classification, f2),
        )
    )
    published = protocol.spec.get("published", {})
    f3, cells = [], []
    for f in files:
        for label, pub in published.items():
            mean = (pub.get("mean_30_resamples") or {}).get(f["name"])
            if mean is None:
                continue
            ours = tests[f["name"]].get(label)
            ok = None if ours is None else abs(ours - mean) <= 0.020
            f3.append(ok)
            cells.append(f"{label} on {f['name']} {_fmt(ours)} vs {mean:.3f}")
    f3_reached = None if not f3 or None in f3 else all(f3)
    out.append(_floor(protocol, records, "F3", f3_reached, incomplete, "; ".join(cells) or "no published mean"))
    f4 = []
    for f in regression:
        s, t = sel[f["name"]], tests[f["name"]]
        f4.append(None if s is None or s.best not in t or "training mean" not in t else t[s.best] <= t["training mean"])
    f4_reached = None if not f4 or None in f4 else all(f4)
    out.append(_floor(protocol, records, "F4", f4_reached, incomplete, _detail(regression, f4)))
    return out


def _all_jobs(protocol, file, root):
    return [*cv_jobs(protocol, file), Job(file["name"], "fit"), *(file_refits(protocol, file, root) or [])]


def _floor(protocol, records, floor_id, reached, incomplete, detail) -> FloorResult:
    return FloorResult(protocols.verdict(protocol, records, floor_id, reached, post_hoc=incomplete), detail)


def _detail(files, outcomes) -> str:
    words = {True: "yes", False: "no", None: "not yet"}
    return ", ".join(f"{f['name']} {words[o]}" for f, o in zip(files, outcomes)) or "no file"


def _fmt(value: float | None) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


# ------------------------------------------------------------------------------------------------
# the report


def report(protocol: protocols.Protocol, root: Path) -> str:
    """``report.md``: what is recorded against the plan, each file's selection and choices, the test scores, the
    floors' verdicts per role."""
    done = sum(recorded(protocol, root, j) for j in jobs(protocol))
    lines = [
        "# UEA/UCR floors under the pre-registered protocol",
        "",
        f"Generated by `python -m neurodyn_lab run time_series/uea_floors --report` from the records under protocol "
        f"`{protocol.name}` (sha256 `{protocol.sha256[:12]}`, status {protocol.spec['status']}). Cross-validation and "
        f"fit jobs recorded: {done} of {len(jobs(protocol))}; CPU-hours recorded {cpu_hours(root):.2f} (stated "
        f"budget {protocol.spec['budget']['cpu_hours']}, stop at {protocol.spec['budget']['stop_cpu_hours']}). "
        "Seeds: the training seed in the selection, three seeds in the fits and refits.",
        "",
    ]
    for f in protocol.files():
        s = selection(protocol, f, root)
        lines += [
            f"## {f['name']} ({f['task']}, {'development' if f in protocol.files('development') else 'confirmation'})",
            "",
        ]
        if s is None:
            lines += ["Selection not complete.", ""]
        else:
            metric = "accuracy" if s.higher else "RMSE"
            lines += [
                f"| rank | candidate | held-out {metric} (mean of folds) | final inner validation | folds |",
                "|---:|---|---:|---:|---:|",
            ]
            lines += [
                f"| {i + 1} | {label} | {_fmt(score)} | {_fmt(inner)} | {n} |"
                for i, (label, (score, inner, n)) in enumerate((lab, s.scores[lab]) for lab in s.ranked)
            ]
            lines += [
                "",
                f"Chosen: best {s.best}" + (f", best neural {s.best_neural}, NAC {s.nac}" if s.higher else ""),
                "",
            ]
        tests = test_scores(protocol, f, root)
        if tests:
            lines += ["| test (mean over seeds) | " + " | ".join(tests) + " |", "|---|" + "---:|" * len(tests)]
            lines += ["| " + f["name"] + " | " + " | ".join(_fmt(v) for v in tests.values()) + " |", ""]
    for role in ("development", "confirmation"):
        lines += [f"## Floors, {role} files", "", "| floor | verdict | detail |", "|---|---|---|"]
        for res in floors(protocol, role, root):
            lines.append(f"| {res.verdict.floor} | {res.verdict.text} | {res.detail} |")
        lines.append("")
    return "\n".join(lines)


def write_report(protocol: protocols.Protocol, root: Path) -> Path:
    return write_text(Path(root) / "report.md", report(protocol, root))
