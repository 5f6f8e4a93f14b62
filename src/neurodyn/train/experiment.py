"""From an experiment config (a merged preset) to a trained run folder.

``run_experiment(cfg, run_dir)`` assembles the data (:func:`neurodyn.data.assembly.build_data`: the
dataset, generated when missing, and the normalizers fitted on the training split), builds the model with
the data's channel counts and the task, trains with the one trainer and writes ``config.yaml``,
``metrics.jsonl``, the checkpoints and ``summary.md``. The plots are drawn above this layer
(:func:`neurodyn.plots.write_run_plots`); :mod:`neurodyn.train.runs` restores and re-evaluates runs.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
import yaml

from ..data.assembly import build_data, build_test_sets, named_test_files
from ..data.datasets import SteadyDataset
from ..config_types import check_field_types
from ..errors import ConfigError
from ..models import build, count_parameters
from ..models.registry import config_fields
from .checkpoint import check_resume_config
from .distributed import DistInfo, barrier
from .losses import build_loss
from .tasks import AutoregressiveTask, SteadyTask
from .trainer import TrainConfig, Trainer

def model_channels(cfg: dict[str, Any], train_set) -> dict[str, int]:
    """Input/output channel counts (and context length) the model needs for this data and task."""
    if isinstance(train_set, SteadyDataset):
        return {"in_channels": train_set.in_channels, "out_channels": train_set.out_channels}
    if cfg.get("task") == "sequence":
        return {"in_channels": train_set.in_channels, "out_channels": train_set.n_targets,
                "per_step": train_set.per_step}
    step = int(cfg["data"].get("step", 1))
    c = train_set.channels
    fac = train_set.frames_as_channels
    out = {"in_channels": (train_set.t_in * c if fac else c) + train_set.cf_channels,
           "out_channels": step * c if fac else c}
    if train_set.n_ctx:
        out["ctx_channels"] = train_set.n_ctx
    return out


def build_model(cfg: dict[str, Any], train_set) -> torch.nn.Module:
    m = dict(cfg["model"])
    if "name" not in m:
        raise ConfigError("the model section needs a 'name' (see `neurodyn info models`)")
    name = m.pop("name")
    derived = model_channels(cfg, train_set)
    spatial = getattr(train_set, "spatial_shape", None)
    if spatial and "grid_size" in config_fields(name):
        derived["grid_size"] = list(spatial)  # the nominal grid of a resolution-aware model: the training grid
    for key, have in derived.items():
        if m.get(key) not in (None, have):
            raise ConfigError(f"model.{key}={m[key]} but the data and task need {have}; drop the override "
                              "or change the data section")
        m[key] = have
    return build(name, m)


def check_model_accepts(model: torch.nn.Module, task, dataset, name: str, what: str = "this dataset") -> None:
    """One forward pass on a sample of ``dataset``, so that a resolution or channel count the model cannot
    take fails now, with the data's shape named, rather than deep inside the first step (or, for a test
    file, after the whole training)."""
    item = dataset[0]
    batch = {k: v[None] for k, v in item.items() if torch.is_tensor(v) and v.dim() > 0}
    was_training = model.training
    model.eval()  # a shape check: no batch-norm statistics of one sample (nor an update of the running ones)
    try:
        with torch.no_grad():
            out = task.predict(model, batch)
    except (ValueError, RuntimeError) as exc:
        msg = " ".join(str(exc).split())
        raise ConfigError(f"model {name!r} cannot take {what}'s input of shape "
                          f"{tuple(item['x'].shape)}: {msg}") from None
    finally:
        model.train(was_training)
    want = task.expected_output_shape(batch) if hasattr(task, "expected_output_shape") else batch["y"].shape
    if tuple(out.shape) != tuple(want):
        raise ConfigError(f"model {name!r} returns shape {tuple(out.shape[1:])} on {what} where the task needs "
                          f"{tuple(want[1:])}")


def build_task(cfg: dict[str, Any], data: dict[str, Any]):
    t = cfg["train"]
    name = t.get("loss", "rel_l2")
    kwargs = {"weight": t.get("grad_loss_weight", 0.1)} if name == "rel_l2+grad" else {}
    loss = build_loss(name, **kwargs)
    if cfg.get("task", "steady") == "steady":
        return SteadyTask(loss, data["x_norm"], data["y_norm"])
    if cfg.get("task") == "sequence":
        from .sequence_task import SequenceTask

        train = data["sets"]["train"]
        return SequenceTask(train.kind, data["x_norm"], data.get("y_norm"), per_step=train.per_step,
                            n_targets=train.n_targets)
    train = data["sets"]["train"]
    return AutoregressiveTask(loss, data["u_norm"], train.channels, train.frames_as_channels,
                              step=int(cfg["data"].get("step", 1)), cf_norm=data.get("cf_norm"),
                              ctx_norm=data.get("ctx_norm"), train_mode=t.get("train_mode", "teacher_forcing"),
                              pushforward=int(t.get("pushforward", 0)), input_noise=float(t.get("input_noise", 0.0)),
                              eval_mode=t.get("eval_mode", "rollout"))


def train_config(cfg: dict[str, Any]) -> TrainConfig:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(cfg["train"]) - fields)
    if unknown:
        raise ConfigError(f"train section has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
    return TrainConfig(**check_field_types(TrainConfig, cfg["train"], "train"))


def run_experiment(cfg: dict[str, Any], run_dir: str | Path, device: str | torch.device = "cpu",
                   resume: bool = True, dist: DistInfo | None = None, progress: bool | None = None,
                   interrupt_at=None) -> dict[str, Any]:
    """Train the experiment ``cfg`` into ``run_dir``; returns the final evaluation metrics."""
    dist = dist or DistInfo()
    run_dir = Path(run_dir)
    tcfg = train_config(cfg)
    named_test_files(cfg["data"])  # a missing test file fails before any data is generated or loaded
    if resume:  # before any data is generated or loaded
        check_resume_config(cfg, run_dir)
    torch.manual_seed(tcfg.seed)
    data = build_data(cfg, device, progress is not False, dist.is_main, barrier)
    model = build_model(cfg, data["sets"]["train"])
    task = build_task(cfg, data)
    check_model_accepts(model, task, data["sets"]["train"], cfg["model"]["name"])
    test_sets = build_test_sets(cfg)
    for name, dataset in test_sets.items():  # before training: a resolution the model refuses fails now
        check_model_accepts(model, task, dataset, cfg["model"]["name"], what=f"test file {name!r}")
    eval_set = monitored_set(data["sets"], test_sets)
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    trainer = Trainer(model, task, data["sets"]["train"], eval_set, tcfg, run_dir, experiment=cfg,
                      device=device, dist_info=dist, progress=progress, interrupt_at=interrupt_at)
    if dist.is_main and progress is not False:
        tests = f" + test files {', '.join(f'{k} ({len(v)})' for k, v in test_sets.items())}" if test_sets else ""
        print(f"{cfg.get('preset', 'experiment')} [{cfg.get('scale', '?')}]: model {cfg['model']['name']} with "
              f"{count_parameters(model):,} parameters; {len(data['sets']['train'])} train / "
              f"{len(data['sets'].get('test', []))} test samples from {data['path']}{tests}", flush=True)
    history = trainer.fit(resume=resume)
    final = dict(history[-1].get("eval", {})) if history else {}
    file_metrics = {}
    if test_sets:
        trainer.model.eval()
        file_metrics = {name: task.evaluate(trainer.model, trainer.eval_batches(ds)) for name, ds in test_sets.items()}
        trainer.log_extra({"epoch": trainer.epoch - 1, "test_files": file_metrics})
        final.update({f"{name}/{trainer.monitor_key}": m[trainer.monitor_key] for name, m in file_metrics.items()})
    if dist.is_main:
        write_summary(cfg, history, count_parameters(model), run_dir, monitor=trainer.monitor_key,
                      mode=trainer.monitor_mode, test_files=file_metrics)
    return final


def monitored_set(sets: dict[str, Any], test_sets: dict[str, Any]):
    """What the trainer evaluates each epoch (and selects ``best.pt`` by): the validation split, else the test
    split, else the first test file."""
    for name in ("val", "test"):
        if name in sets and len(sets[name]):
            return sets[name]
    return next(iter(test_sets.values()), None)


def write_summary(cfg: dict[str, Any], history: list[dict[str, Any]], n_params: int, run_dir: Path,
                  monitor: str = "rel_l2", mode: str = "min", test_files: dict[str, dict[str, Any]] | None = None) -> None:
    """``summary.md``: the run's settings, the final evaluation and one row per separate test file."""
    final = history[-1].get("eval", {}) if history else {}
    pick = min if mode == "min" else max
    best = pick((h["eval"][monitor] for h in history if "eval" in h), default=float("nan"))
    lines = [f"# {cfg.get('preset', 'experiment')} — scale `{cfg.get('scale', '?')}`", "",
             f"- model: `{cfg['model']['name']}`, {n_params:,} parameters",
             f"- data: {json.dumps({k: v for k, v in cfg['data'].items()})}",
             f"- training: {len(history)} epochs, final train loss {history[-1]['train_loss']:.5g}" if history else "",
             f"- time: {sum(h['seconds'] for h in history):.1f} s of training",
             f"- best eval {'rel. L2' if monitor == 'rel_l2' else monitor} over epochs: {best:.5g} "
             "(the table reports the final model)", "",
             "| metric | value |", "| --- | --- |"]
    lines += [f"| {k} | {v:.5g} |" for k, v in final.items() if isinstance(v, (int, float))]
    if test_files:
        keys = [k for k in next(iter(test_files.values())) if isinstance(next(iter(test_files.values()))[k], (int, float))]
        lines += ["", "Separate test files (the final model, the training normalizers):", "",
                  "| test file | " + " | ".join(keys) + " |", "| --- |" + " --- |" * len(keys)]
        lines += [f"| {name} | " + " | ".join(f"{m.get(k, float('nan')):.5g}" for k in keys) + " |"
                  for name, m in test_files.items()]
    lines += ["", "Metric definitions: see `neurodyn.train.sequence_task`." if cfg.get("task") == "sequence" else
              "Metric definitions: see `neurodyn.train.metrics` (PDEBench conventions).", "",
              "![predictions](predictions.png)", "", "![learning curve](learning_curve.png)", ""]
    (run_dir / "summary.md").write_text("\n".join(lines))
