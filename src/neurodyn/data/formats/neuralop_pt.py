"""neuraloperator's ``.pt`` dictionaries (``darcy_train_16.pt``, ``burgers_train_16.pt``, ``nsforcing_*.pt``).

Each file is ``torch.save(dict(x=tensor, y=tensor, ...))``; it is loaded with
``torch.load(weights_only=True)``, so a file holding anything but tensors and plain containers is
refused instead of executed. By default (``channel_dim=None``) the channel axis is taken as squeezed
out, as in neuraloperator's small Darcy (x, y: (N, 16, 16)) and Burgers files and its ``PTDataset``
default ``channels_squeezed=True``; give ``channel_dim=1`` for files that keep a channel axis there.

Two layouts are recognised (shapes after moving channels last):

* **steady** (Darcy, NS-forcing): x (N, *spatial, Cx), y (N, *spatial, Cy) -> ``fields/a`` = x,
  ``fields/u`` = y; inputs ("a",), targets ("u",).
* **space-time** (Burgers 1-D time: x (N, X) the initial condition, y (N, T, X) the solution): ->
  ``fields/a`` (N, X, Cx), ``fields/u`` (N, T, X, Cy) with time first, as every trajectory in the store;
  inputs ("a",), targets ("u",). neuraloperator's processor repeats ``a`` along T to learn the map
  a -> u(t, x) on the (T, X) grid; a consumer doing the same broadcasts ``fields/a`` over T.

A file holding a list of per-sample dicts (point clouds of any sizes, as neuraloperator's car files) is read by
:mod:`~neurodyn.data.formats.point_cloud`.

Other tensors with N rows and at most 2 axes become ``params/<name>``; anything else is listed in
``info["ignored"]``. The files carry no grid, so no ``coords`` are stored.
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
    load_torch_file,
    make_options,
    options_dict,
    require_shape,
    select,
    stride_slices,
)

NAME = "neuralop-pt"


@dataclass
class PtOptions(ReaderOptions):
    """``channel_dim``: the axis of x and y holding channels (None: squeezed, one channel)."""

    channel_dim: Any = None


def claims(peek) -> bool:
    """A ``torch.save`` file: a zip archive holding ``<name>/data.pkl``, or a legacy pickle (first byte ``0x80``)."""
    if peek.container == "pickle":
        return True
    return peek.container == "zip" and any(n.endswith("data.pkl") for n in peek.zip_names())


def read(path: Path, **options: Any) -> PublicDataset:
    """Read a neuraloperator ``.pt`` dict with tensors ``x`` (input) and ``y`` (output)."""
    import torch

    path = Path(path)
    obj = load_torch_file(path)
    if isinstance(obj, list) and obj and all(isinstance(s, dict) for s in obj):  # point clouds (car files)
        from .point_cloud import from_samples

        return from_samples(path, obj, **options)
    opts = make_options(PtOptions, NAME, options)
    if opts.channel_dim is not None and (not isinstance(opts.channel_dim, int) or opts.channel_dim < 1):
        raise ConfigError(
            f"option channel_dim must be None (channels squeezed) or an axis >= 1, got {opts.channel_dim!r}"
        )
    if not isinstance(obj, dict):
        raise DataError(
            f"file {path} holds a {type(obj).__name__}; expected a dict with tensors 'x' and 'y' "
            "(neuraloperator's layout), or a list of per-sample dicts (point clouds)"
        )
    for key in ("x", "y"):
        if key not in obj:
            raise DataError(
                f"file {path} has no {key!r} (the {'input' if key == 'x' else 'output'} tensor); it holds "
                f"{sorted(map(str, obj))}"
            )
        if not isinstance(obj[key], torch.Tensor):
            raise DataError(f"entry {key!r} of {path} is a {type(obj[key]).__name__}; expected a tensor")
    arrays = {}
    for key in ("x", "y"):
        t = obj[key].detach().cpu()
        if t.is_complex():
            raise DataError(f"tensor {key!r} of {path} is complex; expected real values")
        arr = t.to(torch.float32).numpy()
        if opts.channel_dim is not None:
            require_shape(
                f"tensor {key!r} of {path.name}",
                arr.shape,
                f"an axis {opts.channel_dim} holding channels (option channel_dim)",
                arr.ndim > opts.channel_dim + 1,
            )
            arr = np.moveaxis(arr, opts.channel_dim, -1)
        else:
            arr = arr[..., None]
        require_shape(
            f"tensor {key!r} of {path.name}",
            arr.shape[:-1] if opts.channel_dim is None else arr.shape,
            "(N, *spatial) with at least one spatial axis",
            arr.ndim >= 3,
        )
        arrays[key] = arr
    x, y = arrays["x"], arrays["y"]
    require_shape(
        f"tensor 'y' of {path.name}",
        y.shape[:-1],
        f"{x.shape[0]} samples like 'x' {x.shape[:-1]}",
        y.shape[0] == x.shape[0],
    )
    sx, sy = x.shape[1:-1], y.shape[1:-1]
    if sx == sy:
        kind, time = "steady", False
    elif len(sy) == len(sx) + 1 and sy[1:] == sx:
        kind, time = "space-time", True
    else:
        raise DataError(
            f"tensor 'y' of {path.name} has spatial shape {sy}, expected {sx} like 'x' (a steady pair) or "
            f"(T, {', '.join(map(str, sx))}) (a trajectory from the initial condition 'x')"
        )
    n = select(x.shape[0], opts.max_samples)
    slices = stride_slices(opts.stride, len(sx))
    x = x[(slice(0, n), *slices)]
    y = y[(slice(0, n), *(((slice(None, None, opts.time_stride),) if time else ()) + slices))]

    def source(arr: np.ndarray, key: str) -> ArraySource:
        return ArraySource(arr.shape, f"tensor {key!r} of {path.name}", lambda lo, hi: arr[lo:hi])

    params, ignored = {}, []
    n_all = obj["x"].shape[0]
    for key, val in sorted(obj.items(), key=lambda kv: str(kv[0])):
        if key in ("x", "y"):
            continue
        if isinstance(val, torch.Tensor) and val.ndim in (1, 2) and val.shape[0] == n_all and not val.is_complex():
            params[str(key)] = val.detach().cpu().to(torch.float64).numpy()[:n]
        else:
            ignored.append(str(key))
    return PublicDataset(
        format=NAME,
        kind=kind,
        path=path,
        files=[path],
        fields={"a": source(x, "x"), "u": source(y, "y")},
        params=params,
        inputs=("a",),
        targets=("u",),
        options=options_dict(opts),
        param_labels={k: f"tensor {k!r} of {path.name}" for k in params},
        info={
            "source_keys": {"a": "x", "u": "y"},
            "ignored": ignored,
            "channels": "squeezed (one channel added)"
            if opts.channel_dim is None
            else f"axis {opts.channel_dim} moved last",
        },
    )
