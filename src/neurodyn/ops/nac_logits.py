"""NAC attention logits: the linear ODE ``da/dt = -omega a + phi`` (paper 002, eqs. 1-3, 17-18) three ways.

* :func:`exact_logits`  closed form ``a_t = a* + (a_0 - a*) exp(-omega t)``, ``a* = phi / omega`` (eqs. 3, 17)
* :func:`euler_logits`  explicit Euler ``a <- a + dt (-omega a + phi)``, ``steps`` times (eq. 2)
* :func:`steady_logits` the equilibrium ``a* = phi / omega`` (eq. 18), the limit ``t -> inf``

All are elementwise on broadcastable tensors ``phi``, ``omega > 0``, ``t``; Euler with many steps is the
reference of the closed form (it converges at first order in ``dt``), the closed form at large ``t`` that
of the steady state.
"""

from __future__ import annotations

import torch

from ..errors import ConfigError

__all__ = ["steady_logits", "exact_logits", "euler_logits"]


def steady_logits(phi: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """Equilibrium ``a* = phi / omega`` (eq. 18)."""
    return phi / omega


def exact_logits(
    phi: torch.Tensor, omega: torch.Tensor, t: torch.Tensor | float, a0: torch.Tensor | float = 0.0
) -> torch.Tensor:
    """Closed form ``a_t = a* + (a_0 - a*) exp(-omega t)`` (eq. 3); with ``a_0 = 0`` eq. 17."""
    a_star = phi / omega
    decay = torch.exp(-omega * t)
    if isinstance(a0, (int, float)) and a0 == 0:
        return a_star * (1.0 - decay)  # = -a* expm1(-omega t) without cancellation for small omega t
    return a_star + (a0 - a_star) * decay


def euler_logits(
    phi: torch.Tensor,
    omega: torch.Tensor,
    t: torch.Tensor | float | None,
    steps: int,
    dt: float | None = None,
    a0: torch.Tensor | float = 0.0,
) -> torch.Tensor:
    """Explicit Euler (eq. 2): ``steps`` updates ``a <- a + dt (-omega a + phi)``.

    ``dt=None`` integrates over ``[0, t]`` (``dt = t / steps``, converging to :func:`exact_logits` as
    ``steps`` grows); a number uses that fixed step whatever ``t`` (the released code). The paper's
    invariance argument (Theorem 1, eq. 46) needs ``dt * omega <= 1``.
    """
    if steps < 1:
        raise ConfigError(f"Euler mode needs at least one step, got {steps}")
    if dt is None:
        if t is None:
            raise ConfigError("Euler mode with dt=None integrates to the pair time t, which was not given")
        h = t / steps
    else:
        h = dt
    a = torch.zeros_like(phi) + a0
    for _ in range(int(steps)):
        a = a + h * (-omega * a + phi)
    return a
