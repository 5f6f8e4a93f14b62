"""Checkpoint files: written atomically, read with ``weights_only=True`` and clear errors.

Neutral ground for every layer that stores tensors: ``models.save`` / ``models.load`` and the trainer
(``neurodyn.train.checkpoint`` holds the trainer's own state: RNG states and the resume position).
"""

from __future__ import annotations

import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from .errors import ConfigError, DataError, DiskFullError, disk_full_errno, make_room, no_room
from .files import check_not_special, temporary_path


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        if not is_disk_full(exc):
            raise
        kept = f"the previous {path.name} is kept" if path.exists() else f"no {path.name} was written"
        code = disk_full_errno(exc)
        raise DiskFullError(
            f"{no_room(code, path.parent)} (writing {path.name}); {kept}; "
            f"{make_room(code, path.parent)} and run the same command again to resume"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-space error; torch's zip writer reports one as ``RuntimeError: unexpected pos``
    with only an iostream error behind it."""
    return disk_full_errno(exc) is not None or (isinstance(exc, RuntimeError) and "unexpected pos" in str(exc))


def nonfinite_tensors(state: dict[str, Any]) -> list[str]:
    """Names of the floating-point tensors of a state dict that hold NaN or Inf."""
    return [
        name
        for name, t in state.items()
        if torch.is_tensor(t) and (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all())
    ]


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Delete the temporary files ``.<name>.<pid>.tmp`` that :func:`atomic_torch_save` leaves when its process is
    killed mid-write; returns what was removed. Call it where no other process of the run is writing."""
    folder = Path(folder)
    stale = sorted(folder.glob(".*.tmp")) if folder.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def unsafe_pickle_reason(exc: BaseException) -> str | None:
    """Why ``torch.load(weights_only=True)`` refused a file (``"the global argparse.Namespace"``, ``"the global
    posix.system"``), or ``None`` when ``exc`` is not such a refusal. torch's first lines are generic advice (and
    differ between a global it could allow and one from a module it blocks); the reason is the line that names
    the global."""
    text = str(exc).strip()
    if not (isinstance(exc, pickle.UnpicklingError) and "Weights only load failed" in text):
        return None
    named = re.search(r"GLOBAL ([\w.]+)", text)
    return f"the global {named.group(1).rstrip('.')}" if named else None


def check_device(device: str | torch.device, option: str = "--device") -> torch.device:
    """``device`` as a ``torch.device`` this machine has; one ConfigError for a name torch does not know or a GPU
    that is not there (rather than a failure, later, that reads like a damaged file)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(f"{option} {device!r} is not a device; expected cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(
                f"{option} {device}: this machine has no usable CUDA GPU (torch.cuda.is_available() "
                f"is False); leave {option} out or give {option} cpu"
            )
        if dev.index is not None and dev.index >= count:
            raise ConfigError(f"{option} {device}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ConfigError(f"{option} {device}: this machine has no usable Apple GPU; give {option} cpu")
    return dev


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint dict; missing, truncated or foreign files raise one DataError naming the file."""
    path = Path(path)
    if isinstance(map_location, (str, torch.device)):  # (torch also takes a mapping or a function)
        check_device(map_location, "device")
    if path.is_dir():
        for name in ("last.pt", "best.pt"):
            if (path / "checkpoints" / name).exists():
                path = path / "checkpoints" / name
                break
        else:
            raise DataError(f"run folder {path} has no checkpoints/last.pt or checkpoints/best.pt")
    for given in (path, *path.parents):  # a run "folder" that is a named pipe is refused as such
        check_not_special(given, "checkpoint" if given == path else "run")
    if not path.exists():
        raise DataError(f"checkpoint {path} does not exist")
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except (
        RuntimeError,
        EOFError,
        zipfile.BadZipFile,
        pickle.UnpicklingError,
        OSError,
        ValueError,
        KeyError,
        IndexError,
    ) as exc:  # KeyError, IndexError: the unpickler reading bytes that are not a pickle
        hint = ""
        if path.name == "last.pt" and path.parent.name == "checkpoints":
            hint = (
                "; evaluate the run's best checkpoint with `neurodyn evaluate RUN --which best`, or start "
                "the run over with `neurodyn train ... --fresh`"
            )
        text = str(exc).strip()
        reason = unsafe_pickle_reason(exc)
        if reason is not None:
            raise DataError(
                f"checkpoint {path} is not a neurodyn checkpoint: it holds Python objects that are not "
                f"allowed to load safely (torch.load weights_only=True): {reason}; nothing of it was "
                f"loaded or run{hint}"
            ) from None
        detail = text.split("WeightsUnpickler error:", 1)[-1].strip().splitlines()
        first = (
            "bytes that are not a pickle"
            if isinstance(exc, (KeyError, IndexError))
            else f"bytes that are not a pickle: {detail[0].split('. ')[0]}"
            if "Weights only load failed" in text
            else text.splitlines()[0]
            if text
            else type(exc).__name__
        )
        raise DataError(f"checkpoint {path} is truncated or not a neurodyn checkpoint ({first[:200]}){hint}") from None
    if not isinstance(obj, dict):
        raise DataError(f"checkpoint {path} holds a {type(obj).__name__}, expected a dict written by neurodyn")
    checkpoint_format(obj, path)
    return upgrade_checkpoint(obj)


CHECKPOINT_FORMAT = 2
"""The format of the checkpoints this neurodyn writes (``format_version`` in each). A trainer checkpoint holds the
model spec and state, optimizer, scheduler, normalizers with their kinds, the task's spec, position, RNG states,
the train config (``train_config``) and the experiment; a model checkpoint (``neurodyn.models.save``) the spec and
state. Format 2: the train config in sections (``schedule``, ``rollout``, ``logging``) and LaMO as two models
(``lamo`` on grids, ``lamo_mesh`` on meshes and point clouds). Format 1: the same with a flat train config and one
``lamo`` model with a ``variant``; format 0: format 1 before checkpoints carried their version (neurodyn 0.1).
:func:`read_checkpoint` converts formats 0 and 1 to format 2 in one place, :func:`upgrade_checkpoint` (the tables
:data:`FORMAT_1_TRAIN_KEYS` and :data:`FORMAT_1_LAMO_KEYS`). Bump the number with any change a reader must know of,
and keep reading the formats of :data:`READABLE_FORMATS`."""
READABLE_FORMATS = (0, 1, 2)

FORMAT_1_TRAIN_KEYS = {
    # format 0 / 1 (a flat train config) -> format 2: (section, key)
    "scheduler": ("schedule", "name"),
    "pct_start": ("schedule", "pct_start"),
    "step_size": ("schedule", "step_size"),
    "gamma": ("schedule", "gamma"),
    "train_mode": ("rollout", "mode"),
    "rollout_steps": ("rollout", "steps"),
    "eval_mode": ("rollout", "eval_mode"),
    "pushforward": ("rollout", "pushforward"),
    "input_noise": ("rollout", "input_noise"),
    "log": ("logging", "to"),
    "n_plot": ("logging", "n_plot"),
}
"""How a format-0 / format-1 ``train_config`` (and the experiment's ``train`` section) is read: each flat key on the
left is the right's ``section.key`` in format 2; every other train key is the same in both."""

FORMAT_1_LAMO_KEYS = {
    # the keys of format 1's one ``lamo`` config that only one of format 2's two models has
    "lamo": ("patch_size", "pad_multiple", "grid_size", "grid_transfer", "pos_embed", "pos_embed_interp"),
    "lamo_mesh": (
        "n_slices",
        "slice_heads",
        "slice_temperature",
        "slice_clamp",
        "share_encoder",
        "decoder",
        "n_points",
        "slice_normalize",
        "slice_value_projection",
        "pos_channels",
        "placeholder",
        "time_embedding",
    ),
}
"""How a format-0 / format-1 ``lamo`` model is read: ``variant="grid"`` is format 2's ``lamo``; ``"structured_mesh"``
and ``"point_cloud"`` are ``lamo_mesh`` with that ``geometry``. Each keeps the keys of its model (the other model's
keys, which format 1 stored with their defaults, are dropped); the weights are named the same."""


def upgrade_checkpoint(ckpt: dict[str, Any]) -> dict[str, Any]:
    """A format-0 or format-1 checkpoint dict read as format 2 (a format-2 one unchanged): its ``train_config``
    and the experiment's ``train`` section in sections (:data:`FORMAT_1_TRAIN_KEYS`), a ``lamo`` model spec and the
    experiment's ``lamo`` model section as the model of its variant (:data:`FORMAT_1_LAMO_KEYS`). The one place an
    older format is converted; nothing else reads the old layouts."""
    if ckpt.get("format_version", 0) >= 2:
        return ckpt
    ckpt = dict(ckpt, format_version=CHECKPOINT_FORMAT)
    if isinstance(ckpt.get("train_config"), dict):
        ckpt["train_config"] = _format_2_train(ckpt["train_config"])
    experiment = ckpt.get("experiment")
    if isinstance(experiment, dict):
        experiment = ckpt["experiment"] = dict(experiment)
        if isinstance(experiment.get("train"), dict):
            experiment["train"] = _format_2_train(experiment["train"])
        if isinstance(experiment.get("model"), dict):
            experiment["model"] = _format_2_lamo(experiment["model"], "name", experiment["model"])
    spec = ckpt.get("model")
    if isinstance(spec, dict) and isinstance(spec.get("config"), dict):
        ckpt["model"] = _format_2_lamo(spec, "name", spec["config"], nested=True)
    return ckpt


def _format_2_train(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key in FORMAT_1_TRAIN_KEYS:
            section, new = FORMAT_1_TRAIN_KEYS[key]
            out.setdefault(section, {})[new] = value
        else:
            out[key] = value
    return out


def _format_2_lamo(holder: dict[str, Any], name_key: str, config: dict[str, Any], nested: bool = False):
    """``holder`` (a model spec ``{name, config}`` when ``nested``, else a model section) with a format-1 ``lamo``
    config as format 2's model."""
    if holder.get(name_key) != "lamo" or "variant" not in config:
        return holder
    config = dict(config)
    variant = config.pop("variant")
    name = "lamo" if variant == "grid" else "lamo_mesh"
    other = FORMAT_1_LAMO_KEYS["lamo_mesh" if name == "lamo" else "lamo"]
    config = {k: v for k, v in config.items() if k not in other}
    if name == "lamo_mesh":
        config["geometry"] = variant
    return {**holder, name_key: name, "config": config} if nested else {**config, name_key: name}


def versioned(ckpt: dict[str, Any]) -> dict[str, Any]:
    """``ckpt`` with ``format_version``: :data:`CHECKPOINT_FORMAT` (what every checkpoint writer saves)."""
    return {"format_version": CHECKPOINT_FORMAT, **ckpt}


def checkpoint_format(ckpt: dict[str, Any], path: str | Path = "the checkpoint") -> int:
    """The format of a loaded checkpoint dict (0 without ``format_version``); one DataError for a format this
    neurodyn does not read (a newer one)."""
    version = ckpt.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version not in READABLE_FORMATS:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > CHECKPOINT_FORMAT
        raise DataError(
            f"checkpoint {path} has format_version {version!r}, which this neurodyn does not read "
            f"(formats {', '.join(map(str, READABLE_FORMATS))})"
            + ("; it was written by a newer neurodyn: upgrade neurodyn to load it" if newer else "")
        )
    return version
