"""Trainer options: gradient accumulation, early stopping, CSV / TensorBoard logs, extending a finished run,
bf16 autocast, torch.compile.

Oracles: accumulation against one batch of the accumulated size; an extended run interrupted and resumed against
the same extension uninterrupted; early stopping against a scripted validation curve.
"""

import csv
import json
import re

import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.train.experiment import run_experiment
from neurodyn.train.runs import read_history

TINY = ["data.n_train=24", "data.n_test=4", "model.width=8", "model.modes=[4,4]", "train.shuffle=true"]


def _cfg(*extra):
    return load_experiment("fno/darcy", "tiny", [*TINY, *extra])


def _weights(run):
    return torch.load(run / "checkpoints" / "last.pt", weights_only=True)["model_state"]


def _train_both_same_weights(tmp_path, reference, variant, rtol, atol):
    """Train the overrides ``reference`` and ``variant`` into two folders; their final weights agree within
    ``rtol`` / ``atol``. Returns the two run folders."""
    runs = tmp_path / "reference", tmp_path / "variant"
    for run, extra in zip(runs, (reference, variant)):
        run_experiment(_cfg(*extra), run, progress=False)
    for k, w in _weights(runs[0]).items():
        torch.testing.assert_close(_weights(runs[1])[k], w, rtol=rtol, atol=atol)
    return runs


@pytest.mark.slow
def test_accumulation_equals_one_batch_of_the_accumulated_size(tmp_path, data_dir):
    # 21 training samples (24 with 3 carved for validation): steps of 8, 8 and 5 samples, each in micro-batches
    one, four = _train_both_same_weights(
        tmp_path,
        ["train.epochs=2", "train.batch_size=8"],
        ["train.epochs=2", "train.batch_size=2", "train.accumulate=4"],
        2e-5,
        1e-6,
    )
    la, lb = ([h["train_loss"] for h in read_history(r)] for r in (one, four))
    assert la == pytest.approx(lb, rel=1e-5)
    # the oracle is not trivially met: plain batches of 2 train differently
    two = tmp_path / "two"
    run_experiment(_cfg("train.epochs=2", "train.batch_size=2"), two, progress=False)
    assert any(not torch.allclose(_weights(two)[k], w, rtol=1e-3) for k, w in _weights(one).items())


def test_early_stop_stops_on_the_validation_metric_and_stays_stopped(tmp_path, data_dir, monkeypatch):
    from neurodyn.train import tasks

    curve = iter([0.5, 0.4, 0.45, 0.41, 0.3, 0.2, 0.1, 0.05])  # best at evaluation 2, then two worse ones
    real = tasks.SteadyTask.evaluate
    calls = []

    def scripted(self, model, batches):
        out = real(self, model, batches)
        calls.append(1)
        out["rel_l2"] = next(curve)
        return out

    monkeypatch.setattr(tasks.SteadyTask, "evaluate", scripted)
    run = tmp_path / "run"
    run_experiment(_cfg("train.epochs=8", "train.early_stop=2"), run, progress=False)
    history = read_history(run)
    assert [h["val"]["rel_l2"] for h in history] == [0.5, 0.4, 0.45, 0.41]
    assert history[-1].get("stopped_early") is True
    assert torch.load(run / "checkpoints" / "best.pt", weights_only=True)["position"]["epoch"] == 2
    run_experiment(_cfg("train.epochs=8", "train.early_stop=2"), run, progress=False)  # resuming: still stopped
    assert len(read_history(run)) == 4


def test_early_stop_needs_a_validation_split(tmp_path, data_dir):
    with pytest.raises(ConfigError, match="train.early_stop=2 stops on the validation split"):
        run_experiment(_cfg("train.epochs=2", "train.early_stop=2", "data.n_val=0"), tmp_path / "r", progress=False)


def test_csv_log_has_one_row_per_epoch_after_a_resume(tmp_path, data_dir):
    run = tmp_path / "run"
    cfg = _cfg("train.epochs=3", "train.logging.to=csv")
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, run, progress=False, interrupt_at=lambda e, b: (e, b) == (2, 1))
    run_experiment(cfg, run, progress=False)
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    history = read_history(run)
    assert [float(r["val_rel_l2"]) for r in rows] == pytest.approx([h["val"]["rel_l2"] for h in history])


def test_the_train_section_is_parsed_and_validated_once(tmp_path, data_dir, monkeypatch):
    """``TrainConfig`` is the one reader of the train section: one parse, one validation per training run."""
    from neurodyn.train.trainer import TrainConfig

    calls = []
    real = TrainConfig.__post_init__
    monkeypatch.setattr(TrainConfig, "__post_init__", lambda self: calls.append(1) or real(self))
    run_experiment(_cfg("train.epochs=1"), tmp_path / "r", progress=False)
    assert len(calls) == 1
    assert TrainConfig().window_steps == 1
    assert TrainConfig.from_options({"rollout": {"mode": "rollout", "steps": 3}}).window_steps == 3
    assert TrainConfig.from_options({"rollout": {"mode": "pushforward", "pushforward": 2}}).window_steps == 3
    with pytest.raises(ConfigError, match="train.batch_size must be >= 1"):
        TrainConfig(batch_size=0)  # a config built by hand is validated too
    # the loss of experiments and of fit() alike (fit() dropped grad_loss_weight before)
    assert TrainConfig(loss="rel_l2+grad", grad_loss_weight=0.7).loss_fn().weight == 0.7


@pytest.mark.parametrize(
    "section, values, words",
    [
        ("schedule", dict(name="linear"), "train.schedule.name must be one of 'onecycle', 'step', 'cosine', 'none'"),
        ("schedule", dict(pct_start=1.5), "train.schedule.pct_start is the warm-up fraction of OneCycleLR, in [0, 1]"),
        ("schedule", dict(step_size=0), "train.schedule.step_size must be >= 1"),
        ("schedule", dict(gamma=0.0), "train.schedule.gamma must be > 0"),
        ("rollout", dict(mode="replay"), "train.rollout.mode must be one of"),
        ("rollout", dict(steps=0), "train.rollout.steps must be >= 1, got 0"),
        ("rollout", dict(eval_mode="one_step"), "train.rollout.eval_mode must be one of"),
        ("rollout", dict(input_noise=-0.1), "train.rollout.input_noise must be >= 0"),
        ("rollout", dict(mode="pushforward"), "train.rollout.mode=pushforward needs train.rollout.pushforward >= 1"),
        ("logging", dict(to="wandb"), "train.logging.to must be none, csv, tensorboard"),
        ("logging", dict(n_plot=-1), "train.logging.n_plot must be >= 0, got -1"),
    ],
)
def test_each_train_section_validates_itself_naming_its_field(section, values, words):
    """A section made by hand and the same section parsed from a mapping refuse a bad value in one ConfigError that
    names train.<section>.<field>."""
    from neurodyn.train import trainer

    cls = {"schedule": trainer.ScheduleConfig, "rollout": trainer.RolloutConfig, "logging": trainer.LoggingConfig}
    with pytest.raises(ConfigError, match=re.escape(words)):
        cls[section](**values)
    with pytest.raises(ConfigError, match=re.escape(words)):
        trainer.TrainConfig.from_options({section: values})


def test_the_train_sections_parse_from_nested_mappings_and_name_a_flat_key_s_new_spelling():
    """Nested mappings become the sections (the rest keeps its defaults); each flat key of the former layout (the
    checkpoint reader's table lists them) is refused with one sentence naming its new spelling, for a preset's
    train.<key> and for fit()'s keywords; a typo inside a section gets the closest key of that section."""
    from neurodyn.checkpoint_io import FORMAT_1_TRAIN_KEYS
    from neurodyn.train.trainer import RolloutConfig, ScheduleConfig, TrainConfig

    t = TrainConfig.from_options({"lr": 0.01, "schedule": {"name": "step", "gamma": 0.9}, "rollout": {"steps": 3}})
    assert t.schedule == ScheduleConfig(name="step", gamma=0.9) and t.rollout == RolloutConfig(steps=3)
    assert t.lr == 0.01 and t.logging.to == "none" and t.window_steps == 1  # steps count in mode=rollout only
    for old, (section, key) in FORMAT_1_TRAIN_KEYS.items():
        with pytest.raises(ConfigError) as info:
            TrainConfig.from_options({old: 1})
        assert (
            f"train.{old} (the train options that belong together are sections now: spell it "
            f"train.{section}.{key})" in str(info.value)
        ), old
        with pytest.raises(ConfigError, match=re.escape(f"spell it {section}={{{key!r}: ...}}")):
            TrainConfig.from_options({old: 1}, unknown="fit() got unknown training option(s)", prefix="")
    with pytest.raises(ConfigError, match=r"train\.schedule\.nam \(did you mean train\.schedule\.name\?\)"):
        TrainConfig.from_options({"schedule": {"nam": "step"}})
    with pytest.raises(ConfigError, match=r"train\.schedule is a section with the keys name, pct_start"):
        TrainConfig.from_options({"schedule": "cosine"})
    with pytest.raises(ConfigError, match=r"train\.schedule\.pct_start='abc' is not a number"):
        TrainConfig.from_options({"schedule": {"pct_start": "abc"}})


def test_tensorboard_log(tmp_path, data_dir):
    pytest.importorskip("torch.utils.tensorboard")
    """The event file holds, per epoch (step = epoch + 1), the training loss, learning rate and validation metrics
    that metrics.jsonl records: read back with TensorBoard's own reader."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run = tmp_path / "run"
    run_experiment(_cfg("train.epochs=2", "train.logging.to=[csv,tensorboard]"), run, progress=False)
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    events = accumulator.EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    history = read_history(run)
    want = {
        "train/loss": [h["train_loss"] for h in history],
        "train/lr": [h["lr"] for h in history],
        "val/rel_l2": [h["val"]["rel_l2"] for h in history],
        "val/rmse": [h["val"]["rmse"] for h in history],
    }
    assert set(want) <= set(events.Tags()["scalars"])
    for tag, values in want.items():
        logged = events.Scalars(tag)
        assert [e.step for e in logged] == [1, 2], tag
        assert [e.value for e in logged] == pytest.approx(values, rel=1e-6), tag  # float32 in the event file


def test_tensorboard_missing_is_one_sentence(tmp_path, data_dir, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError("no tensorboard")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(ConfigError, match=r"train.logging.to=tensorboard needs the tensorboard package"):
        run_experiment(_cfg("train.epochs=1", "train.logging.to=tensorboard"), tmp_path / "r", progress=False)
    with pytest.raises(ConfigError, match="train.logging.to must be none, csv, tensorboard"):
        run_experiment(_cfg("train.logging.to=wandb"), tmp_path / "r", progress=False)


@pytest.mark.parametrize("scheduler", ["onecycle", "cosine"])
@pytest.mark.slow
def test_raising_epochs_continues_a_finished_run_with_a_new_segment(tmp_path, data_dir, scheduler):
    base = [f"train.schedule.name={scheduler}", "train.batch_size=8"]
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    for run in (straight, broken):
        run_experiment(_cfg("train.epochs=2", *base), run, progress=False)
    run_experiment(_cfg("train.epochs=4", *base), straight, progress=False)
    with pytest.raises(KeyboardInterrupt):  # the extension, interrupted inside the new segment, then resumed
        run_experiment(
            _cfg("train.epochs=4", *base), broken, progress=False, interrupt_at=lambda e, b: (e, b) == (3, 1)
        )
    run_experiment(_cfg("train.epochs=4", *base), broken, progress=False)
    history = read_history(straight)
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]
    for k, w in _weights(straight).items():
        assert torch.equal(_weights(broken)[k], w), k
    # the added epochs ran on a schedule of their own: halfway through it the learning rate is back near train.lr
    # (one schedule over 4 epochs would be at its last quarter: below 0.15 train.lr for both kinds)
    lr = _cfg()["train"]["lr"]
    assert history[2]["lr"] > 0.3 * lr
    ckpt = torch.load(straight / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["scheduler"]["segments"] == [2, 4]
    records = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert sum("test" in r for r in records) == 1  # the test data evaluated once, after the extension


def test_bf16_autocast_trains_with_float32_parameters(tmp_path, data_dir):
    run = tmp_path / "bf16"
    final = run_experiment(_cfg("train.epochs=2", "train.precision=bf16"), run, progress=False)
    fp32 = run_experiment(_cfg("train.epochs=2"), tmp_path / "fp32", progress=False)
    assert all(w.dtype == torch.float32 for w in _weights(run).values() if w.is_floating_point())
    assert final["rel_l2"] == pytest.approx(fp32["rel_l2"], rel=0.2)  # close to float32 ...
    assert final["rel_l2"] != fp32["rel_l2"]  # ... but computed in bfloat16
    with pytest.raises(ConfigError, match="train.precision=16 .* needs a CUDA device"):
        run_experiment(_cfg("train.precision=16"), tmp_path / "r16", progress=False)
    with pytest.raises(ConfigError, match="train.precision must be one of 32, bf16, 16"):
        run_experiment(_cfg("train.precision=8"), tmp_path / "r8", progress=False)


@pytest.mark.slow
def test_compiled_training_follows_eager(tmp_path, data_dir):
    eager = ["train.epochs=1", "train.batch_size=8"]
    _train_both_same_weights(tmp_path, eager, [*eager, "train.compile=true"], 1e-4, 1e-5)


@pytest.mark.parametrize(
    "preset", ["stssm/burgers", "nac/event_digits", "mha/activity", "lamo/darcy", "chonn_unet/darcy"]
)
def test_every_family_trains_under_bf16(tmp_path, data_dir, preset, tiny_run):
    """bf16 autocast end to end (the S4D convolution and NAC's time gate accumulate in float32)."""
    run = tiny_run(load_experiment(preset, "tiny", ["train.epochs=1", "train.precision=bf16"]), tmp_path / "run")
    final, initial = run.final, run.initial
    assert final and all(v == v for v in final.values() if isinstance(v, float))  # finite metrics, no NaN
    # it trained: every trainable float32 master weight moved from its initial value and is finite (the buffers,
    # e.g. NAC's wiring masks, stay)
    init, trained = initial.state_dict(), _weights(tmp_path / "run")
    names = [k for k, p in initial.named_parameters() if p.requires_grad]
    assert all(trained[k].dtype == torch.float32 and torch.isfinite(trained[k]).all() for k in names)
    still = [k for k in names if torch.equal(trained[k], init[k])]
    assert not still, (preset, still)


def test_bf16_models_run_in_bf16():
    """``model.to(torch.bfloat16)`` works for the models whose layers compute in float32 inside."""
    from neurodyn.models import build

    for name, kw, x in (
        ("stssm", dict(in_channels=2, out_channels=1, dims=1, width=8, d_state=4), (2, 5, 16, 2)),
        ("mha", dict(in_channels=3, out_channels=4, hidden=8, n_heads=2), (2, 7, 3)),
        ("nac", dict(in_channels=3, out_channels=4, d_model=8, n_heads=2, dense=(8,)), (2, 7, 3)),
    ):
        torch.manual_seed(0)
        model = build(name, **kw).to(torch.bfloat16)
        ref = build(name, **kw)  # float32, the same (bf16-rounded) weights and input
        ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        inp = torch.randn(*x, dtype=torch.bfloat16)
        t = torch.linspace(0, 1, x[1]).expand(x[0], x[1])
        with torch.no_grad():
            out = model(inp, t=t.bfloat16()) if name != "stssm" else model(inp)
            want = ref(inp.float(), t=t) if name != "stssm" else ref(inp.float())
        assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all(), name
        # the function of the float32 model, to bfloat16's rounding (8 bits: ~0.4 % per operation)
        err = ((out.float() - want).abs().max() / want.abs().max()).item()
        assert err < 0.05, (name, err)
