"""S4D (diagonal state space) convolution kernel, FFT convolution and the equivalent recurrence.

Continuous system per channel h with N/2 complex-conjugate state pairs (only one of each pair is
stored; the real output is twice the real part)::

    x'(t) = A x(t) + B u(t),      y(t) = 2 Re(C x(t)) + D u(t),      A = diag(A_n), Re A_n < 0

ZOH discretisation with step ``dt = exp(log_dt)``: ``Abar = exp(dt A)``, ``Bbar = (exp(dt A) - 1) / A * B``,
so the convolution kernel is the Vandermonde product

    K[h, l] = 2 Re( sum_n C[h, n] Bbar[h, n] Abar[h, n]^l ),   l = 0 .. L_k - 1

and the output is the causal convolution ``y[t] = sum_{l <= t, l < L_k} K[l] u[t - l] + D u[t]``.
``window`` truncates the kernel to ``L_k = min(L, window)`` taps (ST-SSM's temporal memory K: the
output at t sees inputs t-K+1 .. t). :func:`fft_conv` evaluates the convolution by a zero-padded
(non-circular) real FFT of size ``L + L_k``, or for ``L <= TOEPLITZ_MAX_L`` by one batched matmul with
each channel's Toeplitz matrix; :func:`s4d_recurrent` runs the same system step by step.
:func:`s4d_kernel` evaluates the Vandermonde product in real arithmetic with a hand-written backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def _check_ssm(A, B, C, log_dt):
    if not isinstance(A, torch.Tensor) or A.dim() != 2:
        raise ValueError(f"A has shape {tuple(getattr(A, 'shape', ()))}, expected (H, N/2) complex")
    if not A.is_complex():
        raise TypeError(f"A must be a complex tensor (H, N/2) of eigenvalues, got dtype {A.dtype}")
    H, N2 = A.shape
    for name, t in (("B", B), ("C", C)):
        if t is not None and (not isinstance(t, torch.Tensor) or tuple(t.shape) != (H, N2)):
            raise ValueError(f"{name} has shape {tuple(getattr(t, 'shape', ()))}, expected (H, N/2) = ({H}, {N2})")
    if not isinstance(log_dt, torch.Tensor) or tuple(log_dt.shape) not in ((H,), (H, 1)):
        raise ValueError(f"log_dt has shape {tuple(getattr(log_dt, 'shape', ()))}, expected (H,) = ({H},)")
    if log_dt.is_complex():
        raise TypeError("log_dt must be real")
    return H, N2


def _discretise(A, B, C, log_dt):
    dtA = torch.exp(log_dt.reshape(-1, 1).to(A.real.dtype)) * A  # (H, N/2)
    Bbar = torch.expm1(dtA) / A
    if B is not None:
        Bbar = Bbar * B
    return dtA, Bbar, C


def s4d_kernel(A: Tensor, B: Tensor | None, C: Tensor, log_dt: Tensor, L: int, window: int | None = None) -> Tensor:
    """S4D convolution kernel ``(H, L_k)`` (real), ``L_k = min(L, window)``; see the module docstring.

    ``A, B, C``: complex ``(H, N/2)`` (``B=None`` means ones); ``log_dt``: real ``(H,)``.
    """
    _check_ssm(A, B, C, log_dt)
    if L < 0 or (window is not None and window < 0):
        raise ValueError(f"L and window must be non-negative, got L={L}, window={window}")
    Lk = L if window is None else min(L, window)
    dtA, Bbar, _ = _discretise(A, B, C, log_dt)
    W = C * Bbar
    return _Vandermonde.apply(dtA.real, dtA.imag, W.real, W.imag, Lk)


def s4d_kernel_ref(A: Tensor, B: Tensor | None, C: Tensor, log_dt: Tensor, L: int, window: int | None = None) -> Tensor:
    """:func:`s4d_kernel` by a complex Vandermonde matrix and autograd (the reference of the tests)."""
    _check_ssm(A, B, C, log_dt)
    Lk = L if window is None else min(L, window)
    dtA, Bbar, _ = _discretise(A, B, C, log_dt)
    pos = torch.arange(Lk, device=A.device, dtype=dtA.real.dtype)
    vander = torch.exp(dtA.unsqueeze(-1) * pos)  # (H, N/2, L_k) Vandermonde matrix
    return 2 * torch.einsum("hn,hnl->hl", C * Bbar, vander).real


class _Vandermonde(torch.autograd.Function):
    """``K[h, l] = 2 Re(sum_n W[h, n] z[h, n]^l)`` with ``z = exp(a + i b)``, in real arithmetic.

    ``z^l = e^{a l} (cos(b l) + i sin(b l))``: one real exp, cos and sin per entry of ``(H, N/2, L)`` instead
    of a complex exp (several times slower on CPU), and a hand-written backward (four batched
    mat-vecs with the saved ``E cos``, ``E sin``) instead of autograd through the complex graph.
    ``a, b, wr, wi: (H, N/2)`` real -> ``(H, L)``; ``dK/da = 2 sum l g (wr Ec - wi Es)``,
    ``dK/db = -2 sum l g (wr Es + wi Ec)``, ``dK/dwr = 2 sum g Ec``, ``dK/dwi = -2 sum g Es``.
    """

    @staticmethod
    def forward(ctx, a, b, wr, wi, L):
        pos = torch.arange(L, device=a.device, dtype=a.dtype)
        phase = b.unsqueeze(-1) * pos
        E = torch.exp(a.unsqueeze(-1) * pos)
        Ec = torch.cos(phase).mul_(E)
        Es = torch.sin(phase).mul_(E)
        # K = 2 (wr Ec - wi Es) summed over n: (H, 1, N2) @ (H, N2, L)
        K = torch.bmm(wr.unsqueeze(1), Ec).sub_(torch.bmm(wi.unsqueeze(1), Es)).squeeze(1).mul_(2)
        ctx.save_for_backward(wr, wi, Ec, Es, pos)
        return K

    @staticmethod
    def backward(ctx, g):
        wr, wi, Ec, Es, pos = ctx.saved_tensors
        g = g.unsqueeze(-1)  # (H, L, 1)
        gl = g * pos.unsqueeze(-1)
        Ecg, Esg = torch.bmm(Ec, g).squeeze(-1), torch.bmm(Es, g).squeeze(-1)  # (H, N2)
        Ecl, Esl = torch.bmm(Ec, gl).squeeze(-1), torch.bmm(Es, gl).squeeze(-1)
        ga = 2 * (wr * Ecl - wi * Esl)
        gb = -2 * (wr * Esl + wi * Ecl)
        return ga, gb, 2 * Ecg, -2 * Esg, None


def fft_conv(u: Tensor, K: Tensor, D: Tensor | None = None, K_rev: Tensor | None = None) -> Tensor:
    """Causal convolution of ``u (..., H, L)`` with ``K (H, L_k)`` by zero-padded FFT, plus ``D u``.

    With ``K_rev (H, L_k')`` the layer is bidirectional: the anti-causal part
    ``flip(conv(flip(u), K_rev))`` is added (each direction includes its own lag-0 tap, as in
    ST-SSM's ``M_fwd(u) + flip(M_bwd(flip(u)))``).
    """
    if not isinstance(u, torch.Tensor) or u.dim() < 2:
        raise ValueError(f"u has shape {tuple(getattr(u, 'shape', ()))}, expected (..., H, L)")
    H, L = u.shape[-2:]
    for name, k in (("K", K), ("K_rev", K_rev)):
        if k is not None and (k.dim() != 2 or k.shape[0] != H or k.shape[1] > L):
            raise ValueError(f"{name} has shape {tuple(k.shape)}, expected (H, L_k) with H = {H}, L_k <= L = {L}")
    if D is not None and tuple(D.shape) != (H,):
        raise ValueError(f"D has shape {tuple(D.shape)}, expected (H,) = ({H},)")
    y = _causal_fft(u, K)
    if K_rev is not None:
        y = y + _causal_fft(u.flip(-1), K_rev).flip(-1)
    if D is not None:
        y = y + D[:, None] * u
    return y


# Up to this length the causal convolution is one batched matmul with the (L, L) Toeplitz matrix of each
# channel's kernel (cheaper forward + backward than three zero-padded FFTs on CPU); longer ones use the FFT.
TOEPLITZ_MAX_L = 128


def _causal_fft(u: Tensor, K: Tensor) -> Tensor:
    L, Lk = u.shape[-1], K.shape[-1]
    if L == 0 or Lk == 0:
        return torch.zeros_like(u)
    if L <= TOEPLITZ_MAX_L:
        return _causal_toeplitz(u, K)
    return _causal_fft_only(u, K)


def _causal_toeplitz(u: Tensor, K: Tensor) -> Tensor:
    """``y[..., h, t] = sum_s u[..., h, s] T[h, s, t]`` with ``T[h, s, t] = K[h, t - s]`` for
    ``0 <= t - s < L_k`` (else 0): the same causal convolution as :func:`_causal_fft_only`."""
    H, L = u.shape[-2:]
    Lk = K.shape[-1]
    cdt = torch.promote_types(u.dtype, K.dtype)
    if cdt in (torch.float16, torch.bfloat16):
        cdt = torch.float32
    # Kp[j] = K[j - (L - 1)] (zero outside 0 <= j - L + 1 < L_k); its window starting at L - 1 - s is row s
    # of T (T[s, t] = Kp[t - s + L - 1]); unfold + flip, whose backward is a fold (no index_put)
    Kp = F.pad(K.to(cdt), (L - 1, L - Lk))  # (H, 2L - 1)
    T = Kp.unfold(-1, L, 1).flip(1)  # (H, L, L)
    U = u.to(cdt).reshape(-1, H, L).transpose(0, 1)  # (H, M, L)
    return torch.bmm(U, T).transpose(0, 1).reshape(u.shape).to(u.dtype)


def _causal_fft_only(u: Tensor, K: Tensor) -> Tensor:
    L, Lk = u.shape[-1], K.shape[-1]
    n = L + Lk
    cdt = torch.promote_types(u.dtype, K.dtype)
    if cdt in (torch.float16, torch.bfloat16):
        cdt = torch.float32
    Uf = torch.fft.rfft(u.to(cdt), n=n)
    Kf = torch.fft.rfft(K.to(cdt), n=n)
    return torch.fft.irfft(Uf * Kf, n=n)[..., :L].to(u.dtype)


def s4d_recurrent(
    u: Tensor,
    A: Tensor,
    B: Tensor | None,
    C: Tensor,
    log_dt: Tensor,
    D: Tensor | None = None,
    state: Tensor | None = None,
    return_state: bool = False,
):
    """The same S4D system run step by step: ``x_t = Abar x_{t-1} + Bbar u_t``, ``y_t = 2 Re(C x_t) + D u_t``.

    ``u (..., H, L)`` real; ``state (..., H, N/2)`` complex (zero if None). Equals
    ``fft_conv(u, s4d_kernel(A, B, C, log_dt, L), D)`` for a zero initial state.
    """
    _check_ssm(A, B, C, log_dt)
    dtA, Bbar, _ = _discretise(A, B, C, log_dt)
    Abar = torch.exp(dtA)
    x = state if state is not None else torch.zeros(*u.shape[:-1], A.shape[1], dtype=A.dtype, device=u.device)
    ys = []
    for t in range(u.shape[-1]):
        x = Abar * x + Bbar * u[..., t, None]
        ys.append(2 * (C * x).sum(-1).real)
    y = torch.stack(ys, -1) if ys else torch.zeros_like(u)
    y = y.to(u.dtype)
    if D is not None:
        y = y + D[:, None] * u
    return (y, x) if return_state else y
