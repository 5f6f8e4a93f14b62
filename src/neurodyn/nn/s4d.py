"""The S4D block as ST-SSM uses it (Koren & Lanthaler 2025, arXiv 2507.23428 v1): diagonal state space,
ZOH discretisation, Vandermonde kernel, zero-padded FFT convolution, ``D`` skip, GELU, ``Linear(H -> 2H)``
and GLU.

One block maps ``u: (..., L, H)`` (channels last, ``L`` the sequence axis) to ``y`` of the same shape::

    z[h, t] = sum_{l = 0}^{L_k - 1} K[h, l] u[h, t - l]  +  D[h] u[h, t]          (causal, non-circular)
    K[h, l] = 2 Re( sum_n C[h, n] Bbar[h, n] exp(dt_h A[h, n] l) ),                  l = 0 .. L_k - 1
    Bbar    = (exp(dt_h A) - 1) / A * B                                              (zero-order hold)
    y[t]    = GLU( W gelu(z[:, t]) + b ),   W: (2H, H),   GLU(a | g) = a * sigmoid(g)

with ``N/2`` complex state pairs per channel (``d_state = N`` counts both members of a conjugate pair; only
one of each is stored, the real output is twice the real part) and ``L_k = min(L, window)``: ``window = K``
truncates the kernel to ``K`` taps, so that ``y[t]`` sees ``u[t-K+1 .. t]`` only (ST-SSM's temporal memory
window). The kernel and the convolution are :func:`neurodyn.ops.s4d_kernel` and :func:`neurodyn.ops.fft_conv`.

**Parameters.** The paper gives no code; its parameter counts (every SSM layer has 20,736 at ``H = 64``)
fix the layout of ``state-spaces/s4``'s ``S4Block(d_model=H, d_state=64, mode='diag')`` (see
``docs/papers/notes-stssm.md`` §2.2), which this block reproduces in count (not in code):

==================  ==============  ===========================================  ======================
tensor              shape           meaning                                      count (H = N = 64)
==================  ==============  ===========================================  ======================
``log_dt``          (H,)            step size ``dt = exp(log_dt)``               64
``log_neg_re_A``    (H, N/2)        ``Re A = -exp(log_neg_re_A) < 0``            2,048
``im_A``            (H, N/2)        ``Im A``                                     2,048
``B``               (H, N/2, 2)     complex ``B`` as (re, im)                    4,096
``C``               (H, N/2, 2)     complex ``C`` as (re, im)                    4,096
``D``               (H,)            skip                                         64
``output_linear``   Linear(H, 2H)   followed by GLU                              8,320
total                                                                            **20,736**
==================  ==============  ===========================================  ======================

In general ``3 H N + 2 H^2 + 4 H`` (``A``, ``B``, ``C``: ``H N`` each; ``log_dt``, ``D``: ``H`` each; the linear map).

**Initialisation** (the paper does not say which; ``init``):

* ``"legs"`` (default; S4's default for the diagonal kernel, S4D-LegS): ``A`` = the eigenvalues of the
  normal part ``A_LegS + P P^T`` of the HiPPO-LegS matrix (real parts ``-1/2``; the ``N/2`` with positive
  imaginary part), ``B`` = HiPPO's ``B`` in that eigenbasis;
* ``"lin"`` (S4D-Lin): ``A_n = -1/2 + i pi n``, ``B_n = 1``;
* ``"inv"`` (S4D-Inv): ``A_n = -1/2 + i (N/pi) (N/(2n+1) - 1)``, ``B_n = 1``;

for ``n = 0 .. N/2 - 1``; always ``C ~ CN(0, 1)``, ``D ~ N(0, 1)``, ``dt`` log-uniform on
``[dt_min, dt_max]`` (S4's defaults ``1e-3, 1e-1``) and ``Linear`` as in ``nn.Linear``.

**Streaming.** :meth:`S4D.step` advances one position: for ``window=None`` through the exact recurrence
``x_t = Abar x_{t-1} + Bbar u_t`` (complex state ``(..., H, N/2)``), for a finite window through a buffer of
the last ``window - 1`` inputs (a truncated kernel has no finite-state recurrence). Running
:meth:`step` over a sequence reproduces :meth:`forward` (tested).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice
from ..ops.s4d import fft_conv, s4d_kernel
from .mlp import activation as make_activation

__all__ = ["S4D", "s4d_init", "S4D_INITS"]

S4D_INITS = ("legs", "lin", "inv")


def _hippo_legs_diag(N: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (N/2, Im > 0, ascending) of the normal part of HiPPO-LegS and B in that eigenbasis."""
    n = np.arange(N, dtype=np.float64)
    r = np.sqrt(2 * n + 1)
    A = -np.tril(np.outer(r, r), -1) - np.diag(n + 1)  # HiPPO-LegS
    P = np.sqrt(n + 0.5)
    S = A + np.outer(P, P)  # normal: -1/2 I + skew-symmetric
    skew = S + 0.5 * np.eye(N)
    # the eigenvalues of a real skew-symmetric matrix are i * (those of the Hermitian -i * skew)
    w, V = np.linalg.eigh(-1j * skew)
    keep = np.argsort(w)[N // 2 :]  # positive imaginary parts; their conjugates are the other half
    lam = -0.5 + 1j * w[keep]
    Bv = V[:, keep].conj().T @ r  # V unitary: the eigenbasis coordinates of B
    return lam, Bv


def s4d_init(
    init: str, H: int, N: int, dt_min: float = 1e-3, dt_max: float = 1e-1, generator: torch.Generator | None = None
) -> dict[str, torch.Tensor]:
    """Initial ``A, B, C`` (complex ``(H, N/2)``), ``D`` (``(H,)``) and ``log_dt`` (``(H,)``) of an S4D layer."""
    check_choice("S4D init", init, S4D_INITS)
    if N < 2 or N % 2:
        raise ConfigError(f"S4D d_state must be even and >= 2 (N/2 complex-conjugate pairs); got {N}.")
    if not 0 < dt_min <= dt_max:
        raise ConfigError(f"S4D needs 0 < dt_min <= dt_max; got dt_min={dt_min}, dt_max={dt_max}.")
    N2 = N // 2
    n = torch.arange(N2, dtype=torch.float64)
    if init == "lin":
        A = torch.complex(torch.full((N2,), -0.5, dtype=torch.float64), math.pi * n)
        B = torch.ones(N2, dtype=torch.cdouble)
    elif init == "inv":
        A = torch.complex(torch.full((N2,), -0.5, dtype=torch.float64), (N / math.pi) * (N / (2 * n + 1) - 1))
        B = torch.ones(N2, dtype=torch.cdouble)
    else:
        lam, Bv = _hippo_legs_diag(N)
        A, B = torch.from_numpy(lam), torch.from_numpy(Bv)
    log_dt = torch.rand(H, dtype=torch.float64, generator=generator) * (math.log(dt_max) - math.log(dt_min)) + math.log(
        dt_min
    )
    C = torch.randn(H, N2, dtype=torch.cdouble, generator=generator)  # complex normal, E|C|^2 = 1
    D = torch.randn(H, dtype=torch.float64, generator=generator)
    return {"A": A.expand(H, N2).clone(), "B": B.expand(H, N2).clone(), "C": C, "D": D, "log_dt": log_dt}


class S4D(nn.Module):
    """S4D block ``(..., L, H) -> (..., L, H)`` (see the module docstring for the equations).

    Args:
        d_model: channels ``H`` (one independent SSM per channel).
        d_state: state size ``N`` (``N/2`` complex-conjugate pairs; 64 in ST-SSM).
        init: ``"legs"``, ``"lin"`` or ``"inv"``.
        dt_min, dt_max: range of the log-uniform initial step sizes.
        window: kernel length cap ``K`` (``None``: the whole sequence). ``y[t]`` depends on ``u[t-K+1..t]``.
            ``window=0`` is not allowed here (an "off" memory layer is the identity; see ``models.stssm``).
        activation: ``"gelu"`` (the paper) or any name of ``neurodyn.nn.mlp.ACTIVATIONS``.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        init: str = "legs",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        window: int | None = None,
        activation: str = "gelu",
    ):
        super().__init__()
        if d_model < 1:
            raise ConfigError(f"S4D d_model must be >= 1; got {d_model}.")
        if window is not None and window < 1:
            raise ConfigError(f"S4D window must be None (whole sequence) or >= 1 taps; got {window}.")
        self.d_model, self.d_state, self.window, self.init = int(d_model), int(d_state), window, init
        p = s4d_init(init, self.d_model, self.d_state, dt_min, dt_max)
        f32 = torch.float32
        self.log_dt = nn.Parameter(p["log_dt"].to(f32))
        self.log_neg_re_A = nn.Parameter(torch.log(-p["A"].real).to(f32))
        self.im_A = nn.Parameter(p["A"].imag.to(f32))
        self.B = nn.Parameter(torch.view_as_real(p["B"]).to(f32).contiguous())
        self.C = nn.Parameter(torch.view_as_real(p["C"]).to(f32).contiguous())
        self.D = nn.Parameter(p["D"].to(f32))
        self.act = make_activation(activation)
        self.output_linear = nn.Linear(self.d_model, 2 * self.d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_state={self.d_state}, init={self.init!r}, window={self.window}"

    # -- the linear system ---------------------------------------------------------------------------
    def _real(self) -> torch.dtype:
        """The dtype the system is computed in: the parameters', but at least float32 (a bfloat16 or float16 model,
        or autocast, still builds A, B, C and the kernel in float32; complex bfloat16 does not exist)."""
        return torch.float64 if self.log_dt.dtype == torch.float64 else torch.float32

    def ssm(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(A, B, C, log_dt)``: complex ``(H, N/2)`` x 3 and real ``(H,)``, in float32 or float64."""
        f = self._real()
        A = torch.complex(-torch.exp(self.log_neg_re_A.to(f)), self.im_A.to(f))
        return A, torch.view_as_complex(self.B.to(f)), torch.view_as_complex(self.C.to(f)), self.log_dt.to(f)

    def kernel(self, L: int) -> torch.Tensor:
        """Convolution kernel ``(H, min(L, window))`` (real)."""
        A, B, C, log_dt = self.ssm()
        return s4d_kernel(A, B, C, log_dt, L, window=self.window)

    def conv(self, u: torch.Tensor) -> torch.Tensor:
        """The linear part ``K * u + D u`` on channels-first ``u: (..., H, L)``; the convolution accumulates in
        float32 (float64 for float64 input) whatever the input dtype, and returns ``u``'s dtype."""
        f = torch.float64 if u.dtype == torch.float64 else torch.float32
        with torch.autocast(u.device.type, enabled=False):
            y = fft_conv(u.to(f), self.kernel(u.shape[-1]).to(f), self.D.to(f))
        return y.to(u.dtype)

    # -- forward ---------------------------------------------------------------------------------------
    def _check(self, u: torch.Tensor) -> None:
        if u.dim() < 2 or u.shape[-1] != self.d_model:
            raise ValueError(
                f"S4D input has shape {tuple(u.shape)}; expected (..., L, {self.d_model}) "
                "(sequence axis second to last, channels last)."
            )

    def _head(self, z: torch.Tensor) -> torch.Tensor:
        """Pointwise part after the convolution: ``GLU(Linear(act(z)))`` on channels-last ``z``."""
        return F.glu(self.output_linear(self.act(z)), dim=-1)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """``u: (..., L, H)`` -> ``(..., L, H)``."""
        self._check(u)
        z = self.conv(u.transpose(-1, -2)).transpose(-1, -2)
        return self._head(z)

    # -- streaming -------------------------------------------------------------------------------------
    def initial_state(self, *batch: int, device=None, dtype=torch.float32) -> torch.Tensor:
        """Zero state for :meth:`step`: complex ``(*batch, H, N/2)`` or, with a window, the input buffer
        ``(*batch, H, window - 1)``."""
        if self.window is None:
            cdt = torch.complex128 if dtype == torch.float64 else torch.complex64
            return torch.zeros(*batch, self.d_model, self.d_state // 2, dtype=cdt, device=device)
        return torch.zeros(*batch, self.d_model, self.window - 1, dtype=dtype, device=device)

    def step(self, u: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One position: ``u: (..., H)`` -> ``(y: (..., H), new state)``; see :meth:`initial_state`."""
        if u.shape[-1] != self.d_model:
            raise ValueError(f"S4D.step input has shape {tuple(u.shape)}; expected (..., {self.d_model}).")
        if state is None:
            state = self.initial_state(*u.shape[:-1], device=u.device, dtype=u.dtype)
        A, B, C, log_dt = self.ssm()
        if self.window is None:
            dtA = torch.exp(log_dt)[:, None].to(A.real.dtype) * A
            Bbar = torch.expm1(dtA) / A * B
            state = torch.exp(dtA) * state + Bbar * u[..., None].to(state.dtype)
            z = 2 * (C * state).sum(-1).real.to(u.dtype)
        else:
            K = s4d_kernel(A, B, C, log_dt, self.window, window=self.window).to(u.dtype)  # (H, window)
            hist = torch.cat([state, u[..., None]], dim=-1)  # oldest .. newest, (..., H, window)
            z = (hist * K.flip(-1)).sum(-1)
            state = hist[..., 1:]
        z = z + self.D.to(u.dtype) * u
        return self._head(z), state
