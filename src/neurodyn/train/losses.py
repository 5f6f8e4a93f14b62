"""Training losses for operator learning on channels-last fields ``(B, *spatial, C)``.

Every loss takes ``pred`` and ``target`` of the same shape ``(B, *spatial, C)`` and reduces per sample
first, then over the batch (``reduction="mean"`` (default), ``"sum"`` or ``"none"`` for the ``(B,)``
vector of per-sample values).

Definitions
-----------
``relative_lp``  (the FNO ``LpLoss`` in its relative form; the loss and metric of LaMO, GeoMaNO,
    Transolver, ONO, ...). Per sample ``b``, with all spatial points and channels flattened together::

        r_b = ||pred_b - target_b||_p / ||target_b||_p

    Optional quadrature weights ``w`` turn the norms into ``(sum_x w_x |f_x|^p)^(1/p)``. On a uniform grid
    ``w`` is the constant cell volume ``prod_d h_d``, which multiplies numerator and denominator by the same
    ``w^(1/p)`` and cancels, so passing grid spacings changes nothing (up to ``eps``); only non-uniform
    weights (a per-point tensor, e.g. cell areas of a mesh) change the value.

``mse``  per-sample mean over space and channels of ``(pred - target)^2``; with ``reduction="mean"`` it
    equals ``torch.nn.functional.mse_loss``.

``gradient_loss`` (``DarcyGradientLoss``, name ``"rel_l2+grad"``)  ONO's Darcy loss ("L_rL2 + 0.1 L_g"), reused by
    Transolver, LaMO and GeoMaNO; neither paper defines ``L_g``. The reference form (transcribed in
    docs/papers/notes-lamo.md#gradient-regulariser-darcy-only and docs/papers/notes-geomano.md#33-loss), 2-D::

        pred'  = pred with its boundary ring set to 0
        d_x f[i, j] = (f[i, j+1] - f[i, j-1]) / (2 h_x),  d_y likewise along i; f = 0 outside the grid
        loss   = relL2(pred, target) + weight * [relL2(d_x pred', d_x target) + relL2(d_y pred', d_y target)]

    Choices: ``mode="reference"`` (default) is that form, ``"interior"`` differentiates the untouched fields at
    interior points only; ``x`` is the last spatial axis (``W``); the caller passes decoded (physical-unit)
    fields, as the reference does; ``h`` cancels in every ratio; ``reduction="sum"`` is the reference's
    batch sum.

``h1_loss``  relative H1 norm of the error, per sample::

        r_b = sqrt(||e||^2 + sum_d ||d_d e||^2) / sqrt(||u||^2 + sum_d ||d_d u||^2),  e = pred - u, u = target

    with plain sums over grid points and channels (a uniform quadrature weight cancels in the ratio, but
    the spacing ``h`` does not: it sets the relative weight of the derivative terms). Derivatives are finite
    differences along each spatial axis: periodic grids use central differences with wrap-around
    ``(f[i+1] - f[i-1]) / 2h`` (no FFT); non-periodic grids use ``torch.gradient`` (central in the
    interior, second-order one-sided at the two ends; needs at least 3 points per axis). Default spacing
    assumes the unit domain along each axis: ``h = 1/n`` if periodic (points ``k/n``), ``h = 1/(n-1)``
    otherwise (points ``linspace(0, 1, n)``).

Precision
---------
Losses are computed in float32 or wider: float16 / bfloat16 inputs (a model's output under ``torch.autocast``, as
``train.precision=bf16`` and Lightning's bf16-mixed call it) are taken to float32 first, so that differences of
neighbouring values and norms do not round to 8 bits.

NaN policy
----------
Losses never check for NaN or raise on it (that would force a device synchronisation every step): a NaN
or inf in ``pred`` propagates to the returned loss, and the trainer decides what to do (stop, skip).
Shape mismatches raise ``ValueError`` naming both shapes; there is no broadcasting.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError, unknown_name

__all__ = [
    "relative_lp",
    "mse",
    "central_diff_2d",
    "gradient_loss",
    "h1_loss",
    "RelativeLpLoss",
    "RelativeL2Loss",
    "RelativeL1Loss",
    "MSELoss",
    "DarcyGradientLoss",
    "H1Loss",
    "build_loss",
    "available_losses",
]

Quadrature = None | float | Sequence[float] | Tensor
Spacing = None | float | Sequence[float]

_REDUCTIONS = ("mean", "sum", "none")


# ----------------------------------------------------------------------------------------------------
# input checks shared with metrics.py


def check_fields(pred: Tensor, target: Tensor, where: str, min_spatial: int = 1, max_spatial: int | None = 3) -> int:
    """Check that ``pred`` and ``target`` are same-shaped ``(B, *spatial, C)`` tensors; return ``len(spatial)``."""
    if not isinstance(pred, Tensor) or not isinstance(target, Tensor):
        raise TypeError(
            f"{where}: pred and target must be torch tensors, got {type(pred).__name__} and {type(target).__name__}."
        )
    if pred.shape != target.shape:
        raise ValueError(
            f"{where}: pred and target must have the same shape (B, *spatial, C), got pred "
            f"{tuple(pred.shape)} and target {tuple(target.shape)}."
        )
    n_spatial = pred.dim() - 2
    if n_spatial < 0:
        raise ValueError(
            f"{where}: expected fields (B, *spatial, C) with a batch and a channel axis, got shape {tuple(pred.shape)}."
        )
    if n_spatial < min_spatial or (max_spatial is not None and n_spatial > max_spatial):
        want = (
            f"{min_spatial} to {max_spatial}"
            if max_spatial is not None and max_spatial != min_spatial
            else f"{min_spatial}"
            if max_spatial == min_spatial
            else f"at least {min_spatial}"
        )
        raise ValueError(
            f"{where}: expected fields of shape (B, *spatial, C) with {want} spatial dimension(s), "
            f"got shape {tuple(pred.shape)} ({max(n_spatial, 0)} spatial)."
        )
    if pred.shape[0] == 0:
        raise ValueError(f"{where}: got an empty batch (shape {tuple(pred.shape)}).")
    return n_spatial


def _check_reduction(reduction: str, where: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{where}: reduction must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduction!r}.")


def _reduce(per_sample: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    return per_sample


def _spacing(h: Spacing, shape: Sequence[int], periodic: bool, where: str) -> tuple[float, ...]:
    """Per-axis grid spacing; default is the unit domain (``1/n`` periodic, ``1/(n-1)`` otherwise)."""
    if h is None:
        if periodic:
            return tuple(1.0 / n for n in shape)
        if min(shape) < 2:
            raise ValueError(
                f"{where}: cannot infer the spacing of an axis with fewer than 2 points "
                f"(spatial shape {tuple(shape)}); pass h."
            )
        return tuple(1.0 / (n - 1) for n in shape)
    hs = (float(h),) * len(shape) if isinstance(h, (int, float)) else tuple(float(v) for v in h)
    if len(hs) != len(shape) or not all(v > 0 and math.isfinite(v) for v in hs):
        raise ValueError(
            f"{where}: h must be a positive number or one positive number per spatial axis ({len(shape)}), got {h!r}."
        )
    return hs


def at_least_float32(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors, float16 / bfloat16 ones as float32 (module docstring, "Precision")."""
    return tuple(t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors)


# ----------------------------------------------------------------------------------------------------
# functional losses


def relative_lp(
    pred: Tensor,
    target: Tensor,
    p: float = 2,
    reduction: str = "mean",
    eps: float = 1e-12,
    quadrature: Quadrature = None,
) -> Tensor:
    """Relative Lp error ``||pred - target||_p / ||target||_p`` per sample, then reduced over the batch.

    Args:
        pred, target: ``(B, ...)`` tensors of the same shape, normally ``(B, *spatial, C)``; everything after
            the batch axis (all points and all channels) is flattened into one vector per sample.
        p: norm order, ``p > 0`` or ``math.inf``.
        reduction: ``"mean"`` | ``"sum"`` | ``"none"`` (returns the ``(B,)`` per-sample values).
        eps: the denominator is clamped to at least ``eps`` (a zero target with zero error gives 0).
        quadrature: optional weights. A number or a sequence of per-axis spacings means a constant cell
            volume, which cancels exactly in the ratio on uniform grids (accepted for API symmetry with
            absolute norms). A tensor gives per-point weights ``w`` broadcastable to ``pred.shape[:-1]``
            (``(*spatial)``, ``(1, *spatial)`` or ``(B, *spatial)``), shared by all channels; the norm is then
            ``(sum_x w_x |f_x|^p)^(1/p)``. Weights must be non-negative.

    NaN/inf in the inputs propagate to the result (no exception).
    """
    where = "relative_lp"
    check_fields(pred, target, where, min_spatial=0, max_spatial=None)
    pred, target = at_least_float32(pred, target)
    _check_reduction(reduction, where)
    if not (p > 0):
        raise ValueError(f"{where}: p must be positive (or math.inf), got {p!r}.")
    diff = pred - target
    ref = target
    if isinstance(quadrature, Tensor):
        w = quadrature.to(device=pred.device, dtype=pred.dtype)
        try:
            ok = torch.broadcast_shapes(w.shape, pred.shape[:-1]) == pred.shape[:-1]
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"{where}: quadrature weights of shape {tuple(w.shape)} do not broadcast to the "
                f"points {tuple(pred.shape[:-1])} of fields {tuple(pred.shape)}."
            ) from None
        if not math.isinf(p):
            # sum w|f|^p == sum |w^(1/p) f|^p: scale the fields and reuse vector_norm (safe gradient at 0)
            scale = w.clamp_min(0).pow(1.0 / p).unsqueeze(-1)
            diff, ref = diff * scale, ref * scale
        else:  # sup norm over points with positive weight
            keep = (w > 0).unsqueeze(-1).to(pred.dtype)
            diff, ref = diff * keep, ref * keep
    elif quadrature is not None:
        vals = [quadrature] if isinstance(quadrature, (int, float)) else list(quadrature)
        if not all(isinstance(v, (int, float)) and v > 0 for v in vals):
            raise ValueError(
                f"{where}: quadrature must be a tensor of weights, a positive spacing or a "
                f"sequence of positive spacings, got {quadrature!r}."
            )
        # constant weight: cancels in the ratio (documented); nothing to do
    num = torch.linalg.vector_norm(diff.reshape(diff.shape[0], -1), ord=p, dim=1)
    den = torch.linalg.vector_norm(ref.reshape(ref.shape[0], -1), ord=p, dim=1)
    return _reduce(num / den.clamp_min(eps), reduction)


def mse(pred: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error per sample (over all points and channels), then reduced over the batch."""
    check_fields(pred, target, "mse", min_spatial=0, max_spatial=None)
    pred, target = at_least_float32(pred, target)
    _check_reduction(reduction, "mse")
    per_sample = (pred - target).pow(2).reshape(pred.shape[0], -1).mean(dim=1)
    return _reduce(per_sample, reduction)


def central_diff_2d(f: Tensor, h: Spacing = None, *, zero_pad: bool = True) -> tuple[Tensor, Tensor]:
    """Central differences ``(d_x f, d_y f)`` of a 2D channels-last field ``f: (B, H, W, C)``.

    ``x`` is the last spatial axis (``W``), ``y`` the first (``H``); ``h`` is ``(h_y, h_x)`` or one number
    (default ``1/(H-1), 1/(W-1)``). With ``zero_pad=True`` the derivatives are returned at all ``H x W``
    points, taking ``f = 0`` outside the grid (the ONO/Transolver reference); otherwise at the
    ``(H-2) x (W-2)`` interior points only.
    """
    if f.dim() != 4:
        raise ValueError(f"central_diff_2d: expected a (B, H, W, C) field, got shape {tuple(f.shape)}.")
    hy, hx = _spacing(h, f.shape[1:3], periodic=False, where="central_diff_2d")
    if zero_pad:
        f = F.pad(f, (0, 0, 1, 1, 1, 1))  # pads C by 0, W by 1 each side, H by 1 each side
    elif min(f.shape[1:3]) < 3:
        raise ValueError(
            f"central_diff_2d: interior differences need at least 3 points per axis, got "
            f"spatial shape {tuple(f.shape[1:3])}."
        )
    dx = (f[:, 1:-1, 2:, :] - f[:, 1:-1, :-2, :]) / (2 * hx)
    dy = (f[:, 2:, 1:-1, :] - f[:, :-2, 1:-1, :]) / (2 * hy)
    return dx, dy


def gradient_loss(
    pred: Tensor,
    target: Tensor,
    weight: float = 0.1,
    h: Spacing = None,
    mode: str = "reference",
    reduction: str = "mean",
    eps: float = 1e-12,
) -> Tensor:
    """Darcy loss ``relL2(pred, target) + weight * [relL2(d_x pred', d_x target) + relL2(d_y pred', d_y target)]``.

    ``pred``/``target``: 2D fields ``(B, H, W, C)``, decoded to physical units (see the module docstring
    for the exact reference form and the choices made). ``mode="reference"``: ``pred'`` is ``pred`` with
    its boundary ring zeroed and the differences are zero-padded over the whole grid (ONO / Transolver /
    LaMO / GeoMaNO); ``mode="interior"``: plain central differences of both untouched fields at interior
    points. ``weight=0`` gives exactly ``relative_lp(pred, target)``. ``h`` cancels in the ratios.
    """
    where = "gradient_loss"
    check_fields(pred, target, where, min_spatial=2, max_spatial=2)
    pred, target = at_least_float32(pred, target)
    _check_reduction(reduction, where)
    if mode not in ("reference", "interior"):
        raise ValueError(f"{where}: mode must be 'reference' or 'interior', got {mode!r}.")
    if min(pred.shape[1:3]) < 3:
        raise ValueError(f"{where}: needs at least 3 points per spatial axis, got shape {tuple(pred.shape)}.")
    base = relative_lp(pred, target, 2, reduction="none", eps=eps)
    if mode == "reference":
        pred_g = F.pad(pred[:, 1:-1, 1:-1, :], (0, 0, 1, 1, 1, 1))
        pdx, pdy = central_diff_2d(pred_g, h, zero_pad=True)
        tdx, tdy = central_diff_2d(target, h, zero_pad=True)
    else:
        pdx, pdy = central_diff_2d(pred, h, zero_pad=False)
        tdx, tdy = central_diff_2d(target, h, zero_pad=False)
    grad = relative_lp(pdx, tdx, 2, reduction="none", eps=eps) + relative_lp(pdy, tdy, 2, reduction="none", eps=eps)
    return _reduce(base + weight * grad, reduction)


def _fd_gradients(f: Tensor, hs: Sequence[float], periodic: bool) -> list[Tensor]:
    """Finite-difference derivative along each spatial axis of a channels-last field."""
    axes = range(1, f.dim() - 1)
    if periodic:
        return [(torch.roll(f, -1, dims=a) - torch.roll(f, 1, dims=a)) / (2 * h) for a, h in zip(axes, hs)]
    return list(torch.gradient(f, spacing=list(hs), dim=list(axes), edge_order=2))


def h1_loss(
    pred: Tensor, target: Tensor, periodic: bool = False, h: Spacing = None, reduction: str = "mean", eps: float = 1e-12
) -> Tensor:
    """Relative H1 error ``sqrt(||e||^2 + ||grad e||^2) / sqrt(||u||^2 + ||grad u||^2)`` per sample.

    ``e = pred - target``, ``u = target``; fields ``(B, *spatial, C)`` with 1 to 3 spatial axes; norms are
    sums over all points and channels; ``grad`` by finite differences (periodic: central with wrap-around;
    otherwise ``torch.gradient``, second-order at the ends). ``h``: spacing per axis, default unit domain
    (``1/n`` periodic, ``1/(n-1)`` otherwise) -- unlike for ``relative_lp`` it does not cancel.
    """
    where = "h1_loss"
    n_spatial = check_fields(pred, target, where, min_spatial=1, max_spatial=3)
    _check_reduction(reduction, where)
    pred, target = at_least_float32(pred, target)
    spatial = pred.shape[1:-1]
    if not periodic and min(spatial) < 3:
        raise ValueError(
            f"{where}: non-periodic differences need at least 3 points per axis, got spatial shape {tuple(spatial)}."
        )
    hs = _spacing(h, spatial, periodic, where)
    assert len(hs) == n_spatial
    B = pred.shape[0]

    def h1_norm(f: Tensor) -> Tensor:
        parts = [f.reshape(B, -1)] + [g.reshape(B, -1) for g in _fd_gradients(f, hs, periodic)]
        return torch.linalg.vector_norm(torch.cat(parts, dim=1), ord=2, dim=1)

    per_sample = h1_norm(pred - target) / h1_norm(target).clamp_min(eps)
    return _reduce(per_sample, reduction)


# ----------------------------------------------------------------------------------------------------
# modules


class FunctionalLoss(nn.Module):
    """``nn.Module`` form of a functional loss ``fn(pred, target, **options)``: the options are attributes
    (``reduction`` checked), passed by name; ``shown`` are the ones ``repr`` lists."""

    fn: Callable[..., Tensor]
    shown: tuple[str, ...] = ()

    def __init__(self, **options: Any):
        super().__init__()
        _check_reduction(options["reduction"], type(self).__name__)
        self._options = tuple(options)
        for key, value in options.items():
            setattr(self, key, value)

    def forward(self, pred: Tensor, target: Tensor) -> Tensor:
        return type(self).fn(pred, target, **{k: getattr(self, k) for k in self._options})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self.shown)


class RelativeLpLoss(FunctionalLoss):
    """``nn.Module`` form of :func:`relative_lp`."""

    fn, shown = relative_lp, ("p", "reduction")

    def __init__(self, p: float = 2, reduction: str = "mean", eps: float = 1e-12, quadrature: Quadrature = None):
        super().__init__(p=p, reduction=reduction, eps=eps, quadrature=quadrature)


class RelativeL2Loss(RelativeLpLoss):
    """Relative L2 loss (per-sample ``||pred - target||_2 / ||target||_2``, mean over the batch by default)."""

    def __init__(self, reduction: str = "mean", eps: float = 1e-12, quadrature: Quadrature = None):
        super().__init__(2, reduction, eps, quadrature)


class RelativeL1Loss(RelativeLpLoss):
    """Relative L1 loss (per-sample ``||pred - target||_1 / ||target||_1``, mean over the batch by default)."""

    def __init__(self, reduction: str = "mean", eps: float = 1e-12, quadrature: Quadrature = None):
        super().__init__(1, reduction, eps, quadrature)


class MSELoss(FunctionalLoss):
    """Mean squared error with a strict shape check (no silent broadcasting)."""

    fn = mse

    def __init__(self, reduction: str = "mean"):
        super().__init__(reduction=reduction)


class DarcyGradientLoss(FunctionalLoss):
    """``nn.Module`` form of :func:`gradient_loss` (relative L2 + ``weight`` x relative L2 of gradients)."""

    fn, shown = gradient_loss, ("weight", "mode", "reduction")

    def __init__(
        self,
        weight: float = 0.1,
        h: Spacing = None,
        mode: str = "reference",
        reduction: str = "mean",
        eps: float = 1e-12,
    ):
        super().__init__(weight=weight, h=h, mode=mode, reduction=reduction, eps=eps)
        if mode not in ("reference", "interior"):
            raise ValueError(f"DarcyGradientLoss: mode must be 'reference' or 'interior', got {mode!r}.")


class H1Loss(FunctionalLoss):
    """``nn.Module`` form of :func:`h1_loss` (relative H1 error)."""

    fn, shown = h1_loss, ("periodic", "reduction")

    def __init__(self, periodic: bool = False, h: Spacing = None, reduction: str = "mean", eps: float = 1e-12):
        super().__init__(periodic=periodic, h=h, reduction=reduction, eps=eps)


_LOSSES: dict[str, type[nn.Module]] = {
    "rel_l2": RelativeL2Loss,
    "rel_l1": RelativeL1Loss,
    "mse": MSELoss,
    "h1": H1Loss,
    "rel_l2+grad": DarcyGradientLoss,
}


def masked_loss(loss: nn.Module, pred: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """``loss(pred, target)`` over the real points of padded point clouds only: ``mask (B, *spatial)`` is True on
    real points. Each sample's value is the one of the sample without its padding: relative Lp takes the mask as
    0/1 quadrature weights (both norms run over the real points); MSE divides each sample's squared error by its
    own point count. Other losses (gradients, H1) assume a grid, which padded points do not have."""
    m = mask.to(
        device=pred.device, dtype=torch.float32 if pred.dtype in (torch.float16, torch.bfloat16) else pred.dtype
    )
    if isinstance(loss, RelativeLpLoss):
        if loss.quadrature is not None:
            raise ConfigError(
                "a relative Lp loss with quadrature weights cannot also take a point mask; drop "
                "the loss's quadrature for padded point clouds"
            )
        return relative_lp(pred, target, loss.p, loss.reduction, loss.eps, quadrature=m)
    if isinstance(loss, MSELoss):
        pred, target = at_least_float32(pred, target)
        per_point = (pred - target).pow(2).mean(dim=-1) * m
        per_sample = per_point.reshape(pred.shape[0], -1).sum(1) / m.reshape(pred.shape[0], -1).sum(1).clamp_min(1)
        return _reduce(per_sample, loss.reduction)
    raise ConfigError(
        f"loss {type(loss).__name__} assumes a grid and cannot skip the padded points of ragged point "
        "clouds; use train.loss rel_l2, rel_l1 or mse"
    )


def available_losses() -> list[str]:
    """Sorted names accepted by :func:`build_loss`."""
    return sorted(_LOSSES)


def build_loss(name: str, **kw: Any) -> nn.Module:
    """Build a loss module by name: ``"rel_l2"``, ``"rel_l1"``, ``"mse"``, ``"h1"``, ``"rel_l2+grad"``.

    Keyword arguments go to the module's constructor. Unknown names raise
    :class:`neurodyn.errors.UnknownNameError` (suggesting the closest names); unknown arguments raise
    :class:`neurodyn.errors.ConfigError` listing the accepted ones.
    """
    if name not in _LOSSES:
        raise unknown_name("loss", name, _LOSSES)
    cls = _LOSSES[name]
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    bad = sorted(set(kw) - set(params))
    if bad:
        raise ConfigError(
            f"loss {name!r} does not take argument(s) {', '.join(map(repr, bad))}; "
            f"it takes {', '.join(params) or 'no arguments'}."
        )
    return cls(**kw)
