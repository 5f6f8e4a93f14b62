"""The MiniRocket / MultiRocket / Hydra table of pages/nac.md, recomputed from its records with code of its own (never
the driver's): every "ours" cell is the mean of the recorded test accuracies over the seeds, every published mean is
the protocol's (lab/protocols/time_series/uea_floors.yaml, for the files it names) and the driver's, every gap and
"within 2 points" verdict follows from those two; the records are fits on the whole train file of the raw series."""

import json
import math
import re
import statistics

import pytest
import yaml

from neurodyn_lab.paths import LAB, RECORDS
from neurodyn_lab.time_series import rocket_baselines

PAGE = LAB / "pages" / "nac.md"
FOLDER = RECORDS / "time_series" / "rocket_baselines"
HEADING = "### MiniRocket, MultiRocket and Hydra against their published accuracies"
NAMES = {"minirocket": "MiniRocket", "multirocket": "MultiRocket", "hydra": "Hydra"}


def page_rows():
    text = PAGE.read_text()
    assert HEADING in text
    section = text.split(HEADING, 1)[1].split("\n### ", 1)[0].split("\n#### ", 1)[0]  # the default split's table
    rows = [ln for ln in section.splitlines() if re.match(r"\| [A-Z]\w+ \| (minirocket|multirocket|hydra) \|", ln)]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in rows]


def recorded(name):
    out = {}
    for r in json.loads((FOLDER / name / "results.json").read_text()):
        model, seed = r["preset"].rsplit("-s", 1)
        assert r["n_val"] == 0 and "data.n_val=0" in r["overrides"] and "data.max_steps=0" in r["overrides"]
        (acc,) = r["sets"].values()
        out.setdefault(model, {})[int(seed)] = acc
    return out


def test_the_page_table_is_the_records():
    rows = page_rows()
    assert len(rows) >= 12 and len(rows) % 3 == 0  # the files recorded x three baselines
    protocol = yaml.safe_load((LAB / "protocols" / "time_series" / "uea_floors.yaml").read_text())["published"]
    for name, model, each, mean, published, gap, within, split in rows:
        seeds = recorded(name)[model]
        assert each == ", ".join(f"{seeds[s]:.3f}" for s in sorted(seeds))
        ours = statistics.mean(seeds.values())
        assert mean == f"{ours:.3f}"
        pub = rocket_baselines.PUBLISHED[model].get(name)
        if name in protocol[model]["mean_30_resamples"]:
            assert protocol[model]["mean_30_resamples"][name] == pub
        if pub is None:
            assert published == "–" and gap == "–" and within.startswith("–")
            continue
        assert published == f"{pub:.3f}" and gap == f"{100 * (ours - pub):+.1f}"
        assert within == ("yes" if abs(ours - pub) <= 0.020 + 1e-9 else "no")
        default = protocol[model].get("default_split", {}).get(name)
        if default is not None:
            assert split == f"{default:.3f}"


def test_the_protocol_names_every_published_mean_of_its_files():
    protocol = yaml.safe_load((LAB / "protocols" / "time_series" / "uea_floors.yaml").read_text())["published"]
    for model in ("minirocket", "multirocket", "hydra"):
        assert protocol[model]["source"]
        for name in ("GunPoint", "ItalyPowerDemand", "ArrowHead"):
            assert protocol[model]["mean_30_resamples"][name] == rocket_baselines.PUBLISHED[model][name]


@pytest.mark.parametrize("name", ["BasicMotions", "JapaneseVowels"])
def test_no_published_mean_is_claimed_for_the_multivariate_files(name):
    assert all(name not in rocket_baselines.PUBLISHED[m] for m in rocket_baselines.MODELS)


def test_a_resample_keeps_the_default_splits_class_counts_and_partitions_the_cases():
    import numpy as np

    y_train, y_test = np.array([0] * 5 + [1] * 7 + [2] * 3), np.array([0] * 20 + [1] * 4 + [2] * 9)
    pooled = np.concatenate([y_train, y_test])
    draws = [rocket_baselines.stratified_resample(y_train, y_test, seed) for seed in (1, 2)]
    for train, test in draws:
        assert sorted([*train, *test]) == list(range(len(pooled)))
        assert [int((pooled[train] == c).sum()) for c in (0, 1, 2)] == [5, 7, 3]
        assert [int((pooled[test] == c).sum()) for c in (0, 1, 2)] == [20, 4, 9]
    assert not np.array_equal(draws[0][0], draws[1][0])
    again = rocket_baselines.stratified_resample(y_train, y_test, 1)
    assert np.array_equal(again[0], draws[0][0])


def test_the_resample_table_averages_resample_0_and_the_drawn_ones(tmp_path):
    def store(folder, recs):
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(recs))

    store(tmp_path / "ArrowHead", [{"preset": f"hydra-s{s}", "sets": {"ArrowHead_TEST": 0.80 + s}} for s in (0, 1)])
    drawn = {1: 0.86, 2: 0.88, 3: 0.90}
    store(
        tmp_path / "ArrowHead-resamples", [{"preset": f"hydra-r{r:02d}", "sets": {"test": a}} for r, a in drawn.items()]
    )
    assert rocket_baselines.resample_accuracies(tmp_path, "ArrowHead") == {"hydra": {0: 0.80, **drawn}}
    (row,) = [
        ln for ln in rocket_baselines.resample_table(tmp_path, ["ArrowHead"], ["hydra"]) if ln.startswith("| Arr")
    ]
    values = [0.80, 0.86, 0.88, 0.90]
    se = statistics.stdev(values) / 2
    assert f"| 4 | {statistics.mean(values):.3f} ± {se:.3f} | 0.800 - 0.900 | 0.870 | -1.0 | yes |" in row


def test_the_page_resample_table_is_the_records():
    """nac.md's 30-resample table from the records, with this test's own reading: resample 0 is the default split's
    model.seed 0 fit, resamples 1-29 the "-resamples" folder's; mean, standard error, range, gap and verdict; and the
    sentence under it (how many within 2 points, the largest gap in standard errors)."""
    text = PAGE.read_text().split("#### Over 30 resamples", 1)[1].split("\n#", 1)[0]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines() if re.match(r"\| [A-Z]", ln)]
    assert len(rows) >= 9 and len({(r[0], r[1]) for r in rows}) == len(rows)  # files x baselines, each once
    reached, ratios = 0, []
    for name, model, n, mean_se, span, published, gap, within in rows:
        acc = [recorded(name)[model][0]]
        recs = json.loads((FOLDER / f"{name}-resamples" / "results.json").read_text())
        drawn = {int(r["preset"].rsplit("-r", 1)[1]): r for r in recs if r["preset"].rsplit("-r", 1)[0] == model}
        assert sorted(drawn) == list(range(1, 30))
        for k, r in drawn.items():
            assert "data.n_val=0" in r["overrides"] and "data.max_steps=0" in r["overrides"]
            assert f"data.path=<stores>/{name}-resamples/r{k:02d}/train.h5" in r["overrides"]
        acc += [next(iter(drawn[k]["sets"].values())) for k in sorted(drawn)]
        mean, se = statistics.mean(acc), statistics.stdev(acc) / len(acc) ** 0.5
        assert n == str(len(acc)) == "30"
        assert mean_se == f"{mean:.3f} ± {se:.3f}"
        assert span == f"{min(acc):.3f} - {max(acc):.3f}"
        pub = rocket_baselines.PUBLISHED[model][name]
        assert published == f"{pub:.3f}" and gap == f"{100 * (mean - pub):+.1f}"
        assert within == ("yes" if abs(mean - pub) <= 0.020 else "no")
        reached += within == "yes"
        ratios.append((abs(mean - pub) / se, model, name))
    worst, model, name = max(ratios)
    prose = " ".join(text.split())
    said = f"({reached} of {len(rows)} within 2 points; every gap within {math.ceil(worst)} of our standard errors"
    assert f"{said}, the largest {worst:.1f}, {NAMES[model]} on {name})" in prose, said
