"""The UEA/UCR evidence recomputed from its records with the tests' own code (never the driver's functions): the
choices on validation under both ranking rules the pages report, the floors, the refits. Used by test_verdicts.py and
test_results_pages.py; the rules are as pages/nac.md states them."""

import json
import statistics
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[1] / "records"
UEA = RECORDS / "time_series" / "uea"
CLASSIFICATION = ("BasicMotions", "GunPoint", "ItalyPowerDemand", "ArrowHead", "JapaneseVowels")
REGRESSION = "Covid3Month"
#: the entries in the order the comparisons list them (nac.md: a tie on validation keeps the earlier one)
ORDER = (
    "nac-paper",
    "nac-tuned",
    "gru/sequence",
    "lstm/sequence",
    "cfc/sequence",
    "ltc/sequence",
    "mha/sequence",
    "odernn/sequence",
    "nac-conv",
    "gru-conv",
    "majority/sequence",
    "knn/sequence",
    "minirocket/sequence",
)
FITTED = ("majority/sequence", "knn/sequence", "minirocket/sequence")
NAC = ("nac-paper", "nac-tuned", "nac-conv")
#: MiniRocket's published accuracy (nac.md: Dempster et al. 2021, the mean of 30 resamples)
MINIROCKET_PUBLISHED = {"GunPoint": 0.992, "ItalyPowerDemand": 0.960, "ArrowHead": 0.881}


def mean(v):
    return statistics.mean(v)


def uea(folder: str) -> list[dict]:
    path = UEA / folder / "results.json"
    return json.loads(path.read_text()) if path.exists() else []


def uea_test(recs: list[dict], label: str, key: str | None = None) -> float:
    vals = [
        v
        for r in recs
        if r["preset"] == label
        for v in ((r["sets"].values()) if key is None else [m[key] for m in r["set_metrics"].values()])
    ]
    assert vals, label
    return mean(vals)


def choose(splits: list[list[dict]], labels, higher: bool, rule_: str) -> str:
    """The label ranked first on validation over ``splits``: per split the mean over seeds of each run's final
    validation score ("final", the rule adopted later) or best one ("best", the rule used first), the other one
    breaking ties, then the order listed; averaged over the splits."""
    sign = 1 if higher else -1
    scored = []
    for i, label in enumerate(ORDER):
        if label not in labels:
            continue
        curves = [[r["curve_rel_l2"] for r in s if r["preset"] == label and r.get("curve_rel_l2")] for s in splits]
        if not all(curves):
            continue
        final = mean([mean([c[-1] for c in cs]) for cs in curves])
        best = mean([mean([(max if higher else min)(c) for c in cs]) for cs in curves])
        scored.append(((sign * final, sign * best) if rule_ == "final" else (sign * best, sign * final), -i, label))
    return max(scored)[2]


def one_nn(dataset: str) -> float:
    acc = json.loads((UEA / f"{dataset}-regular-wholetrain" / "one_nn_ed.json").read_text())["accuracy"]
    return acc if acc is not None else uea_test(uea(f"{dataset}-regular-wholetrain"), "knn/sequence")


def best_epoch(r: dict, higher: bool) -> int:
    c = r["curve_rel_l2"]
    return round((c.index((max if higher else min)(c)) + 1) * r["epochs"] / len(c))


def uea_floors(budget: str = "400ep", draws: int = 0, rule_: str = "final", refit: str | None = None) -> dict:
    """Per classification file ``{group: (label, test, at or above 1-NN)}`` and ``counts``; Covid3Month's chosen
    label, test RMSE, R^2 and the training mean's RMSE; MiniRocket (whole train file) against its published
    accuracy."""
    out = {"files": {}, "counts": {"best": 0, "neural": 0, "nac": 0}}
    for d in (*CLASSIFICATION, REGRESSION):
        main = uea(f"{d}-regular-{budget}")
        splits = [main] + [uea(f"{d}-regular-{budget}-draw{k}") for k in range(1, draws + 1)]
        labels = {r["preset"] for r in main}
        higher = d != REGRESSION
        refits, whole = uea(f"{d}-regular-refit"), uea(f"{d}-regular-wholetrain")

        def test_of(label, key=None, splits=splits, main=main, refits=refits, whole=whole, higher=higher):
            if refit is None:
                return uea_test(main, label, key)
            if label in FITTED:
                return uea_test(whole if higher else refits, label, key)
            runs = [r for s in splits for r in s if r["preset"] == label and r.get("curve_rel_l2")]
            epochs = max(1, round(mean([best_epoch(r, higher) if refit == "best" else r["epochs"] for r in runs])))
            return uea_test([r for r in refits if r["budget"] == f"{epochs}ep"], label, key)

        if not higher:
            label = choose(splits, labels, False, rule_)
            train_mean = uea_test(refits if refit else main, "majority/sequence")
            out["covid"] = (label, test_of(label), test_of(label, "r2"), train_mean)
            continue
        nn, row = one_nn(d), {}
        for group, allowed in (("best", labels), ("neural", labels - set(FITTED)), ("nac", set(NAC))):
            label = choose(splits, allowed, True, rule_)
            t = test_of(label)
            row[group] = (label, t, t >= nn)
            out["counts"][group] += t >= nn
        out["files"][d] = (nn, row)
    out["rocket"] = {d: uea_test(uea(f"{d}-regular-wholetrain"), "minirocket/sequence") for d in MINIROCKET_PUBLISHED}
    return out


def counts_text(f: dict) -> str:
    c = f["counts"]
    return (
        f"best model at or above 1-NN on {c['best']} of 5; best neural model on {c['neural']} of 5; "
        f"NAC on {c['nac']} of 5"
    )


def slash(f: dict) -> str:
    c = f["counts"]
    return f"{c['best']} / {c['neural']} / {c['nac']}"
