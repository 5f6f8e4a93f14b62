"""Nothing transforms a sequence run's data silently, and every training says its cost before it starts: the run
header (``neurodyn train``) prints how the series reach the model (raw or pooled in time, and the steps a strided
front end leaves to the core) and the seconds per epoch estimated from a few timed steps; ``summary.md`` writes the
same steps line. The estimate changes nothing of the training that follows. The baselines whose published protocol
reads the raw series (1-NN, MiniRocket, MultiRocket, Hydra) never pool unless asked."""

import json

import numpy as np
import pytest
import torch

from neurodyn.checkpoint_io import read_checkpoint
from neurodyn.cli import main
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.sequence_pooling import describe_pooling
from neurodyn.experiments import load_experiment


def write_store(tmp_path, name, n, length, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, length, 1)) + (np.arange(n) % 2)[:, None, None]
    t = np.broadcast_to(np.arange(length, dtype=float), (n, length)).copy()
    y = np.where(np.arange(n) % 2, "up", "down")
    np.savez(tmp_path / f"{name}.npz", x=x, t=t, y=y)
    return convert_to_store(tmp_path / f"{name}.npz", tmp_path / f"{name}.h5")


def train(tmp_path, preset, *overrides, name="run", quiet=False):
    argv = [
        "train",
        preset,
        "--scale",
        "tiny",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--run-name",
        name,
        "--quiet" if quiet else "--no-progress",
        *overrides,
    ]
    assert main(argv) == 0
    return tmp_path / "runs" / name


def test_describe_pooling_says_raw_or_pooled():
    assert describe_pooling(1460, 1) == "raw series, 1460 steps"
    assert describe_pooling(1344, 6, "auto") == "steps pooled by 6: 1344 -> 224 (data.max_steps=auto)"
    assert describe_pooling(427, 2) == "steps pooled by 2: 427 -> 214"


@pytest.fixture
def long_store(tmp_path):
    return write_store(tmp_path, "long", 16, 300)


def test_the_header_and_summary_say_how_the_series_reach_the_model_and_the_cost(tmp_path, long_store, capsys):
    run = train(tmp_path, "gru/sequence", f"data.path={long_store}", "data.max_steps=auto", "train.epochs=2")
    out = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(out) if line.startswith("gru/sequence [tiny]: model gru"))
    assert out[first + 1] == "steps pooled by 2: 300 -> 150 (data.max_steps=auto)"
    cost = out[first + 2]
    assert cost.startswith("cost: ~") and " s per epoch (1 steps of " in cost and "for 2 epochs" in cost
    assert out[first + 3].startswith("epoch 1/2")  # printed before training starts
    summary = (run / "summary.md").read_text()
    assert "- steps pooled by 2: 300 -> 150 (data.max_steps=auto)" in summary


def test_a_strided_front_end_reads_the_raw_series_and_says_what_the_core_reads(tmp_path, long_store, capsys):
    run = train(
        tmp_path,
        "gru/sequence",
        f"data.path={long_store}",
        "data.max_steps=0",
        "model.conv_stride=auto",
        "model.core_steps=40",
        "train.epochs=1",
    )
    line = "raw series, 300 steps; the front end's strides 8: the core reads 38 steps"
    assert line in capsys.readouterr().out
    assert f"- {line}" in (run / "summary.md").read_text()
    model = read_checkpoint(run / "checkpoints" / "last.pt")["model"]["config"]
    assert list(model["conv_stride"]) == [8]  # the checkpoint holds the strides chosen


def test_the_cost_estimate_changes_nothing_of_the_training(tmp_path, long_store, capsys):
    common = [f"data.path={long_store}", "train.epochs=3", "model.dropout=0.3"]
    quiet = train(tmp_path, "nac/sequence", *common, name="quiet", quiet=True)
    told = train(tmp_path, "nac/sequence", *common, name="told")
    assert "cost: ~" in capsys.readouterr().out

    def losses(run):
        return [
            json.loads(line)["train_loss"]
            for line in (run / "metrics.jsonl").read_text().splitlines()
            if "train_loss" in line
        ]

    assert losses(quiet) == losses(told) and len(losses(told)) == 3
    a = read_checkpoint(quiet / "checkpoints" / "last.pt")["model_state"]
    b = read_checkpoint(told / "checkpoints" / "last.pt")["model_state"]
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("preset", ["knn/sequence", "minirocket/sequence", "multirocket/sequence", "hydra/sequence"])
def test_the_raw_series_baselines_never_pool_unless_asked(tmp_path, long_store, capsys, preset):
    for scale in ("tiny", "cpu", "paper"):
        assert load_experiment(preset, scale, [f"data.path={long_store}"])["data"]["max_steps"] == 0
    run = train(tmp_path, preset, f"data.path={long_store}", name="raw")
    out = capsys.readouterr().out
    assert "raw series, 300 steps" in out and "cost: fitted in one pass" in out
    assert "- raw series, 300 steps" in (run / "summary.md").read_text()
    train(tmp_path, preset, f"data.path={long_store}", "data.max_steps=100", name="asked")
    assert "steps pooled by 3: 300 -> 100 (data.max_steps=100)" in capsys.readouterr().out


def test_a_fitted_baseline_is_estimated_as_its_one_pass(long_store):
    """compare's budget for a baseline fitted in one pass: one epoch whatever the budget, timed as the fit of a copy
    (the model that the config builds stays unfitted)."""
    from neurodyn.compare import estimate_epochs
    from neurodyn.train.queue import preset_config

    cfg = preset_config("knn/sequence", "tiny", [f"data.path={long_store}"])
    small, large = estimate_epochs(cfg, 1e-6), estimate_epochs(cfg, 1e6)
    assert small["epochs"] == large["epochs"] == 1
    assert 0 < large["estimated_seconds_per_epoch"] < 60
