"""The pre-registered UEA/UCR rerun recomputed from its records with the tests' own code (never the rerun's driver,
neurodyn_lab.time_series.uea_floors*): which jobs are recorded, the CPU-hours, each file's selection by repeated
stratified k-fold and, once the plan is complete, the floors F1-F4. The rules are read from the protocol file
(lab/protocols/time_series/uea_floors.yaml) as its text states them:

- a cross-validation job ``<file>-cv-r<r>-f<k>`` holds one run per candidate at the training seed, scored on the
  held-out fold (``set_metrics["heldout"]``); a candidate's score is the mean over the ``k x repeats`` folds, and a
  fold missing or NaN ranks it last; ties (to 1e-9) go to the better mean of the final inner-validation values (the
  last point of each run's validation curve), then to the order the protocol lists;
- choices: best (all candidates), best neural (group ``neural``), NAC (group ``nac``); regression: best only;
- ``<file>-fit`` holds the fitted candidates and the references, ``<file>-refit-<label>`` a chosen neural
  candidate, each at every seed, scored once on the test file (``set_metrics["test"]``); a verdict reads the mean
  over seeds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
from pathlib import Path

import yaml

LAB = Path(__file__).resolve().parents[1]
PROTOCOL = LAB / "protocols" / "time_series" / "uea_floors.yaml"
RECORDS = LAB / "records" / "time_series" / "uea_floors"
#: the references' record labels (the entry's name before "=") and the names the floors give them
REFERENCES = {"1nn-ed": "1-NN ED", "majority": "training mean"}


@functools.cache
def spec() -> dict:
    return yaml.safe_load(PROTOCOL.read_text())


def sha256() -> str:
    return hashlib.sha256(PROTOCOL.read_bytes()).hexdigest()


def files(role: str | None = None) -> list[dict]:
    roles = ("development", "confirmation") if role is None else (role,)
    return [f for r in roles for f in spec()["files"][r]]


def candidates() -> list[dict]:
    return spec()["candidates"]


def runs(folder: str) -> list[dict]:
    """The runs of one job's folder ([] when it has none)."""
    path = RECORDS / folder / "results.json"
    return json.loads(path.read_text()) if path.exists() else []


def metric(task: str) -> str:
    return "accuracy" if task == "classification" else "rmse"


def cv_folders(name: str) -> list[str]:
    sel = spec()["selection"]
    return [f"{name}-cv-r{r}-f{k}" for r in range(sel["repeats"]) for k in range(sel["k"])]


def _has(folder: str, labels, seeds) -> bool:
    have = {(r["preset"], r["seed"]) for r in runs(folder)}
    return all((label, seed) in have for label in labels for seed in seeds)


def cv_done(folder: str) -> bool:
    return _has(folder, [c["label"] for c in candidates()], [spec()["selection"]["training_seed"]])


def fit_done(f: dict) -> bool:
    """The fit job holds the fitted candidates and the file's reference (1-NN ED for a classification file, the
    training mean for a regression file) at every seed."""
    fitted = [c["label"] for c in candidates() if "fitted" in c["group"]]
    reference = "1nn-ed" if f["task"] == "classification" else "majority"
    return _has(f"{f['name']}-fit", [*fitted, reference], spec()["seeds"])


def jobs_recorded() -> tuple[int, int]:
    """(cross-validation and fit jobs complete, their number in the plan)."""
    done = total = 0
    for f in files():
        for folder in cv_folders(f["name"]):
            done, total = done + cv_done(folder), total + 1
        done, total = done + fit_done(f), total + 1
    return done, total


def cpu_hours() -> float:
    """Wall seconds x threads of every run recorded, in hours."""
    seconds = sum(r["wall_seconds"] * r["threads"] for p in RECORDS.glob("*/results.json") for r in runs(p.parent.name))
    return seconds / 3600


def _mean(values: list[float | None], strict: bool) -> float:
    ok = [v for v in values if v is not None and not math.isnan(v)]
    if not ok or (strict and len(ok) < len(values)):
        return math.nan
    return sum(ok) / len(ok)


def selection(f: dict) -> dict | None:
    """``{"ranked": [(label, mean held-out, mean inner validation, folds)], "best", "best neural", "NAC"}`` of file
    ``f``, None until all its folds are recorded."""
    folders = cv_folders(f["name"])
    if not all(cv_done(x) for x in folders):
        return None
    key, higher = metric(f["task"]), f["task"] == "classification"
    seed = spec()["selection"]["training_seed"]
    order = [c["label"] for c in candidates()]
    held: dict[str, list] = {label: [] for label in order}
    inner: dict[str, list] = {label: [] for label in order}
    for folder in folders:
        for r in runs(folder):
            if r["seed"] != seed or r["preset"] not in held:
                continue
            held[r["preset"]].append(r["set_metrics"]["heldout"][key])
            inner[r["preset"]].append(r["curve_rel_l2"][-1] if r["curve_rel_l2"] else None)
    rows = [(label, _mean(held[label], True), _mean(inner[label], False), len(held[label])) for label in order]
    sign = 1.0 if higher else -1.0

    def better(a, b) -> bool:  # a ranks above b
        (_, sa, ia, _), (_, sb, ib, _) = a, b
        if math.isnan(sa) != math.isnan(sb):
            return math.isnan(sb)
        if not math.isnan(sa) and abs(sa - sb) > 1e-9:
            return sign * (sa - sb) > 0
        if math.isnan(ia) != math.isnan(ib):
            return math.isnan(ib)
        if not math.isnan(ia) and ia != ib:
            return sign * (ia - ib) > 0
        return order.index(a[0]) < order.index(b[0])

    ranked: list = []
    for row in rows:  # insertion sort with the rule itself, no sort key shared with the driver
        i = 0
        while i < len(ranked) and better(ranked[i], row):
            i += 1
        ranked.insert(i, row)
    groups = {c["label"]: c["group"] for c in candidates()}
    out = {"ranked": ranked, "best": ranked[0][0], "best neural": None, "NAC": None}
    if higher:
        out["best neural"] = next(r[0] for r in ranked if "neural" in groups[r[0]])
        out["NAC"] = next(r[0] for r in ranked if "nac" in groups[r[0]])
    return out


def test_means(f: dict) -> dict[str, float]:
    """Label (the references by their floor names) -> mean over seeds of the test metric, from the fit and refit
    folders."""
    key = metric(f["task"])
    values: dict[str, list[float]] = {}
    folders = [f"{f['name']}-fit"] + [f"{f['name']}-refit-{c['label']}" for c in candidates()]
    for folder in folders:
        for r in runs(folder):
            label = REFERENCES.get(r["preset"], r["preset"])
            values.setdefault(label, []).append(r["set_metrics"]["test"][key])
    return {label: statistics.fmean(v) for label, v in values.items()}


def refit_labels(sel: dict) -> list[str]:
    """The chosen candidates that are refitted: the neural ones among best, best neural and NAC."""
    groups = {c["label"]: c["group"] for c in candidates()}
    chosen = {sel[choice] for choice in ("best", "best neural", "NAC")} - {None}
    return sorted(label for label in chosen if "neural" in groups[label])


def complete(f: dict, sel: dict | None) -> bool:
    """Whether every run of file ``f``'s plan is recorded: its folds (``sel``, its :func:`selection`, is not None),
    its fit and its refits."""
    return (
        sel is not None
        and fit_done(f)
        and all(_has(f"{f['name']}-refit-{label}", [label], spec()["seeds"]) for label in refit_labels(sel))
    )


def tallies(role: str) -> dict[str, tuple[int, int]] | None:
    """Per floor of ``role``'s files, ``(files or baselines that pass, of how many)``: F1 the best candidate at or
    above 1-NN ED, F2 NAC at or above it (classification files), F3 a fitted baseline within 2 points of its published
    30-resample mean (where one exists), F4 the best candidate at or below the training mean's RMSE (regression
    files); F3 and F4 only where there is something to count. None while a run of the role's plan is not recorded."""
    fs = files(role)
    sel = {f["name"]: selection(f) for f in fs}
    if not all(complete(f, sel[f["name"]]) for f in fs):
        return None
    tests = {f["name"]: test_means(f) for f in fs}
    cls = [f for f in fs if f["task"] == "classification"]

    def above(f, choice):
        t = tests[f["name"]]
        return t[sel[f["name"]][choice]] >= t["1-NN ED"]

    out = {
        "F1": (sum(above(f, "best") for f in cls), len(cls)),
        "F2": (sum(above(f, "NAC") for f in cls), len(cls)),
    }
    f3 = []
    for label, pub in spec()["published"].items():
        for name, value in (pub.get("mean_30_resamples") or {}).items():
            if name in tests:
                f3.append(abs(tests[name][label] - value) <= 0.020)
    if f3:
        out["F3"] = (sum(f3), len(f3))
    reg = [f for f in fs if f["task"] == "regression"]
    if reg:
        t = {f["name"]: tests[f["name"]] for f in reg}
        out["F4"] = (sum(t[f["name"]][sel[f["name"]]["best"]] <= t[f["name"]]["training mean"] for f in reg), len(reg))
    return out


def floors(role: str) -> dict[str, bool] | None:
    """F1-F4 of ``role``'s files, reached or not, from their :func:`tallies`: every file for F1, F3 and F4; for F2
    the protocol's share, 4 of 5 (at least 1). None while a run of the role's plan is not recorded."""
    counted = tallies(role)
    if counted is None:
        return None
    out = {floor: passed == of for floor, (passed, of) in counted.items()}
    passed, of = counted["F2"]
    out["F2"] = passed >= max(1, int(0.8 * of))
    return out


def verdict_text(role: str, verdicts: dict[str, bool]) -> str:
    """RESULTS.md's verdict of ``role``'s files: ``development files (...): F1 not met, F2 met, ...``."""
    what = {
        "development": "development files (their test splits seen before the protocol)",
        "confirmation": "confirmation files (never used before)",
    }[role]
    return f"{what}: " + ", ".join(f"{k} {'met' if v else 'not met'}" for k, v in verdicts.items())
