"""The host network of the sequence models (the NAC paper's Table 4): front end, sequence layer, pooling, head.

``x (B, T, C)`` -> optional Conv1d front end (same padding, optional normalisation, ReLU) -> ``core`` (the
sequence layer of a subclass: an RNN, attention, NAC) -> pooling over time (the last valid step or the mean over
valid steps; none with ``per_step``) -> dense layers (ReLU, dropout) -> ``out_channels``. ``t: (B, T)`` timestamps
and ``mask: (B, T)`` (True for real steps, a prefix) reach ``core``; padded steps are zeroed before the front end
(and after each of its normalisations).

A front-end conv of stride ``s > 1`` (``conv_stride``) shortens the sequence in a learned way: its output step
``j`` is centred on input step ``js`` (``T -> ceil(T / s)``), so the core reads ``T / prod(strides)`` steps, with
the timestamps and mask of the steps the outputs are centred on (``t[:, ::s]``, ``mask[:, ::s]``: a sequence of
``L`` real steps keeps ``ceil(L / s)``). Per-sequence targets only (one output per input step cannot survive it).
``conv_stride="auto"`` chooses the stride from the training data when a run builds the model
(:func:`resolve_conv_stride`, called by :func:`neurodyn.train.experiment.build_model`): none for series of at most
``core_steps`` steps, else the smallest stride ``s`` (the same for every conv) with which the core reads at most
``core_steps`` steps; the run's checkpoint holds the strides chosen. Built without data, ``auto`` is stride 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ConfigError, check_choice

__all__ = [
    "AUTO_CORE_STEPS",
    "CONV_NORMS",
    "HostConfig",
    "SequenceHost",
    "auto_strides",
    "describe_front_end",
    "pool",
    "resolve_conv_stride",
]

CONV_NORMS = ("none", "batch", "layer")
INPUT_NORMS = ("none", "series")
AUTO_CORE_STEPS = 256  # conv_stride "auto": the most steps the core reads (the default of core_steps)


@dataclass
class HostConfig:
    """The host network's fields, which every sequence model's config inherits (``NACConfig``, ``SequenceConfig``).

    Attributes:
        in_channels (int, 1): features per step (set from the data).
        out_channels (int, 10): classes or regression targets (set from the data).
        conv_channels (tuple, ()): Conv1d front-end widths (same padding, ReLU; NAC Table 4 "Conv layers").
        conv_kernel (int, 5): kernel of every front-end conv.
        conv_stride (int | tuple | str, 1): stride of every front-end conv (one value), or of each (one per conv):
            the core reads ``T / prod(strides)`` steps, a learned shortening of long series (module doc); 1: none;
            ``"auto"``: chosen from the training data's length so that the core reads at most ``core_steps``.
        core_steps (int, 256): with ``conv_stride="auto"``: the most steps the core reads (module doc).
        input_norm (str, "none"): none | series: each series standardised over its own real steps (per channel),
            with the log of its standard deviation appended as one more channel per channel (:meth:`per_series`).
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
    conv_stride: int | tuple | str = 1
    core_steps: int = AUTO_CORE_STEPS
    input_norm: str = "none"
    dense: tuple = (32,)
    pool: str = "last"
    per_step: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_choice("pool", self.pool, ("last", "mean"))
        check_choice("conv_norm", self.conv_norm, CONV_NORMS)
        check_choice("input_norm", self.input_norm, INPUT_NORMS)
        if self.in_channels < 1 or self.out_channels < 1 or self.hidden < 1:
            raise ConfigError("sequence models need in_channels, out_channels and hidden >= 1")
        if isinstance(self.core_steps, bool) or not isinstance(self.core_steps, int) or self.core_steps < 1:
            raise ConfigError(
                f"core_steps is a whole number >= 1 (the most steps the core reads with "
                f"conv_stride=auto); got {self.core_steps!r}"
            )
        if isinstance(self.conv_stride, str) and self.conv_stride != "auto":
            raise ConfigError(
                f"conv_stride is a whole number >= 1, one per front-end conv, or 'auto'; got {self.conv_stride!r}"
            )
        strides = self.strides()
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in strides):
            raise ConfigError(
                f"conv_stride is a whole number >= 1, one per front-end conv, or 'auto'; got {self.conv_stride!r}"
            )
        if any(s > 1 for s in strides) and self.per_step:
            raise ConfigError(
                f"conv_stride={self.conv_stride!r} shortens the sequence, and this data has per-step "
                "targets (one output per step): use conv_stride=1"
            )

    def strides(self) -> tuple:
        """The stride of each front-end conv (``conv_stride`` repeated, or as given; ``auto`` not yet resolved from
        data: 1; a ConfigError for a list whose length is not the number of convs)."""
        if self.conv_stride == "auto":
            return (1,) * len(self.conv_channels)
        if isinstance(self.conv_stride, (list, tuple)):
            if len(self.conv_stride) != len(self.conv_channels):
                raise ConfigError(
                    f"conv_stride lists {len(self.conv_stride)} strides for {len(self.conv_channels)} "
                    "front-end convs (conv_channels); give one per conv, or one number for all"
                )
            return tuple(self.conv_stride)
        return (self.conv_stride,) * len(self.conv_channels)


def auto_strides(n_convs: int, steps: int, core_steps: int = AUTO_CORE_STEPS) -> tuple:
    """``conv_stride="auto"``: ``(s,) * n_convs`` with the smallest ``s >= 1`` for which ``n_convs`` convs of stride
    ``s`` leave at most ``core_steps`` of ``steps`` (each conv: ``T -> ceil(T / s)``); stride 1 without convs."""
    if n_convs < 1:
        return ()
    s = 1
    while core_steps_of(steps, (s,) * n_convs) > core_steps:
        s += 1
    return (s,) * n_convs


def core_steps_of(steps: int, strides) -> int:
    """The steps the core reads of a series of ``steps`` steps behind convs of ``strides``."""
    for s in strides:
        steps = -(-int(steps) // int(s))
    return int(steps)


def resolve_conv_stride(section: dict, steps: int) -> dict:
    """A model section (``name`` and fields) with ``conv_stride: auto`` replaced by the strides
    :func:`auto_strides` chooses for training series of ``steps`` steps (module doc); any other section as it is."""
    if section.get("conv_stride") != "auto":
        return section
    n = len(section.get("conv_channels") or ())
    core = section.get("core_steps", AUTO_CORE_STEPS)
    return {**section, "conv_stride": list(auto_strides(n, steps, core)) if n else 1}


def describe_front_end(cfg, steps: int) -> str:
    """The run header's words on a front end that shortens the series (``""`` when none does): ``"the front end's
    strides 2x2x2: the core reads 183 steps"``."""
    strides = cfg.strides() if hasattr(cfg, "strides") else ()
    if not any(s > 1 for s in strides):
        return ""
    shown = "x".join(str(s) for s in strides)
    return f"the front end's strides {shown}: the core reads {core_steps_of(steps, strides)} steps"


class SequenceHost(nn.Module):
    """Conv front end + ``core`` (subclass) + pooling + dense head, for a config with the fields ``in_channels``,
    ``out_channels``, ``hidden``, ``conv_channels``, ``conv_kernel``, ``dense``, ``pool``, ``per_step`` and
    ``dropout``. A subclass defines ``core(z, t, mask)`` and ``check_input(x, t, mask)`` (a registered model
    checks with ``neurodyn.models.inputs.check_sequence_input``)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg  # validated when it was made (HostConfig.__post_init__)
        convs, c = [], cfg.in_channels * (2 if cfg.input_norm == "series" else 1)
        for ch, stride in zip(cfg.conv_channels, cfg.strides()):
            convs.append(nn.Conv1d(c, int(ch), cfg.conv_kernel, stride=stride, padding=cfg.conv_kernel // 2))
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

    def forward(
        self, x: torch.Tensor, t: torch.Tensor | None = None, mask: torch.Tensor | None = None, pos=None, ctx=None
    ) -> torch.Tensor:
        self.check_input(x, t, mask)
        x = self.per_series(x, mask)
        z, t, mask = self.front.shorten(x, t, mask)
        h = self.core(z, t, mask)
        if not self.cfg.per_step:
            h = pool(h, mask, self.cfg.pool)
        return self.head(h)

    def per_series(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``x`` with padded steps zeroed; with ``input_norm="series"`` each series standardised over its real steps,
        per channel (``(x - mean) / sd``), and ``log(sd)`` appended as ``C`` more channels (constant over the series'
        steps): the shapes of series whose amplitudes span orders of magnitude on one scale, their amplitude kept as
        a feature. ``(B, T, C)`` -> ``(B, T, C)`` or ``(B, T, 2C)``."""
        m = None if mask is None else mask[..., None].to(x.dtype)
        if m is not None:
            x = x * m
        if self.cfg.input_norm == "none":
            return x
        n = x.new_full((x.shape[0], 1, 1), x.shape[1]) if m is None else m.sum(1, keepdim=True).clamp_min(1)
        mean = x.sum(1, keepdim=True) / n
        dev = x - mean if m is None else (x - mean) * m
        sd = torch.sqrt((dev * dev).sum(1, keepdim=True) / n + SERIES_EPS)
        out = torch.cat([dev / sd, torch.log(sd).expand_as(x)], -1)
        return out if m is None else out * m


SERIES_EPS = 1e-8  # input_norm "series": added to each series' variance (in the training normalizer's units)


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
    """The conv front end: ``x (B, T, C), mask`` -> ``(B, T', F)`` (``x`` itself without convs; ``T' = T`` unless a
    conv has a stride); the normalisation layers (:class:`MaskedNorm`) take the mask of their steps (without a norm
    the layout and the outputs are those of before). :meth:`shorten` also returns the timestamps and mask of the
    output steps."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.shorten(x, None, mask)[0]

    def shorten(self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None):
        """``(z (B, T', F), t', mask')``: the front end's output with the timestamps and mask of the steps its
        outputs are centred on (``[:, ::s]`` after each conv of stride ``s``; module doc)."""
        if not len(self):
            return x, t, mask
        z = x.transpose(1, 2)
        for layer in self:
            if isinstance(layer, MaskedNorm):
                z = layer(z, mask)
                continue
            z = layer(z)
            s = layer.stride[0] if isinstance(layer, nn.Conv1d) else 1
            if s > 1:
                t = None if t is None else t[:, ::s]
                mask = None if mask is None else mask[:, ::s]
                if mask is not None:  # padded steps of the shortened sequence are zeros, as before the front end
                    z = z * mask[:, None, :].to(z.dtype)
        return z.transpose(1, 2), t, mask


def pool(h: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """``(B, T, F)`` -> ``(B, F)``: the last valid step or the mean over valid steps."""
    if mask is None:
        return h[:, -1] if how == "last" else h.mean(1)
    m = mask.to(h.dtype)
    if how == "mean":
        return (h * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp_min(1)
    last = (mask.long().sum(1) - 1).clamp_min(0)
    return h[torch.arange(h.shape[0], device=h.device), last]
