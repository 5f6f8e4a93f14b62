"""The kit every reader of public dataset files shares: its options (:class:`ReaderOptions`, :func:`make_options`),
its checks and the errors of a damaged file.

A reader turns a public file (or folder) into a :class:`~neurodyn.data.public_dataset.PublicDataset` (defined below
the readers, in :mod:`neurodyn.data.public_dataset`, and named here too): per-sample arrays already in the project's
layout, read lazily sample range by sample range.

Every failure is a :class:`~neurodyn.errors.DataError` (bad file) or
:class:`~neurodyn.errors.ConfigError` (bad reader option) of one sentence naming the file, the array,
the shape found and the shape expected.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from ..public_dataset import ArraySource, Fetch, PublicDataset, check_finite

READER_VERSION = "1"
"""Bump when a reader's output bytes change for the same input file and options."""

# --------------------------------------------------------------------------------------------------
# Checks and small helpers shared by the readers
# --------------------------------------------------------------------------------------------------


def require_shape(label: str, shape: tuple[int, ...], expected: str, ok: bool) -> None:
    """Raise ``DataError`` saying ``label`` has ``shape`` when ``expected`` (a description) was wanted."""
    if not ok:
        raise DataError(f"{label} has shape {tuple(int(s) for s in shape)}, expected {expected}")


def select(n: int, max_samples: int) -> int:
    """Number of samples kept: all ``n``, or the first ``max_samples`` when that is > 0."""
    return n if max_samples <= 0 else min(n, max_samples)


def stride_slices(stride: int | tuple[int, ...], ndim: int, label: str = "stride") -> tuple[slice, ...]:
    """``(::s1, ::s2, ...)`` for ``ndim`` spatial axes from one int or one int per axis."""
    s = (stride,) * ndim if isinstance(stride, int) else tuple(stride)
    if len(s) != ndim:
        raise ConfigError(f"option {label} has {len(s)} values for {ndim} spatial axes; give one int or {ndim}")
    return tuple(slice(None, None, int(v)) for v in s)


def strided_len(n: int, step: int) -> int:
    return -(-n // step)


@dataclass
class ReaderOptions:
    """Options every reader accepts.

    ``max_samples``: convert only the first samples (0: all). ``stride``: keep every ``stride``-th
    grid point along each spatial axis (an int, or one int per axis), as FNO's ``[::r]`` sub-sampling
    (421 -> 85 points for ``stride=5``). ``time_stride``: keep every ``time_stride``-th snapshot.
    """

    max_samples: int = 0
    stride: Any = 1
    time_stride: int = 1


def make_options(cls: type, reader: str, options: Mapping[str, Any]):
    """Build the options dataclass ``cls`` from ``options``; unknown names and bad values raise ConfigError."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"reader {reader!r} has no option(s) {', '.join(unknown)}; its options are: {', '.join(sorted(known))}"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    opts = cls(**values)
    if not isinstance(opts.max_samples, int) or opts.max_samples < 0:
        raise ConfigError(f"option max_samples must be an int >= 0 (0: all samples), got {opts.max_samples!r}")
    strides = (opts.stride,) if isinstance(opts.stride, int) else tuple(opts.stride)
    if not strides or not all(isinstance(s, int) and s >= 1 for s in strides):
        raise ConfigError(f"option stride must be an int >= 1 or a list of them, got {opts.stride!r}")
    if not isinstance(opts.time_stride, int) or opts.time_stride < 1:
        raise ConfigError(f"option time_stride must be an int >= 1, got {opts.time_stride!r}")
    return opts


def options_dict(opts) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(opts).items()}


def read_failed(path: Path, exc: BaseException, what: str = "file") -> DataError:
    """The error for a file that a library could not parse: truncated, damaged or not of that format."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DataError(
        f"{what} {path} could not be read; it is truncated, damaged or not of the expected format ({detail})"
    )


def load_torch_file(path: Path) -> Any:
    """What ``torch.save`` wrote to ``path``, loaded with ``weights_only=True`` (anything but tensors and plain
    containers is refused, not executed); a damaged file is one DataError."""
    import torch

    from ...checkpoint_io import unsafe_pickle_reason

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = unsafe_pickle_reason(exc) or str(exc).strip().splitlines()[0]
        raise DataError(
            f"file {path} holds objects other than tensors and plain containers, which are not loaded "
            f"(torch.load weights_only=True refused {reason}); re-save it as a dict of tensors"
        ) from None
    except Exception as exc:  # truncated zip, bad magic number, ...
        raise read_failed(path, exc, "torch file") from None


def as_1d(arr: np.ndarray) -> np.ndarray:
    """A coordinate vector stored as (1, n), (n, 1) or (n,) as (n,)."""
    arr = np.asarray(arr)
    return arr.reshape(-1) if arr.ndim <= 1 or sum(s > 1 for s in arr.shape) <= 1 else arr


def open_h5(path: Path):
    """``h5py.File(path, "r")``, with a truncated or damaged file reported as one DataError."""
    import h5py

    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise read_failed(path, exc, "HDF5 file") from None


def h5_read(path: Path, key: str, index: Any = ()) -> np.ndarray:
    """``f[key][index]`` from a freshly opened file; a failed read (damaged data) is one DataError."""
    with open_h5(path) as f:
        try:
            return np.asarray(f[key][index])
        except (OSError, ValueError, KeyError) as exc:
            raise read_failed(path, exc, f"array {key!r} of HDF5 file") from None


__all__ = [
    "ArraySource",
    "Fetch",
    "PublicDataset",
    "READER_VERSION",
    "ReaderOptions",
    "as_1d",
    "check_finite",
    "h5_read",
    "load_torch_file",
    "make_options",
    "open_h5",
    "options_dict",
    "read_failed",
    "require_shape",
    "select",
    "stride_slices",
    "strided_len",
]
