"""What the command line says to a new user: the version, a preset's resolved config, the run header, the
epoch lines (``--no-progress`` keeps them, ``--quiet`` drops them), the line before a torch.compile, and a
``compare --budget`` that stays within its budget when the epoch estimate is wrong."""

import json

import pytest
import torch
import yaml

from neurodyn import __version__
from neurodyn.cli import main
from neurodyn.experiments import load_experiment

TINY = ["--scale", "tiny"]


def _train(tmp_path, *extra):
    return main(["train", "fno/darcy", *TINY, "--runs-dir", str(tmp_path / "runs"), "train.epochs=2", *extra])


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"neurodyn {__version__}"


def test_info_prints_the_resolved_config_of_a_preset(capsys):
    assert main(["info", "fno/darcy", "--scale", "tiny", "model.width=7"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == load_experiment("fno/darcy", "tiny", ["model.width=7"])
    assert printed["model"]["width"] == 7 and printed["scale"] == "tiny"
    assert main(["info", "fno/darcy"]) == 0  # default scale: cpu, another config
    assert yaml.safe_load(capsys.readouterr().out)["data"] == load_experiment("fno/darcy", "cpu")["data"]
    assert main(["info", "fno/darcyy"]) == 2
    assert "unknown info topic or preset 'fno/darcyy'" in capsys.readouterr().err
    assert main(["info", "models", "model.width=7"]) == 2
    assert "apply to a preset's config" in capsys.readouterr().err


def test_compare_seeds_take_the_integers_that_follow(monkeypatch, tmp_path, capsys):
    import neurodyn.compare as cmp

    seen = {}
    monkeypatch.setattr(cmp, "compare", lambda presets, out, scale, **kw: seen.update(presets=presets, **kw))
    assert main(["compare", "--seeds", "3", "4", "fno/darcy", "--epochs", "1", "--runs-dir", str(tmp_path)]) == 0
    assert seen["presets"] == ["fno/darcy"] and seen["seeds"] == [3, 4]
    assert main(["compare", "fno/darcy", "--epochs", "1", "--runs-dir", str(tmp_path)]) == 0
    assert seen["seeds"] == [0]  # the default
    with pytest.raises(SystemExit):  # --seeds without a number: argparse's own message
        main(["compare", "fno/darcy", "--seeds", "0", "--seeds", "--epochs", "1"])
    assert "--seeds" in capsys.readouterr().err


def test_no_progress_keeps_the_header_and_epoch_lines_and_quiet_drops_them(tmp_path, data_dir, capsys):
    assert _train(tmp_path, "--no-progress") == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("fno/darcy [tiny]"))
    assert header.endswith("processes: 1")
    assert "epoch 1/2" in out and "epoch 2/2" in out
    assert _train(tmp_path, "--quiet", "--fresh") == 0
    out = capsys.readouterr().out
    assert "epoch 1/2" not in out and "fno/darcy [tiny]" not in out
    assert "test metrics" in out  # the result is still printed


def test_a_compiled_run_says_so_before_compiling(tmp_path, data_dir, capsys, monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda module, **kw: compiled.append(module) or module)
    assert _train(tmp_path, "--no-progress", "train.compile=true") == 0
    out = capsys.readouterr().out
    line = "compiling the model with torch.compile; the first step takes minutes on a CPU"
    assert compiled and out.count(line) == 1
    assert out.index(line) < out.index("epoch 1/2")


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
def test_compare_budget_is_held_when_the_estimate_is_far_off(tmp_path, data_dir, monkeypatch):
    """An estimate of 10,000 epochs for a 4 s budget: the time limit stops the run after the epoch that used it
    (or before one that would end more than 10 % past it)."""
    import neurodyn.compare as cmp

    real = cmp.estimate_epochs
    monkeypatch.setattr(
        cmp, "estimate_epochs", lambda cfg, budget, device="cpu": {**real(cfg, budget, device), "epochs": 10_000}
    )
    budget = 4.0
    assert main(["compare", "fno/darcy", *TINY, "--budget", f"{budget:g}s", "--out", str(tmp_path / "cmp")]) == 0
    (record,) = json.loads((tmp_path / "cmp" / "results.json").read_text())
    assert 1 < record["epochs"] < 10_000
    assert record["train_seconds"] <= 1.1 * budget
    # the epoch mean says another one would have ended past the budget
    mean = record["train_seconds"] / record["epochs"]
    assert record["train_seconds"] + mean > budget


def test_time_limit_must_not_be_negative(tmp_path, data_dir, capsys):
    assert _train(tmp_path, "train.time_limit=-1") == 2
    assert "train.time_limit" in capsys.readouterr().err
