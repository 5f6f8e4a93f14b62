"""The selective scan's argument checks, shared by every path (and by the multi-head and Kirchhoff-cell scans):
shapes, dtypes and devices of mamba-ssm's ``selective_scan_fn`` arguments
(:mod:`neurodyn.ops.selective_scan.interface`)."""

from __future__ import annotations

import torch

from ..custom_op import compute_dtype

Tensor = torch.Tensor

__all__ = ["check_float", "check_selective_scan_args", "compute_dtype", "shape_text"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _fmt(shape) -> str:
    shape = tuple(int(s) for s in shape)
    return str(shape)


def shape_text(t: Tensor) -> str:
    """A tensor's shape as ``(a, b, c)``, for error messages."""
    return _fmt(t.shape)


def check_float(name: str, t: Tensor) -> None:
    """TypeError unless ``t`` (argument ``name``) is a floating-point tensor."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _FLOATS:
        raise TypeError(
            f"{name} must be a real floating tensor (float16/bfloat16/float32/float64), got dtype {t.dtype}"
        )


def _expect(name: str, t: Tensor, shape: tuple, desc: str) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {shape_text(t)}, expected {desc} = {_fmt(shape)}")


def _check_coef(name: str, W: Tensor, batch: int, dim: int, n: int, L: int) -> Tensor:
    """Validate B or C and return it with input-dependent forms as (batch, groups, n, L)."""
    check_float(name, W)
    if W.dim() == 2:
        _expect(name, W, (dim, n), "(d, n) for a fixed matrix")
        return W
    if W.dim() == 3:
        _expect(name, W, (batch, n, L), "(batch, n, L) for an input-dependent matrix")
        return W.unsqueeze(1)
    if W.dim() == 4:
        g = W.shape[1]
        if g < 1 or dim % g:
            raise ValueError(f"{name} has shape {shape_text(W)}: its groups dimension {g} must divide d = {dim}")
        _expect(name, W, (batch, g, n, L), "(batch, groups, n, L)")
        return W
    raise ValueError(
        f"{name} has shape {shape_text(W)}, expected (d, n) = ({dim}, {n}), (batch, n, L) = "
        f"({batch}, {n}, {L}) or (batch, groups, n, L)"
    )


def check_selective_scan_args(u, delta, A, B, C, D=None, z=None, delta_bias=None, initial_state=None):
    """Validate shapes, dtypes and devices; return (B, C) normalised to 2-D or 4-D."""
    check_float("u", u)
    if u.dim() != 3:
        raise ValueError(f"u has shape {shape_text(u)}, expected (batch, d, L)")
    batch, dim, L = u.shape
    check_float("delta", delta)
    _expect("delta", delta, (batch, dim, L), "(batch, d, L) like u")
    if not isinstance(A, torch.Tensor) or A.is_complex():
        raise TypeError("A must be a real floating tensor of shape (d, n); complex A is not supported")
    check_float("A", A)
    if A.dim() != 2 or A.shape[0] != dim:
        raise ValueError(f"A has shape {shape_text(A)}, expected (d, n) with d = {dim}")
    n = A.shape[1]
    if n < 1:
        raise ValueError(f"A has shape {shape_text(A)}: the state size n must be at least 1")
    B = _check_coef("B", B, batch, dim, n, L)
    C = _check_coef("C", C, batch, dim, n, L)
    for name, t, shape, desc in (
        ("D", D, (dim,), "(d,)"),
        ("z", z, (batch, dim, L), "(batch, d, L)"),
        ("delta_bias", delta_bias, (dim,), "(d,)"),
        ("initial_state", initial_state, (batch, dim, n), "(batch, d, n)"),
    ):
        if t is not None:
            check_float(name, t)
            _expect(name, t, shape, desc)
    for name, t in (
        ("delta", delta),
        ("A", A),
        ("B", B),
        ("C", C),
        ("D", D),
        ("z", z),
        ("delta_bias", delta_bias),
        ("initial_state", initial_state),
    ):
        if t is not None and t.device != u.device:
            raise ValueError(f"{name} is on {t.device} but u is on {u.device}; all inputs must share a device")
    return B, C
