"""Checkpoint files: written atomically, read with ``weights_only=True`` and clear errors.

A trainer checkpoint is a dict of plain data and tensors: ``model`` (registered name + config),
``model_state``, ``optimizer``, ``scheduler``, ``normalizers``, ``position`` (epoch, batch, global
step), ``rng`` (torch, CUDA, numpy, python states), ``best``, ``experiment`` (the full config).
"""
from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DataError


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint dict; missing, truncated or foreign files raise one DataError naming the file."""
    path = Path(path)
    if path.is_dir():
        for name in ("last.pt", "best.pt"):
            if (path / "checkpoints" / name).exists():
                path = path / "checkpoints" / name
                break
        else:
            raise DataError(f"run folder {path} has no checkpoints/last.pt or checkpoints/best.pt")
    if not path.exists():
        raise DataError(f"checkpoint {path} does not exist")
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"checkpoint {path} is truncated or not a neurodyn checkpoint ({first[:200]})") from None
    if not isinstance(obj, dict):
        raise DataError(f"checkpoint {path} holds a {type(obj).__name__}, expected a dict written by neurodyn")
    return obj


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
