"""Trainer: exact resume, Ctrl-C checkpoint, DDP equivalence, divergence and bad configs."""

import json
import os
import subprocess
import sys

import pytest
import torch

from neurodyn.checkpoint_io import read_checkpoint
from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.plots import write_run_plots
from neurodyn.train.experiment import run_experiment

TINY = ["train.epochs=3", "train.batch_size=6", "data.n_train=20", "data.n_test=6"]


def _cfg(*extra):
    return load_experiment("fno/darcy", "tiny", [*TINY, *extra])


def _weights(run_dir):
    return read_checkpoint(run_dir / "checkpoints" / "last.pt")["model_state"]


def _losses(run_dir):
    return [
        r["train_loss"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if "train_loss" in (r := json.loads(line))
    ]


def test_interrupted_run_resumes_to_identical_weights(tmp_path, data_dir, device):
    cfg = _cfg("train.schedule.name=onecycle")
    whole = tmp_path / "whole"
    run_experiment(cfg, whole, device=device, progress=False)

    broken = tmp_path / "broken"
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in the middle of epoch 1
        run_experiment(cfg, broken, device=device, progress=False, interrupt_at=lambda e, b: (e, b) == (1, 2))
    pos = read_checkpoint(broken / "checkpoints" / "last.pt")["position"]
    assert (pos["epoch"], pos["batch"]) == (1, 2)
    torch.manual_seed(123)  # the resumed run must not depend on the process' RNG state
    run_experiment(cfg, broken, device=device, progress=False)

    a, b = _weights(whole), _weights(broken)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert _losses(whole) == _losses(broken)
    assert len(_losses(broken)) == 3


def test_sigterm_saves_the_batch_it_stopped_at_and_the_run_resumes_to_identical_weights(tmp_path, data_dir):
    """A SIGTERM (a scheduler's pre-emption, a session's stop) in the middle of epoch 1 interrupts like Ctrl-C:
    last.pt holds that batch, the process' own SIGTERM handler is back afterwards, and the resumed run ends with
    the weights and losses of an uninterrupted one."""
    import os
    import signal

    cfg = _cfg("train.schedule.name=onecycle")
    whole = tmp_path / "whole"
    run_experiment(cfg, whole, progress=False)
    before = signal.getsignal(signal.SIGTERM)

    def terminate_at(epoch, batch):
        if (epoch, batch) == (1, 2):
            os.kill(os.getpid(), signal.SIGTERM)
        return False

    stopped = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, stopped, progress=False, interrupt_at=terminate_at)
    assert signal.getsignal(signal.SIGTERM) is before
    pos = read_checkpoint(stopped / "checkpoints" / "last.pt")["position"]
    assert (pos["epoch"], pos["batch"]) == (1, 2)
    run_experiment(cfg, stopped, progress=False)
    a, b = _weights(whole), _weights(stopped)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _losses(whole) == _losses(stopped)


def test_resume_with_another_config_is_refused(tmp_path, data_dir):
    cfg = _cfg("train.schedule.name=onecycle")
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, run, progress=False, interrupt_at=lambda e, b: (e, b) == (1, 1))
    saved = (run / "config.yaml").read_text()
    faster = _cfg("train.schedule.name=onecycle", "train.lr=0.01")  # the optimizer and schedule were built for another
    with pytest.raises(ConfigError, match=r"train\.lr \(0\.001 -> 0\.01\)"):
        run_experiment(faster, run, progress=False)
    shorter = _cfg("train.schedule.name=onecycle", "train.epochs=2")
    with pytest.raises(ConfigError, match=r"can be extended \(more epochs\) but not shortened"):
        run_experiment(shorter, run, progress=False)
    assert (run / "config.yaml").read_text() == saved  # the refused runs left the folder as it was
    run_experiment(faster, run, progress=False, resume=False)  # starting over is allowed
    assert len(_losses(run)) == 3


def test_a_run_folder_of_the_flat_train_layout_is_refused_in_one_sentence(tmp_path, data_dir):
    """A run folder whose config.yaml holds the former flat train section (train.scheduler, ...): one sentence saying
    the layout changed and how to go on, not a list of differing keys; its checkpoints still load."""
    import yaml

    import neurodyn

    cfg = _cfg("train.schedule.name=onecycle")
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, run, progress=False, interrupt_at=lambda e, b: (e, b) == (1, 1))
    saved = yaml.safe_load((run / "config.yaml").read_text())
    schedule = saved["train"].pop("schedule")
    saved["train"].update(scheduler=schedule["name"])  # as the folder was written before the sections
    (run / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    before = sorted(p.name for p in run.rglob("*"))
    with pytest.raises(ConfigError) as info:
        run_experiment(cfg, run, progress=False)
    text = str(info.value)
    assert "former layout of the train section" in text and "train.scheduler" in text and "--fresh" in text
    assert "\n" not in text and "->" not in text  # one sentence, no list of differing keys
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing touched
    assert neurodyn.load_run(run).train_config.schedule.name == "onecycle"
    run_experiment(cfg, run, progress=False, resume=False)  # starting over is allowed
    assert len(_losses(run)) == 3


@pytest.mark.slow
def test_best_checkpoint_and_artifacts(tmp_path, data_dir):
    run = tmp_path / "run"
    final = run_experiment(_cfg(), run, progress=False)
    write_run_plots(run)  # the CLI draws after training: plots sit above train/
    assert set(final) >= {"rel_l2", "rmse", "nrmse", "max_err", "brmse", "frmse_low"}
    best = read_checkpoint(run / "checkpoints" / "best.pt")
    history = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert best["best"] == pytest.approx(min(h["val"]["rel_l2"] for h in history if "val" in h))
    for name in ("summary.md", "predictions.png", "learning_curve.png", "config.yaml"):
        assert (run / name).stat().st_size > 0
    assert "rel_l2" in (run / "summary.md").read_text()


def test_model_load_rebuilds_without_the_script(tmp_path, data_dir, tiny_run):
    """``neurodyn.models.load`` rebuilds the trained network from the checkpoint alone: the same architecture
    (config) and exactly the trained weights, so it computes the trained model's outputs bit for bit; a fresh
    model of the same config does not."""
    from neurodyn.models import build, load

    run = tmp_path / "run"
    trained = [tiny_run(_cfg(), run).module]  # the very module the trainer optimised
    model = load(run / "checkpoints" / "last.pt")
    ref = read_checkpoint(run / "checkpoints" / "last.pt")
    assert ref["model"]["name"] == "fno" and type(model) is type(trained[0]) and model.config == trained[0].config
    want = trained[0].state_dict()
    assert model.state_dict().keys() == want.keys()
    for k, v in model.state_dict().items():
        assert torch.equal(v, want[k]), k
    x = torch.randn(2, 16, 16, 1)
    trained[0].eval()
    with torch.no_grad():
        y = model(x)
        assert y.shape == (2, 16, 16, 1)
        assert torch.equal(y, trained[0](x))
        assert not torch.allclose(build("fno", model.config)(x), y)  # not met by any model of that config


def test_divergence_stops_with_position(tmp_path, data_dir, monkeypatch):
    from neurodyn.train.tasks import SteadyTask
    from neurodyn.train.trainer import TrainingDiverged

    calls = []

    def nan_on_third_batch(self, model, batch):
        calls.append(1)
        loss = self.loss_fn(self.predict(model, batch), batch["y"])
        return loss * float("nan") if len(calls) == 3 else loss

    monkeypatch.setattr(SteadyTask, "training_loss", nan_on_third_batch)
    with pytest.raises(TrainingDiverged, match="epoch 0 batch 2"):
        run_experiment(_cfg(), tmp_path / "r", progress=False)


@pytest.mark.parametrize(
    "override,match",
    [
        ("train.epochs=0", "epochs"),
        ("train.optimizer=sgdx", "optimizer"),
        ("train.lossy=1", "unknown key"),
        ("model.in_channels=3", "in_channels"),
    ],
)
def test_impossible_train_configs(tmp_path, data_dir, override, match):
    with pytest.raises(ConfigError, match=match):
        run_experiment(_cfg(override), tmp_path / "r", progress=False)


@pytest.mark.slow
def test_two_process_ddp_follows_the_one_process_curve(tmp_path, data_dir):
    args = [
        "train",
        "fno/darcy",
        "--scale",
        "tiny",
        "--no-progress",
        *TINY,
        "train.epochs=2",
        "--runs-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NEURODYN_DATA": str(data_dir)}
    # the oracle: one process taking each global batch of 6 as the ranks' two halves (tests/train/test_ddp_models.py
    # says why the two then take the same float32 steps, whatever the machine's reduction order)
    one = subprocess.run(
        [sys.executable, "-m", "neurodyn", *args, "--run-name", "one", "train.batch_size=3", "train.accumulate=2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(29500 + os.getpid() % 1000),
            "-m",
            "neurodyn",
            *args,
            "--run-name",
            "two",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    assert "processes: 1" in one.stdout and two.stdout.count("processes: 2") == 1  # the main process's header
    l1, l2 = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(l1) == len(l2) == 2
    assert l2 == pytest.approx(l1, rel=1e-9, abs=0)  # float64 epoch sums, added in another order
    w1, w2 = _weights(tmp_path / "one"), _weights(tmp_path / "two")
    for k in w1:
        torch.testing.assert_close(w1[k], w2[k], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["adamw", "adam"])
def test_make_optimizer_steps_like_the_reference_optimizer(name):
    """The (fused where available) optimizer takes the same steps as PyTorch's default implementation."""
    from neurodyn.train.trainer import make_optimizer

    g = torch.Generator().manual_seed(0)
    w0 = [torch.randn(7, 5, generator=g), torch.randn(3, generator=g)]
    grads = [[torch.randn(w.shape, generator=g) for w in w0] for _ in range(3)]
    runs = []
    for make in (
        lambda p: make_optimizer(name, p, 1e-2, 1e-2),
        lambda p: (torch.optim.AdamW if name == "adamw" else torch.optim.Adam)(p, lr=1e-2, weight_decay=1e-2),
    ):
        ps = [torch.nn.Parameter(w.clone()) for w in w0]
        opt = make(ps)
        for gs in grads:
            for p, gr in zip(ps, gs):
                p.grad = gr.clone()
            opt.step()
        runs.append(ps)
    for a, b in zip(*runs):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
        assert not torch.allclose(a, w0[0] if a.shape == w0[0].shape else w0[1])  # it did move
