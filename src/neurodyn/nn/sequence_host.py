"""The host network of the sequence models (the NAC paper's Table 4): front end, sequence layer, pooling, head.

``x (B, T, C)`` -> optional Conv1d front end (stride 1, same padding, optional normalisation, ReLU) -> ``core``
(the sequence layer of a subclass: an RNN, attention, NAC) -> pooling over time (the last valid step or the mean
over valid steps; none with ``per_step``) -> dense layers (ReLU, dropout) -> ``out_channels``. ``t: (B, T)``
timestamps and ``mask: (B, T)`` (True for real steps, a prefix) reach ``core``; padded steps are zeroed before the
front end (and after each of its normalisations).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ConfigError, check_choice

__all__ = ["CONV_NORMS", "HostConfig", "SequenceHost", "pool"]

CONV_NORMS = ("none", "batch", "layer")


@dataclass
class HostConfig:
    """The host network's fields, which every sequence model's config inherits (``NACConfig``, ``SequenceConfig``).

    Attributes:
        in_channels (int, 1): features per step (set from the data).
        out_channels (int, 10): classes or regression targets (set from the data).
        conv_channels (tuple, ()): Conv1d front-end widths (stride 1, same padding, ReLU; NAC Table 4 "Conv layers").
        conv_kernel (int, 5): kernel of every front-end conv.
        conv_norm (str, "none"): normalisation after every front-end conv, before its ReLU: none | batch
            (``BatchNorm1d`` over batch and valid steps, the FCN/ResNet baselines' front end of Wang et al. 2017) |
            layer (over the channels of each step).
        dense (tuple, (32,)): hidden widths of the dense head (ReLU; NAC Table 4 "Dense").
        pool (str, "last"): sequence output: last valid step | mean over valid steps.
        per_step (bool, False): one output per step instead of per sequence (set from the data).
        dropout (float, 0.0): dropout in the dense head.
    """

    in_channels: int = 1
    out_channels: int = 10
    conv_channels: tuple = ()
    conv_kernel: int = 5
    conv_norm: str = "none"
    dense: tuple = (32,)
    pool: str = "last"
    per_step: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_choice("pool", self.pool, ("last", "mean"))
        check_choice("conv_norm", self.conv_norm, CONV_NORMS)
        if self.in_channels < 1 or self.out_channels < 1 or self.hidden < 1:
            raise ConfigError("sequence models need in_channels, out_channels and hidden >= 1")


class SequenceHost(nn.Module):
    """Conv front end + ``core`` (subclass) + pooling + dense head, for a config with the fields ``in_channels``,
    ``out_channels``, ``hidden``, ``conv_channels``, ``conv_kernel``, ``dense``, ``pool``, ``per_step`` and
    ``dropout``. A subclass defines ``core(z, t, mask)`` and ``check_input(x, t, mask)`` (a registered model
    checks with ``neurodyn.models.inputs.check_sequence_input``)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg  # validated when it was made (HostConfig.__post_init__)
        convs, c = [], cfg.in_channels
        for ch in cfg.conv_channels:
            convs.append(nn.Conv1d(c, int(ch), cfg.conv_kernel, padding=cfg.conv_kernel // 2))
            if cfg.conv_norm != "none":
                convs.append(MaskedNorm(int(ch), cfg.conv_norm))
            convs.append(nn.ReLU())
            c = int(ch)
        self.front = FrontEnd(*convs)
        self.core_in = c
        head, h = [], self.core_out()
        for d in cfg.dense:
            head += [nn.Linear(h, int(d)), nn.ReLU(), nn.Dropout(cfg.dropout)]
            h = int(d)
        head.append(nn.Linear(h, cfg.out_channels))
        self.head = nn.Sequential(*head)

    def core_out(self) -> int:
        return self.cfg.hidden

    def core(self, z: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def check_input(self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> None:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                pos=None, ctx=None) -> torch.Tensor:
        self.check_input(x, t, mask)
        if mask is not None:
            x = x * mask[..., None].to(x.dtype)
        z = self.front(x, mask)
        h = self.core(z, t, mask)
        if not self.cfg.per_step:
            h = pool(h, mask, self.cfg.pool)
        return self.head(h)


class MaskedNorm(nn.Module):
    """Normalisation of a conv output ``(B, F, T)`` that ignores padded steps (``mask: (B, T)``, True = real) and
    returns them as zeros, so that the next conv reads zeros there as it does at the sequence's ends.

    ``batch``: each feature standardised over the batch's valid steps (training; running statistics in eval, as
    ``BatchNorm1d``), then scaled and shifted: ``y = gamma (z - mu) / sqrt(var + eps) + beta``. ``layer``: each step
    standardised over its ``F`` features (``LayerNorm``; no statistics across steps, so padding cannot reach it).
    """

    def __init__(self, features: int, how: str):
        super().__init__()
        self.how = how
        self.norm = nn.BatchNorm1d(features) if how == "batch" else nn.LayerNorm(features)

    def forward(self, z: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.how == "layer":
            y = self.norm(z.transpose(1, 2)).transpose(1, 2)
            return y if mask is None else y * mask[:, None, :].to(y.dtype)
        if mask is None or bool(mask.all()):
            return self.norm(z)
        # BatchNorm1d over the valid steps only: (valid steps, F) rows are one batch of its statistics
        flat = z.transpose(1, 2)[mask]
        out = torch.zeros_like(z.transpose(1, 2))
        out[mask] = self.norm(flat)
        return out.transpose(1, 2)


class FrontEnd(nn.Sequential):
    """The conv front end: ``x (B, T, C), mask`` -> ``(B, T, F)`` (``x`` itself without convs); the normalisation
    layers (:class:`MaskedNorm`) take the mask (without a norm the layout and the outputs are those of before)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if not len(self):
            return x
        z = x.transpose(1, 2)
        for layer in self:
            z = layer(z, mask) if isinstance(layer, MaskedNorm) else layer(z)
        return z.transpose(1, 2)


def pool(h: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """``(B, T, F)`` -> ``(B, F)``: the last valid step or the mean over valid steps."""
    if mask is None:
        return h[:, -1] if how == "last" else h.mean(1)
    m = mask.to(h.dtype)
    if how == "mean":
        return (h * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp_min(1)
    last = (mask.long().sum(1) - 1).clamp_min(0)
    return h[torch.arange(h.shape[0], device=h.device), last]
