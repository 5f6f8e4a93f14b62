"""The resume check of a run folder compares what trains, not the preset's prose."""

import json

import pytest


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
