"""neurodyn compare: several presets' models on one dataset, one split, one budget, several seeds."""
import json

import pytest
import yaml

from neurodyn.cli import main
from neurodyn.compare import compare, estimate_epochs, parse_budget
from neurodyn.errors import ConfigError
from neurodyn.train.runs import preset_config


def test_parse_budget():
    assert parse_budget("90") == 90 and parse_budget("90s") == 90 and parse_budget("2m") == 120
    assert parse_budget("1.5h") == 5400
    for bad in ("", "-3s", "0", "ten minutes", "5d"):
        with pytest.raises(ConfigError, match="positive time"):
            parse_budget(bad)


def test_every_model_trains_on_the_same_data_and_is_scored_on_the_same_sets(tmp_path, data_dir, capsys):
    out = tmp_path / "cmp"
    records = compare(["fno/darcy", "unet/darcy"], out, "tiny", seeds=(0, 1), epochs=1, data_from="unet/darcy")
    assert len(records) == 4 and {r["preset"] for r in records} == {"fno/darcy", "unet/darcy"}
    configs = [yaml.safe_load((out / "runs" / r["run"] / "config.yaml").read_text()) for r in records]
    assert all(c["data"] == configs[0]["data"] for c in configs)            # one dataset, one split
    assert {c["model"]["name"] for c in configs} == {"fno", "unet"}
    assert all(set(r["sets"]) == {"test"} and 0 < r["sets"]["test"] < 10 for r in records)
    table = (out / "compare.md").read_text()
    assert "| fno (fno/darcy) | 1ep | 2 |" in table and "| unet (unet/darcy) | 1ep | 2 |" in table
    assert (out / "error_vs_time.png").stat().st_size > 1000
    # the recorded runs are not trained again
    capsys.readouterr()
    again = compare(["fno/darcy", "unet/darcy"], out, "tiny", seeds=(0, 1), epochs=1, data_from="unet/darcy")
    assert "seed 0:" not in capsys.readouterr().out
    assert [r["sets"] for r in again] == [r["sets"] for r in records]
    assert len(json.loads((out / "results.json").read_text())) == 4


def test_models_keep_their_own_training_settings(tmp_path):
    cfg = preset_config("fno/darcy", "tiny", data_from="unet/darcy")
    assert cfg["data"] == preset_config("unet/darcy", "tiny")["data"]
    assert cfg["train"] == preset_config("fno/darcy", "tiny")["train"]


def test_budget_gives_more_epochs_to_a_larger_budget(data_dir):
    cfg = preset_config("fno/darcy", "tiny")
    small = estimate_epochs(cfg, 1e-6)
    large = estimate_epochs(cfg, 1e4)
    assert small["epochs"] == 1 and large["epochs"] > 10
    assert large["epochs"] == int(1e4 // large["estimated_seconds_per_epoch"])


def test_cli_compare_needs_one_budget(tmp_path, data_dir, capsys):
    assert main(["compare", "fno/darcy", "--scale", "tiny", "--runs-dir", str(tmp_path)]) == 2
    assert "needs a budget" in capsys.readouterr().err
    assert main(["compare", "fno/darcy", "--scale", "tiny", "--budget", "5s", "--epochs", "2",
                 "--runs-dir", str(tmp_path)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["compare", "fno/darcy", "fno/darcy", "--scale", "tiny", "--epochs", "1",
                 "--runs-dir", str(tmp_path)]) == 2
    assert "listed twice" in capsys.readouterr().err
