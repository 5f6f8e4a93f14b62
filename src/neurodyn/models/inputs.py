"""The one check of a model's input ``x`` that every registered model runs at the top of ``forward``.

:func:`check_input` refuses, each in one sentence naming the model and the shape or dtype: a non-tensor or a
tensor of the wrong rank, the wrong channel count (the last axis), an empty axis (batch 0, no points, no steps)
and a dtype other than the model's parameters' (float64 into a float32 model, integers). The per-layout
wrappers (``fno.check_grid_input``, ``lamo.check_grid2d_input``, ``lamo.mesh_features``,
``sequence_baselines.check_sequence_input``) say which layout is expected and check ``pos`` / ``ctx`` / ``t``.

An empty batch is refused rather than passed through: several models reshape with ``-1``, which an empty tensor
leaves ambiguous, and a batch of no samples is a caller's bug (an empty split) that an empty output would hide.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["check_input", "grid_shape", "parameter_dtype"]

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
        raise ValueError(f"{name} input x has shape {shape} with {shape[-1]} channels (last axis); expected "
                         f"in_channels={channels}, i.e. {layout}.")
    if shape[0] == 0:
        raise ValueError(f"{name} input x has batch size 0 (shape {shape}); expected at least one sample.")
    if 0 in shape:
        raise ValueError(f"{name} input x has shape {shape} with an empty axis {shape.index(0)}; expected at least "
                         f"one point (or step) on every axis of {layout}.")
    want = parameter_dtype(model)
    if want is not None and x.dtype != want:
        fix = f"{_cast('model', x.dtype)} or " if x.is_floating_point() else ""
        raise ValueError(f"{name} expects {_name(want)} input like its parameters; got {_name(x.dtype)}; call "
                         f"{fix}{_cast('x', want)}.")
