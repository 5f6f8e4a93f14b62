"""FNO's MATLAB files (Li et al. 2021): Darcy, Burgers and Navier–Stokes.

Layouts recognised (axes as MATLAB and ``scipy.io.loadmat`` show them, sample axis first):

* **Darcy** (``piececonst_r421_N1024_smooth1.mat``): ``coeff`` (N, s, s) the coefficient a(x),
  ``sol`` (N, s, s) the solution u(x) of -div(a grad u) = 1, u = 0 on the boundary of [0,1]^2, on the
  vertex grid x_i = i / (s - 1). Other variables (``Kcoeff``, ``Kcoeff_x``, ``Kcoeff_y``) are not
  used and are listed in ``info["ignored"]``. Stored: ``fields/a``, ``fields/u`` (N, s', s', 1),
  ``coords/x``, ``coords/y`` = linspace(0, 1, s)[::stride]; inputs ("a",), targets ("u",).
* **Burgers** (``burgers_data_R10.mat``): ``a`` (N, s) the initial condition u(x, 0), ``u`` (N, s) the
  solution at t = 1 (FNO's README), periodic on [0, 1). Any ``a``/``u`` pair of equal shapes is read
  this way (a steady map a -> u). Stored: ``fields/a``, ``fields/u`` (N, *spatial, 1), ``coords/x`` (and
  ``y``) = (i / s)[::stride], the periodic grid.
* **Navier–Stokes** (``NavierStokes_V1e-5_N1200_T20.mat``, ``ns_V1e-3_N5000_T50.mat``): ``a`` (N, s, s)
  the initial vorticity w(x, 0), ``u`` (N, s, s, T) the T following snapshots with time LAST, ``t``
  (T,) their times (1, 2, ..., T when absent), periodic on [0, 1)^2. Stored as a trajectory
  ``fields/u`` (N, T', s', s', 1) with time first; inputs = targets = ("u",).

  *Choice:* with ``include_initial=True`` (default) ``a`` is prepended as frame 0 at t = 0, so the
  trajectory is complete: frame k is the vorticity at time t_k and FNO's protocol (the first 10
  snapshots of ``u`` predict the next 10) reads frames 1..10 -> 11..20. ``include_initial=False``
  keeps ``u`` alone (frame k = FNO's ``u[..., k]``). ``time_stride`` is applied to that sequence.

MATLAB v5 files are read with ``scipy.io.loadmat`` (one variable at a time); v7.3 files are HDF5,
where MATLAB's column-major order shows every array with its axes REVERSED (``sol`` appears as
(s, s, N)): they are read with h5py and transposed back, as FNO's ``MatReader`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from .base import (
    ArraySource,
    PublicDataset,
    ReaderOptions,
    as_1d,
    make_options,
    open_h5,
    options_dict,
    read_failed,
    require_shape,
    select,
    stride_slices,
    strided_len,
)

NAME = "fno-mat"


class MatFile:
    """Variables of a MATLAB file, v5 (scipy) or v7.3 (HDF5), in MATLAB axis order (sample axis first)."""

    def __init__(self, path: Path):
        import h5py

        self.path = Path(path)
        self.hdf5 = h5py.is_hdf5(self.path)
        self._cache: dict[str, np.ndarray] = {}
        if self.hdf5:
            with open_h5(self.path) as f:
                self.shapes = {
                    k: tuple(reversed(ds.shape))
                    for k, ds in f.items()
                    if isinstance(ds, h5py.Dataset) and not k.startswith("#")
                }
        else:
            import scipy.io

            try:
                self.shapes = {name: tuple(shape) for name, shape, _cls in scipy.io.whosmat(str(self.path))}
            except Exception as exc:  # scipy raises ValueError, TypeError, struct.error ... on damage
                raise read_failed(self.path, exc, "MATLAB file") from None
            if not self.shapes:
                raise DataError(f"MATLAB file {self.path} holds no variables; expected FNO's arrays")

    @property
    def version(self) -> str:
        return "7.3" if self.hdf5 else "5"

    def names(self) -> list[str]:
        return sorted(self.shapes)

    def label(self, name: str) -> str:
        return f"array {name!r} of {self.path.name}"

    def read(self, name: str, lo: int | None = None, hi: int | None = None) -> np.ndarray:
        """Rows ``lo:hi`` of variable ``name`` (all rows when ``lo`` is None), MATLAB axis order."""
        if self.hdf5:
            with open_h5(self.path) as f:
                ds = f[name]
                index = (Ellipsis, slice(lo, hi)) if lo is not None and ds.ndim > 0 else ()
                try:
                    arr = np.asarray(ds[index])
                except (OSError, ValueError) as exc:
                    raise read_failed(self.path, exc, f"array {name!r} of MATLAB v7.3 file") from None
            return arr.transpose(tuple(range(arr.ndim - 1, -1, -1)))
        if name not in self._cache:
            import scipy.io

            try:
                self._cache[name] = scipy.io.loadmat(str(self.path), variable_names=[name])[name]
            except Exception as exc:
                raise read_failed(self.path, exc, "MATLAB file") from None
        arr = self._cache[name]
        return arr if lo is None else arr[lo:hi]


def is_matlab(peek) -> bool:
    """A MATLAB file: v5 (its text header), v7.3 (an HDF5 file named ``.mat`` or holding ``MATLAB_class``
    attributes), or another file named ``.mat`` (which the reader then says it cannot read)."""
    if peek.container == "matlab":
        return True
    if peek.container == "hdf5":
        return peek.suffix == ".mat" or any("MATLAB_class" in ds.attrs for ds in peek.hdf5().values())
    return peek.container == "other" and peek.suffix == ".mat"


def variables(peek) -> set[str]:
    """The variable names of the MATLAB file being looked at (read once per conversion, for the readers of FNO's and
    Geo-FNO's files)."""
    if peek.container == "hdf5":
        return peek.look("matlab variables", lambda: set(peek.hdf5().keys()))
    return peek.look("matlab variables", lambda: set(MatFile(peek.path).names()))


def claims(peek) -> bool:
    """Any MATLAB file (Geo-FNO's plasticity row, walked before this one, takes those with ``input`` and
    ``output``)."""
    return is_matlab(peek)


@dataclass
class FnoMatOptions(ReaderOptions):
    """``include_initial``: for Navier–Stokes files, prepend ``a`` as frame 0 (t = 0); see the module doc."""

    include_initial: bool = True


def read(path: Path, **options: Any) -> PublicDataset:
    """Read an FNO .mat file (Darcy, Burgers or Navier–Stokes layout, found from its variables)."""
    opts = make_options(FnoMatOptions, NAME, options)
    mat = MatFile(path)
    names = set(mat.names())
    if {"coeff", "sol"} <= names:
        return _darcy(mat, opts)
    if {"a", "u"} <= names:
        return _au(mat, opts)
    have = ", ".join(f"{k}{mat.shapes[k]}" for k in mat.names())
    if "coeff" in names or "sol" in names:
        raise DataError(
            f"MATLAB file {path} has {'coeff' if 'coeff' in names else 'sol'} but no "
            f"{'sol' if 'coeff' in names else 'coeff'}; a Darcy file needs both (it holds {have})"
        )
    if "a" in names or "u" in names:
        raise DataError(
            f"MATLAB file {path} has {'a' if 'a' in names else 'u'} but no "
            f"{'u' if 'a' in names else 'a'}; a Burgers or Navier-Stokes file needs both (it holds {have})"
        )
    raise DataError(
        f"MATLAB file {path} holds {have}; expected FNO's 'coeff' and 'sol' (Darcy) or 'a' and 'u' "
        "(Burgers, Navier-Stokes)"
    )


def _spatial_source(mat: MatFile, name: str, n: int, slices: tuple[slice, ...]) -> ArraySource:
    full = mat.shapes[name]
    shape = (n, *(strided_len(s, sl.step) for s, sl in zip(full[1:], slices)), 1)

    def fetch(lo: int, hi: int) -> np.ndarray:
        return mat.read(name, lo, hi)[(slice(None), *slices)][..., None]

    return ArraySource(shape, mat.label(name), fetch)


def _info(mat: MatFile, used: dict[str, str], extra: dict | None = None) -> dict:
    return {
        "matlab_version": mat.version,
        "source_keys": used,
        "source_shapes": {k: list(mat.shapes[k]) for k in sorted(set(used.values()))},
        "ignored": [k for k in mat.names() if k not in used.values()],
        **(extra or {}),
    }


def _darcy(mat: MatFile, opts: FnoMatOptions) -> PublicDataset:
    a_shape, u_shape = mat.shapes["coeff"], mat.shapes["sol"]
    require_shape(
        mat.label("coeff"),
        a_shape,
        "(N, s, s) with N >= 1 and s >= 2",
        len(a_shape) == 3 and a_shape[1] >= 2 and a_shape[2] >= 2 and a_shape[0] >= 1,
    )
    require_shape(mat.label("sol"), u_shape, f"{a_shape} like 'coeff'", u_shape == a_shape)
    n = select(a_shape[0], opts.max_samples)
    slices = stride_slices(opts.stride, 2)
    coords = {ax: np.linspace(0.0, 1.0, a_shape[1 + i])[slices[i]] for i, ax in enumerate("xy")}
    return PublicDataset(
        format=NAME,
        kind="darcy",
        path=mat.path,
        files=[mat.path],
        fields={"a": _spatial_source(mat, "coeff", n, slices), "u": _spatial_source(mat, "sol", n, slices)},
        coords=coords,
        inputs=("a",),
        targets=("u",),
        options=options_dict(opts),
        info=_info(mat, {"a": "coeff", "u": "sol"}, {"grid": "vertex grid x_i = i/(s-1) on [0,1]"}),
    )


def _au(mat: MatFile, opts: FnoMatOptions) -> PublicDataset:
    a_shape, u_shape = mat.shapes["a"], mat.shapes["u"]
    require_shape(mat.label("a"), a_shape, "(N, *spatial) with 1 to 3 spatial axes", 2 <= len(a_shape) <= 4)
    d = len(a_shape) - 1
    n = select(a_shape[0], opts.max_samples)
    slices = stride_slices(opts.stride, d)
    periodic = {ax: (np.arange(a_shape[1 + i]) / a_shape[1 + i])[slices[i]] for i, ax in enumerate("xyz"[:d])}
    if u_shape == a_shape:
        kind = "burgers" if d == 1 else "steady"
        return PublicDataset(
            format=NAME,
            kind=kind,
            path=mat.path,
            files=[mat.path],
            fields={"a": _spatial_source(mat, "a", n, slices), "u": _spatial_source(mat, "u", n, slices)},
            coords=periodic,
            inputs=("a",),
            targets=("u",),
            options=options_dict(opts),
            info=_info(mat, {"a": "a", "u": "u"}, {"grid": "periodic grid x_i = i/s on [0,1)"}),
        )
    require_shape(
        mat.label("u"),
        u_shape,
        f"{a_shape} (a steady pair, as Burgers) or {(*a_shape, 'T')} (a trajectory with time last, as Navier-Stokes)",
        len(u_shape) == len(a_shape) + 1 and u_shape[:-1] == a_shape and u_shape[-1] >= 1,
    )
    n_t = u_shape[-1]
    if "t" in mat.shapes:
        t = as_1d(mat.read("t")).astype(np.float64)
        require_shape(mat.label("t"), np.shape(t), f"({n_t},), one time per snapshot of 'u'", t.shape == (n_t,))
    else:
        t = np.arange(1, n_t + 1, dtype=np.float64)
    frames = np.arange(0 if opts.include_initial else 1, n_t + 1)[:: opts.time_stride]  # 0 = a, k = u[..., k-1]
    times = np.concatenate([[0.0], t])[frames]
    spatial = tuple(strided_len(s, sl.step) for s, sl in zip(a_shape[1:], slices))

    def fetch(lo: int, hi: int) -> np.ndarray:
        out = np.empty((hi - lo, len(frames), *spatial, 1), dtype=np.float32)
        u_frames = frames[frames > 0]
        if frames[0] == 0:
            out[:, 0, ..., 0] = mat.read("a", lo, hi)[(slice(None), *slices)]
        u = mat.read("u", lo, hi)[(slice(None), *slices, u_frames - 1)]  # (n, *spatial, T')
        out[:, len(frames) - len(u_frames) :, ..., 0] = np.moveaxis(u, -1, 1)
        return out

    label = f"arrays 'a'/'u' of {mat.path.name}" if opts.include_initial else mat.label("u")
    return PublicDataset(
        format=NAME,
        kind="navier-stokes" if d == 2 else "trajectory",
        path=mat.path,
        files=[mat.path],
        fields={"u": ArraySource((n, len(frames), *spatial, 1), label, fetch)},
        coords={**periodic, "t": times},
        inputs=("u",),
        targets=("u",),
        options=options_dict(opts),
        info=_info(
            mat,
            {"u0": "a", "u": "u"},
            {
                "grid": "periodic grid x_i = i/s on [0,1)",
                "frames": "frame 0 is 'a' at t=0, frame k>=1 is u[..., k-1]"
                if opts.include_initial
                else "frame k is u[..., k]",
                "t_source": "'t'" if "t" in mat.shapes else "absent; assumed 1..T",
            },
        ),
    )
