"""Ridge regression with an unpenalised intercept and its penalty chosen by exact leave-one-out error.

``ridge_loo(x (n, p), y (n, k), alphas)`` minimises ``|y - x w - b|^2 + alpha |w|^2`` for each ``alpha``, from one
thin SVD of the centred design ``x_c = U diag(s) V^T``:

* fitted values ``y_hat = 1 y_mean^T + U diag(s^2 / (s^2 + alpha)) U^T y_c``;
* the hat matrix's diagonal ``h_i = 1/n + sum_r U_ir^2 s_r^2 / (s_r^2 + alpha)``;
* leave-one-out residuals ``(y_i - y_hat_i) / (1 - h_i)`` (exact for a linear smoother with an unpenalised
  intercept: the model refitted without sample ``i`` predicts ``y_i`` with that error);
* the chosen ``alpha`` minimises their mean square (over samples and targets; the first on ties), and
  ``w = V diag(s / (s^2 + alpha)) U^T y_c``, ``b = y_mean - x_mean w``.

Computed in float64; :func:`loo_errors_ref` refits ``n`` times (the test oracle).
"""

from __future__ import annotations

import torch


def loo_errors(x: torch.Tensor, y: torch.Tensor, alphas: torch.Tensor) -> torch.Tensor:
    """Mean squared leave-one-out error of each ``alpha`` (``(len(alphas),)``; module docstring)."""
    _, U, s, _, yc = _decompose(x, y)
    n = len(x)
    uty = U.T @ yc
    out = []
    for a in alphas.tolist():
        f = s.square() / (s.square() + a)
        fitted = U @ (f[:, None] * uty)
        h = U.square() @ f + 1.0 / n
        out.append(((yc - fitted) / (1.0 - h).clamp_min(1e-12)[:, None]).square().mean())
    return torch.stack(out)


def ridge_loo(x: torch.Tensor, y: torch.Tensor, alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``(w (p, k), b (k,), alpha)``: the ridge fit at the ``alpha`` of least leave-one-out error."""
    if x.dim() != 2 or y.dim() != 2 or len(x) != len(y) or len(x) < 2:
        raise ValueError(
            f"ridge_loo takes x (n, p) and y (n, k) with n >= 2; got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    alphas = torch.as_tensor(alphas, dtype=torch.float64)
    errors = loo_errors(x, y, alphas)
    alpha = float(alphas[int(torch.argmin(errors))])
    xm, U, s, Vh, yc = _decompose(x, y)
    w = Vh.T @ ((s / (s.square() + alpha))[:, None] * (U.T @ yc))
    b = y.double().mean(0) - xm @ w
    return w.to(x.dtype), b.to(x.dtype), alpha


def _decompose(x: torch.Tensor, y: torch.Tensor):
    x, y = x.double(), y.double()
    xm = x.mean(0)
    U, s, Vh = torch.linalg.svd(x - xm, full_matrices=False)
    return xm, U, s, Vh, y - y.mean(0)


def loo_errors_ref(x: torch.Tensor, y: torch.Tensor, alphas) -> torch.Tensor:
    """The same errors by refitting without each sample in turn (normal equations; slow, for tests)."""
    x, y = x.double(), y.double()
    n, p = x.shape
    out = []
    for a in torch.as_tensor(alphas, dtype=torch.float64).tolist():
        sq = 0.0
        for i in range(n):
            keep = torch.arange(n) != i
            xk, yk = x[keep], y[keep]
            xm, ym = xk.mean(0), yk.mean(0)
            w = torch.linalg.solve((xk - xm).T @ (xk - xm) + a * torch.eye(p, dtype=x.dtype), (xk - xm).T @ (yk - ym))
            sq += float((y[i] - (x[i] - xm) @ w - ym).square().sum())
        out.append(sq / (n * y.shape[1]))
    return torch.tensor(out, dtype=torch.float64)
