"""Multi-head selective scan with one decay per head, in the time-major layout the Mamba layers hold.

For every batch element b, scan set s (e.g. a scan direction with its own parameters), head h of P channels p,
group g = h // (H / G) and state n::

    a_t        = exp(dt_t[h] * A[s, h])                                   (one decay per head and step)
    h_t[p, n]  = a_t h_{t-1}[p, n] + dt_t[h] B_t[g, n] u_t[h P + p],      h_{-1} = 0
    y_t[h P + p] = sum_n C_t[g, n] h_t[p, n] + D[s, h P + p] u_t[h P + p]

Shapes: ``u: (batch, S, L, H * P)``, ``dt: (batch, S, L, H)`` (the final, positive step: softplus and bias are the
caller's), ``A: (S, H)`` (negative), ``B, C: (batch, S, L, G, N)``, ``D: (S, H * P)`` or ``None``; returns
``y: (batch, S, L, H * P)``. This is Mamba-2's scalar-A head (LaMO's and GeoMaNO's ``a_mode="head"``,
``dt_mode="head"``) and is :func:`selective_scan` with every channel of a head given its head's step and a row of
``N`` equal decays; :func:`head_scan_ref` computes it exactly that way (folded into ``(batch, S H P, L)`` channels,
through the sequential :func:`selective_scan_ref`).

Backends: ``"heads"`` is the fused CPU kernel (``csrc/head_scan_cpu.cpp``, the operator of ``cpu.py``): the vector
lane is the channel, so a head's shared step, decay, B and C are read once per step for 16 (float) or 8 (double)
channels, the sum over states is a multiply-add per state and nothing is transposed. It needs ``P`` to be a multiple
of that lane count. ``"auto"`` takes it for CPU tensors when it applies and otherwise folds into channels and calls
:func:`selective_scan` with its own ``"auto"``; for CUDA tensors when ``triton`` imports it takes ``"triton"``: the
Triton selective-scan kernels reading this layout in place (the operator of ``triton_op.py``, no fold; the default
pending a GPU measurement). ``"cpp"``, ``"torch"``, ``"ref"``, ``"mamba"`` fold and force that
:func:`selective_scan` backend.
"""

from __future__ import annotations

import torch

from ...errors import check_choice
from .. import cpu_kernel, triton_loader
from ..selective_scan.checks import check_float, compute_dtype, shape_text
from ..selective_scan.interface import selective_scan
from ..selective_scan.ref import selective_scan_ref
from .cpu import head_lanes, head_scan_cpu
from .triton_op import head_scan_triton

Tensor = torch.Tensor

__all__ = ["head_scan", "head_scan_ref", "HEAD_SCAN_BACKENDS"]

HEAD_SCAN_BACKENDS = ("auto", "heads", "triton", "cpp", "torch", "ref", "mamba")


def _check_head_args(u, dt, A, B, C, D) -> None:
    for name, t in (("u", u), ("dt", dt), ("A", A), ("B", B), ("C", C)) + ((("D", D),) if D is not None else ()):
        check_float(name, t)
        if t.device != u.device:
            raise ValueError(f"{name} is on {t.device} but u is on {u.device}; all inputs must share a device")
    if u.dim() != 4:
        raise ValueError(f"u has shape {shape_text(u)}, expected (batch, sets, L, heads * head_dim)")
    b, S, L, HP = u.shape
    if dt.dim() != 4 or tuple(dt.shape[:3]) != (b, S, L) or dt.shape[3] < 1 or HP % dt.shape[3]:
        raise ValueError(
            f"dt has shape {shape_text(dt)}, expected (batch, sets, L, heads) = ({b}, {S}, {L}, H) with H "
            f"dividing the {HP} channels of u"
        )
    H = dt.shape[3]
    if tuple(A.shape) != (S, H):
        raise ValueError(f"A has shape {shape_text(A)}, expected (sets, heads) = ({S}, {H})")
    for name, t in (("B", B), ("C", C)):
        if t.dim() != 5 or tuple(t.shape[:3]) != (b, S, L) or t.shape[3] < 1 or H % t.shape[3] or t.shape[4] < 1:
            raise ValueError(
                f"{name} has shape {shape_text(t)}, expected (batch, sets, L, groups, N) = ({b}, {S}, "
                f"{L}, G, N) with G dividing the {H} heads"
            )
    if B.shape != C.shape:
        raise ValueError(f"B has shape {shape_text(B)} but C has {shape_text(C)}; they must match")
    if D is not None and tuple(D.shape) != (S, HP):
        raise ValueError(f"D has shape {shape_text(D)}, expected (sets, channels) = ({S}, {HP})")


def fold_to_channels(u, dt, A, B, C, D):
    """The head scan's arguments as :func:`selective_scan` arguments: ``(batch, S H P, L)`` channels, every channel
    with its head's step, a row of N equal decays, its group's B and C."""
    b, S, L, HP = u.shape
    H, (G, N) = dt.shape[3], B.shape[3:]
    P = HP // H
    u_c = u.permute(0, 1, 3, 2).reshape(b, S * HP, L)
    dt_c = dt.permute(0, 1, 3, 2).unsqueeze(3).expand(b, S, H, P, L).reshape(b, S * HP, L)
    A_c = A.repeat_interleave(P, dim=1).reshape(S * HP, 1).expand(S * HP, N)
    B_c = B.permute(0, 1, 3, 4, 2).reshape(b, S * G, N, L)
    C_c = C.permute(0, 1, 3, 4, 2).reshape(b, S * G, N, L)
    return u_c, dt_c, A_c, B_c, C_c, None if D is None else D.reshape(S * HP)


def _unfold(y: Tensor, like: Tensor) -> Tensor:
    b, S, L, HP = like.shape
    return y.reshape(b, S, HP, L).permute(0, 1, 3, 2)


def head_scan_ref(u, dt, A, B, C, D=None) -> Tensor:
    """The module docstring's recurrence through the sequential :func:`selective_scan_ref` (the tests' oracle)."""
    _check_head_args(u, dt, A, B, C, D)
    return _unfold(selective_scan_ref(*fold_to_channels(u, dt, A, B, C, D)), u)


def head_kernel_applies(u: Tensor, dt: Tensor) -> bool:
    """Whether the fused head kernel can run these tensors: CPU, the kernel builds, P a multiple of its lanes."""
    if u.device.type != "cpu" or u.shape[2] == 0:
        return False
    if not cpu_kernel.available():
        return False
    return (u.shape[3] // dt.shape[3]) % head_lanes(compute_dtype(u, dt)) == 0


def head_scan(u, dt, A, B, C, D=None, *, backend: str = "auto") -> Tensor:
    """Multi-head selective scan of the module docstring; ``y: (batch, S, L, H * P)`` in u's dtype."""
    check_choice("backend", backend, HEAD_SCAN_BACKENDS, error=ValueError)
    _check_head_args(u, dt, A, B, C, D)
    if u.numel() == 0:  # no steps, samples, sets or channels: y is as empty as u, whatever the backend
        return u.clone()
    if triton_loader.chosen(backend, u):
        return head_scan_triton(u, dt, A, B, C, D)
    use_kernel = backend == "heads" or (backend == "auto" and head_kernel_applies(u, dt))
    if backend == "heads" and not head_kernel_applies(u, dt):
        lanes = "16 (float32) or 8 (float64)"
        raise ValueError(
            f"backend='heads' needs CPU tensors, the compiled kernel and channels per head a multiple "
            f"of {lanes}; got u {shape_text(u)} on {u.device} with {dt.shape[3]} heads"
        )
    if not use_kernel:
        return _unfold(selective_scan(*fold_to_channels(u, dt, A, B, C, D), backend=backend), u)
    cdt = compute_dtype(u, dt, A, B, C, D)
    c = lambda t: None if t is None else t.to(cdt).contiguous()  # noqa: E731
    return head_scan_cpu(c(u), c(dt), c(A), c(B), c(C), c(D)).to(u.dtype)
