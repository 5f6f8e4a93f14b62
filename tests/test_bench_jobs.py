"""The experiment queue (:mod:`neurodyn.bench.jobs`): train a preset, job lists into a results store; and the
restore / evaluate / read functions of :mod:`neurodyn.train.runs` on the runs it trains."""
import json

import pytest

from neurodyn.bench.jobs import Job, job_config, load_results, run_jobs, train_preset
from neurodyn.train.runs import evaluate_run, load_run, read_history

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

    (tmp_path / "old-s0.json").write_text(json.dumps({"label": "old", "seed": 0, "final_rel_l2": 0.5}))
    jobs = [Job("new-s0", "fno/darcy", 0, TINY, {"label": "new"}, model_overrides=["model.width=6"]),
            Job("old-s0", "fno/darcy", 0, TINY)]
    recs = run_jobs(jobs, tmp_path, "tiny", workers=1, threads=1,
                    evaluate=lambda r: {"n_eval": len(r.split("test"))}, overrides=["train.lr=2e-3"])
    # job_config: the config the worker process trained with, as its run folder stored it
    saved = yaml.safe_load((tmp_path / "runs" / "new-s0" / "config.yaml").read_text())
    assert job_config(jobs[0], "tiny", ["train.lr=2e-3"]) == saved
    assert saved["model"]["width"] == 6 and saved["train"]["lr"] == 2e-3 and saved["train"]["seed"] == 0
    assert [r["run"] for r in recs] == ["new-s0", "old-s0"]  # the older one-file record is not trained again
    assert recs[0]["label"] == "new" and recs[0]["n_eval"] == 4 and recs[0]["seed"] == 0
    assert recs[0]["overrides"][-2:] == ["train.seed=0", "train.lr=2e-3"] and recs[1]["final_rel_l2"] == 0.5
    stored = json.loads((tmp_path / "results.json").read_text())
    assert [r["run"] for r in stored] == ["old-s0", "new-s0"] and load_results(tmp_path) == stored


def test_a_reworded_preset_description_still_resumes_and_a_changed_setting_does_not(tmp_path):
    """The resume check compares what trains (model, data, train sections), not the preset's prose: a run folder
    whose stored ``description`` differs from today's resumes, while the same folder with another learning rate
    is still refused."""
    import yaml

    from neurodyn.errors import ConfigError
    from neurodyn.experiments import load_experiment
    from neurodyn.train.checkpoint import check_resume_config
    from neurodyn.train.experiment import train_config

    cfg = json.loads(json.dumps(load_experiment("fno/darcy", "tiny")))
    tcfg = train_config(cfg)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(b"")
    (run / "config.yaml").write_text(yaml.safe_dump({**cfg, "description": "an older wording"}, sort_keys=False))
    check_resume_config(cfg, run, tcfg)
    with pytest.raises(ConfigError, match=r"train.lr"):
        check_resume_config({**cfg, "train": {**cfg["train"], "lr": cfg["train"]["lr"] * 2}}, run, tcfg)
