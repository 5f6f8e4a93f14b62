"""NAC sequence classifier / regressor: the paper's host network around one NAC layer (Table 4).

``Conv1d front end (optional) -> NACAttention(d_model, heads) -> pool (last valid step or mean) ->
dense head -> out_channels``, over ``x: (B, T, C)`` with timestamps ``t: (B, T)`` and ``mask``.
The layer is :class:`neurodyn.nn.nac.NACAttention`; its docstring explains each option.

``compat`` names the profile that fills every field of ``options`` left unset: ``"paper"`` (default: the paper,
the released code where it is silent, the reading it forces where its text cannot work), ``"released"`` (the
authors' code) or ``"tuned"`` (our measured choices); a value set in ``options`` wins. The table of every option,
profile by profile with the reasons, is in docs/papers/notes-nac.md#nac-model-paper-vs-code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConfigError, check_choice
from ..nn.nac import PROFILES, NACAttention, NACOptions, check_attention, resolve_options
from ..nn.sequence_host import HostConfig, SequenceHost
from .inputs import check_sequence_input
from .registry import register


@dataclass
class NACConfig(HostConfig):
    """Config of the ``nac`` model (one line per field: type, default, meaning).

    Attributes:
        in_channels (int, 1): features per step (set from the data by the trainer).
        out_channels (int, 10): classes or regression targets (set from the data).
        d_model (int, 64): NAC width (Table 4: 64 E-MNIST, 32 PAR, 16 RUL).
        n_heads (int, 8): attention heads; must divide d_model (Table 4: 8, 4, 8).
        mode (str, "exact"): logits: exact (eq. 17; the paper's default, App. B.1.2) | euler (eq. 2) | steady (eq. 18).
        topk (int | None, 8): keys per query (§3.5 recommends 8); None keeps every pair (NAC-PW).
        sparsity (float, 0.5): AutoNCP sparsity of every NCP wiring (§3.5 recommends 50 %).
        phi_activation (str, "sigmoid"): phi = sigmoid (eq. 15) | linear | tanh (the App. D.2 ablations).
        compat (str, "paper"): the profile that fills the unset ``options``: paper | released | tuned.
        options (NACOptions, all unset): every profile-dependent choice (table above); a value set here wins.
        use_time (bool, True): pass the timestamps; False gives t_sample = 1 (the released scripts pass none).
        time_scale (float, 1.0): timestamps are divided by this first; no preset sets it (old checkpoints hold it).
        token_mode (str, "sequence"): sequence | per_step (every step its own length-1 sequence, as the code).
        seed (int, 22222): NCP wiring seed (the ncps and released-code default).
        conv_channels (tuple, ()): Conv1d front-end widths (same padding, ReLU; Table 4 "Conv layers").
        conv_kernel (int, 5): kernel of every front-end conv.
        conv_stride (int | tuple | str, 1): stride of every (or each) front-end conv, a learned shortening; 'auto':
            from the training series' length (host docstring).
        core_steps (int, 256): with conv_stride 'auto': the most steps the core reads.
        input_norm (str, "none"): none | series: each series standardised over its real steps, log(sd) appended.
        conv_norm (str, "none"): none | batch | layer normalisation after every front-end conv (host docstring).
        dense (tuple, (32,)): hidden widths of the dense head (ReLU; Table 4 "Dense").
        pool (str, "last"): sequence output: last valid step | mean over valid steps (every sequence model's host).
        per_step (bool, False): one output per step (set from the data: PAR's per-step labels).
        dropout (float, 0.0): dropout in the dense head (Table 4 "Dropout"; CarRacing 0.2, Udacity 0.5).
        attn_dropout (float, 0.0): dropout on the attention weights (the released layer's option; no preset sets it).

    ``options`` is resolved when the config is made: afterwards every field holds a value, so a saved config
    rebuilds the same model whatever the profiles become. A config made from another one keeps that one's
    resolved options: change ``compat`` on a mapping (or a preset), not on a built config.
    """

    d_model: int = 64  # in_channels, out_channels and the host's fields come from HostConfig
    n_heads: int = 8
    mode: str = "exact"
    topk: int | None = 8
    sparsity: float = 0.5
    phi_activation: str = "sigmoid"
    compat: str = "paper"
    options: NACOptions = field(default_factory=NACOptions)
    use_time: bool = True
    time_scale: float = 1.0
    token_mode: str = "sequence"
    seed: int = 22222
    attn_dropout: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_attention(self.mode, self.d_model, self.n_heads, self.topk, self.phi_activation)
        check_choice("nac token_mode", self.token_mode, ("sequence", "per_step"))
        if not self.time_scale > 0:
            raise ConfigError(f"nac time_scale must be > 0, got {self.time_scale}")
        if isinstance(self.options, Mapping):
            self.options = NACOptions(**self.options)
        check_choice("nac compat", self.compat, PROFILES)
        self.options = resolve_options(self.compat, self.options)

    @property
    def hidden(self) -> int:
        return self.d_model


@register("nac", NACConfig)
class NACModel(SequenceHost):
    """NAC in the paper's host network; ``forward(x, t=None, mask=None)``."""

    def __init__(self, cfg: NACConfig):
        super().__init__(cfg)
        self.nac = NACAttention(
            self.core_in,
            cfg.d_model,
            cfg.n_heads,
            mode=cfg.mode,
            topk=cfg.topk,
            sparsity=cfg.sparsity,
            compat=cfg.compat,
            phi_activation=cfg.phi_activation,
            dropout=cfg.attn_dropout,
            seed=cfg.seed,
            options=cfg.options,
        )
        init = _FRONT_INITS[cfg.options.front_init]
        for m in self.front:
            if isinstance(m, torch.nn.Conv1d) and init is not None:
                init(m)

    def check_input(self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> None:
        check_sequence_input(x, t, mask, self.cfg.in_channels, type(self).__name__, self)

    def core(self, z: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> torch.Tensor:
        t = None if (t is None or not self.cfg.use_time) else t / self.cfg.time_scale
        if self.cfg.token_mode == "per_step":
            B, T, C = z.shape
            y = self.nac(z.reshape(B * T, 1, C), None if t is None else t.reshape(B * T, 1))
            return y.reshape(B, T, -1)
        return self.nac(z, t, mask)

    def details(self, x: torch.Tensor, t: torch.Tensor | None = None, mask: torch.Tensor | None = None):
        """The NAC layer's per-pair tensors (phi, omega, t, logits, attn, index, valid) for ``x``."""
        z, t, mask = self.front.shorten(self.per_series(x, mask), t, mask)
        t = None if (t is None or not self.cfg.use_time) else t / self.cfg.time_scale
        return self.nac(z, t, mask, return_details=True)[1]


def _glorot(conv: torch.nn.Conv1d) -> None:
    """Keras' Conv1D default (the released code): Glorot-uniform kernel, zero bias."""
    torch.nn.init.xavier_uniform_(conv.weight)
    torch.nn.init.zeros_(conv.bias)


def _he(conv: torch.nn.Conv1d) -> None:
    """Kaiming-normal with the ReLU gain, zero bias (tuned: PyTorch's default conv init followed by ReLU keeps
    ~0.4 of the std per layer, so NAC saw inputs ~10x smaller than the data and phi, omega barely depended on
    them at step 0)."""
    torch.nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
    torch.nn.init.zeros_(conv.bias)


_FRONT_INITS: dict[str, Any] = {"glorot": _glorot, "he": _he, "torch": None}
