"""Trainer checkpoints (the file I/O is :mod:`neurodyn.checkpoint_io`) and the resume check.

A trainer checkpoint is a dict of plain data and tensors: ``model`` (registered name + config),
``model_state``, ``optimizer``, ``scheduler``, ``normalizers``, ``position`` (epoch, batch, global
step), ``rng`` (torch, CUDA, numpy, python states), ``best``, ``experiment`` (the full config).
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from ..data.assembly import without_generator
from ..errors import ConfigError


def rng_state() -> dict[str, Any]:
    """Every RNG state a training step can touch, as weights_only-loadable data."""
    np_state = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
        "python": _tuples_to_lists(random.getstate()),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"].cpu())
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), *rest))
    random.setstate(_lists_to_tuples(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _tuples_to_lists(v: Any) -> Any:
    return [_tuples_to_lists(x) for x in v] if isinstance(v, (tuple, list)) else v


def _lists_to_tuples(v: Any) -> Any:
    return tuple(_lists_to_tuples(x) for x in v) if isinstance(v, list) else v


def _config_differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested config dicts (added and removed keys included)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(old) + [k for k in new if k not in old]:
            key = f"{prefix}{k}"
            if k not in old or k not in new:
                out.append(key)
            else:
                out += _config_differences(old[k], new[k], key + ".")
        return out
    return [] if old == new else [prefix.rstrip(".") or "<root>"]


PROSE_KEYS = ("description",)  # a preset's text: rewording it changes nothing that was trained


def check_resume_config(cfg: dict[str, Any], run_dir: Path, tcfg: Any) -> None:
    """Refuse to resume a run folder whose checkpoint was trained with another config.

    A resumed run continues the saved optimizer, scheduler (whose length is fixed by the epochs and batches
    it was built for) and data split, so a changed config would silently train something that is neither
    the old run nor the new one. The preset's prose (``description``) is not compared. The one change allowed is
    more ``train.epochs``: the run continues to the new count (see :mod:`neurodyn.train.schedule` for what the
    learning-rate schedule does then); and a longer ``train.time_limit`` (or none, 0): a run its limit stopped
    trains on, in the same schedule, until the new limit or its epochs. A run folder written with the former flat
    train section (before ``train.schedule`` / ``rollout`` / ``logging``) is refused in one sentence saying so
    (``tcfg``: the parsed train section of ``cfg``, whose fields are today's train options).
    """
    saved = run_dir / "config.yaml"
    if not (run_dir / "checkpoints" / "last.pt").exists() or not saved.exists():
        return
    try:
        old = yaml.safe_load(saved.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"cannot resume {run_dir}: its config.yaml is not readable YAML ({err})") from None
    old_train = old.get("train") if isinstance(old, dict) else None
    former = _former_train_layout(old_train, tcfg) if isinstance(old_train, dict) else []
    if former:
        raise ConfigError(
            f"run folder {run_dir} was trained with the former layout of the train section (flat keys "
            f"such as train.{former[0]}; the options that belong together are "
            "the sections train.schedule, train.rollout and train.logging now), so its config cannot be "
            "compared: train into a new run folder (neurodyn train --run-name NAME) or start this one "
            "over (--fresh); its checkpoints still load (neurodyn evaluate, neurodyn.load_run)"
        )
    if isinstance(old, dict) and isinstance(old.get("data"), dict):  # what the run recorded of its file is no setting
        old = {**old, "data": without_generator({k: v for k, v in old["data"].items() if k != "file"})}
    diff = [k for k in _config_differences(old, json.loads(json.dumps(cfg))) if k not in PROSE_KEYS]
    if "train.time_limit" in diff and _longer_time_limit(
        _lookup(old, "train.time_limit"), _lookup(cfg, "train.time_limit")
    ):
        diff.remove("train.time_limit")  # a longer limit (or none) continues a run its limit stopped
    if not diff:
        return
    if (
        diff == ["train.epochs"]
        and isinstance(_lookup(old, diff[0]), int)
        and _lookup(cfg, diff[0]) > _lookup(old, diff[0])
    ):
        return  # more epochs: the run continues (neurodyn.train.schedule: a new segment over the added epochs)
    if "train.epochs" in diff and len(diff) == 1:
        raise ConfigError(
            f"run folder {run_dir} was trained for train.epochs={_lookup(old, 'train.epochs')}; a run "
            "can be extended (more epochs) but not shortened: evaluate its checkpoints instead, train "
            "into a new run folder (--run-name NAME) or start this one over (--fresh)"
        )
    if diff:
        shown = ", ".join(f"{k} ({_lookup(old, k)!r} -> {_lookup(cfg, k)!r})" for k in diff[:6])
        more = f" and {len(diff) - 6} more" if len(diff) > 6 else ""
        raise ConfigError(
            f"run folder {run_dir} holds a checkpoint trained with another config: {shown}{more}; "
            "train into a new run folder (neurodyn train --run-name NAME) or start this one over "
            "(--fresh)"
        )


def _former_train_layout(train: dict[str, Any], tcfg: Any) -> list[str]:
    """The keys of a saved ``train`` section that are no option of today's train config (the fields of ``tcfg``, a
    :class:`~neurodyn.train.trainer.TrainConfig`): a config.yaml is written after its config was validated, so such
    a key was an option when the run was made, in the flat layout before the train options were grouped in
    sections."""
    known = {f.name for f in dataclasses.fields(tcfg)}
    return [k for k in train if k not in known]


def _longer_time_limit(old: Any, new: Any) -> bool:
    """Whether ``train.time_limit`` changed from ``old`` to a longer limit or to none (0; absent: 0)."""
    old, new = (0 if v == "<absent>" else v for v in (old, new))
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new)):
        return False
    return new == 0 or (old != 0 and new >= old)


def _lookup(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(cfg, dict) or part not in cfg:
            return "<absent>"
        cfg = cfg[part]
    return cfg
