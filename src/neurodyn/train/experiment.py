"""From an experiment config (a merged preset) to data, model, trainer, metrics, plots and summary.

This is the glue the CLI calls: ``run_experiment(cfg, run_dir)`` generates (or reuses) the dataset,
fits the normalizers on the training split, builds the model with the data's channel counts, trains
with the one trainer and writes ``summary.md`` and the plots.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
import yaml

from ..data.datasets import SteadyDataset, split_indices
from ..data.generators import get_generator
from ..data.normalize import Normalizer
from ..data.store import StoredDataset
from ..errors import ConfigError, DataError
from ..models import build, count_parameters
from .checkpoint import read_checkpoint
from .distributed import DistInfo, barrier
from .losses import build_loss
from .tasks import SteadyTask
from .trainer import TrainConfig, Trainer

DATA_KEYS = ("generator", "path", "n_train", "n_val", "n_test", "seed", "chunk_size", "normalize_input",
             "normalize_target", "normalize_reduce")
TASKS = ("steady",)


def data_options(data_cfg: dict[str, Any]) -> dict[str, Any]:
    """The generator's own options: everything in ``data`` that is not a split/normalisation key."""
    return {k: v for k, v in data_cfg.items() if k not in DATA_KEYS}


def ensure_dataset(data_cfg: dict[str, Any], device: str | torch.device = "cpu", progress: bool = True,
                   dist: DistInfo | None = None) -> Path:
    """Path of the store file the config describes, generating it first when missing (rank 0 only)."""
    dist = dist or DistInfo()
    if data_cfg.get("path"):
        return Path(data_cfg["path"])
    if "generator" not in data_cfg:
        raise ConfigError("the data section needs either 'generator' (to make the data) or 'path' (a store file)")
    gen = get_generator(data_cfg["generator"])
    gcfg = gen.make_config(**data_options(data_cfg))
    n = int(data_cfg.get("n_train", 0)) + int(data_cfg.get("n_val", 0)) + int(data_cfg.get("n_test", 0))
    seed = int(data_cfg.get("seed", 0))
    path = gen.default_path(gcfg, n, seed)
    if dist.is_main and not path.exists():
        gen.run(gcfg, n, seed=seed, path=path, device=device, chunk_size=data_cfg.get("chunk_size"),
                progress=progress)
    barrier()
    return path


def build_data(cfg: dict[str, Any], device="cpu", progress=True, dist=None) -> dict[str, Any]:
    """Store file, split datasets and fitted normalizers of an experiment."""
    d = cfg["data"]
    if cfg.get("task", "steady") not in TASKS:
        raise ConfigError(f"task {cfg.get('task')!r} is not available yet; known tasks: {', '.join(TASKS)}")
    path = ensure_dataset(d, device, progress, dist)
    store = StoredDataset(path)
    splits = split_indices(store.n_samples, int(d.get("n_train", 0)), int(d.get("n_test", 0)), int(d.get("n_val", 0)))
    sets = {name: SteadyDataset(store, ids) for name, ids in splits.items()}
    reduce = d.get("normalize_reduce", "pointwise")
    x_train, y_train = sets["train"].tensors()
    x_norm = Normalizer(d.get("normalize_input", "gaussian"), reduce).fit(x_train)
    y_norm = Normalizer(d.get("normalize_target", "gaussian"), reduce).fit(y_train)
    return {"path": path, "store": store, "sets": sets, "x_norm": x_norm, "y_norm": y_norm}


def build_model(cfg: dict[str, Any], train_set: SteadyDataset) -> torch.nn.Module:
    m = dict(cfg["model"])
    if "name" not in m:
        raise ConfigError("the model section needs a 'name' (see `neurodyn info models`)")
    name = m.pop("name")
    for key, have in (("in_channels", train_set.in_channels), ("out_channels", train_set.out_channels)):
        if m.get(key) not in (None, have):
            raise ConfigError(f"model.{key}={m[key]} but the dataset's {'inputs' if key[0] == 'i' else 'targets'} "
                              f"have {have} channel(s); drop the override or choose other fields")
        m[key] = have
    return build(name, m)


def build_task(cfg: dict[str, Any], data: dict[str, Any]):
    t = cfg["train"]
    name = t.get("loss", "rel_l2")
    kwargs = {"weight": t.get("grad_loss_weight", 0.1)} if name == "rel_l2+grad" else {}
    return SteadyTask(build_loss(name, **kwargs), data["x_norm"], data["y_norm"])


def train_config(cfg: dict[str, Any]) -> TrainConfig:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(cfg["train"]) - fields)
    if unknown:
        raise ConfigError(f"train section has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
    return TrainConfig(**cfg["train"])


def run_experiment(cfg: dict[str, Any], run_dir: str | Path, device: str | torch.device = "cpu",
                   resume: bool = True, dist: DistInfo | None = None, progress: bool | None = None,
                   interrupt_at=None) -> dict[str, Any]:
    """Train the experiment ``cfg`` into ``run_dir``; returns the final evaluation metrics."""
    dist = dist or DistInfo()
    run_dir = Path(run_dir)
    tcfg = train_config(cfg)
    torch.manual_seed(tcfg.seed)
    data = build_data(cfg, device, progress is not False, dist)
    model = build_model(cfg, data["sets"]["train"])
    task = build_task(cfg, data)
    eval_set = data["sets"].get("val", data["sets"]["test"]) if cfg["data"].get("n_test", 0) or "val" in data["sets"] else None
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    trainer = Trainer(model, task, data["sets"]["train"], eval_set, tcfg, run_dir, experiment=cfg,
                      device=device, dist_info=dist, progress=progress, interrupt_at=interrupt_at)
    if dist.is_main:
        print(f"{cfg.get('preset', 'experiment')} [{cfg.get('scale', '?')}]: model {cfg['model']['name']} with "
              f"{count_parameters(model):,} parameters; {len(data['sets']['train'])} train / "
              f"{len(data['sets'].get('test', []))} test samples from {data['path']}")
    history = trainer.fit(resume=resume)
    final = history[-1].get("eval", {}) if history else {}
    if dist.is_main:
        from .. import plots

        test = data["sets"].get("test")
        if test is not None and len(test):
            n = min(tcfg.n_plot, len(test))
            batch = trainer._collate(test, list(range(n)))
            model.eval()
            with torch.no_grad():
                pred = task.predict(model, batch)
            plots.plot_predictions(batch["x"], batch["y"], pred, run_dir / "predictions.png")
        plots.plot_learning_curve(history, run_dir / "learning_curve.png")
        write_summary(cfg, history, count_parameters(model), run_dir)
    return final


def write_summary(cfg: dict[str, Any], history: list[dict[str, Any]], n_params: int, run_dir: Path) -> None:
    final = history[-1].get("eval", {}) if history else {}
    best = min((h["eval"]["rel_l2"] for h in history if "eval" in h), default=float("nan"))
    lines = [f"# {cfg.get('preset', 'experiment')} — scale `{cfg.get('scale', '?')}`", "",
             f"- model: `{cfg['model']['name']}`, {n_params:,} parameters",
             f"- data: {json.dumps({k: v for k, v in cfg['data'].items()})}",
             f"- training: {len(history)} epochs, final train loss {history[-1]['train_loss']:.5g}" if history else "",
             f"- time: {sum(h['seconds'] for h in history):.1f} s of training",
             f"- best eval rel. L2 over epochs: {best:.5g} (the table reports the final model)", "",
             "| metric | value |", "| --- | --- |"]
    lines += [f"| {k} | {v:.5g} |" for k, v in final.items() if isinstance(v, (int, float))]
    lines += ["", "Metric definitions: see `neurodyn.train.metrics` (PDEBench conventions).", "",
              "![predictions](predictions.png)", "", "![learning curve](learning_curve.png)", ""]
    (run_dir / "summary.md").write_text("\n".join(lines))


def evaluate_run(run: str | Path, device: str | torch.device = "cpu", which: str = "last") -> dict[str, Any]:
    """Re-evaluate a finished run's checkpoint on its test split with its saved normalizers."""
    run = Path(run)
    path = run if run.is_file() else run / "checkpoints" / f"{which}.pt"
    ckpt = read_checkpoint(path, map_location=device)
    cfg = ckpt.get("experiment")
    if not cfg:
        raise DataError(f"checkpoint {path} holds no experiment config; it was not written by the trainer")
    store = StoredDataset(ensure_dataset(cfg["data"], device))
    d = cfg["data"]
    ids = split_indices(store.n_samples, int(d["n_train"]), int(d.get("n_test", 0)), int(d.get("n_val", 0)))["test"]
    test = SteadyDataset(store, ids)
    norms = {}
    for key, spec in ckpt["normalizer_kinds"].items():
        norms[key] = Normalizer(spec["kind"], spec["reduce"])
        norms[key].load_state_dict(ckpt["normalizers"][key])
    model = build(ckpt["model"]["name"], ckpt["model"]["config"])
    model.load_state_dict(ckpt["model_state"])
    task = SteadyTask(build_loss("rel_l2"), norms["input"], norms["target"]).to(torch.device(device))
    trainer = Trainer(model, task, test, None, TrainConfig(**ckpt["train_config"]), run if run.is_dir() else run.parent,
                      device=device, progress=False)
    model.eval()
    return task.evaluate(model, trainer.eval_batches(test))
