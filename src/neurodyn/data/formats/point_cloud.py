"""Point clouds from a user's files: torch lists of per-sample dicts, and ``.npz`` arrays.

* **torch** ``.pt`` (``torch.save`` of a list of dicts, one per sample, as neuraloperator's car-CFD files such as
  ``mini_car.pt``): each dict holds the point coordinates ``(P, d)`` (``(P,)`` and leading axes of length 1 are
  read too) and the target at the points: one value per point in any layout with axes of length 1 (``(P,)``,
  ``(1, P)`` as neuraloperator's ``press``, ``(P, 1)``, ``(1, P, 1)``...) or ``c`` values per point as ``(P, c)``
  or ``(c, P)`` where only one axis has length ``P`` (:func:`per_point_layout`); any other shape is one DataError
  naming the shape found and the shapes expected. ``P`` may differ between samples. The keys are found by name
  (coordinates: ``vertices``, ``points``, ``pos``, ``coords``; target: ``press``, ``pressure``, ``y``, ``u``) or
  chosen with the options ``points=KEY`` and ``target=KEY``; a file where none or several match is refused with
  the keys it holds. Loaded with ``torch.load(weights_only=True)``: a file holding anything but tensors and plain
  containers is refused instead of executed.
* **npz** (``np.savez(FILE, x=..., y=..., mask=...)``): ``x (N, P, d)`` the coordinates, ``y (N, P, c)`` (or
  ``(N, P)``, ``(N, c, P)``, and axes of length 1 anywhere after ``N``, as above) the target, optional
  ``mask (N, P)`` of 0/1 (1: a real point; the values at 0 are ignored).

Stored (the layout of Geo-FNO's elasticity set): ``fields/pos (N, P_max, d)`` the coordinates (the input),
``fields/u (N, P_max, c)`` the target; inputs ``("pos",)``, targets ``("u",)``. When the point counts differ,
every sample is padded with zeros to ``P_max`` and ``fields/mask (N, P_max, 1)`` holds 1 on real points and 0 on
padding (the training loss, the metrics and the point-cloud models skip the padding).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from .base import (
    ArraySource,
    PublicDataset,
    ReaderOptions,
    load_torch_file,
    make_options,
    options_dict,
    read_failed,
    select,
)

NAME = "point-cloud"
POINT_KEYS = ("vertices", "points", "pos", "coords")
TARGET_KEYS = ("press", "pressure", "y", "u")


@dataclass
class PointCloudOptions(ReaderOptions):
    """``points`` / ``target``: the keys of the coordinates and of the target in each sample's dict (torch
    lists; None: found by name)."""

    points: Any = None
    target: Any = None


def npz_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """``name -> shape`` of the arrays of an ``.npz`` from their headers (nothing loaded)."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if not name.endswith(".npy"):
                continue
            with z.open(name) as fh:
                version = np.lib.format.read_magic(fh)
                shape = (
                    np.lib.format.read_array_header_1_0(fh)
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0(fh)
                )[0]
            out[name[:-4]] = tuple(shape)
    return out


def torch_archive(path: Path) -> bool:
    """Whether the zip archive ``path`` is a ``torch.save`` file (it holds ``<name>/data.pkl``)."""
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith("data.pkl") for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def looks_like_npz(path: Path) -> bool:
    """An ``.npz`` of point clouds: ``x (N, P, d)`` and ``y`` of three axes or more holding values at the ``P``
    points (:func:`per_point_layout`: ``(N, P, c)``, ``(N, 1, P)``, ``(N, c, P)``...; a sequence ``.npz`` has
    ``y (N,)`` or ``(N, T)``)."""
    try:
        shapes = npz_shapes(path)
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    x, y = shapes.get("x"), shapes.get("y")
    return (
        x is not None
        and y is not None
        and len(x) == 3
        and len(y) >= 3
        and x[0] == y[0]
        and per_point_layout(y[1:], x[1]) is not None
    )


def claims(peek) -> bool:
    """An ``.npz`` of point clouds (:func:`looks_like_npz`); a torch list of them is read only with
    ``kind=point-cloud`` (neuraloperator's reader hands such a file here too)."""
    return (
        peek.container == "zip" and ("x.npy" in peek.zip_names() or peek.suffix == ".npz") and looks_like_npz(peek.path)
    )


def _pick(keys: list[str], given: Any, known: tuple[str, ...], what: str, option: str, where: str) -> str:
    if given is not None:
        if given not in keys:
            raise DataError(f"{where} has no key {given!r} (option {option}); it holds {keys}")
        return given
    found = [k for k in known if k in keys]
    if len(found) != 1:
        how = f"several candidates ({', '.join(found)})" if found else f"none of {', '.join(known)}"
        raise DataError(
            f"{where}: cannot tell which key holds the {what}: {how}; it holds {keys}. Choose with {option}=KEY"
        )
    return found[0]


def _ragged(
    path: Path,
    pos: list[np.ndarray],
    target: list[np.ndarray],
    masks: list[np.ndarray] | None,
    info: dict[str, Any],
    opts: PointCloudOptions,
    kind: str,
) -> PublicDataset:
    """A dataset of per-sample ``pos (P_i, d)``, ``target (P_i, c)`` (``masks``: which points are real, or None:
    all), padded to the largest ``P``."""
    n = select(len(pos), opts.max_samples)
    pos, target = pos[:n], target[:n]
    masks = [np.ones(len(p), dtype=bool) for p in pos] if masks is None else masks[:n]
    p_max = max(len(p) for p in pos)
    padded = any(len(p) != p_max for p in pos) or not all(m.all() for m in masks)
    d, c = pos[0].shape[1], target[0].shape[1]
    P = np.zeros((n, p_max, d), dtype=np.float32)
    U = np.zeros((n, p_max, c), dtype=np.float32)
    M = np.zeros((n, p_max, 1), dtype=np.float32)
    for i, (p, u, m) in enumerate(zip(pos, target, masks)):
        k = len(p)
        P[i, :k], U[i, :k], M[i, :k, 0] = np.where(m[:, None], p, 0), np.where(m[:, None], u, 0), m
    fields = {
        "pos": ArraySource(P.shape, f"coordinates of {path.name}", lambda lo, hi: P[lo:hi]),
        "u": ArraySource(U.shape, f"target of {path.name}", lambda lo, hi: U[lo:hi]),
    }
    if padded:
        fields["mask"] = ArraySource(M.shape, f"point mask of {path.name}", lambda lo, hi: M[lo:hi])
    counts = M[..., 0].sum(1).astype(int)
    info = {
        **info,
        "points_min": int(counts.min()),
        "points_max": int(counts.max()),
        "dims": int(d),
        "channels": int(c),
        "padded": bool(padded),
    }
    return PublicDataset(
        format=NAME,
        kind=kind,
        path=path,
        files=[path],
        fields=fields,
        inputs=("pos",),
        targets=("u",),
        options=options_dict(opts),
        info=info,
    )


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _as_coords(arr: np.ndarray, label: str, width: int | None = None) -> np.ndarray:
    """The coordinates ``(P,)``, ``(P, d)`` or either with leading singleton axes (``(1, P, d)``) -> ``(P, d)``
    float; anything else one DataError naming ``label``, the shape found and the shape expected."""
    arr = np.asarray(arr)
    found = arr.shape
    while arr.ndim > 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] < 1 or not np.issubdtype(arr.dtype, np.number):
        raise DataError(
            f"{label} has shape {_shape(found)} and dtype {arr.dtype}; expected numbers of shape (P, d) "
            "(or (P,), or with leading axes of length 1) with P >= 1 points"
        )
    if width is not None and arr.shape[1] != width:
        raise DataError(
            f"{label} has shape {_shape(found)}, {arr.shape[1]}-d coordinates where the first sample has "
            f"{width}-d; expected one dimension for every sample"
        )
    return arr.astype(np.float64)


def per_point_layout(shape: tuple[int, ...], n_points: int, width: int | None = None) -> tuple[str, int] | None:
    """How an array of ``shape`` holds values at ``n_points`` points, or None when it cannot be read as such.

    Axes of length 1 are dropped first (unless the points or the width are 1 themselves, then kept as one
    axis), so every singleton layout of one value per point (``(P,)``, ``(1, P)``, ``(P, 1)``, ``(1, P, 1)``)
    is ``("points", 1)``. Two axes left: ``(P, c)`` is ``("points", c)`` and ``(c, P)`` is
    ``("channels", c)`` (transposed by the reader), only when one axis alone has length ``P``; ``(P, P)``, a
    third non-singleton axis or no axis of length ``P`` give None. ``width``: the channel count an earlier
    sample fixed, which must match.
    """
    dims = [n for n in shape if n != 1]
    size = int(np.prod(shape)) if shape else 1
    if size == n_points and (not dims or dims == [n_points]):
        layout = ("points", 1)
    elif len(dims) == 2 and (dims[0] == n_points) != (dims[1] == n_points):
        layout = ("points", dims[1]) if dims[0] == n_points else ("channels", dims[0])
    elif len(dims) == 1 and n_points == 1:  # one point, a vector of values at it
        layout = ("points", dims[0])
    else:
        return None
    return layout if width is None or layout[1] == width else None


def _expected(n_points: int, width: int | None) -> str:
    """The layouts of values at ``n_points`` points, for a message."""
    one = f"({n_points},) or the same with axes of length 1 such as (1, {n_points})"
    if width == 1:
        return f"{one} as the first sample"
    if width is not None:
        return f"({n_points}, {width}) or ({width}, {n_points}) as the first sample"
    return f"{one}, or vectors ({n_points}, c) / (c, {n_points})"


def _as_values(arr: np.ndarray, label: str, n_points: int, points: str, width: int | None = None) -> np.ndarray:
    """The target at ``n_points`` points in any layout :func:`per_point_layout` reads -> ``(P, c)`` float; any
    other one DataError naming ``label``, the shape found, the points (``points``: where they come from) and the
    shapes expected."""
    arr = np.asarray(arr)
    if not np.issubdtype(arr.dtype, np.number):
        raise DataError(f"{label} has dtype {arr.dtype}; expected numbers, one value (or vector) per point")
    layout = per_point_layout(arr.shape, n_points, width)
    if layout is None:
        raise DataError(
            f"{label} has shape {_shape(arr.shape)} where {points} holds {n_points} points; expected "
            f"one value per point, shape {_expected(n_points, width)}"
        )
    kind, c = layout
    out = arr.reshape([n for n in arr.shape if n != 1]).T if kind == "channels" else arr.reshape(n_points, c)
    return np.ascontiguousarray(out, dtype=np.float64)


def from_samples(path: Path, samples: list, **options: Any) -> PublicDataset:
    """A torch list of per-sample dicts (already loaded with ``weights_only=True``) as a point-cloud dataset."""
    import torch

    opts = make_options(PointCloudOptions, NAME, options)
    if not samples:
        raise DataError(f"file {path} holds an empty list; expected one dict per sample")
    pos, target = [], []
    pk = tk = None
    for i, s in enumerate(samples):
        where = f"sample {i} of {path}"
        if not isinstance(s, dict):
            raise DataError(f"{where} is a {type(s).__name__}; expected a dict of tensors (points and target)")
        keys = sorted(map(str, s))
        if pk is None:
            pk = _pick(keys, opts.points, POINT_KEYS, "point coordinates (P, d)", "points", where)
            tk = _pick(keys, opts.target, TARGET_KEYS, "target at the points (P,) or (P, c)", "target", where)
        for key in (pk, tk):
            if key not in s:
                raise DataError(f"{where} has no {key!r} (sample 0 has it); it holds {keys}")
            if not isinstance(s[key], torch.Tensor) or s[key].is_complex():
                raise DataError(f"entry {key!r} of {where} is a {type(s[key]).__name__}; expected a real tensor")
        p = _as_coords(s[pk].detach().cpu().double().numpy(), f"{pk!r} of {where}", pos[0].shape[1] if pos else None)
        u = _as_values(
            s[tk].detach().cpu().double().numpy(),
            f"{tk!r} of {where}",
            len(p),
            f"{pk!r} {_shape(tuple(s[pk].shape))}",
            target[0].shape[1] if target else None,
        )
        pos.append(p)
        target.append(u)
    return _ragged(path, pos, target, None, {"source_keys": {"pos": pk, "u": tk}}, opts, "torch-list")


def read(path: Path, **options: Any) -> PublicDataset:
    """A point-cloud ``.npz``, or a torch file holding a list of per-sample dicts (module doc)."""
    with open(path, "rb") as fh:
        zipped = fh.read(4) == b"PK\x03\x04"
    if zipped and not torch_archive(path):
        return read_npz(path, **options)
    obj = load_torch_file(path)
    if not isinstance(obj, list):
        raise DataError(
            f"file {path} holds a {type(obj).__name__}; a point-cloud torch file holds a list of "
            "per-sample dicts (points and target)"
        )
    return from_samples(path, obj, **options)


def read_npz(path: Path, **options: Any) -> PublicDataset:
    """``np.savez`` arrays ``x (N, P, d)``, ``y (N, P, c)`` or ``(N, P)``, optional ``mask (N, P)``."""
    opts = make_options(PointCloudOptions, NAME, options)
    if opts.points is not None or opts.target is not None:
        raise ConfigError(
            "options points / target choose keys of a torch list; an .npz is read from its arrays x, y (and mask)"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files if k in ("x", "y", "mask")}
            names = list(z.files)
    except Exception as exc:  # a damaged zip or member, or pickled objects
        raise read_failed(path, exc, ".npz file") from None
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(f"{path}: no array {key!r}; the file holds {names} and needs x (N, P, d) and y (N, P, c)")
    x, y = arrays["x"], arrays["y"]
    if x.ndim != 3 or y.ndim < 2 or x.shape[0] != y.shape[0] or min(x.shape[:2]) < 1:
        raise DataError(
            f"{path}: x has shape {_shape(x.shape)} and y {_shape(y.shape)}; expected x (N, P, d) and y "
            "(N, P, c) or (N, P) with the same N"
        )
    layout = per_point_layout(y.shape[1:], x.shape[1])
    if layout is None:
        raise DataError(
            f"{path}: y has shape {_shape(y.shape)} where x {_shape(x.shape)} holds {x.shape[1]} points "
            f"per sample; expected ({x.shape[0]}, P, c), ({x.shape[0]}, c, P) or ({x.shape[0]}, P) with "
            "any axes of length 1"
        )
    n, P = x.shape[:2]
    y = y.reshape(n, layout[1], P).transpose(0, 2, 1) if layout[0] == "channels" else y.reshape(n, P, layout[1])
    for key, arr in (("x", x), ("y", y)):
        if not np.issubdtype(arr.dtype, np.number):
            raise DataError(f"{path}: {key} has dtype {arr.dtype}; expected numbers")
    masks = None
    if "mask" in arrays:
        m = arrays["mask"]
        if m.shape != x.shape[:2] or not np.isin(m, (0, 1)).all():
            raise DataError(f"{path}: mask has shape {m.shape}; expected 0/1 values of shape (N, P) = {x.shape[:2]}")
        masks = [row.astype(bool) for row in m]
        empty = [i for i, row in enumerate(masks) if not row.any()]
        if empty:
            raise DataError(f"{path}: sample {empty[0]}: the mask marks no point as real; expected at least one")
    return _ragged(
        path,
        list(x.astype(np.float64)),
        list(y.astype(np.float64)),
        masks,
        {"source_keys": {"pos": "x", "u": "y"}},
        opts,
        "npz",
    )


def summary_line(n_samples: int, info: dict[str, Any]) -> str:
    """One line describing a converted point-cloud set (``info``: the reader's description): samples, points,
    dimensions, output channels."""
    i = info
    points = (
        f"{i['points_min']} points"
        if i["points_min"] == i["points_max"]
        else f"{i['points_min']}..{i['points_max']} points (padded, with fields/mask)"
    )
    return (
        f"{n_samples} point clouds, {points}, {i['dims']}-d coordinates, {i['channels']} output "
        f"channel{'s' if i['channels'] != 1 else ''}"
    )


__all__ = ["read", "read_npz", "from_samples", "claims", "looks_like_npz", "summary_line"]
