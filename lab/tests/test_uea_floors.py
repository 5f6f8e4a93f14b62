"""The UEA/UCR floors protocol (lab/protocols/time_series/uea_floors.yaml) and its plan (neurodyn_lab.time_series.
uea_floors): the protocol states what a pre-registered verdict needs, its candidates are the development runs'
configurations, its confirmation files are new to every record, its CPU-hours are what the records give and within
the budget, and its folds are stratified partitions. Nothing trains."""

import json

import numpy as np
import pytest

from neurodyn_lab import protocols
from neurodyn_lab.paths import LAB, RECORDS
from neurodyn_lab.time_series import uea, uea_floors


@pytest.fixture(scope="module")
def protocol():
    return protocols.load(uea_floors.PROTOCOL)


def test_the_protocol_states_files_candidates_rules_seeds_floors_and_budget(protocol):
    spec = protocol.spec
    assert protocol.path == LAB / "protocols" / "time_series" / "uea_floors.yaml"
    dev = [f["name"] for f in protocol.files("development")]
    assert dev == [*uea.DATASETS, *uea.REGRESSION]  # the five files and Covid3Month of the development runs
    conf = protocol.files("confirmation")
    assert {f["name"] for f in conf} == {"PickupGestureWiimoteZ", "UnitTest", "CardanoSentiment"}
    assert not {f["name"] for f in conf} & set(dev)
    for name in ("ACSF1", "OSULeaf", "PLAID", "Tecator", "Covid3Month_disc"):  # seen by others: said so, left out
        assert name in spec["files"]["seen"]["excluded"]
    assert all(len(f["sha256"]["train"]) == 64 and len(f["sha256"]["test"]) == 64 for f in protocol.files())
    sel = spec["selection"]
    assert "stratified k-fold" in sel["rule"] and sel["k"] == 5 and sel["repeats"] == 2 and sel["fold_seeds"] == [0, 1]
    assert spec["seeds"] == [0, 1, 2] and [f["id"] for f in spec["floors"]] == ["F1", "F2", "F3", "F4"]
    assert "never a candidate" in protocol.floor("F1")["rule"]  # 1-NN is the reference, not "the best model"
    assert spec["common_overrides"] == ["data.max_steps=0"]  # no pooling, baselines included
    labels = protocol.labels()
    assert {"multirocket", "hydra", "minirocket", "nac-conv", "gru-conv", "nac-paper", "nac-tuned"} <= set(labels)
    assert "knn/sequence" not in [c["entry"].split("=")[1].split(";")[0] for c in protocol.candidates()]
    assert {"1-NN ED", "training mean"} == {r["label"] for r in spec["references"]}
    assert spec["budget"]["cpu_hours"] <= 10


def test_the_candidates_are_the_development_runs_configurations(protocol):
    """The protocol's NAC and GRU entries train exactly what the development comparisons trained (uea.MODELS), the
    plain GRU under its own label."""
    entries = {c["label"]: c["entry"] for c in protocol.candidates()}
    dev = {uea._label(e): e for e in uea.MODELS}
    for label in ("nac-paper", "nac-tuned", "nac-conv", "gru-conv"):
        assert entries[label] == dev[label]
    assert entries["gru-oneconv"].split(";", 1)[1] == dev["gru/sequence"].split(";", 1)[1]
    for plain in ("lstm", "cfc", "ltc", "mha", "odernn"):
        assert entries[plain] == f"{plain}={plain}/sequence"


def test_the_confirmation_files_are_in_no_record_but_the_protocols_own():
    """A record naming a confirmation file without this protocol's stamp would make the confirmation exploratory:
    none exists (the development of the presets never touched them)."""
    p = protocols.load(uea_floors.PROTOCOL)
    names = [f["name"] for f in p.files("confirmation")]
    own = (RECORDS / p.spec["records"].removeprefix("lab/records/")).resolve()
    for path in RECORDS.rglob("*"):
        if not path.is_file() or path.suffix not in (".json", ".md", ".yaml", ".jsonl") or own in path.parents:
            continue
        text = path.read_text(errors="replace")
        assert not [n for n in names if n in text], f"{path} names a confirmation file of {p.name}"


def test_the_stated_cpu_hours_are_the_plans_and_within_the_budget(protocol):
    runs = uea_floors.plan(protocol)
    est = uea_floors.estimate(runs)
    stated = protocol.spec["budget"]["estimate"]
    for key, value in est.items():
        assert round(value, 2) == pytest.approx(stated[key], abs=0.011), (key, value, stated[key])
    assert est["total"] <= protocol.spec["budget"]["cpu_hours"]
    ltc = sum(r.seconds for r in runs if r.stage == "cv" and r.label == "ltc") / 3600
    assert f"LTC is {ltc:.1f} of the cross-validation's {stated['cross_validation']}" in protocol.spec["budget"]["how"]
    assert (
        f"({stated['cross_validation']} for the cross-validation, {ltc:.1f} of them LTC's; at most "
        f"{stated['refits']} for the refits)"
    ) in " ".join((LAB / "pages" / "nac.md").read_text().split())
    cv = [r for r in runs if r.stage == "cv"]
    assert len(cv) == len(protocol.files()) * len(protocol.candidates()) * 5 * 2
    assert {r.seed for r in cv} == {0} and {r.seed for r in runs if r.stage != "cv"} == {0, 1, 2}
    # a confirmation file's cost is scaled from a development file's records, and says so
    assert all(r.basis.startswith("scaled from") for r in runs if r.role == "confirmation")
    assert all(r.basis.startswith("measured") for r in runs if r.role == "development")


def test_the_dry_run_prints_the_plan_and_trains_nothing(capsys, protocol):
    assert uea_floors.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "estimated CPU-hours" in out and "| PickupGestureWiimoteZ | confirmation | cv | nac-conv | 10 |" in out
    assert ("nothing may be recorded under this protocol" in out) == (not protocol.frozen)
    assert uea_floors.main([]) == 2  # neither --archive, --report nor --dry-run: nothing to do


def test_stratified_folds_partition_the_cases_and_balance_the_classes():
    y = np.array([0] * 13 + [1] * 7 + [2] * 5)
    folds = uea_floors.stratified_folds(y, 5, seed=0)
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(y)))
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
    for c in (0, 1, 2):
        counts = [int((y[f] == c).sum()) for f in folds]
        assert max(counts) - min(counts) <= 1, (c, counts)
    again = uea_floors.stratified_folds(y, 5, seed=0)
    assert all((a == b).all() for a, b in zip(folds, again))
    assert any((a != b).any() or len(a) != len(b) for a, b in zip(folds, uea_floors.stratified_folds(y, 5, seed=1)))
    # regression: by the target's quintile, so each fold spans the range
    t = np.linspace(0.0, 1.0, 50)
    for f in uea_floors.stratified_folds(t, 5, seed=0, regression=True):
        assert len(f) == 10 and sorted((t[f] * 5).astype(int).clip(max=4).tolist()) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_a_fold_split_holds_out_its_fold_and_validates_on_the_others():
    y = np.array([0, 1] * 10)  # UnitTest's size: 20 cases
    seen = []
    for fold in range(5):
        train, val, held = uea_floors.fold_split(y, 5, seed=1, fold=fold)
        assert not (set(train) & set(val) or set(train) & set(held) or set(val) & set(held))
        assert sorted([*train, *val, *held]) == list(range(20))
        assert len(held) == 4 and len(val) >= 4
        seen += held.tolist()
    assert sorted(seen) == list(range(20))  # every case held out once per repeat


def test_the_plan_reads_the_records_it_says(protocol):
    table = uea_floors.cost_table("GunPoint")
    recs = json.loads((RECORDS / "time_series" / "uea" / "GunPoint-regular-400ep" / "results.json").read_text())
    assert {r["preset"] for r in recs} <= set(table)
    for cand in protocol.candidates():
        assert cand["cost_from"] in table, cand


def test_every_record_of_the_rerun_is_the_protocols_as_it_is_and_a_job_of_its_plan(protocol):
    """The rerun's records (lab/records/time_series/uea_floors): each folder a job of the plan (or a refit), each
    record stamped with this protocol's name and the hash of the file as it is now, on the raw series, a fold run on
    its fold's stores with exactly its validation cases, a fit or refit on the whole files with none."""
    import re

    from neurodyn_lab.records import load_results

    root = uea_floors.records_dir(protocol)
    folders = sorted(p.parent for p in root.glob("*/results.json"))
    assert folders, f"no record under {root}"
    planned = {j.folder for j in uea_floors.jobs(protocol)}
    labels = {c["label"] for c in protocol.candidates()}
    for folder in folders:
        job = folder.relative_to(root).as_posix()
        refit = re.fullmatch(r"(\w+)-refit-(.+)", job)
        assert job in planned or (refit and refit[2] in labels), job
        records = load_results(folder)
        assert not protocols.check_records(protocol, records), job
        name = job.split("-")[0]
        for r in records:
            assert "data.max_steps=0" in r["overrides"], (job, r["run"])
            if "-cv-" in job:
                fold = job.split("-cv-")[1]  # r<repeat>-f<fold>, the fold stores' folder
                assert "train.seed=0" in r["overrides"] and "train.epochs=400" in r["overrides"]
                assert f"data.path=<stores>/{name}/{fold}/train.h5" in r["overrides"]
                assert f"data.test_path=<stores>/{name}/{fold}/heldout.h5" in r["overrides"]
                assert "data.shuffle=false" in r["overrides"] and list(r["sets"]) == ["heldout"]
            else:
                assert "data.n_val=0" in r["overrides"] and list(r["sets"]) == ["test"]
                assert r["seed"] in protocol.spec["seeds"] and f"train.seed={r['seed']}" in r["overrides"]
