"""NAC sequence classifier / regressor: the paper's host network around one NAC layer (Table 4).

``Conv1d front end (optional) -> NACAttention(d_model, heads) -> pool (last valid step or mean) ->
dense head -> out_channels``, over ``x: (B, T, C)`` with timestamps ``t: (B, T)`` and ``mask``.
The layer, its modes and every reading of the paper are documented in
:class:`neurodyn.nn.nac.NACAttention`; the config below exposes all of them.

``compat="paper"`` (default) follows the paper; ``compat="released"`` switches every option whose
field is left ``None`` to the authors' released code (input-independent phi and omega, one output
neuron for both heads, linear backbone, dense sensory masks, shared backbone, exact Top-K, fixed
Euler step, no time quadrature). ``token_mode="per_step"`` reproduces the released scripts' length-1
sequences (PAR, CarRacing, RUL): every time step is attended alone, so the attention weight is 1 and
NAC reduces to its value path.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError, check_choice
from ..nn.nac import NACAttention
from .registry import register
from .sequence_baselines import SequenceHost


@dataclass
class NACConfig:
    in_channels: int = 1
    out_channels: int = 10
    d_model: int = 64
    n_heads: int = 8
    mode: str = "exact"              # exact | euler | steady
    topk: int | None = 8             # None: every pair (NAC-PW)
    sparsity: float = 0.5
    compat: str = "paper"            # paper | released
    phi_activation: str = "sigmoid"  # sigmoid | linear | tanh (ablations)
    pair_time: str = "delta"         # delta (|t_q - t_k|) | query | key
    learn_horizon: bool = False      # T = exp(log T) learned per head, from time_horizon
    time_scale: float = 1.0          # timestamps are divided by this before the time gate
    use_time: bool = True            # False: t_sample = 1 (the paper's "no meaningful timing")
    token_mode: str = "sequence"     # sequence | per_step (released scripts' length-1 sequences)
    seed: int = 22222                # NCP wiring seed
    # options left None take the value of `compat` (see neurodyn.nn.nac.PAPER / RELEASED)
    tied_heads: bool | None = None
    backbone_unfolds: int | None = None
    backbone_activation: str | None = None
    dense_sensory: bool | None = None
    shared_backbone: bool | None = None
    topk_method: str | None = None   # block | exact
    euler_steps: int | None = None
    euler_dt: float | None = None
    quadrature: str | None = None    # time | none
    eps: float | None = None
    ncp_init: str | None = None      # fan_in | glorot
    topk_spare_blocks: int | None = None
    time_horizon: float | None = None  # T: paper mode 10, released 1 (see neurodyn.nn.nac, issue 19)
    # host network
    conv_channels: tuple = ()
    conv_kernel: int = 5
    dense: tuple = (32,)
    pool: str = "last"
    per_step: bool = False
    dropout: float = 0.0
    attn_dropout: float = 0.0
    front_init: str = "he"           # he: Kaiming-normal (ReLU gain) Conv1d front end | torch: PyTorch's default

    @property
    def hidden(self) -> int:
        return self.d_model


OPTION_FIELDS = ("tied_heads", "backbone_unfolds", "backbone_activation", "dense_sensory", "shared_backbone",
                 "topk_method", "euler_steps", "euler_dt", "quadrature", "eps", "ncp_init", "topk_spare_blocks",
                 "time_horizon")


@register("nac", NACConfig)
class NACModel(SequenceHost):
    """NAC in the paper's host network; ``forward(x, t=None, mask=None)``."""

    def __init__(self, cfg: NACConfig):
        check_choice("nac token_mode", cfg.token_mode, ("sequence", "per_step"))
        check_choice("nac front_init", cfg.front_init, ("he", "torch"))
        if not cfg.time_scale > 0:
            raise ConfigError(f"nac time_scale must be > 0, got {cfg.time_scale}")
        super().__init__(cfg)
        self.nac = NACAttention(self.core_in, cfg.d_model, cfg.n_heads, mode=cfg.mode, topk=cfg.topk,
                                sparsity=cfg.sparsity, compat=cfg.compat, phi_activation=cfg.phi_activation,
                                pair_time=cfg.pair_time,
                                learn_horizon=cfg.learn_horizon, dropout=cfg.attn_dropout,
                                seed=cfg.seed, **{k: getattr(cfg, k) for k in OPTION_FIELDS})
        if cfg.front_init == "he":
            # PyTorch's Conv1d default (uniform, var 1/(3 fan_in)) followed by ReLU keeps ~0.4 of the std per
            # layer: NAC then sees inputs ~10x smaller than the data and phi, omega barely depend on them
            for m in self.front:
                if isinstance(m, torch.nn.Conv1d):
                    torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                    torch.nn.init.zeros_(m.bias)

    def core(self, z: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> torch.Tensor:
        t = None if (t is None or not self.cfg.use_time) else t / self.cfg.time_scale
        if self.cfg.token_mode == "per_step":
            B, T, C = z.shape
            y = self.nac(z.reshape(B * T, 1, C), None if t is None else t.reshape(B * T, 1))
            return y.reshape(B, T, -1)
        return self.nac(z, t, mask)

    def details(self, x: torch.Tensor, t: torch.Tensor | None = None, mask: torch.Tensor | None = None):
        """The NAC layer's per-pair tensors (phi, omega, t, logits, attn, index, valid) for ``x``."""
        if mask is not None:
            x = x * mask[..., None].to(x.dtype)
        z = self.front(x.transpose(1, 2)).transpose(1, 2) if len(self.front) else x
        t = None if (t is None or not self.cfg.use_time) else t / self.cfg.time_scale
        return self.nac(z, t, mask, return_details=True)[1]
