"""Normalizers fitted on the training split only, saved with the run, applied in evaluation.

* ``gaussian``: x' = (x - mean) / (std + eps)          (FNO's UnitGaussianNormalizer)
* ``minmax``:   x' = (x - min) / (max - min + eps)      (maps the training range to [0, 1], ST-SSM)
* ``none``:     identity

``reduce="pointwise"`` keeps one statistic per grid point and channel (FNO's choice for Darcy);
``reduce="channel"`` one per channel (resolution-independent).
Statistics are buffers, so ``state_dict()`` carries them into checkpoints.

Resolution transfer: pointwise statistics fitted on one grid are applied to a grid of the same dimension
but another size (a test set at twice the training resolution) by resampling them multi-linearly onto it,
vertex-aligned (``align_corners=True``: both grids span the same domain with points on its boundary, as every
generator and public file here stores them). A 2-D field's mean and standard deviation are smooth where the
data are, so this is what a user would do by hand; it is not done for point clouds, whose pointwise
statistics have no geometry (their presets use ``reduce="channel"``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import ConfigError, DataError
from ..ops.resample import resample_grid

KINDS = ("gaussian", "minmax", "none")
REDUCES = ("pointwise", "channel")


class Normalizer(nn.Module):
    """Affine map fitted on a (N, *spatial, C) training tensor: encode(x) = (x - shift) / scale."""

    def __init__(self, kind: str = "gaussian", reduce: str = "pointwise", eps: float = 1e-5):
        super().__init__()
        if kind not in KINDS:
            raise ConfigError(f"normalizer kind must be one of {KINDS}, got {kind!r}")
        if reduce not in REDUCES:
            raise ConfigError(f"normalizer reduce must be one of {REDUCES}, got {reduce!r}")
        self.kind, self.reduce, self.eps = kind, reduce, eps
        self.register_buffer("shift", torch.zeros(0))
        self.register_buffer("scale", torch.ones(0))

    def fit(self, data: torch.Tensor) -> Normalizer:
        """Fit on training data (N, *spatial, C) (float64 accumulation)."""
        if data.ndim < 2:
            raise DataError(f"normalizer needs (N, ..., C) data, got shape {tuple(data.shape)}")
        d = data.detach().double()
        dims = (0,) if self.reduce == "pointwise" else tuple(range(d.ndim - 1))
        if self.kind == "gaussian":
            shift, scale = d.mean(dims), d.std(dims, unbiased=False) + self.eps
        elif self.kind == "minmax":
            lo, hi = d.amin(dims), d.amax(dims)
            shift, scale = lo, hi - lo + self.eps
        else:
            shift, scale = torch.zeros(d.shape[-1:]), torch.ones(d.shape[-1:])
        self.shift = shift.to(data.dtype)
        self.scale = scale.to(data.dtype)
        return self

    def _stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(shift, scale) for ``x``: the fitted ones, or pointwise ones resampled onto ``x``'s grid."""
        if self.shift.numel() == 0:
            raise RuntimeError("normalizer used before fit() or load_state_dict()")
        want = tuple(self.shift.shape)
        if tuple(x.shape[-len(want) :]) == want:
            return self.shift, self.scale
        spatial = len(want) - 1
        if self.reduce != "pointwise" or not 1 <= spatial <= 3 or x.ndim < len(want) or x.shape[-1] != want[-1]:
            raise DataError(
                f"normalizer was fitted on samples of shape {want} (per point) but got a tensor "
                f"of shape {tuple(x.shape)}; expected the same channels ({want[-1]}) on a grid of "
                f"{spatial} dimension(s), or use reduce='channel'"
            )
        size = tuple(x.shape[-spatial - 1 : -1])
        return resample_grid(self.shift[None], size)[0], resample_grid(self.scale[None], size)[0]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        shift, scale = self._stats(x)
        return (x - shift) / scale

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        shift, scale = self._stats(x)
        return x * scale + shift

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Buffers start empty: take the saved shapes before the default copy.
        for name in ("shift", "scale"):
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"kind={self.kind}, reduce={self.reduce}"
