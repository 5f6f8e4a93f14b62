"""Geo-FNO's data sets (Li et al. 2022) as the Neural-Solver-Library (Transolver, LaMO) loads them.

Each set is a folder of files; ``read(folder, kind=...)`` takes the folder (or one of its files) and
finds the set from the file names when ``kind`` is not given. Layouts (verified against the
Neural-Solver-Library's ``data_provider/data_loader.py`` and Geo-FNO's scripts):

* **airfoil** (transonic flow past NACA aerofoils): ``NACA_Cylinder_X.npy``, ``NACA_Cylinder_Y.npy``
  (N, 221, 51) the coordinates of a structured C-mesh, ``NACA_Cylinder_Q.npy`` (N, 5, 221, 51) the flow
  on it, channels (density, velocity x, velocity y, pressure, Mach number) per Geo-FNO's own comment.
  The benchmark target is channel 4, the Mach number (default ``channels``).
* **pipe** (flow in a pipe): ``Pipe_X.npy``, ``Pipe_Y.npy`` (N, 129, 129), ``Pipe_Q.npy`` (N, C, 129, 129);
  the target is channel 0 (the horizontal velocity), whatever C is.
  Both: ``fields/pos`` (N, H, W, 2) = (X, Y) stacked last, ``fields/u`` (N, H, W, k) the selected Q
  channels; inputs ("pos",), targets ("u",); ``stride`` sub-samples the mesh as the library's r1, r2.
* **elasticity** (hyper-elastic unit cell with a void): ``Meshes/Random_UnitCell_XY_10.npy`` (P, 2, N)
  the point coordinates and ``Meshes/Random_UnitCell_sigma_10.npy`` (P, N) the stress at them, P = 972
  (the library permutes them to (N, P, 2) and (N, P)). Stored: ``fields/pos`` (N, P, 2), ``fields/u``
  (N, P, 1); inputs ("pos",), targets ("u",). The folder may be the set folder, ``Meshes`` or a parent
  holding ``elasticity/Meshes``.
* **plasticity** (a die pressed into a plastic block): ``plas_N987_T20.mat`` (MATLAB v5; v7.3 read too)
  with ``input`` (N, 101) the die profile and ``output`` (N, 101, 31, 20, 4) four quantities on the
  101 x 31 mesh at 20 times (time on axis 3). Stored: ``fields/a`` (N, 101, 31, 1) = the profile
  repeated along the second axis (as the library feeds it), ``fields/u`` (N, 20, 101, 31, 4) with time
  first; ``coords/x``, ``coords/y``, ``coords/t`` = linspace(0, 1, n) on each axis, the library's
  normalised coordinates (the files hold no physical ones); inputs ("a",), targets ("u",). The four
  output channels are kept as stored (Geo-FNO: deformed mesh and stress quantities; not renamed here).

*Assumptions* (not stated by the files): the Q channel names above; Pipe_Q's channel count is read
from the file. Shapes other than the published ones are accepted when they are consistent (the
checks are on axis count and agreement between files), so sub-sets of the data read too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from .base import (
    ArraySource,
    PublicDataset,
    ReaderOptions,
    make_options,
    options_dict,
    read_failed,
    require_shape,
    select,
    stride_slices,
    strided_len,
)
from .fno_mat import MatFile, is_matlab, variables

NAME = "geo-fno"
SETS = ("airfoil", "pipe", "elasticity", "plasticity")
FILES = {
    "airfoil": ("NACA_Cylinder_X.npy", "NACA_Cylinder_Y.npy", "NACA_Cylinder_Q.npy"),
    "pipe": ("Pipe_X.npy", "Pipe_Y.npy", "Pipe_Q.npy"),
    "elasticity": ("Random_UnitCell_XY_10.npy", "Random_UnitCell_sigma_10.npy"),
}
SUBDIRS = ("", "naca", "pipe", "Meshes", "elasticity/Meshes", "elasticity", "plasticity", "plas")
AIRFOIL_CHANNELS = ("density", "velocity_x", "velocity_y", "pressure", "mach")
DEFAULT_CHANNELS = {"airfoil": (4,), "pipe": (0,)}


@dataclass
class GeoFnoOptions(ReaderOptions):
    """``channels``: airfoil/pipe Q channels to keep (a list of indices, ``"all"``, or None: the benchmark's)."""

    channels: Any = None


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def _find(folder: Path, name: str) -> Path | None:
    for sub in SUBDIRS:
        p = folder / sub / name if sub else folder / name
        if p.is_file():
            return p
    return None


def _plasticity_file(path: Path) -> Path | None:
    if path.is_file() and path.suffix == ".mat":
        return path
    folder = _folder(path)
    for sub in SUBDIRS:
        d = folder / sub if sub else folder
        if d.is_dir():
            hits = sorted(d.glob("plas*.mat"))
            if hits:
                return hits[0]
    return None


def detect(path: Path) -> list[str]:
    """The Geo-FNO sets whose files are present at ``path`` (a folder or one of the set's files)."""
    path = Path(path)
    if path.is_file():
        for kind, names in FILES.items():
            if path.name in names:
                return [kind]
        if path.suffix == ".mat":
            return ["plasticity"]
    folder = _folder(path)
    found = [k for k, names in FILES.items() if _find(folder, names[0]) is not None]
    if _plasticity_file(folder) is not None:
        found.append("plasticity")
    return found


def claims(peek, kind: str) -> bool | str:
    """Whether the file or folder ``peek`` looks at is Geo-FNO's set ``kind``: a folder holding the set's files (a
    sentence when it holds several sets), one of the set's ``.npy`` files by name, or for plasticity a MATLAB file
    with ``input`` and ``output``."""
    if peek.container == "folder":
        found = peek.look("geo-fno sets", lambda: detect(peek.path))
        if kind not in found:
            return False
        if len(found) > 1:
            return f"folder {peek.path} holds several Geo-FNO sets ({', '.join(found)}); choose one with kind=<name>"
        return True
    if kind == "plasticity":
        return is_matlab(peek) and {"input", "output"} <= variables(peek)
    return peek.container == "npy" and peek.path.name in FILES[kind]


def read(path: Path, kind: str | None = None, **options: Any) -> PublicDataset:
    """Read the Geo-FNO set ``kind`` (airfoil | pipe | elasticity | plasticity) at ``path``."""
    path = Path(path)
    opts = make_options(GeoFnoOptions, NAME, options)
    if kind is None:
        found = detect(path)
        if not found:
            raise DataError(
                f"{path} holds none of Geo-FNO's sets; expected NACA_Cylinder_{{X,Y,Q}}.npy (airfoil), "
                "Pipe_{X,Y,Q}.npy (pipe), Meshes/Random_UnitCell_{XY,sigma}_10.npy (elasticity) or "
                "plas_N987_T20.mat (plasticity)"
            )
        if len(found) > 1:
            raise DataError(f"{path} holds several Geo-FNO sets ({', '.join(found)}); choose one with kind=<name>")
        kind = found[0]
    if kind not in SETS:
        from ...errors import unknown_name

        raise unknown_name("Geo-FNO set", kind, SETS)
    if kind == "plasticity":
        return _plasticity(path, opts)
    if opts.channels is not None and kind == "elasticity":
        raise ConfigError("option channels applies to airfoil and pipe, not to elasticity (one stress value per point)")
    folder = _folder(path)
    files = []
    for name in FILES[kind]:
        p = _find(folder, name)
        if p is None:
            raise DataError(
                f"folder {folder} has no {name}, which the Geo-FNO {kind} set needs ({', '.join(FILES[kind])})"
            )
        files.append(p)
    arrays = [_npy(p) for p in files]
    if kind == "elasticity":
        return _elasticity(folder, files, arrays, opts)
    return _mesh2d(kind, folder, files, arrays, opts)


def _npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # ValueError (mmap length, bad header), EOFError, OSError
        raise read_failed(path, exc, "numpy file") from None
    if not isinstance(arr, np.ndarray):
        raise DataError(f"file {path} holds a {type(arr).__name__}, expected one numpy array")
    return arr


def _mesh2d(kind: str, folder: Path, files: list[Path], arrays: list[np.ndarray], opts) -> PublicDataset:
    X, Y, Q = arrays
    fx, fy, fq = (p.name for p in files)
    require_shape(f"array {fx}", X.shape, "(N, H, W), the mesh x-coordinates", X.ndim == 3)
    require_shape(f"array {fy}", Y.shape, f"{X.shape} like {fx}", Y.shape == X.shape)
    require_shape(
        f"array {fq}",
        Q.shape,
        f"(N, C, H, W) = ({X.shape[0]}, C, {X.shape[1]}, {X.shape[2]})",
        Q.ndim == 4 and Q.shape[0] == X.shape[0] and Q.shape[2:] == X.shape[1:],
    )
    if opts.channels is None:
        channels = DEFAULT_CHANNELS[kind]
    elif opts.channels == "all":
        channels = tuple(range(Q.shape[1]))
    else:
        channels = (opts.channels,) if isinstance(opts.channels, int) else tuple(opts.channels)
        if not channels or not all(isinstance(c, int) and c >= 0 for c in channels):
            raise ConfigError(
                f"option channels must be None, 'all' or a list of channel indices >= 0, got {opts.channels!r}"
            )
    if max(channels) >= Q.shape[1]:
        raise DataError(
            f"array {fq} has shape {Q.shape} with {Q.shape[1]} channels, expected channel {max(channels)}"
            + (" (the Mach number, the benchmark target)" if kind == "airfoil" and opts.channels is None else "")
        )
    n = select(X.shape[0], opts.max_samples)
    sl = stride_slices(opts.stride, 2)
    h, w = (strided_len(s, st.step) for s, st in zip(X.shape[1:], sl))
    ch = list(channels)

    def pos(lo: int, hi: int) -> np.ndarray:
        return np.stack([X[(slice(lo, hi), *sl)], Y[(slice(lo, hi), *sl)]], axis=-1)

    def out(lo: int, hi: int) -> np.ndarray:
        return np.moveaxis(Q[lo:hi][:, ch][(slice(None), slice(None), *sl)], 1, -1)

    names = [AIRFOIL_CHANNELS[c] if kind == "airfoil" and c < len(AIRFOIL_CHANNELS) else f"q{c}" for c in ch]
    return PublicDataset(
        format=NAME,
        kind=kind,
        path=folder,
        files=files,
        fields={
            "pos": ArraySource((n, h, w, 2), f"arrays {fx}/{fy}", pos),
            "u": ArraySource((n, h, w, len(ch)), f"array {fq}", out),
        },
        inputs=("pos",),
        targets=("u",),
        options=options_dict(opts),
        info={"source_keys": {"pos": [fx, fy], "u": f"{fq}[:, {ch}]"}, "channels": names},
    )


def _elasticity(folder: Path, files: list[Path], arrays: list[np.ndarray], opts) -> PublicDataset:
    xy, sigma = arrays
    fxy, fs = (p.name for p in files)
    require_shape(
        f"array {fxy}", xy.shape, "(P, 2, N): P points, 2 coordinates, N samples", xy.ndim == 3 and xy.shape[1] == 2
    )
    require_shape(
        f"array {fs}",
        sigma.shape,
        f"({xy.shape[0]}, {xy.shape[2]}) = (P, N) like {fxy}",
        sigma.shape == (xy.shape[0], xy.shape[2]),
    )
    if opts.stride != 1:
        raise ConfigError("option stride does not apply to elasticity (a point cloud); leave it at 1")
    n = select(xy.shape[2], opts.max_samples)
    p = xy.shape[0]
    return PublicDataset(
        format=NAME,
        kind="elasticity",
        path=folder,
        files=files,
        fields={
            "pos": ArraySource((n, p, 2), f"array {fxy}", lambda lo, hi: np.transpose(xy[:, :, lo:hi], (2, 0, 1))),
            "u": ArraySource((n, p, 1), f"array {fs}", lambda lo, hi: np.transpose(sigma[:, lo:hi])[..., None]),
        },
        inputs=("pos",),
        targets=("u",),
        options=options_dict(opts),
        info={"source_keys": {"pos": f"{fxy} (P, 2, N) -> (N, P, 2)", "u": f"{fs} (P, N) -> (N, P, 1)"}},
    )


def _plasticity(path: Path, opts) -> PublicDataset:
    if opts.channels is not None:
        raise ConfigError("option channels applies to airfoil and pipe, not to plasticity")
    file = _plasticity_file(path)
    if file is None:
        raise DataError(f"{path} has no plas*.mat file, which the Geo-FNO plasticity set needs (plas_N987_T20.mat)")
    mat = MatFile(file)
    for key, what in (("input", "the die profile (N, X)"), ("output", "the solution (N, X, Y, T, C)")):
        if key not in mat.shapes:
            raise DataError(f"file {file} has no {key!r} ({what}); it holds {mat.names()}")
    a_shape, u_shape = mat.shapes["input"], mat.shapes["output"]
    require_shape(mat.label("input"), a_shape, "(N, X), one die profile per sample", len(a_shape) == 2)
    require_shape(
        mat.label("output"),
        u_shape,
        f"({a_shape[0]}, {a_shape[1]}, Y, T, C) matching 'input' {a_shape}",
        len(u_shape) == 5 and u_shape[:2] == a_shape,
    )
    n = select(a_shape[0], opts.max_samples)
    sl = stride_slices(opts.stride, 2)
    ts = slice(None, None, opts.time_stride)
    nx, ny, nt = (
        strided_len(u_shape[1], sl[0].step),
        strided_len(u_shape[2], sl[1].step),
        strided_len(u_shape[3], opts.time_stride),
    )

    def a(lo: int, hi: int) -> np.ndarray:
        prof = mat.read("input", lo, hi)[:, sl[0]]
        return np.repeat(prof[:, :, None, None], ny, axis=2)

    def u(lo: int, hi: int) -> np.ndarray:
        return np.moveaxis(mat.read("output", lo, hi)[:, sl[0], sl[1], ts], 3, 1)

    coords = {
        "x": np.linspace(0, 1, u_shape[1])[sl[0]],
        "y": np.linspace(0, 1, u_shape[2])[sl[1]],
        "t": np.linspace(0, 1, u_shape[3])[ts],
    }
    return PublicDataset(
        format=NAME,
        kind="plasticity",
        path=file,
        files=[file],
        fields={
            "a": ArraySource((n, nx, ny, 1), mat.label("input"), a),
            "u": ArraySource((n, nt, nx, ny, u_shape[4]), mat.label("output"), u),
        },
        coords=coords,
        inputs=("a",),
        targets=("u",),
        options=options_dict(opts),
        info={
            "source_keys": {"a": "input (repeated along y)", "u": "output (N, X, Y, T, C) -> (N, T, X, Y, C)"},
            "matlab_version": mat.version,
            "coords": "normalised linspace(0, 1, n) per axis, as the Neural-Solver-Library",
        },
    )
