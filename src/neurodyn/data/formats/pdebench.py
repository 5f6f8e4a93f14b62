"""PDEBench HDF5 files (Takamoto et al. 2022), all three families its loaders read.

* **Single-array files** (1D Advection / Burgers / ReacDiff, e.g. ``1D_Burgers_Sols_Nu0.01.hdf5``):
  dataset ``tensor`` (N, T, *spatial) (a trailing channel axis is accepted too) with 1-D
  ``x-coordinate`` (``y-``, ``z-``) and ``t-coordinate``. Stored as ``fields/u`` (N, T, *spatial, C),
  inputs = targets = ("u",) (kind ``"single"``).
  The 2D Darcy files (``2D_DarcyFlow_beta1.0_Train.hdf5``) hold ``nu`` (N, X, Y) and ``tensor``
  (N, 1, X, Y): stored as the steady pair ``fields/a`` = nu, ``fields/u`` = tensor[:, 0], each
  (N, X, Y, 1), inputs ("a",), targets ("u",) (kind ``"darcy"``).
* **CFD files** (``1D_CFD_*``, ``2D_CFD_*``, ``3D_CFD_*``): ``density``, ``pressure``, ``Vx`` (``Vy``,
  ``Vz``), each (N, T, *spatial), plus coordinates as above. Stored as ``fields/u`` (N, T, *spatial, C)
  with channels in PDEBench's order density, pressure, Vx, Vy, Vz (kind ``"cfd"``).
* **Per-seed group files** (``2D_rdb_NA_NA.h5`` shallow water, ``2D_diff-react_NA_NA.h5``, ...): one
  group per trajectory (``"0000"``, ``"0001"``, ... taken in sorted name order), each with ``data``
  (T, *spatial, C) and ``grid/x`` (``grid/y``, ``grid/z``), ``grid/t``. Stored as ``fields/u``
  (N, T, *spatial, C) (kind ``"seeds"``); the grid of the first group is stored.

*Choice:* PDEBench's ``t-coordinate`` may hold one value more than the snapshots (T + 1 values in the
1D files); as PDEBench's own loaders do, the first T values are kept. Fewer than T values is an error.
The number of spatial axes is the number of coordinate arrays present. ``coords/x`` (``y``, ``z``) and
``coords/t`` follow ``stride`` and ``time_stride``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from .base import (
    ArraySource,
    PublicDataset,
    ReaderOptions,
    h5_read,
    make_options,
    open_h5,
    options_dict,
    read_failed,
    require_shape,
    select,
    stride_slices,
    strided_len,
)

NAME = "pdebench"
AXES = "xyz"
CFD_VARS = ("density", "pressure", "Vx", "Vy", "Vz")


def looks_like(f) -> bool:
    import h5py

    if "tensor" in f or "density" in f:
        return True
    return any(isinstance(g, h5py.Group) and "data" in g for g in f.values())


def claims(peek) -> bool:
    """An HDF5 file of PDEBench: ``tensor``, ``density`` (CFD), or seed groups holding ``data``."""
    return peek.container == "hdf5" and looks_like(peek.hdf5())


def read(path: Path, **options: Any) -> PublicDataset:
    """Read a PDEBench HDF5 file; the family is found from its datasets."""
    import h5py

    opts = make_options(ReaderOptions, NAME, options)
    path = Path(path)
    with open_h5(path) as f:
        if "tensor" in f:
            return _single(path, f, opts)
        if any(v in f for v in CFD_VARS):
            return _cfd(path, f, opts)
        groups = sorted(k for k, g in f.items() if isinstance(g, h5py.Group))
        if groups and all("data" in f[g] for g in groups):
            return _seeds(path, f, groups, opts)
        raise DataError(
            f"HDF5 file {path} holds {sorted(f.keys())}; expected PDEBench's 'tensor', CFD arrays "
            "('density', 'pressure', 'Vx', ...) or per-seed groups each with 'data' and 'grid'"
        )


def _time(path: Path, t: np.ndarray | None, n_t: int, label: str) -> tuple[np.ndarray, str]:
    if t is None:
        return np.arange(n_t, dtype=np.float64), "absent; snapshot indices 0..T-1 stored"
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    if t.shape[0] < n_t:
        raise DataError(
            f"{label} of {path.name} has shape {t.shape}, expected at least ({n_t},), one time per snapshot"
        )
    note = "as stored" if t.shape[0] == n_t else f"first {n_t} of its {t.shape[0]} values kept"
    return t[:n_t], note


def _coord_names(f, prefix: str = "", suffix: str = "-coordinate") -> list[str]:
    names = []
    for ax in AXES:
        if f"{prefix}{ax}{suffix}" in f:
            names.append(ax)
        else:
            break
    return names


def _coords(path: Path, f, axes: list[str], spatial: tuple[int, ...], slices, key_of) -> dict[str, np.ndarray]:
    out = {}
    for i, ax in enumerate(axes):
        c = np.asarray(f[key_of(ax)][()], dtype=np.float64).reshape(-1)
        require_shape(
            f"coordinate {key_of(ax)!r} of {path.name}",
            c.shape,
            f"({spatial[i]},), one value per grid point along axis {i + 1}",
            c.shape == (spatial[i],),
        )
        out[ax] = c[slices[i]]
    return out


def _field_source(
    path: Path, key: str, n: int, shape: tuple[int, ...], opts, has_channel: bool, time_axis: bool = True
) -> ArraySource:
    """``f[key]`` (N, [T,] *spatial[, C]) read lazily with strides, as (n, [T',] *spatial', C)."""
    d = len(shape) - 1 - int(time_axis) - int(has_channel)
    slices = stride_slices(opts.stride, d)
    index_tail = ((slice(None, None, opts.time_stride),) if time_axis else ()) + slices
    out_shape = (
        n,
        *((strided_len(shape[1], opts.time_stride),) if time_axis else ()),
        *(strided_len(s, sl.step) for s, sl in zip(shape[1 + int(time_axis) :][:d], slices)),
        shape[-1] if has_channel else 1,
    )

    def fetch(lo: int, hi: int) -> np.ndarray:
        arr = h5_read(path, key, (slice(lo, hi), *index_tail))
        return arr if has_channel else arr[..., None]

    return ArraySource(out_shape, f"array {key!r} of {path.name}", fetch)


def _single(path: Path, f, opts) -> PublicDataset:
    shape = tuple(f["tensor"].shape)
    axes = _coord_names(f)
    if "nu" in f:  # 2D Darcy: nu (N, X, Y) -> tensor (N, 1, X, Y)
        nu_shape = tuple(f["nu"].shape)
        require_shape(f"array 'nu' of {path.name}", nu_shape, "(N, X, Y)", len(nu_shape) == 3)
        require_shape(
            f"array 'tensor' of {path.name}",
            shape,
            f"{(nu_shape[0], 1, *nu_shape[1:])} like 'nu' with one time step",
            shape == (nu_shape[0], 1, *nu_shape[1:]),
        )
        n = select(nu_shape[0], opts.max_samples)
        slices = stride_slices(opts.stride, 2)
        a = _field_source(path, "nu", n, nu_shape, opts, has_channel=False, time_axis=False)
        u_src = _field_source(path, "tensor", n, shape, opts, has_channel=False)
        u = ArraySource(a.shape, u_src.label, lambda lo, hi: u_src.fetch(lo, hi)[:, 0])
        coords = _coords(path, f, axes, nu_shape[1:], slices, lambda ax: f"{ax}-coordinate") if len(axes) == 2 else {}
        return PublicDataset(
            format=NAME,
            kind="darcy",
            path=path,
            files=[path],
            fields={"a": a, "u": u},
            coords=coords,
            inputs=("a",),
            targets=("u",),
            options=options_dict(opts),
            info={"family": "single-array (Darcy)", "source_keys": {"a": "nu", "u": "tensor[:, 0]"}},
        )
    d = len(axes) or len(shape) - 2
    require_shape(
        f"array 'tensor' of {path.name}",
        shape,
        f"(N, T, {', '.join(['X', 'Y', 'Z'][:d])}[, C]) for its {d} coordinate array(s)",
        len(shape) in (2 + d, 3 + d) and d >= 1,
    )
    has_channel = len(shape) == 3 + d
    n = select(shape[0], opts.max_samples)
    slices = stride_slices(opts.stride, d)
    t, note = _time(path, f["t-coordinate"][()] if "t-coordinate" in f else None, shape[1], "'t-coordinate'")
    coords = _coords(path, f, axes, shape[2 : 2 + d], slices, lambda ax: f"{ax}-coordinate")
    coords["t"] = t[:: opts.time_stride]
    return PublicDataset(
        format=NAME,
        kind="single",
        path=path,
        files=[path],
        fields={"u": _field_source(path, "tensor", n, shape, opts, has_channel)},
        coords=coords,
        inputs=("u",),
        targets=("u",),
        options=options_dict(opts),
        info={"family": "single-array", "source_keys": {"u": "tensor"}, "t_coordinate": note},
    )


def _cfd(path: Path, f, opts) -> PublicDataset:
    shape = tuple(f["density"].shape) if "density" in f else None
    if shape is None or len(shape) < 3:
        raise DataError(
            f"HDF5 file {path} looks like a PDEBench CFD file but its 'density' is "
            f"{'missing' if shape is None else f'of shape {shape}'}; expected (N, T, *spatial)"
        )
    d = len(shape) - 2
    if d > 3:
        raise DataError(f"array 'density' of {path.name} has shape {shape}, expected (N, T, X[, Y[, Z]])")
    names = list(CFD_VARS[: 2 + d])
    for v in names:
        if v not in f:
            raise DataError(
                f"file {path} has no {v!r}, which a {d}-D PDEBench CFD file needs ({', '.join(names)}); "
                f"it holds {sorted(f.keys())}"
            )
        require_shape(f"array {v!r} of {path.name}", f[v].shape, f"{shape} like 'density'", tuple(f[v].shape) == shape)
    n = select(shape[0], opts.max_samples)
    slices = stride_slices(opts.stride, d)
    parts = [_field_source(path, v, n, shape, opts, has_channel=False) for v in names]

    def fetch(lo: int, hi: int) -> np.ndarray:
        return np.concatenate([p.fetch(lo, hi) for p in parts], axis=-1)

    t, note = _time(path, f["t-coordinate"][()] if "t-coordinate" in f else None, shape[1], "'t-coordinate'")
    coords = _coords(
        path, f, [ax for ax in AXES[:d] if f"{ax}-coordinate" in f], shape[2:], slices, lambda ax: f"{ax}-coordinate"
    )
    coords["t"] = t[:: opts.time_stride]
    u = ArraySource((*parts[0].shape[:-1], len(names)), f"arrays {', '.join(names)} of {path.name}", fetch)
    return PublicDataset(
        format=NAME,
        kind="cfd",
        path=path,
        files=[path],
        fields={"u": u},
        coords=coords,
        inputs=("u",),
        targets=("u",),
        options=options_dict(opts),
        info={"family": "CFD", "channels": names, "t_coordinate": note},
    )


def _seeds(path: Path, f, groups: list[str], opts) -> PublicDataset:
    first = f[groups[0]]
    if "grid" not in first:
        raise DataError(
            f"group {groups[0]!r} of {path} has no 'grid' (with x[, y, z] and t); it holds {sorted(first.keys())}"
        )
    axes = _coord_names(first["grid"], suffix="")
    shape = tuple(first["data"].shape)
    d = len(axes) or len(shape) - 2
    require_shape(
        f"array '{groups[0]}/data' of {path.name}",
        shape,
        f"(T, {', '.join(['X', 'Y', 'Z'][:d])}[, C]) for its {d} grid axis/axes",
        len(shape) in (1 + d, 2 + d) and d >= 1,
    )
    for g in groups[1:]:
        if "data" not in f[g]:
            raise DataError(f"group {g!r} of {path} has no 'data'; every seed group needs one like group {groups[0]!r}")
        other = tuple(f[g]["data"].shape)
        require_shape(f"array '{g}/data' of {path.name}", other, f"{shape} like group {groups[0]!r}", other == shape)
    has_channel = len(shape) == 2 + d
    groups = groups[: select(len(groups), opts.max_samples)]
    slices = stride_slices(opts.stride, d)
    index = (slice(None, None, opts.time_stride), *slices)
    out_shape = (
        len(groups),
        strided_len(shape[0], opts.time_stride),
        *(strided_len(s, sl.step) for s, sl in zip(shape[1 : 1 + d], slices)),
        shape[-1] if has_channel else 1,
    )

    def fetch(lo: int, hi: int) -> np.ndarray:
        with open_h5(path) as h:
            try:
                arrs = [np.asarray(h[g]["data"][index]) for g in groups[lo:hi]]
            except (OSError, ValueError) as exc:
                raise read_failed(path, exc, "a seed group's 'data' in HDF5 file") from None
        for k, (g, a) in enumerate(zip(groups[lo:hi], arrs)):
            if not np.isfinite(a).all():
                raise DataError(
                    f"array '{g}/data' of {path.name} (sample {lo + k}) holds NaN or Inf; expected "
                    "finite values (clean the file or drop that group)"
                )
        arr = np.stack(arrs)
        return arr if has_channel else arr[..., None]

    t, note = _time(path, first["grid"]["t"][()] if "t" in first["grid"] else None, shape[0], "'grid/t'")
    coords = _coords(path, first, axes, shape[1 : 1 + d], slices, lambda ax: f"grid/{ax}")
    coords["t"] = t[:: opts.time_stride]
    u = ArraySource(out_shape, f"the seed groups' 'data' of {path.name}", fetch)
    return PublicDataset(
        format=NAME,
        kind="seeds",
        path=path,
        files=[path],
        fields={"u": u},
        coords=coords,
        inputs=("u",),
        targets=("u",),
        options=options_dict(opts),
        info={
            "family": "per-seed groups",
            "groups": [groups[0], groups[-1]],
            "n_groups": len(groups),
            "t_coordinate": note,
        },
    )
