"""Time windows, rollouts and the autoregressive task, on a trajectory set whose dynamics are exact:
u_{t+1}(x) = u_t(x - one cell) (periodic advection), so an oracle model has zero rollout error."""

import numpy as np
import pytest
import torch

from neurodyn.data.datasets import TimeWindowDataset
from neurodyn.data.normalize import Normalizer
from neurodyn.data.store import StoredDataset, StoreMeta, write_store
from neurodyn.errors import ConfigError, DataError
from neurodyn.train.losses import build_loss
from neurodyn.train.rollout import from_frames, rollout, teacher_forced, to_frames
from neurodyn.train.tasks import AutoregressiveTask

T, X = 12, 32


def _advection_store(path, n=10):
    def make(ids):
        rng = np.random.default_rng(ids[0])
        x = np.arange(X) / X
        u0 = np.stack(
            [np.sin(2 * np.pi * (x + rng.random())) + 0.5 * np.cos(4 * np.pi * (x + rng.random())) for _ in ids]
        )
        u = np.stack([np.roll(u0, t, axis=1) for t in range(T)], axis=1)[..., None].astype(np.float32)
        f = np.broadcast_to(np.cos(2 * np.pi * x)[None, :, None], (len(ids), X, 1)).astype(np.float32)
        return {"fields/u": u, "fields/f": f, "params/nu": (0.1 * (ids + 1)).astype(np.float32)}

    meta = StoreMeta("advection", "1", {}, 0, n, 5, ("u",), ("u",))
    return StoredDataset(write_store(path, meta, make, coords={"t": np.arange(T, dtype=float)}, progress=False))


class Shift(torch.nn.Module):
    """The exact one-step operator in normalised units (the normaliser is affine per channel).

    Channels layout: x (B, X, t) -> (B, X, 1); time layout: x (B, t, X, 1) -> (B, 1, X, 1)."""

    def __init__(self, fac=True):
        super().__init__()
        self.fac = fac

    def forward(self, x, pos=None, ctx=None):
        return torch.roll(x[..., -1:], 1, dims=1) if self.fac else torch.roll(x[:, -1:], 1, dims=2)


@pytest.fixture
def store(tmp_path):
    return _advection_store(tmp_path / "adv.h5")


def test_windows_hold_the_right_frames(store):
    ds = TimeWindowDataset(store, np.array([3, 1]), t_in=3, t_out=2, stride=2)
    assert ds.windows_per_sample == (T - 5) // 2 + 1 and len(ds) == 2 * ds.windows_per_sample
    item = ds[ds.windows_per_sample + 1]  # sample 1, window 1: frames 2,3,4 -> 5,6
    u = store.read("fields/u", 1)
    np.testing.assert_array_equal(item["x"].numpy(), np.concatenate([u[2], u[3], u[4]], axis=-1))
    np.testing.assert_array_equal(item["y"].numpy(), np.concatenate([u[5], u[6]], axis=-1))
    assert int(item["t0"]) == 5 and int(item["index"]) == 1
    ts = TimeWindowDataset(store, np.array([1]), t_in=2, t_out=1, time_stride=3, frames_as_channels=False)
    np.testing.assert_array_equal(ts[0]["x"].numpy(), u[[0, 3]])
    full = TimeWindowDataset(store, np.array([1]), t_in=2, t_out=None, context_fields=["f"], context_params=["nu"])
    assert len(full) == 1 and full[0]["y"].shape == (X, T - 2) and full.in_channels == 3
    assert float(full[0]["ctx"]) == pytest.approx(0.2)


def test_window_errors(store):
    with pytest.raises(DataError, match="too few"):
        TimeWindowDataset(store, np.arange(2), t_in=10, t_out=5)
    with pytest.raises(DataError, match="no context parameter"):
        TimeWindowDataset(store, np.arange(2), t_in=2, context_params=["Re"])
    with pytest.raises(DataError, match="no trajectory field"):
        TimeWindowDataset(store, np.arange(2), t_in=2, field="v")


def test_frame_layouts_are_inverse():
    f = torch.randn(2, 5, 7, 6, 3)
    stacked = from_frames(f, True)
    assert stacked.shape == (2, 7, 6, 15)
    torch.testing.assert_close(stacked[..., 3:6], f[:, 1])
    torch.testing.assert_close(to_frames(stacked, 3, True), f)


def test_rollout_feeds_predictions_back():
    history = torch.zeros(1, 2, 4, 1)
    out = rollout(lambda w, k: w[:, -1:] + 1 + 0 * k, history, 5)
    assert out[0, :, 0, 0].tolist() == [1, 2, 3, 4, 5]


def test_teacher_forced_reads_only_true_frames():
    history, truth = torch.zeros(1, 2, 4, 1), torch.arange(1.0, 8.0).reshape(1, 7, 1, 1).expand(1, 7, 4, 1)
    seen = []

    def step(w, k):  # two frames per call: wrong on purpose, so feedback would show up in later windows
        seen.append((k, w[0, :, 0, 0].tolist()))
        return w[:, -1:].repeat(1, 2, 1, 1) + 100

    out = teacher_forced(step, history, truth)
    assert out.shape == truth.shape and [k for k, _ in seen] == [0, 2, 4, 6]
    assert seen[1][1] == [1.0, 2.0] and seen[3][1] == [5.0, 6.0]  # true frames k-2, k-1 go in
    assert out[0, :, 0, 0].tolist() == [100, 100, 102, 102, 104, 104, 106]


@pytest.mark.parametrize("fac", [True, False])
def test_oracle_model_has_zero_rollout_error_and_training_modes_run(store, fac):
    train = TimeWindowDataset(store, np.arange(6), t_in=2, t_out=1, frames_as_channels=fac)
    test = TimeWindowDataset(store, np.arange(6, 10), t_in=2, t_out=None, frames_as_channels=fac)
    frames = torch.stack([train.trajectory(j) for j in range(6)]).flatten(0, 1)
    norm = Normalizer("gaussian", "channel").fit(frames)
    task = AutoregressiveTask(build_loss("rel_l2"), norm, channels=1, frames_as_channels=fac)
    batch = {k: torch.stack([test[i][k] for i in range(4)]) for k in ("x", "y")}
    metrics = task.evaluate(Shift(fac), [batch])
    assert metrics["rel_l2"] < 1e-6 and len(metrics["rel_l2_per_step"]) == T - 2
    assert max(metrics["rel_l2_per_step"]) < 1e-6 and metrics["frame_rmse"] < 1e-6
    # a wrong model accumulates error along the rollout
    lazy = task.evaluate(lambda x, pos=None, ctx=None: x[..., -1:] if fac else x[:, -1:], [batch])
    steps = lazy["rel_l2_per_step"]
    assert steps[-1] > steps[0] > 0.05
    # from true frames the persistence error of a one-cell shift is the same at every step (the first
    # rollout step's), and the horizon error of both modes is reported either way
    assert lazy["rel_l2_rollout"] == lazy["rel_l2"] > lazy["rel_l2_teacher_forced"]
    forced = AutoregressiveTask(build_loss("rel_l2"), norm, 1, fac, eval_mode="teacher_forcing").evaluate(
        lambda x, pos=None, ctx=None: x[..., -1:] if fac else x[:, -1:], [batch]
    )
    assert forced["rel_l2_per_step"] == pytest.approx([steps[0]] * (T - 2), rel=1e-4)
    assert forced["rel_l2"] == forced["rel_l2_teacher_forced"] == pytest.approx(lazy["rel_l2_teacher_forced"])
    assert forced["rel_l2_rollout"] == pytest.approx(lazy["rel_l2"])
    with pytest.raises(ConfigError, match="eval_mode"):
        AutoregressiveTask(build_loss("rel_l2"), norm, 1, fac, eval_mode="one_step")
    for mode, extra in (("teacher_forcing", {}), ("rollout", {}), ("pushforward", {"pushforward": 2})):
        t = AutoregressiveTask(build_loss("rel_l2"), norm, 1, fac, train_mode=mode, **extra)
        b = {k: torch.stack([test[i][k] for i in range(2)]) for k in ("x", "y")}
        assert t.training_loss(Shift(fac), b).item() < 1e-6


@pytest.mark.parametrize("mode", ["teacher_forcing", "pushforward"])
@pytest.mark.slow
def test_autoregressive_experiment_end_to_end(tmp_path, store, mode):
    from neurodyn.plots import write_run_plots
    from neurodyn.train.experiment import run_experiment
    from neurodyn.train.runs import evaluate_run

    cfg = {
        "task": "autoregressive",
        "preset": "test/advection",
        "scale": "tiny",
        "data": {
            "path": str(store.path),
            "n_train": 6,
            "n_test": 4,
            "t_in": 2,
            "context_fields": ["f"],
            "context_params": ["nu"],
            "normalize_reduce": "channel",
        },
        "model": {"name": "fno", "modes": [8], "width": 8, "lifting_channels": 0, "projection_channels": 16},
        "train": {"epochs": 4, "batch_size": 10, "lr": 1e-2, "rollout": {"mode": mode, "pushforward": 1}},
    }
    run = tmp_path / "run"
    final = run_experiment(cfg, run, progress=False)
    write_run_plots(run)
    assert len(final["rel_l2_per_step"]) == T - 2 and final["rel_l2"] > 0
    for name in ("rollout.gif", "rollout_error.png", "predictions.png", "learning_curve.png", "summary.md"):
        assert (run / name).stat().st_size > 0, name
    from PIL import Image

    for png in run.glob("*.png"):  # every figure names the model, the run and the data file
        with Image.open(png) as im:
            title = im.text["Title"]
        assert title.startswith("fno (test/advection), run run: ") and store.path.name in title, (png.name, title)
    summary = (run / "summary.md").read_text()
    assert "| rel_l2 |" in summary and "| rel_l2_rollout |" not in summary  # one quantity, one row
    assert "- rel_l2 is rel_l2_rollout (the evaluation mode)" in summary
    assert "- `frame_rmse`: per predicted frame (one frame of one trajectory is a sample): root-mean-square" in summary
    assert "- `rel_l2`: relative L2 error of each trajectory over all its predicted frames" in summary
    again = evaluate_run(run)
    assert again["rel_l2"] == pytest.approx(final["rel_l2"], rel=1e-5)
