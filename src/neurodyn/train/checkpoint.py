"""Trainer checkpoints (the file I/O is :mod:`neurodyn.checkpoint_io`).

A trainer checkpoint is a dict of plain data and tensors: ``model`` (registered name + config),
``model_state``, ``optimizer``, ``scheduler``, ``normalizers``, ``position`` (epoch, batch, global
step), ``rng`` (torch, CUDA, numpy, python states), ``best``, ``experiment`` (the full config).
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


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
