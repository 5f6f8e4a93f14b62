"""The long-series driver (neurodyn_lab.time_series.long_series): its selection never reads a test file, its choice
is made on validation only (the mean over the files of the best validation accuracy), and its report's floor says
met / not met from the recorded numbers. Records are written here by hand (no training)."""

import argparse
import json
from pathlib import Path

from neurodyn_lab.time_series import long_series as ls


def sel(core: str, candidate: str, dataset: str, val: float, wall: float = 600.0) -> dict:
    return {
        "run": ls.selection_name(core, candidate, dataset),
        "core": core,
        "candidate": candidate,
        "dataset": dataset,
        "t_max": {"ACSF1": 1460, "OSULeaf": 427, "PLAID": 1344}[dataset],
        "val_best": val,
        "val_last": val,
        "best_epoch": 10,
        "epochs_run": 100,
        "wall_seconds": wall,
        "load_avg": [3.0, 3.0, 3.0],
        "cpu_seconds": 100.0,
    }


def _write(folder: Path, records: list[dict]) -> None:
    for r in records:
        path = folder / "runs" / r["run"] / "result.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def test_the_choice_is_the_best_mean_validation_and_needs_every_file():
    files = ["ACSF1", "OSULeaf"]
    records = [
        sel("gru", "pool256", "ACSF1", 0.9),
        sel("gru", "pool256", "OSULeaf", 0.5),
        sel("gru", "stride2", "ACSF1", 0.7),
        sel("gru", "stride2", "OSULeaf", 0.8),
    ]
    rows, choice = ls.choose(records, "gru", files)
    assert choice is None and len(rows) == 2  # stride4 not recorded yet: no choice
    records += [sel("gru", c, d, 0.6) for c in list(ls.CANDIDATES)[3:] for d in files]
    records += [sel("gru", "stride4", "ACSF1", 0.75), sel("gru", "stride4", "OSULeaf", 0.7)]
    assert ls.choose(records, "gru", files)[1] == "stride2"  # 0.75 beats 0.7, 0.725 and 0.6
    records[-1] = sel("gru", "stride4", "OSULeaf", 0.75)  # a tie at 0.75: the later one listed
    assert ls.choose(records, "gru", files)[1] == "stride4"
    assert ls.choose(records, "nac", files) == ([], None)


def test_the_steps_the_core_reads():
    assert [ls.core_steps(1460, c) for c in ls.CANDIDATES] == [244, 183, 23, 183, 23]
    assert [ls.core_steps(427, c) for c in ls.CANDIDATES] == [214, 54, 7, 54, 7]
    assert ls.core_steps(200, "pool256") == 200


def test_the_selection_reads_no_test_file(monkeypatch, tmp_path):
    monkeypatch.setattr(
        ls, "stores", lambda args, name, splits=("TRAIN",): [tmp_path / f"{name}_{s}.h5" for s in splits]
    )
    monkeypatch.setattr(ls, "longest", lambda store: 1000)
    monkeypatch.setattr(ls.uea_sequences, "n_val", lambda store: 20)
    jobs = ls.selection_jobs(argparse.Namespace(datasets=list(ls.DATASETS)))
    assert len(jobs) == len(ls.DATASETS) * len(ls.CORES) * len(ls.CANDIDATES)
    for job in jobs:
        assert not any(k in o for o in job.overrides for k in ("test_path", "n_test", "_TEST")), job.overrides
        assert f"train.time_limit={ls.TIME_LIMIT}" in job.overrides and "data.n_val=20" in job.overrides
    assert all(
        "data.n_val=0" in j.overrides and any("test_path" in o for o in j.overrides)
        for j in ls.baseline_jobs(argparse.Namespace(datasets=["ACSF1"]))
    )


def test_the_report_says_the_floor_from_the_records(tmp_path):
    out = tmp_path / "long"
    records = [
        sel(core, c, d, 0.5 + 0.1 * (c == "stride2") + 0.05 * (core == "nac"))
        for core in ls.CORES
        for c in ls.CANDIDATES
        for d in ls.DATASETS
    ]
    records += [
        {"run": f"knn-raw-{d}", "baseline": "1-NN ED", "steps": "raw", "dataset": d, "test_accuracy": 0.6}
        for d in ls.DATASETS
    ]
    _write(out, records)
    tests = [
        {
            "run": ls.selection_name(core, "stride2", d),
            "core": core,
            "candidate": "stride2",
            "dataset": d,
            "checkpoint": "last.pt",
            "test_accuracy": {"ACSF1": 0.7, "OSULeaf": 0.55, "PLAID": 0.6}[d],
        }
        for core in ls.CORES
        for d in ls.DATASETS
    ]
    (out / ls.TEST).mkdir()
    for t in tests:
        (out / ls.TEST / f"{t['run']}.json").write_text(json.dumps(t))
    text = ls.report(argparse.Namespace(out=str(out), datasets=list(ls.DATASETS), threads=2))
    assert text.count("stride2 **chosen**") == 2
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.endswith("met |")}
    assert rows["ACSF1"].endswith("nac: met |")  # nac validates higher; 0.7 >= 0.6
    assert rows["OSULeaf"].endswith("nac: not met |")  # 0.55 < 0.6
    assert rows["PLAID"].endswith("nac: met |")  # equal to 1-NN: at or above
    _write(out, [{**sel("nac", "stride2", "PLAID", 0.65, wall=901.0)}])
    text = ls.report(argparse.Namespace(out=str(out), datasets=list(ls.DATASETS), threads=2))
    assert "| PLAID |" in text and any(
        line.startswith("| PLAID |") and line.endswith("nac: not met |") for line in text.splitlines()
    )  # over 15 minutes: not met


def test_the_pages_long_series_table_is_the_records():
    """nac.md's long-series table, recomputed from the records with this test's own reading (not the driver's): the
    chosen candidate's test read per core, the best trained core by validation accuracy and its minutes, the raw
    baselines, and the floor's cell."""
    import re

    from neurodyn_lab.paths import LAB, RECORDS

    folder = RECORDS / "time_series" / "long_series"
    runs = {p.parent.name: json.loads(p.read_text()) for p in folder.glob("runs/*/result.json")}
    reads = {p.stem: json.loads(p.read_text()) for p in (folder / "test_reads").glob("*.json")}
    text = (LAB / "pages" / "nac.md").read_text().split("### Long archive series", 1)[1].split("\n### ", 1)[0]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines() if re.match(r"\| [A-Z]", ln)]
    assert [r[0] for r in rows] == ["ACSF1", "OSULeaf", "PLAID"]
    for name, gru, nac, best, minutes, knn, rocket, floor in rows:
        chosen = {
            core: next(k for k in reads if k.startswith(f"{core}-") and k.endswith(f"-{name}"))
            for core in ("gru", "nac")
        }
        assert float(gru) == round(reads[chosen["gru"]]["test_accuracy"], 3)
        assert float(nac) == round(reads[chosen["nac"]]["test_accuracy"], 3)
        val = {core: runs[chosen[core]]["val_best"] for core in chosen}
        assert val[best] == max(val.values())
        assert minutes == f"{runs[chosen[best]]['wall_seconds'] / 60:.1f} min"
        assert runs[chosen[best]]["wall_seconds"] <= 15 * 60
        assert float(knn) == round(runs[f"knn-raw-{name}"]["test_accuracy"], 3)
        assert float(rocket) == round(runs[f"minirocket-raw-{name}"]["test_accuracy"], 3)
        ours = reads[chosen[best]]["test_accuracy"]
        assert floor == ("yes" if ours >= runs[f"knn-raw-{name}"]["test_accuracy"] else "no")
