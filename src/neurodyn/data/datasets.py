"""torch Datasets over store files.

``SteadyDataset`` maps input fields to target fields, sample by sample: items are dicts
``{"x": (*spatial, C_in), "y": (*spatial, C_out), "index": ()}``; several fields are concatenated
along the channel axis in the order the file lists them. Meshes and point clouds store their node
coordinates as ``fields/pos`` (N, P, d); items then carry ``"pos": (P, d)`` (DESIGN.md's ``pos``). Point clouds of
different point counts are padded to the largest and stored with ``fields/mask`` (N, P, 1), 1 on real points and
0 on padding; items then carry ``"mask": (P,)`` bool, which the task's loss, metrics and model honour. Time-window and
sequence datasets plug in beside it with the same dict convention.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataError
from .store import StoredDataset

IN_MEMORY_LIMIT = 2 * 1024**3  # bytes; larger splits are read lazily from disk


def split_indices(n_samples: int, n_train: int, n_test: int, n_val: int = 0) -> dict[str, np.ndarray]:
    """First ``n_train`` samples train, the next ``n_val`` validate, the last ``n_test`` test (FNO protocol)."""
    if n_train < 1 or n_test < 0 or n_val < 0:
        raise DataError(f"split sizes must be n_train >= 1, n_val >= 0, n_test >= 0; got {n_train}/{n_val}/{n_test}")
    if n_train + n_val + n_test > n_samples:
        raise DataError(
            f"the dataset holds {n_samples} samples but the split asks for {n_train} train + "
            f"{n_val} val + {n_test} test"
        )
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
            raise DataError(
                f"dataset file {store.path}: fields/{name} has NaN or Inf in sample "
                f"{int(ids[np.argmax(bad)])}; regenerate or clean the file"
            )
        parts.append(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)))
    return torch.cat(parts, dim=-1)


class SteadyDataset(Dataset):
    """Pairs (input fields -> target fields) of the samples ``ids`` of a store file."""

    def __init__(
        self,
        store: StoredDataset,
        ids: np.ndarray,
        inputs: Sequence[str] | None = None,
        targets: Sequence[str] | None = None,
        in_memory: bool | None = None,
    ):
        self.store = store
        self.ids = np.asarray(ids, dtype=np.int64)
        self.inputs = tuple(inputs or store.inputs)
        self.targets = tuple(targets or store.targets)
        for name in (*self.inputs, *self.targets):
            if f"fields/{name}" not in store.shapes:
                raise DataError(f"dataset file {store.path} has no field {name!r}; it has {store.keys('fields')}")
        spatial = {name: store.shapes[f"fields/{name}"][1:-1] for name in (*self.inputs, *self.targets)}
        if len(set(spatial.values())) != 1:
            raise DataError(
                f"dataset file {store.path}: input and target fields must share one grid, got "
                + ", ".join(f"{k}: {v}" for k, v in spatial.items())
            )
        self.spatial_shape = next(iter(spatial.values()))
        self.in_channels = sum(store.shapes[f"fields/{n}"][-1] for n in self.inputs)
        self.out_channels = sum(store.shapes[f"fields/{n}"][-1] for n in self.targets)
        nbytes = 4 * len(self.ids) * int(np.prod(self.spatial_shape)) * (self.in_channels + self.out_channels)
        in_memory = nbytes <= IN_MEMORY_LIMIT if in_memory is None else in_memory
        self.x = _read_fields(store, self.inputs, self.ids, in_memory)
        self.y = _read_fields(store, self.targets, self.ids, in_memory)
        self.has_pos = "fields/pos" in store.shapes  # also when pos is the input itself (point clouds)
        self.pos = _read_fields(store, ("pos",), self.ids, in_memory) if self.has_pos else None
        self.has_mask = "fields/mask" in store.shapes
        self.mask = _read_fields(store, ("mask",), self.ids, True)[..., 0] > 0.5 if self.has_mask else None

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
        item = {"x": x.float(), "y": y.float(), "index": torch.tensor(int(self.ids[i]))}
        if self.has_pos:
            item["pos"] = (
                self.pos[i]
                if self.pos is not None
                else torch.from_numpy(self.store.read("fields/pos", int(self.ids[i])).astype(np.float32))
            )
        if self.mask is not None:
            item["mask"] = self.mask[i]
        return item

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """All inputs and targets of this split (for fitting normalizers); padded point clouds give their real
        points only, ``(M, C_in)`` and ``(M, C_out)``."""
        if self.x is not None:
            x, y = self.x, self.y
        else:
            items = [self[i] for i in range(len(self))]
            x, y = torch.stack([it["x"] for it in items]), torch.stack([it["y"] for it in items])
        if self.mask is not None:
            return x[self.mask], y[self.mask]
        return x, y


class TimeWindowDataset(Dataset):
    """Windows of trajectories ``fields/u: (N, T, *spatial, C)`` for autoregressive learning.

    Frames are first subsampled by ``time_stride``; window ``w`` of sample ``i`` starts at frame
    ``s = t_start + w * stride`` and yields

    * ``x``:   (*spatial, t_in * C) the frames s .. s+t_in-1, stacked oldest first along channels
      (``frames_as_channels=True``, FNO's layout), or (t_in, *spatial, C) otherwise;
    * ``y``:   the next ``t_out`` frames in the same layout;
    * ``cf``:  (*spatial, C_f) context fields (``context_fields``), the frame at s+t_in-1 when they
      vary in time;
    * ``ctx``: (n_ctx,) per-sample parameters (``context_params``, e.g. viscosity);
    * ``index``, ``t0`` (sample id and first target frame).

    ``t_out=None`` gives one window per trajectory holding the whole remaining horizon (rollout
    evaluation).
    """

    def __init__(
        self,
        store: StoredDataset,
        ids: np.ndarray,
        t_in: int,
        t_out: int | None = 1,
        stride: int = 1,
        time_stride: int = 1,
        t_start: int = 0,
        field: str = "u",
        context_fields: Sequence[str] = (),
        context_params: Sequence[str] = (),
        frames_as_channels: bool = True,
    ):
        key = f"fields/{field}"
        if key not in store.shapes:
            raise DataError(f"dataset file {store.path} has no trajectory field {key!r}; it has {store.keys('fields')}")
        shape = store.shapes[key]
        if len(shape) < 4:
            raise DataError(
                f"dataset file {store.path}: {key} has shape {shape}; a trajectory field needs (N, T, *spatial, C)"
            )
        if t_in < 1 or (t_out is not None and t_out < 1) or stride < 1 or time_stride < 1 or t_start < 0:
            raise DataError(
                f"time windows need t_in >= 1, t_out >= 1, stride >= 1, time_stride >= 1, t_start >= 0; "
                f"got t_in={t_in}, t_out={t_out}, stride={stride}, time_stride={time_stride}, "
                f"t_start={t_start}"
            )
        self.store, self.field, self.ids = store, field, np.asarray(ids, dtype=np.int64)
        self.frames = np.arange(0, shape[1], time_stride)
        self.n_frames = len(self.frames)
        horizon = (self.n_frames - t_start - t_in) if t_out is None else t_out
        if t_start + t_in + horizon > self.n_frames or horizon < 1:
            raise DataError(
                f"dataset file {store.path}: {key} has {self.n_frames} frames (after time_stride "
                f"{time_stride}), too few for t_start={t_start} + t_in={t_in} + t_out={horizon}"
            )
        self.t_in, self.t_out, self.stride, self.t_start = t_in, horizon, stride, t_start
        self.windows_per_sample = (self.n_frames - t_start - t_in - horizon) // stride + 1 if t_out is not None else 1
        self.frames_as_channels = frames_as_channels
        self.spatial_shape = tuple(shape[2:-1])
        self.channels = shape[-1]
        self.context_fields, self.context_params = tuple(context_fields), tuple(context_params)
        for name in self.context_fields:
            fshape = store.shapes.get(f"fields/{name}")
            if fshape is None:
                raise DataError(f"dataset file {store.path} has no context field 'fields/{name}'")
            if tuple(fshape[-len(self.spatial_shape) - 1 : -1]) != self.spatial_shape:
                raise DataError(
                    f"context field fields/{name} has shape {fshape}, expected the grid {self.spatial_shape}"
                )
        for name in self.context_params:
            if f"params/{name}" not in store.shapes:
                raise DataError(
                    f"dataset file {store.path} has no context parameter 'params/{name}'; it has {store.keys('params')}"
                )
        self.cf_varies = any(
            len(store.shapes[f"fields/{n}"]) == len(self.spatial_shape) + 3 for n in self.context_fields
        )
        self.cf_channels = sum(store.shapes[f"fields/{n}"][-1] for n in self.context_fields)
        self.n_ctx = sum(int(np.prod(store.shapes[f"params/{n}"][1:])) for n in self.context_params)
        nbytes = 4 * len(self.ids) * int(np.prod(shape[1:]))
        self.u = None
        if nbytes <= IN_MEMORY_LIMIT:
            u = store.read(key, np.sort(self.ids))[np.argsort(np.argsort(self.ids))][:, self.frames]
            bad = ~np.isfinite(u.reshape(len(self.ids), -1)).all(axis=1)
            if bad.any():
                raise DataError(
                    f"dataset file {store.path}: {key} has NaN or Inf in sample {int(self.ids[np.argmax(bad)])}"
                )
            self.u = torch.from_numpy(np.ascontiguousarray(u, dtype=np.float32))

    @property
    def in_channels(self) -> int:
        return self.t_in * self.channels + self.cf_channels

    @property
    def out_channels(self) -> int:
        return self.channels

    def __len__(self) -> int:
        return len(self.ids) * self.windows_per_sample

    def trajectory(self, j: int) -> torch.Tensor:
        """(T', *spatial, C) subsampled frames of the ``j``-th sample of this split."""
        if self.u is not None:
            return self.u[j]
        return torch.from_numpy(
            self.store.read(f"fields/{self.field}", int(self.ids[j]))[self.frames].astype(np.float32)
        )

    def stack(self, frames: torch.Tensor) -> torch.Tensor:
        """(t, *spatial, C) -> the model layout of several frames."""
        if not self.frames_as_channels:
            return frames
        return frames.movedim(0, -2).reshape(*frames.shape[1:-1], -1)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        j, w = divmod(i, self.windows_per_sample)
        s = self.t_start + w * self.stride
        traj = self.trajectory(j)
        item = {
            "x": self.stack(traj[s : s + self.t_in]),
            "y": self.stack(traj[s + self.t_in : s + self.t_in + self.t_out]),
            "index": torch.tensor(int(self.ids[j])),
            "t0": torch.tensor(s + self.t_in),
        }
        if self.context_fields:
            item["cf"] = self._context_fields(j, s + self.t_in - 1)
            if self.cf_varies:  # every frame of the window, for rollouts: (t_in + t_out, *spatial, C_f)
                item["cf_all"] = torch.stack([self._context_fields(j, f) for f in range(s, s + self.t_in + self.t_out)])
        if self.context_params:
            sid = int(self.ids[j])
            item["ctx"] = torch.cat(
                [
                    torch.as_tensor(self.store.read(f"params/{n}", sid), dtype=torch.float32).reshape(-1)
                    for n in self.context_params
                ]
            )
        return item

    def _context_fields(self, j: int, frame: int) -> torch.Tensor:
        sid = int(self.ids[j])
        parts = []
        for name in self.context_fields:
            arr = self.store.read(f"fields/{name}", sid)
            if arr.ndim == len(self.spatial_shape) + 2:  # (T, *spatial, C): varies in time
                arr = arr[self.frames[frame]]
            parts.append(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)))
        return torch.cat(parts, dim=-1)

    def context_at(self, j: int, frame: int) -> torch.Tensor | None:
        """Context fields of sample ``j`` at subsampled frame ``frame`` (for rollouts), or None."""
        return self._context_fields(j, frame) if self.context_fields else None
