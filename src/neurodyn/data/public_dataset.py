"""What every reader of a file hands on: :class:`PublicDataset`, a file (or folder) read into the project's layout,
array by array and sample range by sample range.

A reader of :mod:`neurodyn.data.formats` (and :func:`neurodyn.data.sequence_store.build_sequences`, which every
sequence reader ends in) returns one: per-sample arrays already in the project's layout (channels-last
``(N, *spatial, C)`` for steady sets, ``(N, T, *spatial, C)`` for time series, the sequence layout of
:mod:`neurodyn.data.sequence_store`), read lazily so a file larger than memory converts chunk by chunk, plus small
``params`` (per-sample) and ``coords`` (shared) arrays held in memory. ``neurodyn convert`` writes it as a store file
(:mod:`neurodyn.data.formats.convert`). It sits below the readers: it imports nothing from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .store import check_in_range

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

    def __init__(
        self,
        *,
        format: str,
        kind: str,
        path: Path,
        files: list[Path],
        fields: Mapping[str, ArraySource],
        params: Mapping[str, np.ndarray] | None = None,
        coords: Mapping[str, np.ndarray] | None = None,
        inputs: tuple[str, ...],
        targets: tuple[str, ...],
        info: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        param_labels: Mapping[str, str] | None = None,
    ):
        self.format, self.kind, self.path, self.files = format, kind, Path(path), [Path(f) for f in files]
        self.fields = dict(fields)
        self.params = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in (params or {}).items()}
        # (reshaped: ascontiguousarray makes a 0-d array 1-d, and a scalar such as n_classes stays a scalar)
        self.coords = {
            k: np.ascontiguousarray(v, dtype=np.float32).reshape(np.shape(v)) for k, v in (coords or {}).items()
        }
        self.inputs, self.targets = tuple(inputs), tuple(targets)
        self.info = dict(info or {})
        self.options = dict(options or {})
        ns = {src.shape[0] for src in self.fields.values()} | {p.shape[0] for p in self.params.values()}
        if len(ns) != 1:
            sizes = {
                **{f"fields/{k}": s.shape[0] for k, s in self.fields.items()},
                **{f"params/{k}": v.shape[0] for k, v in self.params.items()},
            }
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
        return 4 * sum(int(np.prod(s.shape[1:])) for s in self.fields.values()) + 4 * sum(
            int(np.prod(v.shape[1:])) for v in self.params.values()
        )

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


def check_finite(arr: np.ndarray, label: str, offset: int = 0) -> None:
    """Raise naming ``label`` and the first sample (``offset`` + row) holding NaN or Inf."""
    if arr.size == 0 or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.complexfloating)):
        return
    bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1) if arr.ndim else ~np.isfinite(arr)
    if np.any(bad):
        idx = offset + int(np.argmax(bad)) if arr.ndim else 0
        raise DataError(
            f"{label} holds NaN or Inf in sample {idx}; expected finite values (clean the file, or "
            f"convert fewer samples with max_samples={idx} if the damage is at the end)"
        )


__all__ = ["ArraySource", "Fetch", "PublicDataset", "check_finite"]
