"""A trained run predicts in physical units: the README's snippet, `neurodyn predict` and the run's own test error
agree; autoregressive and sequence runs predict too."""

import re
from pathlib import Path

import h5py
import pytest
import torch

from neurodyn.cli import main
from neurodyn.errors import ConfigError
from neurodyn.train.runs import load_run, read_test_metrics

README = Path(__file__).resolve().parents[2] / "README.md"


def _snippet(name: str) -> str:
    text = README.read_text()
    match = re.search(rf"<!-- readme-snippet: {name} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"README.md has no snippet {name!r}"
    return match.group(1)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("readme")
    old_cwd, old_data = Path.cwd(), os.environ.get("NEURODYN_DATA")
    os.chdir(root)
    os.environ["NEURODYN_DATA"] = str(root / "data")
    try:
        assert (
            main(["train", "fno/darcy", "--scale", "tiny", "--run-name", "demo", "--no-progress", "train.epochs=3"])
            == 0
        )
        yield root
    finally:
        os.chdir(old_cwd)
        os.environ.pop("NEURODYN_DATA") if old_data is None else os.environ.__setitem__("NEURODYN_DATA", old_data)


def _rel_l2(pred, true):
    return ((pred - true).flatten(1).norm(dim=1) / true.flatten(1).norm(dim=1)).mean().item()


@pytest.mark.slow
def test_readme_snippet_reproduces_the_runs_test_error(demo_run, monkeypatch):
    monkeypatch.chdir(demo_run)
    monkeypatch.setenv("NEURODYN_DATA", str(demo_run / "data"))
    test = load_run(demo_run / "runs" / "demo").split("test")
    a, truth = test.tensors()
    scope = {"a": a}
    exec(_snippet("load_run"), scope)  # noqa: S102 - the README's own code
    u = scope["u"]
    assert u.shape == truth.shape and not scope["run"].model.training
    reported = read_test_metrics(demo_run / "runs" / "demo")["test"]["last"]["rel_l2"]
    assert _rel_l2(u, truth) == pytest.approx(reported, rel=0.01)
    # the bare module (normalised units) would be far off: the normalizers matter
    bare = scope["run"].model(a)
    assert abs(_rel_l2(bare, truth) - reported) > 0.1


@pytest.mark.slow
def test_predict_command_writes_the_predictions_of_a_store_file(demo_run, monkeypatch, capsys):
    monkeypatch.chdir(demo_run)
    monkeypatch.setenv("NEURODYN_DATA", str(demo_run / "data"))
    data = next((demo_run / "data").rglob("*.h5"))
    out = demo_run / "pred.h5"
    assert main(["predict", "runs/demo", "--data", str(data), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    run = load_run(demo_run / "runs" / "demo")
    from neurodyn.data.store import StoredDataset

    store = StoredDataset(data)
    x, y = (torch.from_numpy(store.read(f"fields/{k}")) for k in ("a", "u"))
    with h5py.File(out) as f:
        pred = torch.from_numpy(f["pred"][:])
    with torch.no_grad():
        direct = run.task.predict(run.model, {"x": x})
    torch.testing.assert_close(pred, direct, rtol=1e-5, atol=1e-6)
    assert f"rel_l2  {_rel_l2(pred, y):.5g}" in printed
    assert not list(demo_run.glob(".pred.h5.*"))  # written through a temporary file


def test_autoregressive_and_sequence_runs_predict(tmp_path, data_dir):
    import neurodyn
    from neurodyn.experiments import load_experiment
    from neurodyn.train.experiment import run_experiment

    cfg = load_experiment("stssm/burgers", "tiny", ["train.epochs=1"])
    run_experiment(cfg, tmp_path / "ar", progress=False)
    r = load_run(tmp_path / "ar")
    batch = next(iter(torch.utils.data.DataLoader(r.split("test"), batch_size=2)))
    run = neurodyn.load_run(tmp_path / "ar")
    steps = r.task.spec()["step"] * (batch["y"].shape[1] if not r.task.fac else 1)
    with torch.no_grad():
        want = r.task.predict(r.model, batch)
    got = run.predict(batch["x"], steps=want.shape[1] if not r.task.fac else steps)
    torch.testing.assert_close(got, want)
    with pytest.raises(ConfigError, match="give steps=K"):
        run.predict(batch["x"])

    cfg = load_experiment("gru/activity", "tiny", ["train.epochs=1"])
    run_experiment(cfg, tmp_path / "seq", progress=False)
    r = load_run(tmp_path / "seq")
    batch = next(iter(torch.utils.data.DataLoader(r.split("test"), batch_size=3)))
    with torch.no_grad():
        want = r.task.predict(r.model, batch)
    got = neurodyn.load_run(tmp_path / "seq").predict(batch["x"], t=batch.get("t"), mask=batch["mask"])
    torch.testing.assert_close(got, want)
