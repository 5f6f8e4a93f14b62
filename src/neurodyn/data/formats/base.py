"""What every reader of public dataset files returns, and the checks they share.

A reader turns a public file (or folder) into a :class:`PublicDataset`: per-sample arrays already in
the project's layout (channels-last ``(N, *spatial, C)`` for steady sets, ``(N, T, *spatial, C)``
for time series), read lazily sample range by sample range so a file larger than memory converts
chunk by chunk, plus small ``params`` (per-sample) and ``coords`` (shared) arrays held in memory.

Every failure is a :class:`~neurodyn.errors.DataError` (bad file) or
:class:`~neurodyn.errors.ConfigError` (bad reader option) of one sentence naming the file, the array,
the shape found and the shape expected.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from ..store import check_in_range

READER_VERSION = "1"
"""Bump when a reader's output bytes change for the same input file and options."""

Fetch = Callable[[int, int], np.ndarray]
"""``fetch(lo, hi)`` returns samples ``lo:hi`` (of the selected samples) in the final layout."""


@dataclass
class ArraySource:
    """One lazily read per-sample array: its final shape ``(N, ...)``, a label for messages, a fetcher, and the
    dtype it is stored as (float32, except integer arrays such as class labels and masks)."""

    shape: tuple[int, ...]
    label: str
    fetch: Fetch
    dtype: Any = np.float32


class PublicDataset:
    """A public dataset read into the project's layout.

    Attributes: ``format`` (reader name, e.g. ``"fno-mat"``), ``kind`` (the layout variant found,
    e.g. ``"darcy"``), ``path`` (what was read), ``files`` (every file read), ``n_samples``,
    ``fields`` (name -> :class:`ArraySource`), ``params`` / ``coords`` (name -> array), ``inputs`` /
    ``targets`` (field names), ``info`` (JSON-able description: channel names, source keys, choices
    made) and ``options`` (the reader options in force, defaults included).

    ``data["fields/u"]`` (or ``data["u"]``) reads a whole array; ``data.read("u", lo, hi)`` a sample
    range. Every field read is checked for NaN/Inf, naming the source array and the sample index.
    """

    def __init__(self, *, format: str, kind: str, path: Path, files: list[Path], fields: Mapping[str, ArraySource],
                 params: Mapping[str, np.ndarray] | None = None, coords: Mapping[str, np.ndarray] | None = None,
                 inputs: tuple[str, ...], targets: tuple[str, ...], info: Mapping[str, Any] | None = None,
                 options: Mapping[str, Any] | None = None, param_labels: Mapping[str, str] | None = None):
        self.format, self.kind, self.path, self.files = format, kind, Path(path), [Path(f) for f in files]
        self.fields = dict(fields)
        self.params = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in (params or {}).items()}
        # (reshaped: ascontiguousarray makes a 0-d array 1-d, and a scalar such as n_classes stays a scalar)
        self.coords = {k: np.ascontiguousarray(v, dtype=np.float32).reshape(np.shape(v))
                       for k, v in (coords or {}).items()}
        self.inputs, self.targets = tuple(inputs), tuple(targets)
        self.info = dict(info or {})
        self.options = dict(options or {})
        ns = {src.shape[0] for src in self.fields.values()} | {p.shape[0] for p in self.params.values()}
        if len(ns) != 1:
            sizes = {**{f"fields/{k}": s.shape[0] for k, s in self.fields.items()},
                     **{f"params/{k}": v.shape[0] for k, v in self.params.items()}}
            raise DataError(f"{self.path}: arrays disagree on the number of samples ({sizes}); expected one count")
        self.n_samples = ns.pop()
        if self.n_samples < 1:
            raise DataError(f"{self.path} holds no samples; expected at least one")
        for name in (*self.inputs, *self.targets):
            if name not in self.fields:
                raise DataError(f"reader {format} names field {name!r} as input/target but made {sorted(self.fields)}")
        labels = dict(param_labels or {})
        for k, v in self.params.items():
            check_finite(v, labels.get(k, f"parameter {k!r} of {self.path}"))
        for k, v in self.coords.items():
            bad = ~np.isfinite(v)
            if bad.any():
                raise DataError(f"{self.path}: coordinate array {k!r} holds NaN or Inf; expected finite values")

    # ----------------------------------------------------------------------------------------------
    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        out = {f"fields/{k}": tuple(s.shape) for k, s in self.fields.items()}
        out.update({f"params/{k}": tuple(v.shape) for k, v in self.params.items()})
        out.update({f"coords/{k}": tuple(v.shape) for k, v in self.coords.items()})
        return out

    def sample_nbytes(self) -> int:
        """float32 bytes of one sample over all fields and params."""
        return 4 * sum(int(np.prod(s.shape[1:])) for s in self.fields.values()) + \
            4 * sum(int(np.prod(v.shape[1:])) for v in self.params.values())

    def read(self, key: str, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Samples ``lo:hi`` of ``fields/<name>`` / ``params/<name>`` (or all of ``coords/<name>``)."""
        group, name = key.split("/", 1) if "/" in key else ("fields", key)
        hi = self.n_samples if hi is None else min(hi, self.n_samples)
        if group == "coords" and name in self.coords:
            return self.coords[name]
        if group == "params" and name in self.params:
            return self.params[name][lo:hi]
        if group != "fields" or name not in self.fields:
            raise DataError(f"{self.path}: no array {key!r} was read; there are {sorted(self.shapes)}")
        src = self.fields[name]
        raw = src.fetch(lo, hi)
        check_in_range(raw, np.dtype(src.dtype), src.label, offset=lo)
        arr = np.ascontiguousarray(raw, dtype=src.dtype)
        want = (hi - lo, *src.shape[1:])
        if arr.shape != want:  # a reader bug rather than a bad file, but say it plainly
            raise DataError(f"{src.label}: read samples {lo}:{hi} with shape {arr.shape}, expected {want}")
        check_finite(arr, src.label, offset=lo)
        return arr

    def __getitem__(self, key: str) -> np.ndarray:
        return self.read(key)

    def chunk(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Samples ``lo:hi`` of every field and param, keyed ``fields/<name>`` / ``params/<name>``."""
        out = {f"fields/{k}": self.read(f"fields/{k}", lo, hi) for k in sorted(self.fields)}
        out.update({f"params/{k}": self.params[k][lo:hi] for k in sorted(self.params)})
        return out

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}{v}" for k, v in sorted(self.shapes.items()))
        return f"PublicDataset({self.format}/{self.kind}, {self.n_samples} samples: {shapes})"


# --------------------------------------------------------------------------------------------------
# Checks and small helpers shared by the readers
# --------------------------------------------------------------------------------------------------

def check_finite(arr: np.ndarray, label: str, offset: int = 0) -> None:
    """Raise naming ``label`` and the first sample (``offset`` + row) holding NaN or Inf."""
    if arr.size == 0 or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.complexfloating)):
        return
    bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1) if arr.ndim else ~np.isfinite(arr)
    if np.any(bad):
        idx = offset + int(np.argmax(bad)) if arr.ndim else 0
        raise DataError(f"{label} holds NaN or Inf in sample {idx}; expected finite values (clean the file, or "
                        f"convert fewer samples with max_samples={idx} if the damage is at the end)")


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
        raise ConfigError(f"reader {reader!r} has no option(s) {', '.join(unknown)}; its options are: "
                          f"{', '.join(sorted(known))}")
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
    return DataError(f"{what} {path} could not be read; it is truncated, damaged or not of the expected "
                     f"format ({detail})")


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
