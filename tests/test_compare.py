"""neurodyn compare: several presets' models on one dataset, one split, one budget, several seeds."""

import json

import pytest
import yaml

from neurodyn.cli import main
from neurodyn.compare import compare, estimate_epochs, estimate_table, parse_budget
from neurodyn.errors import ConfigError
from neurodyn.train.queue import preset_config


def test_parse_budget():
    assert parse_budget("90") == 90 and parse_budget("90s") == 90 and parse_budget("2m") == 120
    assert parse_budget("1.5h") == 5400
    for bad in ("", "-3s", "0", "ten minutes", "5d"):
        with pytest.raises(ConfigError, match="positive time"):
            parse_budget(bad)


@pytest.mark.slow
def test_every_model_trains_on_the_same_data_and_is_scored_on_the_same_sets(
    tmp_path, data_dir, capsys, test_split_rel_l2
):
    out = tmp_path / "cmp"
    records = compare(["fno/darcy", "unet/darcy"], out, "tiny", seeds=(0, 1), epochs=1, data_from="unet/darcy")
    assert len(records) == 4 and {r["preset"] for r in records} == {"fno/darcy", "unet/darcy"}
    configs = [yaml.safe_load((out / "runs" / r["run"] / "config.yaml").read_text()) for r in records]
    assert all(c["data"] == configs[0]["data"] for c in configs)  # one dataset, one split
    assert {c["model"]["name"] for c in configs} == {"fno", "unet"}
    assert all(set(r["sets"]) == {"test"} for r in records)
    for r in records:  # the recorded score is the run's own: recomputed from its checkpoint's test predictions
        assert r["sets"]["test"] == pytest.approx(test_split_rel_l2(out / "runs" / r["run"]), rel=1e-4)
    assert len({r["sets"]["test"] for r in records}) == 4  # four models, four scores (not one set scored four times)
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
    """More budget, more epochs; the count is the budget over the measured epoch time, and the parameter count is
    that of the model the config builds."""
    from neurodyn.data.assembly import build_data
    from neurodyn.models import count_parameters
    from neurodyn.train.experiment import build_model

    cfg = preset_config("fno/darcy", "tiny")
    small = estimate_epochs(cfg, 1e-6)
    large = estimate_epochs(cfg, 1e4)
    assert small["epochs"] == 1 and large["epochs"] > 10
    assert large["epochs"] == int(1e4 // large["estimated_seconds_per_epoch"])
    built = build_model(cfg, build_data(cfg, progress=False)["sets"]["train"])
    assert small["params"] == large["params"] == count_parameters(built)


def test_estimate_table_adds_up_the_cpu_hours(monkeypatch):
    """Each row: the estimate's parameter count and seconds per epoch x threads x epochs x seeds in hours; the
    total row is their sum."""
    import neurodyn.compare as cmp

    cfgs = {"fno": preset_config("fno/darcy", "tiny"), "unet": preset_config("unet/darcy", "tiny")}
    seconds, params = {"fno": 36.0, "unet": 72.0}, {"fno": 12345, "unet": 678}
    monkeypatch.setattr(
        cmp,
        "estimate_epochs",
        lambda cfg, budget, device="cpu": {
            "estimated_seconds_per_epoch": seconds[cfg["model"]["name"]],
            "params": params[cfg["model"]["name"]],
        },
    )
    monkeypatch.setattr(cmp.torch, "get_num_threads", lambda: 2)
    lines = estimate_table(cfgs, epochs=10, seeds=3).splitlines()
    assert "2 threads" in lines[0] and "10 epochs x 3 seeds" in lines[0]
    table = {r[0].strip(): [c.strip() for c in r[1:]] for r in (line.split("|")[1:-1] for line in lines[2:])}
    for label in cfgs:
        assert table[label][0] == f"{params[label]:,}"
        assert float(table[label][1]) == seconds[label]
        assert float(table[label][2]) == pytest.approx(seconds[label] * 2 * 10 * 3 / 3600, abs=0.005)
    assert float(table["total"][2]) == pytest.approx((36 + 72) * 2 * 10 * 3 / 3600, abs=0.005)


def test_cli_compare_needs_one_budget(tmp_path, data_dir, capsys):
    assert main(["compare", "fno/darcy", "--scale", "tiny", "--runs-dir", str(tmp_path)]) == 2
    assert "needs a budget" in capsys.readouterr().err
    assert (
        main(
            ["compare", "fno/darcy", "--scale", "tiny", "--budget", "5s", "--epochs", "2", "--runs-dir", str(tmp_path)]
        )
        == 2
    )
    assert "not both" in capsys.readouterr().err
    assert (
        main(["compare", "fno/darcy", "fno/darcy", "--scale", "tiny", "--epochs", "1", "--runs-dir", str(tmp_path)])
        == 2
    )
    assert "listed twice" in capsys.readouterr().err


def _no_training(monkeypatch):
    import neurodyn.compare as cmp

    def trained(*args, **kwargs):
        raise AssertionError("compare started training before it had checked every preset")

    monkeypatch.setattr(cmp, "run_jobs", trained)


def test_a_preset_whose_model_cannot_take_the_data_is_refused_before_any_training(tmp_path, data_dir, monkeypatch):
    _no_training(monkeypatch)
    with pytest.raises(
        ConfigError,
        match=r"preset 'lamo/elasticity' does not fit the data of 'fno/darcy': model "
        r"'lamo_mesh' cannot take .*LaMO \(point cloud\)",
    ):
        compare(["fno/darcy", "lamo/elasticity"], tmp_path / "cmp", "tiny", epochs=1)


def test_unknown_presets_and_overrides_are_refused_before_any_training(tmp_path, data_dir, monkeypatch):
    _no_training(monkeypatch)
    with pytest.raises(ConfigError, match=r"preset 'nac/activity' is a sequence model .* field data of 'fno/darcy'"):
        compare(["fno/darcy", "nac/activity"], tmp_path / "cmp", "tiny", epochs=1)
    with pytest.raises(KeyError, match="unet/darcy"):
        compare(["fno/darcy", "unet/darcyy"], tmp_path / "cmp", "tiny", epochs=1)
    with pytest.raises(ConfigError, match="widht"):
        compare(
            ["fno/darcy", "unet/darcy"],
            tmp_path / "cmp",
            "tiny",
            epochs=1,
            preset_overrides={"unet/darcy": ["model.widht=3"]},
        )
    assert not data_dir.exists()  # nothing was generated either


def test_parse_entry_gives_label_preset_and_overrides():
    from neurodyn.compare import parse_entry

    assert parse_entry("fno/darcy") == ("fno/darcy", "fno/darcy", [])
    assert parse_entry("small=fno/darcy;model.width=8;train.lr=0.01") == (
        "small",
        "fno/darcy",
        ["model.width=8", "train.lr=0.01"],
    )
    for bad in ("=fno/darcy", "a/b=fno/darcy", "small="):
        with pytest.raises(ConfigError, match="LABEL=PRESET"):
            parse_entry(bad)


def test_one_preset_is_compared_under_two_settings_by_label(tmp_path, data_dir):
    out = tmp_path / "cmp"
    records = compare(["fno/darcy", "fno-narrow=fno/darcy;model.width=4"], out, "tiny", seeds=(0,), epochs=1)
    by = {r["preset"]: r for r in records}
    assert set(by) == {"fno/darcy", "fno-narrow"}
    widths = {
        k: yaml.safe_load((out / "runs" / r["run"] / "config.yaml").read_text())["model"]["width"]
        for k, r in by.items()
    }
    assert widths["fno-narrow"] == 4 and widths["fno/darcy"] != 4
    assert by["fno-narrow"]["params"] < by["fno/darcy"]["params"]
    assert "| fno (fno-narrow) | 1ep | 1 |" in (out / "compare.md").read_text()
    with pytest.raises(ConfigError, match="compared twice"):
        compare(["wide=fno/darcy", "wide=fno/darcy;model.width=4"], out, "tiny", epochs=1)


@pytest.mark.parametrize(
    "argv",
    [
        ["nac/sequence", "gru/sequence", "--seeds", "0", "1", "2", "data.path=X.h5", "data.test_path=Y.h5"],
        ["data.path=X.h5", "data.test_path=Y.h5", "nac/sequence", "gru/sequence", "--seeds", "0", "1", "2"],
        ["nac/sequence", "data.path=X.h5", "gru/sequence", "--seeds", "0", "1", "2", "data.test_path=Y.h5"],
        ["--seeds", "0", "1", "2", "nac/sequence", "data.path=X.h5", "data.test_path=Y.h5", "gru/sequence"],
    ],
)
def test_cli_compare_takes_overrides_anywhere_on_the_line(argv, monkeypatch, tmp_path):
    """A word whose part before '=' is a dotted key is an override; every other word is a compared entry."""
    import neurodyn.compare as cmp

    seen = {}
    monkeypatch.setattr(cmp, "compare", lambda presets, out, scale, **kw: seen.update(presets=presets, **kw))
    assert main(["compare", *argv, "--epochs", "1", "--runs-dir", str(tmp_path)]) == 0
    assert seen["presets"] == ["nac/sequence", "gru/sequence"]
    assert seen["overrides"] == ["data.path=X.h5", "data.test_path=Y.h5"]
    assert seen["seeds"] == [0, 1, 2]


def test_cli_compare_keeps_labelled_entries_apart_from_overrides(monkeypatch, tmp_path):
    import neurodyn.compare as cmp
    from neurodyn.compare import is_override, parse_entry

    seen = {}
    monkeypatch.setattr(cmp, "compare", lambda presets, out, scale, **kw: seen.update(presets=presets, **kw))
    entry = "nac-paper=nac/sequence;model.compat=paper"
    assert (
        main(["compare", "data.drop_steps=0.5", "nac/sequence", entry, "--epochs", "1", "--runs-dir", str(tmp_path)])
        == 0
    )
    assert seen["presets"] == ["nac/sequence", entry] and seen["overrides"] == ["data.drop_steps=0.5"]
    assert not is_override(entry) and not is_override("fno/darcy") and is_override("model.ssm.d_state=8")
    assert is_override("data.test_path={a: a.h5, b: b.h5}")
    with pytest.raises(ConfigError, match="no '.'"):  # a dotted label would read as an override
        parse_entry("v1.2=fno/darcy")
