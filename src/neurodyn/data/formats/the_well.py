"""The Well's HDF5 files (PolymathicAI, Ohana et al. 2024), one file of trajectories at a time.

The layout (The Well's ``docs/data_format.md`` and ``the_well/data/datasets.py``): root attributes
``dataset_name``, ``grid_type``, ``n_spatial_dims`` = D, ``n_trajectories`` = B and
``simulation_parameters`` (names of further root attributes holding the values); groups

* ``dimensions`` (attr ``spatial_dims``, e.g. ['x', 'y']): ``time`` (T,) — or (B, T) when
  ``sample_varying`` — and one coordinate vector per spatial axis;
* ``boundary_conditions``: one group per condition with attrs ``bc_type``, ``associated_dims``;
* ``scalars`` (attr ``field_names``): per-dataset or per-trajectory numbers with attrs
  ``sample_varying`` / ``time_varying``;
* ``t0_fields``, ``t1_fields``, ``t2_fields`` (attr ``field_names``): scalar, vector and tensor fields,
  each dataset (``[B,] [T,] *spatial[, D[, D]]``) with attrs ``sample_varying``, ``time_varying`` and
  ``dim_varying`` (one bool per spatial axis; an axis that does not vary is absent and broadcast).

Stored (channels-last, time first, as the store's convention):

* ``fields/u`` (B, T, *spatial, C): every time-varying field as channels, in the order t0, t1, t2 and
  ``field_names`` order; a vector field gives D channels, a tensor field D*D (row-major), named as The
  Well names them (``velocity_x``, ``velocity_y``, ``stress_xy``, ...) in ``info["channels"]``;
  inputs = targets = ("u",).
* ``fields/static`` (B, *spatial, C'): the time-invariant fields the same way (e.g. a varying
  coefficient), when there are any; names in ``info["static_channels"]``.
* ``params/<name>``: per-trajectory scalars, (B,) or (B, T) when they also vary in time.
  Scalars shared by every trajectory, the root simulation parameters and the boundary conditions are
  recorded in ``info``.
* ``coords/<axis>`` and ``coords/t`` (``params/t``, ``params/<axis>`` when they vary per trajectory).

Axes not varying over samples or time are broadcast so every sample is complete.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from .base import (
    ArraySource,
    PublicDataset,
    ReaderOptions,
    make_options,
    open_h5,
    options_dict,
    read_failed,
    require_shape,
    select,
    stride_slices,
    strided_len,
)

NAME = "the-well"
REQUIRED_ATTRS = ("n_spatial_dims", "n_trajectories")


def looks_like(f) -> bool:
    return "t0_fields" in f or ("dimensions" in f and "n_spatial_dims" in f.attrs)


def claims(peek) -> bool:
    """An HDF5 file of The Well (``t0_fields``, or ``dimensions`` with ``n_spatial_dims``)."""
    return peek.container == "hdf5" and looks_like(peek.hdf5())


def _s(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return [_s(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_s(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def _names(group) -> list[str]:
    names = group.attrs.get("field_names")
    return [str(n) for n in _s(names)] if names is not None else sorted(group.keys())


def read(path: Path, **options: Any) -> PublicDataset:
    """Read one HDF5 file of The Well."""
    opts = make_options(ReaderOptions, NAME, options)
    path = Path(path)
    with open_h5(path) as f:
        return _read(path, f, opts)


@dataclass(frozen=True)
class _Grid:
    """The file's sizes and the slices the options keep: ``D`` spatial axes named ``spatial_dims`` of ``sizes``,
    ``B`` trajectories of ``T`` steps, the first ``n`` read; ``sl`` / ``ts`` the spatial / time strides, giving
    ``out_sp`` / ``out_t`` points."""

    D: int
    B: int
    T: int
    n: int
    spatial_dims: list[str]
    sizes: tuple[int, ...]
    sl: tuple[slice, ...]
    ts: slice
    out_sp: tuple[int, ...]
    out_t: int


def _read(path: Path, f, opts) -> PublicDataset:
    grid = _grid(path, f, opts)
    coords, params = _axes(path, f["dimensions"], grid)
    dynamic, static, ch_dyn, ch_static = _field_specs(path, f, grid)
    fields = {
        "u": ArraySource(
            (grid.n, grid.out_t, *grid.out_sp, len(ch_dyn)),
            f"time-varying fields ({', '.join(s[1] for s in dynamic)}) of {path.name}",
            _fetcher(path, grid, dynamic, True),
        )
    }
    if static:
        fields["static"] = ArraySource(
            (grid.n, *grid.out_sp, len(ch_static)),
            f"time-invariant fields ({', '.join(s[1] for s in static)}) of {path.name}",
            _fetcher(path, grid, static, False),
        )
    shared_scalars = _scalars(path, f, grid, params)
    sim = {str(p): _s(f.attrs[p]) for p in _s(f.attrs.get("simulation_parameters", [])) if p in f.attrs}
    bcs = {}
    if "boundary_conditions" in f:
        for name, g in f["boundary_conditions"].items():
            bcs[name] = {k: _s(g.attrs[k]) for k in ("bc_type", "associated_dims") if k in g.attrs}
    info = {
        "dataset_name": _s(f.attrs.get("dataset_name", "")),
        "grid_type": _s(f.attrs.get("grid_type", "")),
        "channels": ch_dyn,
        "static_channels": ch_static,
        "simulation_parameters": sim,
        "shared_scalars": shared_scalars,
        "boundary_conditions": bcs,
        "spatial_dims": grid.spatial_dims,
    }
    return PublicDataset(
        format=NAME,
        kind=str(info["dataset_name"] or "trajectories"),
        path=path,
        files=[path],
        fields=fields,
        params=params,
        coords=coords,
        inputs=("u",),
        targets=("u",),
        options=options_dict(opts),
        info=info,
        param_labels={k: f"array {k!r} of {path.name}" for k in params},
    )


def _grid(path: Path, f, opts) -> _Grid:
    """The root attributes and ``dimensions`` checked, the sizes read and the options' slices."""
    for a in REQUIRED_ATTRS:
        if a not in f.attrs:
            raise DataError(
                f"HDF5 file {path} lacks root attribute {a!r}; a file of The Well has "
                f"{', '.join(REQUIRED_ATTRS)}, dataset_name and grid_type"
            )
    if "dimensions" not in f:
        raise DataError(f"file {path} has no group 'dimensions' (time and grid); it holds {sorted(f.keys())}")
    D, B = int(_s(f.attrs["n_spatial_dims"])), int(_s(f.attrs["n_trajectories"]))
    dims = f["dimensions"]
    spatial_dims = [str(d) for d in _s(dims.attrs.get("spatial_dims", ["x", "y", "z"][:D]))]
    if len(spatial_dims) != D:
        raise DataError(
            f"file {path}: dimensions/spatial_dims is {spatial_dims}, expected {D} names (n_spatial_dims = {D})"
        )
    for d in ("time", *spatial_dims):
        if d not in dims:
            raise DataError(f"file {path} has no 'dimensions/{d}'; it holds {sorted(dims.keys())}")
    sizes = tuple(int(dims[d].shape[-1]) for d in spatial_dims)
    T = int(dims["time"].shape[-1])
    sl = stride_slices(opts.stride, D)
    return _Grid(
        D,
        B,
        T,
        select(B, opts.max_samples),
        spatial_dims,
        sizes,
        sl,
        slice(None, None, opts.time_stride),
        tuple(strided_len(s, st.step) for s, st in zip(sizes, sl)),
        strided_len(T, opts.time_stride),
    )


def _axes(path: Path, dims, grid: _Grid) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(coords, params)``: each spatial axis and the time, as a shared coordinate or, when it varies per
    trajectory, a parameter."""
    coords: dict[str, np.ndarray] = {}
    params: dict[str, np.ndarray] = {}

    def axis_values(key: str, want: int, sv: bool, index) -> np.ndarray:
        arr = np.asarray(dims[key][()], dtype=np.float64)
        expect = (grid.B, want) if sv else (want,)
        require_shape(f"array 'dimensions/{key}' of {path.name}", arr.shape, f"{expect}", arr.shape == expect)
        return arr[: grid.n][:, index] if sv else arr[index]

    for d, size, st in zip(grid.spatial_dims, grid.sizes, grid.sl):
        sv = bool(_s(dims[d].attrs.get("sample_varying", False)))
        (params if sv else coords)[d] = axis_values(d, size, sv, st)
    t_sv = bool(_s(dims["time"].attrs.get("sample_varying", False)))
    (params if t_sv else coords)["t"] = axis_values("time", grid.T, t_sv, grid.ts)
    return coords, params


def _field_specs(path: Path, f, grid: _Grid) -> tuple[list, list, list[str], list[str]]:
    """``(dynamic, static, dynamic channel names, static channel names)``: every field of t0/t1/t2_fields as
    ``(group, name, sample_varying, time_varying, dim_varying, order)``, its shape checked against its attributes."""
    D, spatial_dims = grid.D, grid.spatial_dims
    dynamic, static, ch_dyn, ch_static = [], [], [], []
    for order in range(3):
        gname = f"t{order}_fields"
        if gname not in f:
            continue
        group = f[gname]
        for name in _names(group):
            if name not in group:
                raise DataError(
                    f"file {path}: {gname} lists field {name!r} in field_names but has no such dataset; "
                    f"it holds {sorted(group.keys())}"
                )
            ds = group[name]
            sv = bool(_s(ds.attrs.get("sample_varying", True)))
            tv = bool(_s(ds.attrs.get("time_varying", True)))
            dv = [bool(v) for v in _s(ds.attrs.get("dim_varying", [True] * D))]
            if len(dv) != D:
                raise DataError(f"field '{gname}/{name}' of {path.name} has dim_varying {dv}, expected {D} values")
            lead = ((grid.B,) if sv else ()) + ((grid.T,) if tv else ()) + tuple(s for s, v in zip(grid.sizes, dv) if v)
            shape = tuple(ds.shape)
            tails = [(D,) * order] + ([(D * D,)] if order == 2 else [])
            ok = any(shape == lead + tail for tail in tails)
            require_shape(
                f"field '{gname}/{name}' of {path.name}",
                shape,
                f"{lead + (D,) * order} = ({'B, ' if sv else ''}{'T, ' if tv else ''}varying spatial axes"
                f"{', D' * order}) from its attributes",
                ok,
            )
            comps = ["".join(c) for c in itertools.product(spatial_dims, repeat=order)]
            spec = (gname, name, sv, tv, dv, order)
            if tv:
                dynamic.append(spec)
                ch_dyn += [f"{name}_{c}" if c else name for c in comps]
            else:
                static.append(spec)
                ch_static += [f"{name}_{c}" if c else name for c in comps]
    if not dynamic:
        raise DataError(
            f"file {path} has no time-varying field in t0_fields/t1_fields/t2_fields; expected at least "
            "one (the trajectory to learn)"
        )
    return dynamic, static, ch_dyn, ch_static


def _fetcher(path: Path, grid: _Grid, specs: list, with_time: bool):
    """``fetch(lo, hi)``: trajectories ``lo:hi`` of the fields ``specs`` as channels, broadcast over the axes a field
    does not vary along."""

    def fetch(lo: int, hi: int) -> np.ndarray:
        parts = []
        with open_h5(path) as h:
            for gname, name, sv, tv, dv, _order in specs:
                index = (
                    ((slice(lo, hi),) if sv else ())
                    + ((grid.ts,) if tv else ())
                    + tuple(st for st, v in zip(grid.sl, dv) if v)
                )
                try:
                    arr = np.asarray(h[gname][name][index], dtype=np.float32)
                except (OSError, ValueError) as exc:
                    raise read_failed(path, exc, f"field '{gname}/{name}' of HDF5 file") from None
                if not sv:
                    arr = arr[None]
                for j, v in enumerate(dv):
                    if not v:
                        arr = np.expand_dims(arr, (2 if with_time else 1) + j)
                target = (hi - lo, *((grid.out_t,) if with_time else ()), *grid.out_sp)
                arr = arr.reshape(*arr.shape[: len(target)], -1)  # tensor axes -> D**order channels
                parts.append(np.broadcast_to(arr, (*target, arr.shape[-1])))
        return np.concatenate(parts, axis=-1)

    return fetch


def _scalars(path: Path, f, grid: _Grid, params: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per-trajectory scalars into ``params``; returns the scalars every trajectory shares."""
    shared: dict[str, Any] = {}
    if "scalars" not in f:
        return shared
    B, T = grid.B, grid.T
    for name in _names(f["scalars"]):
        if name not in f["scalars"]:
            raise DataError(f"file {path}: scalars lists {name!r} in field_names but has no such dataset")
        ds = f["scalars"][name]
        sv = bool(_s(ds.attrs.get("sample_varying", False)))
        tv = bool(_s(ds.attrs.get("time_varying", False)))
        arr = np.asarray(ds[()], dtype=np.float64)
        if sv:
            want = (B, T) if tv else (B,)
            require_shape(
                f"scalar 'scalars/{name}' of {path.name}",
                arr.shape,
                f"{want}",
                arr.shape == want or (not tv and arr.shape == (B, 1)),
            )
            arr = arr.reshape(B, -1)[: grid.n] if tv else arr.reshape(B)[: grid.n]
            params[name] = arr[:, grid.ts] if tv else arr
        else:
            shared[name] = arr.reshape(-1).tolist() if arr.size > 1 else float(arr.reshape(-1)[0])
    return shared
