"""The experiment queue (:mod:`neurodyn_lab.queue`): train a preset, job lists into a records folder (one record per
run, the run folders apart and untracked); and the restore / evaluate / read functions of :mod:`neurodyn.train.runs`
on the runs it trains."""

import json

import pytest

from neurodyn.train.runs import evaluate_run, load_run, read_history
from neurodyn_lab.paths import RECORDS, RUNS, runs_for
from neurodyn_lab.queue import Job, job_config, run_jobs, train_preset
from neurodyn_lab.records import load_results

TINY = ["train.epochs=1", "data.n_train=8", "data.n_test=4", "model.width=8", "model.modes=[4,4]"]


def test_train_preset_restore_and_evaluate(tmp_path, data_dir):
    r = train_preset("fno/darcy", "tiny", tmp_path / "run", TINY, seed=3)
    assert r.cfg["train"]["seed"] == 3 and r.epochs == len(read_history(tmp_path / "run")) == 1
    # n_val "auto": 1 of the 8 training samples validates; the curve and best are validation, final is test
    assert r.params > 0 and (r.n_train, r.n_val, r.n_test) == (7, 1, 4)
    assert r.curve == [read_history(tmp_path / "run")[0]["val"]["rel_l2"]] and r.best == r.curve[0]
    assert r.best != pytest.approx(r.final["rel_l2"])
    assert r.test_at_best["rel_l2"] == pytest.approx(r.final["rel_l2"])  # one epoch: best.pt is the final model
    rec = r.record()
    assert rec["final_rel_l2"] == r.final["rel_l2"] and rec["model"] == "fno" and json.dumps(rec)
    assert rec["best_val_rel_l2"] == r.best and rec["test_rel_l2_at_best_val"] == r.test_at_best["rel_l2"]
    restored = load_run(tmp_path / "run")
    assert restored.run_dir == tmp_path / "run" and not restored.model.training
    assert evaluate_run(tmp_path / "run")["rel_l2"] == pytest.approx(r.final["rel_l2"], rel=1e-5)


@pytest.mark.slow
def test_run_jobs_in_worker_processes_and_older_records(tmp_path, data_dir):
    import yaml

    records = tmp_path / "claim"
    records.mkdir()
    (records / "old-s0.json").write_text(json.dumps({"label": "old", "seed": 0, "final_rel_l2": 0.5}))
    jobs = [
        Job("new-s0", "fno/darcy", 0, TINY, {"label": "new"}, model_overrides=["model.width=6"]),
        Job("old-s0", "fno/darcy", 0, TINY),
    ]
    recs = run_jobs(
        jobs,
        records,
        "tiny",
        workers=1,
        threads=1,
        evaluate=lambda r: {"n_eval": len(r.split("test"))},
        overrides=["train.lr=2e-3"],
    )
    # the run trained in the untracked twin of the records folder; its record and config went to the records
    run_dir = runs_for(records) / "new-s0"
    assert (run_dir / "checkpoints" / "last.pt").exists()
    saved = yaml.safe_load((records / "runs" / "new-s0" / "config.yaml").read_text())
    assert job_config(jobs[0], "tiny", ["train.lr=2e-3"]) == saved
    assert saved["model"]["width"] == 6 and saved["train"]["lr"] == 2e-3 and saved["train"]["seed"] == 0
    assert not list(records.rglob("*.pt")) and not (records / "results.json").exists()
    assert [r["run"] for r in recs] == ["new-s0", "old-s0"]  # the older one-file record is not trained again
    assert recs[0]["label"] == "new" and recs[0]["n_eval"] == 4 and recs[0]["seed"] == 0
    assert recs[0]["overrides"][-2:] == ["train.seed=0", "train.lr=2e-3"] and recs[1]["final_rel_l2"] == 0.5
    assert json.loads((records / "runs" / "new-s0" / "result.json").read_text()) == recs[0]
    assert sorted(r["run"] for r in load_results(records)) == ["new-s0", "old-s0"]


def test_the_run_folders_of_a_claim_are_its_untracked_twin(tmp_path):
    assert runs_for(RECORDS / "lamo" / "darcy_heads") == RUNS / "lamo" / "darcy_heads"
    assert runs_for(tmp_path / "claim") == tmp_path / "claim.runs"  # a records folder outside the lab


def test_a_record_naming_a_machine_folder_is_refused(tmp_path):
    from neurodyn.errors import DataError
    from neurodyn_lab.records import portable, write_run_record

    with pytest.raises(DataError, match="machine"):
        write_run_record(tmp_path, "r-s0", {"overrides": ["data.path=/home/someone/x.h5"]})
    assert not (tmp_path / "runs" / "r-s0" / "result.json").exists()
    assert portable({"a": [f"data.path={RUNS}/x.h5"]}) == {"a": ["data.path=lab/runs/x.h5"]}
