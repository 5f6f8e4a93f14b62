"""The one check of a model's input ``x`` that every registered model runs at the top of ``forward``.

:func:`check_input` refuses, each in one sentence naming the model and the shape or dtype: a non-tensor or a
tensor of the wrong rank, the wrong channel count (the last axis), an empty axis (batch 0, no points, no steps)
and a dtype other than the model's parameters' (float64 into a float32 model, integers). The per-layout
wrappers below (:func:`check_grid_input`, :func:`check_grid2d_input`, :func:`check_mesh_input`,
:func:`check_sequence_input`) say which layout is expected and check ``pos`` / ``ctx`` / ``t`` / ``mask``
(:func:`check_grid_extras`, :func:`check_ctx`).

An empty batch is refused rather than passed through: several models reshape with ``-1``, which an empty tensor
leaves ambiguous, and a batch of no samples is a caller's bug (an empty split) that an empty output would hide.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "check_input",
    "grid_shape",
    "parameter_dtype",
    "check_ctx",
    "check_grid_extras",
    "check_grid_input",
    "check_grid2d_input",
    "check_mesh_input",
    "check_sequence_input",
]

# the call that converts to a dtype, as a user would write it
_CAST = {torch.float64: "double", torch.float32: "float", torch.float16: "half", torch.bfloat16: "bfloat16"}


def parameter_dtype(model: nn.Module) -> torch.dtype | None:
    """The dtype of ``model``'s first floating-point parameter (None if it has none)."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), None)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _cast(obj: str, dtype: torch.dtype) -> str:
    """``"x.float()"``, or ``"x.to(torch.float8_e4m3fn)"`` for a dtype without its own method."""
    return f"{obj}.{_CAST[dtype]}()" if dtype in _CAST else f"{obj}.to({dtype})"


def grid_shape(n_spatial: int, channels: int, frames: bool = False) -> str:
    """``"(batch, n1, n2, 3)"`` (``frames``: ``"(batch, frames, n1, n2, 3)"``) for messages."""
    axes = ", ".join(["frames"] * frames + [f"n{j + 1}" for j in range(n_spatial)])
    return f"(batch, {axes}, {channels})"


def check_input(name: str, x, model: nn.Module, layout: str, ranks: tuple[int, ...], channels: int) -> None:
    """Raise ValueError unless ``x`` is a tensor of one of ``ranks`` with ``channels`` in its last axis, no empty
    axis, and the floating dtype of ``model``'s parameters. ``layout`` is the expected shape in words, e.g.
    ``"(batch, n1, n2, 3) with 2 spatial axis(es), channels last"``."""
    if not isinstance(x, torch.Tensor) or x.dim() not in ranks:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} input x has shape {shape}; expected {layout}.")
    shape = tuple(x.shape)
    if shape[-1] != channels:
        raise ValueError(
            f"{name} input x has shape {shape} with {shape[-1]} channels (last axis); expected "
            f"in_channels={channels}, i.e. {layout}."
        )
    if shape[0] == 0:
        raise ValueError(f"{name} input x has batch size 0 (shape {shape}); expected at least one sample.")
    if 0 in shape:
        raise ValueError(
            f"{name} input x has shape {shape} with an empty axis {shape.index(0)}; expected at least "
            f"one point (or step) on every axis of {layout}."
        )
    want = parameter_dtype(model)
    if want is not None and x.dtype != want:
        fix = f"{_cast('model', x.dtype)} or " if x.is_floating_point() else ""
        raise ValueError(
            f"{name} expects {_name(want)} input like its parameters; got {_name(x.dtype)}; call "
            f"{fix}{_cast('x', want)}."
        )


def check_ctx(model_name: str, ctx: torch.Tensor | None, batch: int, ctx_channels: int) -> None:
    """``ctx`` must be ``(batch, ctx_channels)`` when ``ctx_channels > 0`` and None otherwise."""
    if ctx_channels > 0:
        if ctx is None:
            raise ValueError(
                f"{model_name} was configured with ctx_channels={ctx_channels} but got ctx=None; "
                f"expected ctx of shape ({batch}, {ctx_channels})."
            )
        if tuple(ctx.shape) != (batch, ctx_channels):
            raise ValueError(
                f"{model_name} context ctx has shape {tuple(ctx.shape)}; expected "
                f"({batch}, {ctx_channels}) (batch, ctx_channels)."
            )
    elif ctx is not None:
        raise ValueError(
            f"{model_name} was configured with ctx_channels=0 but got ctx of shape {tuple(ctx.shape)}; "
            f"set ctx_channels={ctx.shape[-1] if ctx.dim() else 1} in the config to use it."
        )


def check_grid_extras(
    model_name: str,
    batch: int,
    pos: torch.Tensor | None,
    ctx: torch.Tensor | None,
    ctx_channels: int,
    pos_hint: str = " (pass pos=None)",
) -> None:
    """A grid model takes no ``pos``, and ``ctx`` as :func:`check_ctx` says."""
    if pos is not None:
        raise ValueError(
            f"{model_name} works on regular grids and takes no pos; got pos of shape {tuple(pos.shape)}{pos_hint}."
        )
    check_ctx(model_name, ctx, batch, ctx_channels)


def check_grid_input(
    model_name: str,
    x: torch.Tensor,
    n_spatial: int,
    in_channels: int,
    ctx: torch.Tensor | None,
    ctx_channels: int,
    pos: torch.Tensor | None,
    model: nn.Module,
) -> None:
    """Shared input checks of grid models: channels-last ``x`` of ``model``'s dtype (:func:`check_input`),
    optional ``ctx``; ``pos`` must be None."""
    check_input(
        model_name,
        x,
        model,
        f"{grid_shape(n_spatial, in_channels)} with {n_spatial} spatial axis(es), channels last",
        (n_spatial + 2,),
        in_channels,
    )
    check_grid_extras(model_name, x.shape[0], pos, ctx, ctx_channels)


def check_grid2d_input(
    name: str, x, in_channels: int, pos, ctx, ctx_channels: int, model: nn.Module, pos_hint: str = ""
) -> None:
    """Check a regular-grid input: ``x (B, H, W, in_channels)`` of ``model``'s dtype, ``pos`` None, ``ctx
    (B, ctx_channels)`` or None."""
    check_input(name, x, model, f"(batch, H, W, {in_channels}) on a regular grid, channels last", (4,), in_channels)
    check_grid_extras(name, x.shape[0], pos, ctx, ctx_channels, pos_hint)


def check_mesh_input(
    name: str,
    x,
    pos,
    ctx,
    *,
    model: nn.Module,
    structured: bool,
    in_channels: int,
    pos_channels: int,
    ctx_channels: int,
) -> None:
    """Check a mesh / point-cloud input: ``x`` of ``model``'s dtype, ``(B, H, W, in_channels)`` on a structured
    mesh's index grid or ``(B, N, in_channels)``; ``pos`` with one ``pos_channels``-d coordinate per point when
    ``pos_channels > 0`` (otherwise ignored: a dataset may pass it also when it is ``x`` itself, as for
    Elasticity); ``ctx`` as :func:`check_ctx` says."""
    if structured:
        check_input(
            f"{name} (structured mesh)",
            x,
            model,
            f"(batch, H, W, {in_channels}) on the mesh index grid, channels last",
            (4,),
            in_channels,
        )
        n = x.shape[1] * x.shape[2]
    else:
        check_input(f"{name} (point cloud)", x, model, f"(batch, N, {in_channels})", (3,), in_channels)
        n = x.shape[1]
    b = x.shape[0]
    if pos_channels > 0:
        if pos is None:
            raise ValueError(
                f"{name} was configured with pos_channels={pos_channels} but got pos=None; expected "
                f"pos of shape ({b}, {n}, {pos_channels})."
            )
        if tuple(pos.reshape(b, -1, pos.shape[-1]).shape) != (b, n, pos_channels):
            raise ValueError(
                f"{name} pos has shape {tuple(pos.shape)}; expected ({b}, {n}, {pos_channels}) "
                f"(one {pos_channels}-d coordinate per point)."
            )
    check_ctx(name, ctx, b, ctx_channels)


def check_sequence_input(
    x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None, channels: int, name: str, model: nn.Module
) -> None:
    """``x (B, T, channels)`` of ``model``'s dtype (:func:`check_input`); ``t`` and ``mask`` ``(B, T)`` or None."""
    check_input(name, x, model, f"(B, T, {channels})", (3,), channels)
    if t is not None and tuple(t.shape) != tuple(x.shape[:2]):
        raise ValueError(f"{name}: timestamps must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(t.shape)}")
    if mask is not None and tuple(mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"{name}: mask must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(mask.shape)}")
