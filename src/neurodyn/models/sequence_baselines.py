"""Sequence models over ``(B, T, C)`` with timestamps and masks, and the host network they share.

Every model has the NAC paper's host (Table 4): an optional Conv1d front end -> the sequence layer
-> pooling over time (unless ``per_step``) -> dense layers -> ``out_channels`` outputs (class
logits or regression values). Call: ``model(x, t=None, mask=None) -> (B, out)`` or ``(B, T, out)``
with ``per_step``; ``t: (B, T)`` timestamps, ``mask: (B, T)`` True for real steps (a prefix).

Registered names (the paper's baselines that we can build; sizes as the paper's "same hidden units
as NAC's d_model / same d_model and heads"):

* ``gru``, ``lstm``: ``torch.nn`` recurrent layers (discrete time: timestamps unused).
* ``cfc``, ``ltc``: ``ncps.torch.CfC`` / ``LTC`` (Hasani et al.), fully connected, fed the elapsed
  time between steps as ``timespans``.
* ``mha``: multi-head scaled-dot-product self-attention (Vaswani et al.; ``F.scaled_dot_product_attention``)
  over a linear embedding plus a sinusoidal encoding of the timestamps, padding keys masked.
* ``odernn``: an ODE-RNN-style GRU: between observations the state follows ``dh/dt = -lambda * h``
  (a learned positive decay per unit, solved exactly: ``h <- h exp(-lambda dt)``), then a GRU cell
  consumes the observation (GRU-D / ODE-RNN with a linear ODE).

Pooling: ``last`` takes the output at the last valid step, ``mean`` averages the valid steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_min, optional_import
from ..nn.sequence_host import HostConfig, SequenceHost
from .inputs import check_sequence_input
from .registry import register


@dataclass
class SequenceConfig(HostConfig):
    """Config of the sequence baselines ``gru``, ``lstm``, ``cfc``, ``ltc``, ``mha``, ``odernn`` (one line per field:
    type, default, meaning; the host network is ``neurodyn.nn.sequence_host.SequenceHost``).

    Attributes:
        in_channels (int, 1): features per step (set from the data).
        out_channels (int, 10): classes or regression targets (set from the data).
        hidden (int, 64): RNN units; attention d_model (the NAC paper: NAC's d_model).
        conv_channels (tuple, ()): Conv1d front-end widths (same padding, ReLU; Table 4 "Conv layers").
        conv_kernel (int, 5): kernel of every front-end conv.
        conv_stride (int | tuple | str, 1): stride of every (or each) front-end conv, a learned shortening; 'auto':
            from the training series' length (host docstring).
        core_steps (int, 256): with conv_stride 'auto': the most steps the core reads.
        input_norm (str, "none"): none | series: each series standardised over its real steps, log(sd) appended.
        conv_norm (str, "none"): none | batch | layer normalisation after every front-end conv (host docstring).
        dense (tuple, (32,)): hidden widths of the dense head (ReLU; Table 4 "Dense").
        pool (str, "last"): sequence output: last valid step | mean over valid steps.
        per_step (bool, False): one output per step instead of per sequence (set from the data).
        dropout (float, 0.0): dropout in the dense head (and on mha's attention weights).
        n_heads (int, 4): mha only: attention heads; must divide hidden.
        ode_unfolds (int, 6): ltc only: solver steps per input step (ncps' default; no preset changes it).
    """

    hidden: int = 64  # the host's fields come from HostConfig
    n_heads: int = 4
    ode_unfolds: int = 6

    def __post_init__(self) -> None:
        super().__post_init__()
        check_min("sequence model", self, ("n_heads", "ode_unfolds"), 1)


def elapsed(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """Time since the previous step ``(B, T)`` (the first step: 1, as without timestamps)."""
    if t is None:
        return torch.ones(like.shape[:2], dtype=like.dtype, device=like.device)
    dt = torch.diff(t.to(like.dtype), dim=1, prepend=t[:, :1].to(like.dtype) - 1.0)
    return dt.clamp_min(0.0)


class _Host(SequenceHost):
    """The host network (``neurodyn.nn.sequence_host``) with the registered models' input check."""

    def check_input(self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> None:
        check_sequence_input(x, t, mask, self.cfg.in_channels, type(self).__name__, self)


class _TorchRNN(_Host):
    """A host around one ``torch.nn`` recurrent layer ``rnn_cls(core_in, hidden, batch_first=True)``."""

    rnn_cls: type[nn.Module] = nn.GRU

    def __init__(self, cfg: SequenceConfig):
        super().__init__(cfg)
        self.rnn = self.rnn_cls(self.core_in, cfg.hidden, batch_first=True)

    def core(self, z, t, mask):
        return self.rnn(z)[0]


@register("gru", SequenceConfig)
class GRUModel(_TorchRNN):
    rnn_cls = nn.GRU


@register("lstm", SequenceConfig)
class LSTMModel(_TorchRNN):
    rnn_cls = nn.LSTM


def _ncps_torch():
    return optional_import("ncps.torch", "the cfc and ltc baselines", "`pip install ncps`")


@register("cfc", SequenceConfig)
class CfCModel(_Host):
    def __init__(self, cfg: SequenceConfig):
        super().__init__(cfg)
        self.rnn = _ncps_torch().CfC(self.core_in, cfg.hidden, batch_first=True, return_sequences=True)

    def core(self, z, t, mask):
        return run_ncps_cell(self.rnn.rnn_cell, z, elapsed(t, z), self.rnn.state_size, self.rnn.fc)


@register("ltc", SequenceConfig)
class LTCModel(_Host):
    def __init__(self, cfg: SequenceConfig):
        super().__init__(cfg)
        self.rnn = _ncps_torch().LTC(
            self.core_in, cfg.hidden, batch_first=True, return_sequences=True, ode_unfolds=cfg.ode_unfolds
        )

    def core(self, z, t, mask):
        # the LTC solver divides by the elapsed time: repeated timestamps (padding) must not give 0
        return run_ncps_cell(self.rnn.rnn_cell, z, elapsed(t, z).clamp_min(1e-4), self.rnn.state_size)


def run_ncps_cell(cell, z: torch.Tensor, dt: torch.Tensor, state_size: int, fc=None) -> torch.Tensor:
    """Unroll an ncps cell over ``z: (B, T, C)`` with per-sample elapsed times ``dt: (B, T)``.

    (``ncps.torch.CfC/LTC.forward`` squeeze batched timespans to ``(B,)``, which does not broadcast
    against ``(B, units)``; the cells themselves take ``(B, 1)``.)
    """
    h = z.new_zeros(z.shape[0], state_size)
    outs = []
    for i in range(z.shape[1]):
        out, h = cell(z[:, i], h, dt[:, i, None])
        outs.append(out if fc is None else fc(out))
    return torch.stack(outs, 1)


def time_encoding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal encoding of real timestamps ``(B, T)`` -> ``(B, T, dim)`` (Vaswani et al., continuous t)."""
    half = dim // 2
    freq = torch.exp(-math.log(1e4) * torch.arange(half, device=t.device, dtype=torch.float32) / max(half, 1))
    ang = t.to(torch.float32)[..., None] * freq
    enc = torch.cat([ang.sin(), ang.cos()], -1)
    return F.pad(enc, (0, dim - 2 * half))


@register("mha", SequenceConfig)
class MHAModel(_Host):
    def __init__(self, cfg: SequenceConfig):
        super().__init__(cfg)
        if cfg.hidden % cfg.n_heads:  # mha's alone (the config serves every baseline): checked when it is built
            raise ConfigError(f"mha hidden {cfg.hidden} must be divisible by n_heads {cfg.n_heads}")
        self.embed = nn.Linear(self.core_in, cfg.hidden)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.hidden)

    def core(self, z, t, mask):
        h = self.embed(z)
        if t is not None:
            h = h + time_encoding(t, h.shape[-1]).to(h.dtype)  # computed in float32, added in the model's dtype
        B, T, d = h.shape
        H = self.cfg.n_heads
        q, k, v = self.qkv(h).reshape(B, T, 3, H, d // H).permute(2, 0, 3, 1, 4)  # (B, H, T, d/H) each
        keep = None if mask is None else mask.bool()[:, None, None, :]
        o = F.scaled_dot_product_attention(
            q, k, v, attn_mask=keep, dropout_p=self.cfg.dropout if self.training else 0.0
        )
        return self.out(o.transpose(1, 2).reshape(B, T, d))


@register("odernn", SequenceConfig)
class ODERNNModel(_Host):
    def __init__(self, cfg: SequenceConfig):
        super().__init__(cfg)
        self.cell = nn.GRUCell(self.core_in, cfg.hidden)
        self.decay = nn.Parameter(torch.zeros(cfg.hidden))

    def core(self, z, t, mask):
        dt = elapsed(t, z)
        lam = F.softplus(self.decay)
        h = z.new_zeros(z.shape[0], self.cfg.hidden)
        outs = []
        for i in range(z.shape[1]):
            h = h * torch.exp(-lam * dt[:, i, None])
            h = self.cell(z[:, i], h)
            outs.append(h)
        return torch.stack(outs, 1)
