"""Restored runs live on the device asked for: every tensor of the model and of the task's normalizers, and the
commands built on them (``evaluate``, ``predict``, plots, ``load_run``) on this machine's default device.

Without an accelerator here, the ``meta`` device stands in for one: a tensor left on the CPU meets a meta tensor
in the first operation and fails there, as a CPU tensor meets a CUDA one ("Expected all tensors to be on the same
device")."""

import pytest
import torch

from neurodyn.cli import default_device, main
from neurodyn.train.experiment import check_model_accepts
from neurodyn.train.predict import load_run
from neurodyn.train.runs import batches, evaluate_run, read_test_metrics

TINY = ["train.epochs=1", "data.n_train=8", "data.n_test=4", "model.width=8", "model.modes=[4,4]"]


@pytest.fixture(scope="module")
def fno_run(tmp_path_factory):
    """A one-epoch tiny FNO run (trained on the CPU) and its data folder."""
    from neurodyn.train.queue import train_preset

    root = tmp_path_factory.mktemp("devices")
    mp = pytest.MonkeyPatch()
    mp.setenv("NEURODYN_DATA", str(root / "data"))
    try:
        train_preset("fno/darcy", "tiny", root / "run", TINY, seed=1)
        yield root / "run"
    finally:
        mp.undo()


@pytest.fixture(scope="module", params=["fno/navier_stokes_rollout", "gru/activity"])
def other_run(request, tmp_path_factory):
    """A one-epoch tiny run of an autoregressive and of a sequence preset."""
    from neurodyn.train.queue import train_preset

    root = tmp_path_factory.mktemp("devices")
    mp = pytest.MonkeyPatch()
    mp.setenv("NEURODYN_DATA", str(root / "data"))
    try:
        train_preset(request.param, "tiny", root / "run", ["train.epochs=1"], seed=1)
        yield root / "run"
    finally:
        mp.undo()


def _devices(model, task) -> set[torch.device]:
    tensors = [*model.parameters(), *model.buffers(), *(b for m in task.normalizers().values() for b in m.buffers())]
    return {t.device for t in tensors}


def test_a_run_restored_on_a_device_holds_every_tensor_there(fno_run, monkeypatch):
    monkeypatch.setenv("NEURODYN_DATA", str(fno_run.parent / "data"))
    meta = torch.device("meta")
    r = load_run(fno_run, device=meta)
    assert _devices(r.model, r.task) == {meta}
    # the shape check of `evaluate` takes a CPU sample of the data to the model's device
    check_model_accepts(r.model, r.task, r.split("test"), "fno")
    batch = next(batches(r.split("test"), 2, meta))
    pred = r.task.predict(r.model, batch)
    assert pred.device == meta and pred.shape == batch["y"].shape
    trained = load_run(fno_run, device=meta)
    assert _devices(trained.model, trained.task) == {meta} and trained.device == meta
    assert trained.task.predict(trained.model, batch).shape == batch["y"].shape


def test_a_run_evaluates_predicts_and_plots_on_the_default_device(fno_run, monkeypatch, tmp_path, capsys):
    """On this machine's default device (cuda when available, else cpu) the commands reproduce the run's own
    test evaluation (written by the trainer on the CPU)."""
    import json

    import h5py

    monkeypatch.setenv("NEURODYN_DATA", str(fno_run.parent / "data"))
    device = torch.device(default_device())
    reported = read_test_metrics(fno_run)["test"]["last"]["rel_l2"]
    r = load_run(fno_run, device=device)
    assert {d.type for d in _devices(r.model, r.task)} == {device.type}
    assert evaluate_run(fno_run, device=device)["rel_l2"] == pytest.approx(reported, rel=1e-4)
    assert main(["evaluate", str(fno_run), "--json"]) == 0  # no --device: the default device
    assert json.loads(capsys.readouterr().out)["test"]["rel_l2"] == pytest.approx(reported, rel=1e-4)
    store = next((fno_run.parent / "data").rglob("*.h5"))
    out = tmp_path / "pred.h5"
    assert main(["predict", str(fno_run), "--data", str(store), "--out", str(out)]) == 0
    with h5py.File(out) as f:
        assert f["pred"].shape[1:] == tuple(r.split("test")[0]["y"].shape)
    from neurodyn.plots import write_run_plots

    (fno_run / "predictions.png").unlink(missing_ok=True)
    write_run_plots(fno_run, device=device)
    assert (fno_run / "predictions.png").stat().st_size > 0


def test_autoregressive_and_sequence_runs_restore_on_a_device(other_run, monkeypatch):
    monkeypatch.setenv("NEURODYN_DATA", str(other_run.parent / "data"))
    meta = torch.device("meta")
    for restored in (load_run(other_run, device=meta),):
        assert _devices(restored.model, restored.task) == {meta}
    r = load_run(other_run, device=meta)
    check_model_accepts(r.model, r.task, r.split("test"), r.cfg["model"]["name"])
    batch = next(batches(r.split("test"), 2, meta))
    assert r.task.predict(r.model, batch).device == meta


def test_job_lists_train_on_the_requested_device(tmp_path, monkeypatch):
    """``run_jobs(..., device=)`` (what ``neurodyn compare --device`` trains through) hands the device to every
    training it runs."""
    from neurodyn.train import queue as runs

    seen = []

    def fake_train(*args, device="cpu", **kwargs):
        seen.append(str(device))
        raise KeyboardInterrupt  # stop before anything trains

    monkeypatch.setattr(runs, "train_preset", fake_train)
    with pytest.raises(KeyboardInterrupt):
        runs.run_jobs([runs.Job("a", "fno/darcy", 0)], tmp_path, "tiny", device="meta")
    assert seen == ["meta"]
