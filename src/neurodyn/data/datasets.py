"""torch Datasets over store files.

``SteadyDataset`` maps input fields to target fields, sample by sample: items are dicts
``{"x": (*spatial, C_in), "y": (*spatial, C_out), "index": ()}``; several fields are concatenated
along the channel axis in the order the file lists them. Time-window and sequence datasets plug in
beside it with the same dict convention.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataError
from .store import StoredDataset

IN_MEMORY_LIMIT = 2 * 1024 ** 3  # bytes; larger splits are read lazily from disk


def split_indices(n_samples: int, n_train: int, n_test: int, n_val: int = 0) -> dict[str, np.ndarray]:
    """First ``n_train`` samples train, the next ``n_val`` validate, the last ``n_test`` test (FNO protocol)."""
    if n_train < 1 or n_test < 0 or n_val < 0:
        raise DataError(f"split sizes must be n_train >= 1, n_val >= 0, n_test >= 0; got {n_train}/{n_val}/{n_test}")
    if n_train + n_val + n_test > n_samples:
        raise DataError(f"the dataset holds {n_samples} samples but the split asks for {n_train} train + "
                        f"{n_val} val + {n_test} test")
    out = {"train": np.arange(n_train), "test": np.arange(n_samples - n_test, n_samples)}
    if n_val:
        out["val"] = np.arange(n_train, n_train + n_val)
    return out


def _read_fields(store: StoredDataset, names: Sequence[str], ids: np.ndarray, in_memory: bool) -> torch.Tensor | None:
    if not in_memory:
        return None
    parts = []
    for name in names:
        arr = store.read(f"fields/{name}", np.sort(ids))
        arr = arr[np.argsort(np.argsort(ids))]
        bad = ~np.isfinite(arr.reshape(len(ids), -1)).all(axis=1)
        if bad.any():
            raise DataError(f"dataset file {store.path}: fields/{name} has NaN or Inf in sample "
                            f"{int(ids[np.argmax(bad)])}; regenerate or clean the file")
        parts.append(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)))
    return torch.cat(parts, dim=-1)


class SteadyDataset(Dataset):
    """Pairs (input fields -> target fields) of the samples ``ids`` of a store file."""

    def __init__(self, store: StoredDataset, ids: np.ndarray, inputs: Sequence[str] | None = None,
                 targets: Sequence[str] | None = None, in_memory: bool | None = None):
        self.store = store
        self.ids = np.asarray(ids, dtype=np.int64)
        self.inputs = tuple(inputs or store.inputs)
        self.targets = tuple(targets or store.targets)
        for name in (*self.inputs, *self.targets):
            if f"fields/{name}" not in store.shapes:
                raise DataError(f"dataset file {store.path} has no field {name!r}; it has "
                                f"{store.keys('fields')}")
        spatial = {name: store.shapes[f"fields/{name}"][1:-1] for name in (*self.inputs, *self.targets)}
        if len(set(spatial.values())) != 1:
            raise DataError(f"dataset file {store.path}: input and target fields must share one grid, got "
                            + ", ".join(f"{k}: {v}" for k, v in spatial.items()))
        self.spatial_shape = next(iter(spatial.values()))
        self.in_channels = sum(store.shapes[f"fields/{n}"][-1] for n in self.inputs)
        self.out_channels = sum(store.shapes[f"fields/{n}"][-1] for n in self.targets)
        nbytes = 4 * len(self.ids) * int(np.prod(self.spatial_shape)) * (self.in_channels + self.out_channels)
        in_memory = nbytes <= IN_MEMORY_LIMIT if in_memory is None else in_memory
        self.x = _read_fields(store, self.inputs, self.ids, in_memory)
        self.y = _read_fields(store, self.targets, self.ids, in_memory)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if self.x is not None:
            x, y = self.x[i], self.y[i]
        else:
            sid = int(self.ids[i])
            x = torch.cat([torch.from_numpy(self.store.read(f"fields/{n}", sid)) for n in self.inputs], -1)
            y = torch.cat([torch.from_numpy(self.store.read(f"fields/{n}", sid)) for n in self.targets], -1)
            if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
                raise DataError(f"dataset file {self.store.path}: NaN or Inf in sample {sid}")
        return {"x": x.float(), "y": y.float(), "index": torch.tensor(int(self.ids[i]))}

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """All inputs and targets of this split (for fitting normalizers)."""
        if self.x is not None:
            return self.x, self.y
        items = [self[i] for i in range(len(self))]
        return torch.stack([it["x"] for it in items]), torch.stack([it["y"] for it in items])
