"""The validation split: it alone selects checkpoints; the test data is read once, after training.

Oracle: two trainings that differ only in their test data (the test split and a separate test file replaced by
other values) must train, validate and select identically, bit for bit, and differ only in the test metrics.
"""

import json

import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.train import experiment
from neurodyn.train.runs import read_history, read_test_metrics

TINY = [
    "train.epochs=3",
    "data.n_train=12",
    "data.n_test=4",
    "model.width=8",
    "model.modes=[4,4]",
    "train.batch_size=4",
]


def _train(tmp_path, name, monkeypatch, scramble: bool, test_file):
    real_build_data, real_test_sets = experiment.build_data, experiment.build_test_sets
    g = torch.Generator().manual_seed(123)  # not the global generator: training must see the same random numbers

    def noise(t):
        return torch.rand(t.shape, generator=g) * 50

    def build_data(*args, **kwargs):
        data = real_build_data(*args, **kwargs)
        if scramble:
            test = data["sets"]["test"]
            test.x, test.y = noise(test.x), noise(test.y)
        return data

    def build_test_sets(*args, **kwargs):
        sets = real_test_sets(*args, **kwargs)
        if scramble:
            for ds in sets.values():
                ds.x, ds.y = noise(ds.x), noise(ds.y)
        return sets

    monkeypatch.setattr(experiment, "build_data", build_data)
    monkeypatch.setattr(experiment, "build_test_sets", build_test_sets)
    cfg = load_experiment("fno/darcy", "tiny", [*TINY, f"data.test_path={{other: {test_file}}}"])
    run = tmp_path / name
    experiment.run_experiment(cfg, run, progress=False)
    monkeypatch.undo()
    return run


@pytest.fixture
def test_file(tmp_path, data_dir):
    from neurodyn.data.generators import get_generator

    gen = get_generator("darcy")
    path = tmp_path / "other.h5"
    gen.run(gen.make_config(resolution=16, solve_resolution=16), 4, seed=7, path=path, progress=False)
    return path


def test_training_and_selection_do_not_depend_on_the_test_data(tmp_path, data_dir, monkeypatch, test_file):
    a = _train(tmp_path, "a", monkeypatch, False, test_file)
    b = _train(tmp_path, "b", monkeypatch, True, test_file)
    ha, hb = read_history(a), read_history(b)
    assert [h["train_loss"] for h in ha] == [h["train_loss"] for h in hb]
    assert [h["val"] for h in ha] == [h["val"] for h in hb]  # validation curves identical
    ca, cb = (torch.load(r / "checkpoints" / "best.pt", weights_only=True) for r in (a, b))
    assert ca["position"]["epoch"] == cb["position"]["epoch"] and ca["best"] == cb["best"]  # the same epoch selected
    for k in ca["model_state"]:
        assert torch.equal(ca["model_state"][k], cb["model_state"][k])
    ta, tb = read_test_metrics(a), read_test_metrics(b)
    assert set(ta) == {"test", "other"} and set(ta["test"]) == {"last", "best"}
    assert ta["test"]["last"]["rel_l2"] != pytest.approx(tb["test"]["last"]["rel_l2"])  # the test data did differ
    assert ta["other"]["last"]["rel_l2"] != pytest.approx(tb["other"]["last"]["rel_l2"])
    records = [json.loads(line) for line in (a / "metrics.jsonl").read_text().splitlines()]
    assert [("test" in r) for r in records] == [False] * 3 + [True]  # the test data is evaluated once, at the end
    summary = (a / "summary.md").read_text()
    assert "validation rel. L2: best" in summary and "Test split:" in summary and "best validation epoch" in summary


def test_split_sizes():
    from neurodyn.data.assembly import split_sizes, stored_samples

    assert split_sizes({"n_train": 100, "n_test": 20}) == (90, 10, 20)  # auto: carved from the training samples
    assert stored_samples({"n_train": 100, "n_test": 20}) == 120  # ... so the file (and its test split) is unchanged
    assert split_sizes({"n_train": 100, "n_val": 30, "n_test": 20}) == (100, 30, 20)
    assert stored_samples({"n_train": 100, "n_val": 30, "n_test": 20}) == 150
    assert split_sizes({"n_train": 100, "n_val": 0, "n_test": 20}) == (100, 0, 20)
    assert split_sizes({"n_train": 1, "n_test": 2}) == (1, 0, 2)
    assert split_sizes({"n_train": 3, "n_test": 2}) == (2, 1, 2)
    with pytest.raises(ConfigError, match="data.n_val must be"):
        split_sizes({"n_train": 10, "n_val": -1})


def test_no_validation_split_selects_nothing(tmp_path, data_dir):
    cfg = load_experiment("fno/darcy", "tiny", [*TINY, "data.n_val=0"])
    run = tmp_path / "run"
    final = experiment.run_experiment(cfg, run, progress=False)
    assert not (run / "checkpoints" / "best.pt").exists()
    assert all("val" not in h for h in read_history(run))
    assert read_test_metrics(run)["test"]["last"]["rel_l2"] == pytest.approx(final["rel_l2"])
    assert "validation: none" in (run / "summary.md").read_text()


def test_condition_split_validates_on_the_training_conditions(tmp_path, data_dir):
    from neurodyn.data.assembly import build_data

    cfg = load_experiment("gru/bearing", "tiny", [])
    data = build_data(cfg, progress=False)
    store, sets = data["store"], data["sets"]
    cond = store.read(f"params/{cfg['data']['split_param']}")
    train_values = set(cfg["data"]["train_values"])
    for name in ("train", "val"):
        assert set(cond[sets[name].ids].tolist()) <= train_values, name
    assert not set(cond[sets["test"].ids].tolist()) & train_values
    assert not set(sets["val"].ids) & set(sets["train"].ids)
