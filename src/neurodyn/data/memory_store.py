"""A store held in memory: what a store file holds, read as :class:`~neurodyn.data.store.StoredDataset` reads it,
without writing a file.

``MemoryStore.from_dataset(data)`` takes a reader's :class:`~neurodyn.data.formats.base.PublicDataset` whole, as
``neurodyn convert`` would write it into a store file (:func:`~neurodyn.data.formats.convert.convert_to_store`):

    fields/<name>   (N, ...)   every field, checked and cast as the reader declares it (float32; int64 labels,
                               uint8 masks)
    params/<name>   (N, ...)   float32
    coords/<name>   any shape  float32 (``coords/n_classes``: a 0-d array)
    config          {format, kind, reader_options, info, shapes}: the conversion's (``info.classes`` names the classes)
    attrs           generator ``memory:<format>``, n_samples, checksum (sha256 of every array's name, dtype, shape
                    and bytes, in name order, and of the config)

and serves ``read(key, index)``, ``keys(group)``, ``shapes``, ``dtypes``, ``n_samples``, ``inputs``, ``targets``,
``config``, ``attrs`` and ``path`` (a label for messages, ``<name>``) like a store file, so
:class:`~neurodyn.data.sequences.SequenceDataset` and :func:`neurodyn.data.assembly.build_sequence_data` read it
unchanged. ``sequence_store(arrays)`` is the sequence arrays of an ``.npz`` file (``x``, ``y``, ``t``, ``mask``,
``classes``) read by the ``.npz`` reader (:func:`~neurodyn.data.formats.sequence_npz.read_sequence_arrays`) into
one: the same datasets as a store converted from the file holding them, with one difference: ``data.drop_steps``
draws its steps with the arrays' checksum rather than the file's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .formats.sequence_npz import read_sequence_arrays
from .store import canonical_json


class MemoryStore:
    """The arrays of a store, in memory (module docstring)."""

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        *,
        config: dict[str, Any],
        inputs: tuple[str, ...],
        targets: tuple[str, ...],
        generator: str = "memory",
        name: str = "arrays",
    ):
        self.path = Path(f"<{name}>")
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}
        self.shapes = {k: tuple(v.shape) for k, v in self.arrays.items()}
        self.dtypes = {k: v.dtype for k, v in self.arrays.items()}
        self.inputs, self.targets = tuple(inputs), tuple(targets)
        counts = {v.shape[0] for k, v in self.arrays.items() if not k.startswith("coords/")}
        if len(counts) != 1:
            raise DataError(f"{self.path}: the arrays disagree on the number of samples ({sorted(counts)})")
        self.n_samples = counts.pop()
        self.config = dict(config)
        self.attrs = {"generator": generator, "n_samples": self.n_samples, "checksum": self.checksum()}

    @classmethod
    def from_dataset(cls, data: Any, name: str = "arrays") -> MemoryStore:
        """A reader's dataset (a :class:`~neurodyn.data.formats.base.PublicDataset`) whole, as a store file would
        hold it (module docstring)."""
        arrays = data.chunk(0, data.n_samples)
        arrays.update({f"coords/{k}": v for k, v in data.coords.items()})
        config = {
            "format": data.format,
            "kind": data.kind,
            "reader_options": data.options,
            "info": data.info,
            "shapes": {k: list(v) for k, v in sorted(data.shapes.items())},
        }
        return cls(
            arrays,
            config=config,
            inputs=data.inputs,
            targets=data.targets,
            generator=f"memory:{data.format}",
            name=name,
        )

    def checksum(self) -> str:
        """sha256 over every array's name, dtype, shape and bytes, in name order, then the config (its class names)."""
        h = hashlib.sha256()
        for key in sorted(self.arrays):
            a = np.ascontiguousarray(self.arrays[key])
            h.update(f"{key}={a.dtype.str}{a.shape};".encode())
            h.update(a.tobytes())
        h.update(canonical_json(self.config).encode())
        return h.hexdigest()

    def record(self) -> dict[str, Any]:
        """What a run records of this data (as :func:`neurodyn.data.assembly.file_record` of a file): ``source``
        (``arrays``), ``sha256`` (:meth:`checksum`), the arrays' ``shapes`` (a sequence run's time pooling reads
        ``fields/x``) and the ``classes`` it names (a test file's labels are read by name), if any."""
        out = {
            "source": "arrays",
            "sha256": self.attrs["checksum"],
            "shapes": {k: list(map(int, v)) for k, v in sorted(self.shapes.items())},
        }
        classes = (self.config.get("info") or {}).get("classes")
        return out | ({"classes": list(classes)} if classes else {})

    def read(self, key: str, index: Any = slice(None)) -> np.ndarray:
        """``fields/<name>``, ``params/<name>`` or ``coords/<name>`` at ``index`` (int, slice, ids or ``()``)."""
        if key not in self.arrays:
            raise DataError(f"{self.path} has no array {key!r}; it has {sorted(self.arrays)}")
        return self.arrays[key][index]

    def keys(self, group: str) -> list[str]:
        return sorted(k.split("/", 1)[1] for k in self.arrays if k.startswith(group + "/"))

    def close(self) -> None:
        """Nothing to close (a store file's handle is; the arrays stay)."""


def sequence_store(arrays: dict[str, np.ndarray], name: str = "arrays", **options: Any) -> MemoryStore:
    """Sequence arrays keyed as in an ``.npz`` file (``x (N, T, C)``, ``y``, optional ``t``, ``mask``, ``classes``;
    :mod:`neurodyn.data.formats.sequence_npz`) as a :class:`MemoryStore`, exactly as the store converted from that
    file holds them; ``options``: the ``.npz`` reader's (``dt``, ``classes``, ``per_step``, ``max_samples``)."""
    return MemoryStore.from_dataset(read_sequence_arrays(arrays, f"<{name}>", **options), name=name)


__all__ = ["MemoryStore", "sequence_store"]
