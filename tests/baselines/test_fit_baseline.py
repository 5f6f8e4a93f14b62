"""The baselines' own path beside the trainer (``fit_baseline``): one pass, the training loss and the validation
metrics against closed forms, the run it writes read back by ``load_run``, a finished run reloaded, nothing written
without a run folder."""

import json
import math
import os

import numpy as np
import pytest
import torch

import neurodyn
from neurodyn.baselines import fit as fit_module
from neurodyn.baselines import fit_baseline
from neurodyn.data.assembly import build_sequence_data
from neurodyn.data.memory_store import sequence_store
from neurodyn.errors import ConfigError
from neurodyn.models import build
from neurodyn.train.experiment import build_task, train_config


def prepared(n=30, n_val=8, seed=0, classes=3):
    """A sequence task on distinct random series with ``classes`` classes, and its train / validation splits."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.normal(size=(n, 12, 2)) + y[:, None, None]
    store = sequence_store({"x": x, "y": y})
    cfg = {"task": "sequence", "data": {"n_train": "all", "n_val": n_val, "arrays": "in memory"}}
    data = build_sequence_data(cfg, store)
    task = build_task(cfg, data, train_config({}))
    return task, data["sets"]["train"], data["sets"].get("val")


def test_majority_scores_and_loss_match_the_closed_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    task, train, val = prepared()
    model = build("majority", in_channels=2, out_channels=3)
    run = fit_baseline(model, task, train, val, batch_size=5)
    counts = np.bincount(train.y.numpy(), minlength=3)
    p = counts / counts.sum()
    mode = int(np.argmax(counts))
    record = run.history[0]
    # the training loss: the cross-entropy of the class frequencies, -sum_k p_k log p_k
    assert record["train_loss"] == pytest.approx(-(p * np.log(p)).sum(), rel=1e-6)
    assert record["val"]["accuracy"] == pytest.approx(np.mean(val.y.numpy() == mode))
    assert run.run_dir is None and not run.reloaded and os.listdir(tmp_path) == []  # nothing written


def test_a_one_nearest_neighbour_recognises_its_training_series():
    """Each training series is its own nearest neighbour (distance 0, distinct series), so the training loss is the
    cross-entropy of logits 0 and log 1e-6 (K - 1 times): log(1 + (K - 1) 1e-6)."""
    task, train, val = prepared(classes=4)
    run = fit_baseline(build("knn", in_channels=2, out_channels=4), task, train, val, batch_size=7)
    assert run.history[0]["train_loss"] == pytest.approx(math.log(1 + 3e-6), abs=2.5e-7)  # (float32 logits)
    assert run.history[0]["val"]["n"] == len(val)


def test_the_fit_does_not_depend_on_the_batches():
    task, train, _ = prepared()
    states = []
    for batch_size in (1, 4, 1000):
        model = build("minirocket", in_channels=2, out_channels=3, n_features=168)
        fit_baseline(model, task, train, batch_size=batch_size, training_loss=False)
        states.append(model.state_dict())
    for other in states[1:]:
        for key, value in states[0].items():
            torch.testing.assert_close(other[key], value, rtol=0, atol=0)


def test_the_run_it_writes_is_a_run_and_is_reloaded_not_refitted(tmp_path, monkeypatch):
    task, train, val = prepared()
    run_dir = tmp_path / "knn"
    model = build("knn", in_channels=2, out_channels=3)
    experiment = {"preset": "knn/sequence", "task": "sequence", "model": {"name": "knn"}, "data": {"arrays": "x"}}
    run = fit_baseline(model, task, train, val, run_dir, batch_size=8, experiment=experiment)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records == json.loads(json.dumps(run.history))
    assert (run_dir / "checkpoints" / "best.pt").is_file() and (run_dir / "checkpoints" / "last.pt").is_file()
    restored = neurodyn.load_run(run_dir)  # the trainer's checkpoint format: load_run restores model, task, norms
    assert restored.cfg["model"]["name"] == "knn"
    raw = train.x[:6].numpy()
    with torch.no_grad():
        direct = task.predict(model, {"x": train.x[:6], "mask": train.m[:6], "t": train.t[:6]})
    torch.testing.assert_close(restored.predict(raw, mask=train.m[:6].numpy()), direct)
    # a finished fit is reloaded: the one pass is never run again, the test records are dropped (written anew)
    run.log_extra({"epoch": 0, "test": {"x": 1}})
    monkeypatch.setattr(fit_module, "fit_on", lambda *a, **k: pytest.fail("fitted again"))
    again = fit_baseline(build("knn", in_channels=2, out_channels=3), task, train, val, run_dir, batch_size=8)
    assert again.reloaded and again.history == run.history
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 1
    for key, value in model.state_dict().items():
        torch.testing.assert_close(again.model.state_dict()[key], value, rtol=0, atol=0)


def test_what_it_refuses():
    """Neither path takes the other's models: the trainer has no case for a model without parameters."""
    from neurodyn.train.trainer import Trainer

    task, train, _ = prepared()
    with pytest.raises(ConfigError, match="model 'knn' has no parameters to train by gradient descent"):
        Trainer(build("knn", in_channels=2, out_channels=3), task, train, None, train_config({}), None)
    with pytest.raises(ConfigError, match="trained by gradient descent"):
        fit_baseline(build("gru", in_channels=2, out_channels=3), task, train)
    with pytest.raises(ConfigError, match="batch_size must be a whole number >= 1"):
        fit_baseline(build("majority", in_channels=2, out_channels=3), task, train, batch_size=0)
    with pytest.raises(ConfigError, match="the training split is empty"):
        fit_baseline(build("majority", in_channels=2, out_channels=3), task, torch.utils.data.Subset(train, []))
