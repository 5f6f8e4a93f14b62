"""Selective scan (Mamba's S6 recurrence): public function, sequential reference, dispatch.

For every batch element b, channel d and state n (ZOH for A, Euler ``delta * B`` for the input)::

    dt_t    = softplus(delta_t + delta_bias)        (softplus only if delta_softplus)
    h_t     = exp(dt_t * A) * h_{t-1} + dt_t * B_t * u_t,      h_{-1} = initial_state (or 0)
    y_t     = sum_n C_t[n] * h_t[n] + D * u_t
    out_t   = y_t * silu(z_t)                       (only if z is given)

Shapes (mamba-ssm's ``selective_scan_fn`` convention): ``u, delta, z: (batch, d, L)``; ``A: (d, n)``
real; ``B, C``: ``(d, n)`` fixed, or input-dependent ``(batch, n, L)`` or ``(batch, groups, n, L)``
(channel ``i`` uses group ``i // (d // groups)``); ``D, delta_bias: (d,)``;
``initial_state: (batch, d, n)``. ``reverse=True`` runs the recurrence from ``t = L-1`` down to 0.
Backends (``selective_scan(backend=...)``): ``"triton"`` (the Triton kernels of :mod:`neurodyn.ops.triton_ops`, the
default for CUDA tensors when ``triton`` imports: one fused kernel per direction, backward by chunked recomputation),
``"mamba"`` (mamba-ssm's CUDA kernel), ``"cpp"`` (the fused CPU kernel), ``"torch"`` (the chunked PyTorch scan),
``"ref"`` (the loop below).

Returns ``out (batch, d, L)`` in u's dtype, and with ``return_last_state`` also the final state
``(batch, d, n)`` (after the last step taken, i.e. position 0 when ``reverse``) in the compute dtype
(float32, or float64 when an input is float64). float16/bfloat16 inputs are computed in float32.
"""
from __future__ import annotations

import importlib
import os

import torch
import torch.nn.functional as F

from ...errors import check_choice
from .. import kernel_ops, triton_loader
from .chunked import SelectiveScanChunked, default_block
from ..triton_ops import selective_scan_triton

Tensor = torch.Tensor

BACKENDS = ("auto", "triton", "mamba", "cpp", "torch", "ref")
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ----------------------------------------------------------------------------------------------
# argument checking


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
        raise TypeError(f"{name} must be a real floating tensor (float16/bfloat16/float32/float64), "
                        f"got dtype {t.dtype}")


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
    raise ValueError(f"{name} has shape {shape_text(W)}, expected (d, n) = ({dim}, {n}), (batch, n, L) = "
                     f"({batch}, {n}, {L}) or (batch, groups, n, L)")


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
    for name, t, shape, desc in (("D", D, (dim,), "(d,)"), ("z", z, (batch, dim, L), "(batch, d, L)"),
                                 ("delta_bias", delta_bias, (dim,), "(d,)"),
                                 ("initial_state", initial_state, (batch, dim, n), "(batch, d, n)")):
        if t is not None:
            check_float(name, t)
            _expect(name, t, shape, desc)
    for name, t in (("delta", delta), ("A", A), ("B", B), ("C", C), ("D", D), ("z", z),
                    ("delta_bias", delta_bias), ("initial_state", initial_state)):
        if t is not None and t.device != u.device:
            raise ValueError(f"{name} is on {t.device} but u is on {u.device}; all inputs must share a device")
    return B, C


def compute_dtype(*tensors) -> torch.dtype:
    """float64 if any input is float64, else float32 (half inputs accumulate in float32)."""
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else torch.float32


# ----------------------------------------------------------------------------------------------
# sequential reference


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                       return_last_state=False, reverse=False, initial_state=None):
    """The recurrence of the module docstring as a plain loop over L (the oracle of the tests).

    Differentiable by autograd; slow (O(L) Python steps). Same arguments and results as
    :func:`selective_scan`.
    """
    B, C = check_selective_scan_args(u, delta, A, B, C, D, z, delta_bias, initial_state)
    cdt = compute_dtype(u, delta, A, B, C, D, z, delta_bias, initial_state)
    batch, dim, L = u.shape
    n = A.shape[1]
    uf, dt, Af = u.to(cdt), delta.to(cdt), A.to(cdt)
    if delta_bias is not None:
        dt = dt + delta_bias.to(cdt)[:, None]
    if delta_softplus:
        dt = F.softplus(dt)

    def coef(W, t):  # (batch, d, n) at step t
        W = W.to(cdt)
        if W.dim() == 2:
            return W.expand(batch, dim, n)
        return W[..., t].repeat_interleave(dim // W.shape[1], dim=1)

    h = initial_state.to(cdt) if initial_state is not None else u.new_zeros(batch, dim, n, dtype=cdt)
    ys = [None] * L
    for t in (range(L - 1, -1, -1) if reverse else range(L)):
        dA = torch.exp(dt[:, :, t, None] * Af)
        h = dA * h + (dt[:, :, t] * uf[:, :, t])[:, :, None] * coef(B, t)
        ys[t] = (h * coef(C, t)).sum(-1)
    y = torch.stack(ys, dim=-1) if L else uf.clone()
    if D is not None:
        y = y + D.to(cdt)[:, None] * uf
    if z is not None:
        y = y * F.silu(z.to(cdt))
    out = y.to(u.dtype)
    return (out, h) if return_last_state else out


# ----------------------------------------------------------------------------------------------
# dispatch


def _mamba_fn():
    if os.environ.get("NEURODYN_NO_MAMBA_SSM", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module("mamba_ssm.ops.selective_scan_interface").selective_scan_fn
    except Exception:  # noqa: BLE001 - not installed, or installed without its compiled kernels
        return None


@kernel_ops.constant_for_compile
def _mamba_available() -> bool:
    """Whether mamba-ssm's kernel can be dispatched to; a constant for ``torch.compile`` (the import is never
    traced)."""
    return _mamba_fn() is not None


def resolve_backend(backend: str, u: Tensor, initial_state=None) -> str:
    """The backend ``selective_scan`` would use for these arguments."""
    check_choice("backend", backend, BACKENDS, error=ValueError)
    if triton_loader.chosen(backend, u):
        return "triton"
    if backend != "auto":
        return backend
    if u.is_cuda and initial_state is None and _mamba_available():
        return "mamba"
    if u.device.type == "cpu" and kernel_ops.available():
        return "cpp"
    return "torch"


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False, *, reverse=False, initial_state=None, backend="auto",
                   block=None):
    """Selective scan with mamba-ssm's ``selective_scan_fn`` signature (see the module docstring).

    Extra keyword arguments: ``reverse`` (scan from the end), ``initial_state (batch, d, n)``,
    ``backend``: ``"auto"`` (for CUDA tensors the Triton kernels when ``triton`` imports, else mamba-ssm's CUDA
    kernel when installed and no ``initial_state``; the fused C++ kernel for CPU tensors when it builds; otherwise
    the chunked PyTorch scan), or one of ``"triton"``, ``"mamba"``, ``"cpp"``, ``"torch"``, ``"ref"`` to force one;
    ``NEURODYN_NO_TRITON=1`` / ``NEURODYN_NO_MAMBA_SSM=1`` take those out of ``"auto"``. The Triton default on CUDA
    is pending a GPU measurement against mamba-ssm and the PyTorch path (``neurodyn bench gpu``). ``"triton"`` on CPU
    tensors runs the kernels in Triton's interpreter and needs ``TRITON_INTERPRET=1`` (tests). ``block`` sets the outer
    block length of the chunked PyTorch path (memory vs. speed).
    """
    B, C = check_selective_scan_args(u, delta, A, B, C, D, z, delta_bias, initial_state)
    which = resolve_backend(backend, u, initial_state)
    if which == "ref":
        return selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                  return_last_state, reverse, initial_state)
    if which == "triton" and u.numel() > 0:  # one kernel: bias, softplus, z, D and reverse included
        out, last = selective_scan_triton(u, delta, A, B, C, D, z, delta_bias, delta_softplus, reverse,
                                          initial_state)
        return (out, last) if return_last_state else out
    if reverse:  # every fast path scans forward; flip the time axis around it
        fl = lambda t: None if t is None or t.dim() < 3 else t.flip(-1)  # noqa: E731
        u, delta, z = fl(u), fl(delta), fl(z)
        B, C = (B if B.dim() == 2 else B.flip(-1)), (C if C.dim() == 2 else C.flip(-1))
    if which == "mamba":
        fn = _mamba_fn()
        if fn is None or not u.is_cuda:
            raise RuntimeError("backend='mamba' needs mamba-ssm installed and CUDA tensors")
        if initial_state is not None:
            raise ValueError("backend='mamba' does not support initial_state; use backend='torch'")
        res = fn(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
        out, last = (res if return_last_state else (res, None))
    else:
        cdt = compute_dtype(u, delta, A, B, C, D, z, delta_bias, initial_state)
        if which == "cpp":
            if u.device.type != "cpu":
                raise ValueError(f"backend='cpp' needs CPU tensors; u is on {u.device}")
            if not kernel_ops.available():
                raise RuntimeError("backend='cpp' requested but the fused CPU kernel is unavailable "
                                   "(no compiler/ninja, or NEURODYN_NO_CPP_EXT=1)")
            from .cpu import selective_scan_cpu
            out, last = selective_scan_cpu(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                           initial_state, cdt)
        else:
            out, last = _selective_scan_torch(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                              initial_state, cdt, block)
        out = out.to(u.dtype)
    if reverse:
        out = out.flip(-1)
    return (out, last) if return_last_state else out


def _selective_scan_torch(u, delta, A, B, C, D, z, delta_bias, softplus, initial_state, cdt, block):
    batch, dim, L = u.shape
    if u.numel() == 0:  # no steps, samples or channels: nothing to scan (the chunked scan's reshapes need some)
        last = initial_state if initial_state is not None else u.new_zeros(batch, dim, A.shape[1])
        return u.to(cdt), last.to(cdt)
    blk = block or default_block(batch, dim, A.shape[1], L, u.device)
    c = lambda t: None if t is None else t.to(cdt)  # noqa: E731
    return SelectiveScanChunked.apply(c(u), c(delta), c(A), c(B), c(C), c(D), c(z), c(delta_bias),
                                      c(initial_state), softplus, blk)
