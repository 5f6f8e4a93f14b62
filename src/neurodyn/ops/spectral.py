"""Truncated DFT matrices: the discrete Fourier transforms of ``SpectralConv`` as real matrix products.

With few kept modes ``m`` out of ``n`` points, ``x @ F`` with a ``(n, 2m)`` real matrix is cheaper than an FFT
followed by slicing. Kept frequencies along an axis of size ``n``: ``0..m-1`` on the half-spectrum (last)
axis, ``0..m-1`` and ``-m..-1`` on every other axis (:func:`kept_frequencies`). With
``w_{f,t} = 2 pi (f t mod n) / n`` (exact integer phases) the matrices are::

    rdft_matrix (n, 2m):  [cos w | -sin w]^T           x @ F = [Re | Im] of rfft(x)[:m]
    irdft_matrix (2m, n): [c cos w ; -c sin w] / n     [Re X | Im X] @ G = irfft(X zero-filled beyond m, n),
                                                       c = 1 at f = 0 (and Nyquist), else 2
    dft_stack (4m, n):    [cos w ; -sin w]             the complex DFT at the 2m kept frequencies
    idft_side (n, 4m):    [cos w | sin w] / n          the inverse DFT from the 2m kept frequencies

:func:`dft_axis` / :func:`idft_axis` apply the last two to complex data stored real as ``(P, n, Q, 2, m)``
(real / imaginary parts on axis 3). The reference is ``torch.fft`` (tests/ops/test_spectral.py). Matrices are
built in float64 and cached per (size, modes, dtype, device), except while ``torch.export`` or ``make_fx`` traces
(they would cache fake tensors: the next call, eager or traced, got a tensor without data).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

__all__ = ["kept_frequencies", "rdft_matrix", "irdft_matrix", "dft_stack", "idft_side", "dft_axis", "idft_axis"]


def kept_frequencies(n: int, m: int, last: bool) -> list[int]:
    """Signed frequencies kept along an axis of size ``n``: ``0..m-1`` (last axis) or also ``-m..-1``."""
    return list(range(m)) if last else list(range(m)) + list(range(-m, 0))


# ---------------------------------------------------------------------------------------------------------
# truncated DFT matrices (float64 construction, cached per size/modes/dtype/device)

_CACHE: dict[tuple, torch.Tensor] = {}
_CACHE_MAX = 256


def _cached(key: tuple, build) -> torch.Tensor:
    if _tracing_outside_dynamo():
        return build()  # traced tensors (fake, proxies) must not outlive the trace in the cache
    t = _CACHE.get(key)
    if t is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        t = build()
        _CACHE[key] = t
    return t


def _tracing_outside_dynamo() -> bool:
    """Whether a tracer that runs this Python code on fake tensors is active: ``torch.export`` (non-strict, the
    default), ``make_fx``. (Under Dynamo the cache is fine: a miss becomes a side effect replayed with real tensors, a
    hit a constant.)"""
    return not torch.compiler.is_dynamo_compiling() and is_in_torch_dispatch_mode()


def _angles(freqs: Sequence[int], n: int) -> torch.Tensor:
    """``2*pi*(f*t mod n)/n`` for f in freqs (rows) and t in 0..n-1 (columns), exact integer phases."""
    f = torch.tensor(list(freqs), dtype=torch.int64)
    t = torch.arange(n, dtype=torch.int64)
    return (2 * math.pi / n) * torch.remainder(f[:, None] * t[None, :], n).to(torch.float64)


def rdft_matrix(n: int, m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(n, 2m)``: ``x @ F`` gives ``[Re X_0..X_{m-1} | Im X_0..X_{m-1}]`` of the real DFT of rows ``x``."""

    def build():
        a = _angles(range(m), n)  # (m, n)
        return torch.cat([torch.cos(a), -torch.sin(a)], 0).T.contiguous().to(dtype=dtype, device=device)

    return _cached(("rdft", n, m, dtype, device), build)


def irdft_matrix(n: int, m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(2m, n)``: ``[Re X | Im X] @ G`` equals ``irfft(X, n)`` with all frequencies >= m set to zero.

    Like ``irfft``, it ignores the imaginary parts of the zero (and, for even n, the Nyquist) frequency.
    """

    def build():
        a = _angles(range(m), n)
        c = torch.full((m, 1), 2.0, dtype=torch.float64)
        c[0] = 1.0
        if n % 2 == 0 and m == n // 2 + 1:
            c[-1] = 1.0
        return (torch.cat([c * torch.cos(a), -c * torch.sin(a)], 0) / n).to(dtype=dtype, device=device)

    return _cached(("irdft", n, m, dtype, device), build)


def dft_stack(n: int, m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(4m, n)``: real parts over imaginary parts of the truncated DFT (frequencies ``0..m-1, -m..-1``)."""

    def build():
        a = _angles(kept_frequencies(n, m, last=False), n)  # (2m, n)
        return torch.cat([torch.cos(a), -torch.sin(a)], 0).to(dtype=dtype, device=device)

    return _cached(("dft", n, m, dtype, device), build)


def idft_side(n: int, m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(n, 4m)``: real parts beside imaginary parts of the inverse DFT (with 1/n) from the kept frequencies."""

    def build():
        a = _angles(kept_frequencies(n, m, last=False), n).T  # (n, 2m)
        return (torch.cat([torch.cos(a), torch.sin(a)], 1) / n).to(dtype=dtype, device=device)

    return _cached(("idft", n, m, dtype, device), build)


# Complex data in the DFT path is a real tensor ``(P, n, Q, 2, m_d)``: the axis being transformed (size n),
# everything before it folded into P, the remaining middle axes into Q, then real/imaginary parts and the
# half-spectrum axis. Both helpers keep that layout, so no large tensor is ever transposed.


def dft_axis(t: torch.Tensor, mat: torch.Tensor, p: int) -> torch.Tensor:
    """Forward complex DFT ``(2K, n)`` stacked as ``[Re; Im]`` along axis ``n`` of ``t (P, n, Q, 2, m)``."""
    _, n, q, _, m = t.shape
    k = mat.shape[0] // 2
    out = torch.matmul(mat, t.reshape(p, n, q * 2 * m)).view(p, 2, k, q, 2, m)
    (rr, ri), (ir, ii) = (o.unbind(3) for o in out.unbind(1))  # unbind: its backward is one stack
    return torch.stack([rr - ii, ri + ir], dim=3)  # (P, K, Q, 2, m)


def idft_axis(t: torch.Tensor, mat: torch.Tensor, p: int) -> torch.Tensor:
    """Inverse DFT with ``mat = [Re G | Im G] (n, 2K)`` along axis ``K`` of small ``t (P, K, Q, 2, m)``.

    ``Re(G z) + i Im(G z) = [Re G | Im G] @ [z; i z]``: the data side is doubled (it is the small one) so
    that the result comes out directly in the ``(P, n, Q, 2, m)`` layout.
    """
    _, k, q, _, m = t.shape
    real, imag = t.unbind(3)
    iz = torch.stack([-imag, real], dim=3)
    both = torch.cat([t, iz], dim=1)  # (P, 2K, Q, 2, m)
    return torch.matmul(mat, both.view(p, 2 * k, q * 2 * m)).view(p, mat.shape[0], q, 2, m)
