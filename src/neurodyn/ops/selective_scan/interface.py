"""Selective scan (Mamba's S6 recurrence): the public function and its backend choice.

For every batch element b, channel d and state n (ZOH for A, Euler ``delta * B`` for the input)::

    dt_t    = softplus(delta_t + delta_bias)        (softplus only if delta_softplus)
    h_t     = exp(dt_t * A) * h_{t-1} + dt_t * B_t * u_t,      h_{-1} = initial_state (or 0)
    y_t     = sum_n C_t[n] * h_t[n] + D * u_t
    out_t   = y_t * silu(z_t)                       (only if z is given)

Shapes (mamba-ssm's ``selective_scan_fn`` convention): ``u, delta, z: (batch, d, L)``; ``A: (d, n)``
real; ``B, C``: ``(d, n)`` fixed, or input-dependent ``(batch, n, L)`` or ``(batch, groups, n, L)``
(channel ``i`` uses group ``i // (d // groups)``); ``D, delta_bias: (d,)``;
``initial_state: (batch, d, n)``. ``reverse=True`` runs the recurrence from ``t = L-1`` down to 0.
Backends (``selective_scan(backend=...)``), each a module of this folder: ``"triton"`` (the Triton kernels,
``triton_kernels.py``, as the operator of ``triton_op.py``; the default for CUDA tensors when ``triton`` imports: one
fused kernel per direction, backward by chunked recomputation), ``"mamba"`` (mamba-ssm's CUDA kernel), ``"cpp"`` (the
fused CPU kernel, ``cpu.py``), ``"torch"`` (the chunked PyTorch scan, ``chunked.py``), ``"ref"`` (the plain loop,
``ref.py``).

Returns ``out (batch, d, L)`` in u's dtype, and with ``return_last_state`` also the final state
``(batch, d, n)`` (after the last step taken, i.e. position 0 when ``reverse``) in the compute dtype
(float32, or float64 when an input is float64). float16/bfloat16 inputs are computed in float32.
"""

from __future__ import annotations

import importlib
import os

import torch

from ...errors import check_choice
from .. import cpu_kernel, triton_loader
from ..custom_op import constant_for_compile
from .checks import check_selective_scan_args, compute_dtype
from .chunked import SelectiveScanChunked, default_block
from .cpu import selective_scan_cpu
from .ref import selective_scan_ref
from .triton_op import selective_scan_triton

Tensor = torch.Tensor

__all__ = ["BACKENDS", "resolve_backend", "selective_scan"]

BACKENDS = ("auto", "triton", "mamba", "cpp", "torch", "ref")


def _mamba_fn():
    if os.environ.get("NEURODYN_NO_MAMBA_SSM", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module("mamba_ssm.ops.selective_scan_interface").selective_scan_fn
    except Exception:  # noqa: BLE001 - not installed, or installed without its compiled kernels
        return None


@constant_for_compile
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
    if u.device.type == "cpu" and cpu_kernel.available():
        return "cpp"
    return "torch"


def selective_scan(
    u,
    delta,
    A,
    B,
    C,
    D=None,
    z=None,
    delta_bias=None,
    delta_softplus=False,
    return_last_state=False,
    *,
    reverse=False,
    initial_state=None,
    backend="auto",
    block=None,
):
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
        return selective_scan_ref(
            u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state, reverse, initial_state
        )
    if which == "triton" and u.numel() > 0:  # one kernel: bias, softplus, z, D and reverse included
        out, last = selective_scan_triton(u, delta, A, B, C, D, z, delta_bias, delta_softplus, reverse, initial_state)
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
        out, last = res if return_last_state else (res, None)
    else:
        cdt = compute_dtype(u, delta, A, B, C, D, z, delta_bias, initial_state)
        if which == "cpp":
            if u.device.type != "cpu":
                raise ValueError(f"backend='cpp' needs CPU tensors; u is on {u.device}")
            if not cpu_kernel.available():
                raise RuntimeError(
                    "backend='cpp' requested but the fused CPU kernel is unavailable "
                    "(no compiler/ninja, or NEURODYN_NO_CPP_EXT=1)"
                )
            out, last = selective_scan_cpu(u, delta, A, B, C, D, z, delta_bias, delta_softplus, initial_state, cdt)
        else:
            out, last = _selective_scan_torch(
                u, delta, A, B, C, D, z, delta_bias, delta_softplus, initial_state, cdt, block
            )
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
    return SelectiveScanChunked.apply(
        c(u), c(delta), c(A), c(B), c(C), c(D), c(z), c(delta_bias), c(initial_state), softplus, blk
    )
