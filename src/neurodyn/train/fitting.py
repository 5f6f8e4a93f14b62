"""Train any ``nn.Module`` with the library trainer: ``neurodyn.train.fit(model, train, val, run_dir=...)``.

The model maps an input field to an output field (``model(x)``, or ``model(x, pos=..., ctx=...)`` when the samples
carry them); the data are ``(x, y)`` tensor pairs or a dataset of ``{"x": ..., "y": ...}`` dicts. It trains like a
preset's run: inputs and targets normalised with statistics of the training data (``normalize``), the loss on
physical units, exact resume, the validation data selecting ``checkpoints/best.pt``, every trainer option
(``precision``, ``accumulate``, ``early_stop``, ``log``, ...). The checkpoint holds the state dict, the
normalizers and what rebuilds the module: its class and the ``init`` arguments, so ``neurodyn.load_run(run_dir)``
predicts in physical units wherever the class is importable (or with ``load_run(run_dir, model=MyNet(...))``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn
from torch.utils.data import Dataset

from ..data.normalize import Normalizer
from ..errors import ConfigError
from .checkpoint import check_resume_config
from .run_folder import check_trainable, foreign_config, open_run_folder, training_lock
from .tasks import SteadyTask
from .trainer import TrainConfig, Trainer


class PairDataset(Dataset):
    """``(x, y)`` tensors of equal length as a dataset of ``{"x", "y"}`` dicts."""

    def __init__(self, x, y):
        self.x, self.y = torch.as_tensor(x).float(), torch.as_tensor(y).float()
        if len(self.x) != len(self.y):
            raise ConfigError(f"x and y hold {len(self.x)} and {len(self.y)} samples; expected the same number")

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i]}

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.y


def _as_dataset(data, what: str) -> Dataset | None:
    if data is None or isinstance(data, Dataset):
        return data
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return PairDataset(*data)
    raise ConfigError(
        f"{what} must be an (x, y) pair of tensors or a Dataset of {{'x', 'y'}} dicts; got {type(data).__name__}"
    )


def _stacked(dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    if hasattr(dataset, "tensors"):
        return dataset.tensors()
    items = [dataset[i] for i in range(len(dataset))]
    return torch.stack([it["x"] for it in items]), torch.stack([it["y"] for it in items])


def fit(
    model: nn.Module,
    train,
    val=None,
    *,
    run_dir: str | Path,
    init: dict[str, Any] | None = None,
    normalize: str = "gaussian",
    normalize_reduce: str = "pointwise",
    device: str | torch.device = "cpu",
    resume: bool = True,
    progress: bool | None = False,
    **train_options: Any,
) -> list[dict[str, Any]]:
    """Train ``model`` on ``train`` (validated on ``val``) into ``run_dir``; returns the per-epoch history.

    ``init``: the module's constructor arguments, saved so the run can rebuild it. ``normalize``: ``gaussian`` |
    ``minmax`` | ``none`` for inputs and targets, fitted on ``train``. ``train_options``: any ``train.*`` setting
    (``epochs``, ``batch_size``, ``lr``, ``loss``, ``precision``, ``accumulate``, ``early_stop``, ..., and the sections
    as mappings: ``schedule={"name": "cosine"}``, ``logging={"to": "csv"}``; see
    :class:`neurodyn.train.trainer.TrainConfig`). Running it again resumes (``resume=False`` starts over).
    """
    tcfg = TrainConfig.from_options(train_options, unknown="fit() got unknown training option(s)", prefix="")
    train_set, val_set = _as_dataset(train, "train"), _as_dataset(val, "val")
    if len(train_set) == 0:
        raise ConfigError("fit() got no training samples (train holds 0); give at least one (x, y) pair")
    if val_set is not None and len(val_set) == 0:
        raise ConfigError("fit() got an empty val; give at least one (x, y) pair, or val=None for no validation")
    x, y = _stacked(train_set)
    task = SteadyTask(
        tcfg.loss_fn(), Normalizer(normalize, normalize_reduce).fit(x), Normalizer(normalize, normalize_reduce).fit(y)
    )
    if init is not None:
        model.neurodyn_init = dict(init)
    cls = type(model)
    experiment = {
        "preset": f"{cls.__module__}:{cls.__qualname__}",
        "scale": "fit",
        "task": "steady",
        "model": {"name": f"{cls.__module__}:{cls.__qualname__}"},
        "data": {"source": "neurodyn.train.fit"},
        "train": dataclasses.asdict(tcfg),
    }
    run_dir = Path(run_dir)
    check_trainable(run_dir, "fit()", "another run_dir")
    with training_lock(run_dir):
        why = foreign_config(run_dir)
        if why:
            raise ConfigError(
                f"run_dir {run_dir} holds a config.yaml that {why}, which fit() does not write over; "
                "give run_dir a new folder (or one that fit() trained)"
            )
        if resume:
            check_resume_config(experiment, run_dir, tcfg)  # changed settings are refused (more epochs continue)
        open_run_folder(run_dir)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(experiment, sort_keys=False))
        trainer = Trainer(
            model, task, train_set, val_set, tcfg, run_dir, experiment=experiment, device=device, progress=progress
        )
        return trainer.fit(resume=resume)


__all__: Sequence[str] = ("fit", "PairDataset")
