"""Checkpoint files: written atomically, read with ``weights_only=True`` and clear errors.

Neutral ground for every layer that stores tensors: ``models.save`` / ``models.load`` and the trainer
(``neurodyn.train.checkpoint`` holds the trainer's own state: RNG states and the resume position).
"""
from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from .errors import DataError


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


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Delete the temporary files ``.<name>.<pid>.tmp`` that :func:`atomic_torch_save` leaves when its process is
    killed mid-write; returns what was removed. Call it where no other process of the run is writing."""
    folder = Path(folder)
    stale = sorted(folder.glob(".*.tmp")) if folder.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


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
        hint = ""
        if path.name == "last.pt" and path.parent.name == "checkpoints":
            hint = ("; evaluate the run's best checkpoint with `neurodyn evaluate RUN --which best`, or start "
                    "the run over with `neurodyn train ... --fresh`")
        raise DataError(f"checkpoint {path} is truncated or not a neurodyn checkpoint ({first[:200]}){hint}") from None
    if not isinstance(obj, dict):
        raise DataError(f"checkpoint {path} holds a {type(obj).__name__}, expected a dict written by neurodyn")
    return obj
