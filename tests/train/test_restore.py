"""One restore path: ``evaluate`` / ``compare`` / the plots / ``predict`` restore a run through ``load_run`` from its
checkpoint, and read only the data asked for (never generated, never re-fitted)."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from neurodyn.cli import main
from neurodyn.data import assembly
from neurodyn.data.generators import base as generators_base
from neurodyn.data.store import StoreMeta, write_store
from neurodyn.errors import ConfigError
from neurodyn.train import fit
from neurodyn.train.predict import load_run
from neurodyn.train.runs import read_test_metrics


class PointNet(nn.Module):
    """A user's module: a pointwise MLP on (B, n, 1) fields."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, width), nn.GELU(), nn.Linear(width, 1))

    def forward(self, x):
        return self.net(x)


def _pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 16, 1, generator=g) * 4 - 2
    return x, 3.0 * torch.sin(x) + 10.0


def _store(path, x, y):
    meta = StoreMeta("pairs", "1", {}, 0, len(x), len(x), ("a",), ("u",))
    return write_store(
        path,
        meta,
        lambda ids: {"fields/a": x[ids].numpy(), "fields/u": y[ids].numpy()},
        coords={"x": np.arange(x.shape[1], dtype=float)},
        progress=False,
    )


@pytest.fixture
def no_training_data(monkeypatch):
    _refuse_training_data(monkeypatch)


def _refuse_training_data(monkeypatch):
    """Building training data or generating a file fails: restoring must need neither."""

    def refuse(*args, **kwargs):
        raise AssertionError("a trained run was restored by rebuilding its training data")

    monkeypatch.setattr(assembly, "build_data", refuse)
    monkeypatch.setattr(assembly, "ensure_dataset", refuse)
    monkeypatch.setattr(generators_base.Generator, "run", refuse)


def test_evaluate_scores_a_fit_run_on_a_given_file(tmp_path, capsys, no_training_data):
    torch.manual_seed(0)
    fit(PointNet(8), _pairs(32, 0), run_dir=tmp_path / "run", init={"width": 8}, epochs=3, batch_size=8, lr=1e-2)
    x, y = _pairs(6, 5)
    data = _store(tmp_path / "held_out.h5", x, y)
    assert main(["evaluate", str(tmp_path / "run"), "--data", str(data), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["held_out"]["rel_l2"]
    pred = load_run(tmp_path / "run").predict(x)  # oracle: the mean relative L2 error, by hand
    by_hand = ((pred - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean().item()
    assert got == pytest.approx(by_hand, rel=1e-5)
    assert main(["evaluate", str(tmp_path / "run")]) != 0
    assert "trained by neurodyn.train.fit" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="neurodyn.train.fit.*--data FILE"):
        load_run(tmp_path / "run").split("test")


def test_evaluate_reads_the_stored_test_split_and_reproduces_the_training_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NEURODYN_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "fno/darcy", "--scale", "tiny", "--run-name", "r", "--no-progress", "train.epochs=2"]) == 0
    capsys.readouterr()
    recorded = read_test_metrics(tmp_path / "runs" / "r")["test"]["last"]

    _refuse_training_data(monkeypatch)
    assert main(["evaluate", str(tmp_path / "runs" / "r"), "--json"]) == 0
    restored = json.loads(capsys.readouterr().out)["test"]
    assert restored["rel_l2"] == pytest.approx(recorded["rel_l2"], rel=1e-5)
    for f in (tmp_path / "data").rglob("*.h5"):  # a missing store is named, not remade
        f.unlink()
    assert main(["evaluate", str(tmp_path / "runs" / "r")]) != 0
    assert "does not exist" in capsys.readouterr().err
