"""NAC: the Neuronal Attention Circuit (Razzaq, Kanjaraway & Zhao), paper 002 (``docs/papers/notes-nac.md``).

Every query-key attention logit ``a`` is the state of the linear ODE (paper eq. 1)::

    da/dt = -omega(u) a + phi(u),      u = [q; k],
    phi   = sigmoid(z_phi)             content-target gate      (eq. 15)
    omega = softplus(z_omega) + eps    time-constant gate, > 0  (eq. 16)

with ``(z_phi, z_omega)`` the two heads of a sparse NCP-wired backbone (eq. 14). Three modes give
``a`` (with ``a_0 = 0``):

* ``exact``  closed form ``(phi/omega)(1 - exp(-omega t))``                (eqs. 3, 17)
* ``euler``  ``a <- a + dt (-omega a + phi)``, ``steps`` times             (eq. 2)
* ``steady`` ``phi/omega``, the limit ``t -> inf``                          (eq. 18)

``t = T * sigmoid(t_a(u) t_sample + t_b(u))`` is a learned time per pair (t_a, t_b affine in u), ``t_sample``
the query's timestamp (or the query-key gap ``|t_q - t_k|``; 1 without timestamps) and ``T`` the option
``time_horizon`` (the paper prints ``sigma(.)`` alone: T = 1). Weights are ``softmax`` over the selected keys
and the output is the time-modulated sum ``sum_j alpha_j t_j v_j`` (eq. 19), per head, heads concatenated and
projected. Only ``K`` keys per query reach the backbone: Algorithm 2 picks them through block centroids of size
``floor(sqrt(T_k))`` (``topk_method="block"``), without forming the ``T_q x T_k`` score matrix; ``"exact"``
scores every key (the authors' released TensorFlow code) and ``topk=None`` keeps every pair (NAC-PW).

Every choice the paper leaves open, or that the authors' released code or our measurements make differently, is
a field of :class:`NACOptions`. A field left ``None`` takes the value of a profile (``compat``):

* ``"paper"``: what the paper prints; where it is silent, the authors' released code; where it forces a reading
  (the backbone unfolds, a nonlinear backbone, Euler integrating to the pair's time), that reading;
* ``"released"``: the authors' released code (notes-nac §2.14-2.15);
* ``"tuned"``: our measured choices (time horizon 10, query-key gap, a spare Top-K block, fan-in / He
  initialisation; the NAC results page), measured on test splits; to be re-selected on validation.

The values of each profile and the reason for each: docs/papers/notes-nac.md#nac-model-paper-vs-code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..config_types import check_flag, check_number, check_whole
from ..errors import ConfigError, check_choice
from ..ops.activations import tanh
from ..ops.block_topk import block_topk, exact_topk, flat_gather
from ..ops.nac_logits import euler_logits, exact_logits, steady_logits
from .ncp import ACTIVATIONS, INITS, NCPCell, build_autoncp, units_backbone, units_sensory

MODES = ("exact", "euler", "steady")
TOPK_METHODS = ("block", "exact")
PHI_ACTIVATIONS = ("sigmoid", "linear", "tanh")
PAIR_TIMES = ("query", "delta", "key")
QUADRATURES = ("time", "none")
FRONT_INITS = ("glorot", "he", "torch")
PROFILES = ("paper", "released", "tuned")


# --------------------------------------------------------------------------------------------------
# Options and the three profiles
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NACOptions:
    """The profile-dependent choices of NAC (``model.options``); each field left ``None`` (the default) takes the
    value of the profile named by ``compat`` (docs/papers/notes-nac.md#nac-model-paper-vs-code lists the values).

    Attributes:
        tied_heads (bool | None, None): one backbone output feeds both phi and omega instead of one motor neuron each.
        backbone_unfolds (int | None, None): Algorithm-1 updates of the backbone on the (frozen) pair input.
        backbone_activation (str | None, None): alpha of the backbone NCPCell: linear | tanh | relu | sigmoid.
        dense_sensory (bool | None, None): dense input mask in the q/k/v gates instead of Algorithm 1's ``|A_in|``.
        shared_backbone (bool | None, None): one backbone and time gate for all heads instead of one per head.
        topk_method (str | None, None): key selection: block (Algorithm 2, block centroids) | exact (every score).
        topk_spare_blocks (int | None, None): blocks scored beyond Algorithm 2's ``ceil(K / B_s)`` (block method).
        euler_steps (int | None, None): explicit Euler steps (``mode="euler"``).
        euler_dt (float | None, None): Euler step; 0 integrates to the pair's time (``dt = t / euler_steps``).
        quadrature (str | None, None): output sum: time (``sum alpha t v``, eq. 19) | none (``sum alpha v``).
        eps (float | None, None): the epsilon of ``omega = softplus(.) + eps`` (eq. 16).
        ncp_init (str | None, None): NCP weight init: glorot (dense scaling) | fan_in (per kept synapse).
        front_init (str | None, None): conv front-end init of the host model: glorot | he | torch (PyTorch's).
        time_horizon (float | None, None): T in ``t = T sigmoid(t_a t_sample + t_b)``; bounds ``a <= phi t <= T``.
        learn_horizon (bool | None, None): learn ``log T`` per head, starting from ``time_horizon``.
        pair_time (str | None, None): ``t_sample`` of a pair: query (t_q) | delta (``|t_q - t_k|``) | key (t_k).
    """

    tied_heads: bool | None = None
    backbone_unfolds: int | None = None
    backbone_activation: str | None = None
    dense_sensory: bool | None = None
    shared_backbone: bool | None = None
    topk_method: str | None = None
    topk_spare_blocks: int | None = None
    euler_steps: int | None = None
    euler_dt: float | None = None
    quadrature: str | None = None
    eps: float | None = None
    ncp_init: str | None = None
    front_init: str | None = None
    time_horizon: float | None = None
    learn_horizon: bool | None = None
    pair_time: str | None = None

    def __post_init__(self) -> None:
        """Every value that is set (``None``: the profile's) checked; ints become floats where a number is meant."""
        for name in ("tied_heads", "dense_sensory", "shared_backbone", "learn_horizon"):
            if getattr(self, name) is not None:
                check_flag(f"NAC option {name}", getattr(self, name))
        for name, least in (("backbone_unfolds", 1), ("topk_spare_blocks", 0), ("euler_steps", 1)):
            if getattr(self, name) is not None:
                check_whole(f"NAC option {name}", getattr(self, name), least)
        for name, bound in (
            ("euler_dt", dict(minimum=0.0, why=" (0: t / euler_steps)")),
            ("eps", dict(above=0.0)),
            ("time_horizon", dict(above=0.0)),
        ):
            if getattr(self, name) is not None:  # frozen: the widened number is set past __setattr__
                object.__setattr__(self, name, check_number(f"NAC option {name}", getattr(self, name), **bound))
        for name, allowed in (
            ("backbone_activation", ACTIVATIONS),
            ("topk_method", TOPK_METHODS),
            ("quadrature", QUADRATURES),
            ("ncp_init", INITS),
            ("front_init", FRONT_INITS),
            ("pair_time", PAIR_TIMES),
        ):
            if getattr(self, name) is not None:
                check_choice(f"NAC {name}", getattr(self, name), allowed)

    def unset(self) -> list[str]:
        """Names of the fields left to the profile."""
        return [f.name for f in fields(self) if getattr(self, f.name) is None]


# what the paper prints; where it is silent the released code; the readings it forces (models/nac.py table)
PAPER = NACOptions(
    tied_heads=False,
    backbone_unfolds=3,
    backbone_activation="tanh",
    dense_sensory=False,
    shared_backbone=False,
    topk_method="block",
    topk_spare_blocks=0,
    euler_steps=6,
    euler_dt=0.0,
    quadrature="time",
    eps=1e-6,
    ncp_init="glorot",
    front_init="glorot",
    time_horizon=1.0,
    learn_horizon=False,
    pair_time="query",
)
# the authors' released code (TF layer defaults; notes-nac §2.14-2.15)
RELEASED = NACOptions(
    tied_heads=True,
    backbone_unfolds=1,
    backbone_activation="linear",
    dense_sensory=True,
    shared_backbone=True,
    topk_method="exact",
    topk_spare_blocks=0,
    euler_steps=5,
    euler_dt=0.5,
    quadrature="none",
    eps=1e-6,
    ncp_init="glorot",
    front_init="glorot",
    time_horizon=1.0,
    learn_horizon=False,
    pair_time="query",
)
# our measured choices (the NAC results page; measured on test splits, to be re-selected on validation):
# what compat="paper" meant before this profile existed. Written out, not derived from PAPER: checkpoints saved
# before the profile existed resolve to it.
TUNED = NACOptions(
    tied_heads=False,
    backbone_unfolds=3,
    backbone_activation="tanh",
    dense_sensory=False,
    shared_backbone=False,
    topk_method="block",
    topk_spare_blocks=1,
    euler_steps=6,
    euler_dt=0.0,
    quadrature="time",
    eps=1e-5,
    ncp_init="fan_in",
    front_init="he",
    time_horizon=10.0,
    learn_horizon=False,
    pair_time="delta",
)
PROFILE_OPTIONS = {"paper": PAPER, "released": RELEASED, "tuned": TUNED}


def check_attention(mode: str, d_model: int, n_heads: int, topk: int | None, phi_activation: str) -> None:
    """One ConfigError for a value of the layer's own arguments (not the options) that it cannot take; the
    ``nac`` model's config runs it when it is made, the layer when it is built from arguments."""
    check_choice("NAC mode", mode, MODES)
    if d_model < 2:
        raise ConfigError(f"NAC d_model must be >= 2 (the sensory-gate sizing rule fails for 1), got {d_model}")
    if n_heads < 1 or d_model % n_heads:
        raise ConfigError(f"NAC d_model {d_model} must be divisible by n_heads {n_heads}")
    if topk is not None and topk < 1:
        raise ConfigError(f"NAC topk must be >= 1 or None (every pair), got {topk}")
    check_choice("NAC phi_activation", phi_activation, PHI_ACTIVATIONS)


def resolve_options(
    compat: str = "paper", options: NACOptions | Mapping[str, Any] | None = None, **overrides: Any
) -> NACOptions:
    """Every option set: the values of ``options`` and ``overrides`` that are not None, the profile ``compat``
    ("paper", "released" or "tuned") for the rest; validated."""
    check_choice("NAC compat", compat, PROFILES)
    given = {} if options is None else dict(asdict(options) if is_dataclass(options) else options)
    given.update(overrides)
    names = [f.name for f in fields(NACOptions)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigError(f"unknown NAC option(s) {', '.join(unknown)}; known: {', '.join(names)}")
    return replace(PROFILE_OPTIONS[compat], **{k: v for k, v in given.items() if v is not None})


# --------------------------------------------------------------------------------------------------
# The layer
# --------------------------------------------------------------------------------------------------


def _split_last(z: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(..., m)`` -> m contiguous ``(...)`` tensors (ATen's transcendental ops on the strided views
    ``z[..., i]`` ran up to 8x slower: softplus of (4, 32, 16, 8) 195 vs 25 us)."""
    return z.movedim(-1, 0).contiguous().unbind(0)


def _masked_softmax(logits: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of ``logits`` restricted to ``ok``; a row without any valid key gives 0.

    Written out (max, exp, sum, divide) because ATen's AVX-512 softmax is 10x slower than this on
    the short rows NAC has (K = 8 keys: 295 vs 27 us for (4, 32, 16, 8) with one thread)."""
    logits = logits.masked_fill(~ok, float("-inf"))
    m = logits.amax(-1, keepdim=True).clamp_min(torch.finfo(logits.dtype).min)  # finite for empty rows
    e = torch.exp(logits - m.detach())
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(logits.dtype).tiny)


class NACAttention(nn.Module):
    """Multi-head NAC self-attention over ``x: (B, T, C)`` with timestamps ``t: (B, T)`` and a mask.

    Architecture (paper §2.2): q, k, v from three NCP sensory gates (eq. 13) with ``d_model`` outputs;
    heads of size ``D = d_model / H``; Top-K pairs ``u = [q; k] in R^{2D}``; backbone (eq. 14) ->
    (phi, omega) (eqs. 15-16); time gate; logits (eq. 2, 3 or 18); softmax; time-weighted value sum;
    heads concatenated; output Linear(d_model, d_model).

    ``compat`` names the profile (paper | released | tuned) that fills the options not given in ``options`` or
    as keyword arguments (:class:`NACOptions`; ``NACAttention(8, compat="paper", time_horizon=10.0)``). What each
    option does, and why each profile holds its value (the values: docs/papers/notes-nac.md#nac-model-paper-vs-code):

    * **Sensory gates.** ``NCPCell`` over ``AutoNCP(ceil((d-0.5)/0.6), 0 motors, s)``; input and output group =
      the ncps inter layer (the neurons with input synapses: exactly ``d_model``), command/motor disabled, linear
      alpha, input mask ``|A_in|`` as Algorithm 1 says (``dense_sensory``, released: dense over the group, so
      sparsity has no effect there). The gate has no active->active synapse, so running it as an RNN over time
      equals a per-step sparse affine map; it is computed that way.
    * **Backbone.** ``AutoNCP(d + floor(d/0.6), 2 motors, s)`` over the 2D-dim pair: the inter -> command ->
      motor pathway, input into the inter layer through ``|A_in|``. Algorithm 1 is one update from the zero
      state, after which the motor neurons eq. 14 reads hold ``alpha(b)`` whatever the input (the released code
      does exactly that, so its phi and omega are constants). The input reaches the motor neurons on the third
      update (inter, command, motor), so reading eq. 14 as a function of u forces ``backbone_unfolds = 3``
      updates on the frozen pair input (the frozen-coefficient assumption of eq. 3). Released: 1 update.
    * **Two heads** (``tied_heads``): "separate head layers" (§2.2; eqs. 15-16 write both gates on the same
      ``NN_backbone(u)``, the text and Fig. 1c give two heads): motor neuron 0 -> phi, motor neuron 1 -> omega,
      each with its own output affine. Released: one motor neuron feeds both, which bounds ``phi/omega < 1`` and
      makes attention over the K keys nearly uniform.
    * **Backbone activation** (``backbone_activation``): the paper needs a nonlinear one (Theorem 2's "nonlinear
      activations"; a linear backbone ranks the keys independently of the query) and names none: tanh is ours.
      Released: linear.
    * **Per-head parameters** (``shared_backbone``; §2.2.1: "each head ... its own parameterization of phi and
      omega"): one backbone and time gate per head, same wiring. Released: one for all.
    * **Top-K**: Algorithm 2 with ``M = ceil(K/B_s) + topk_spare_blocks`` blocks of exactly ``B_s`` real keys
      (in every profile the last block of a row overlaps its neighbour; the paper does not say what happens to
      the ``T_k mod B_s`` remainder keys and the PyTorch port drops them). One spare block (tuned) lifts the
      recall of the exact top-8 on smooth keys from ~0.75 to >= 0.9 (the NAC results page). Released
      (``topk_method``): exact Top-K over the full score matrix (TF code). ``topk=None``: every pair (NAC-PW).
    * **Init** (``ncp_init``): ``"glorot"`` (released; the paper gives none) is dense scaling, under which
      phi ~ 0.50 +- 0.005 for any input at step 0; ``"fan_in"`` (tuned) scales each kept synapse by the neuron's
      actual fan-in, so the sparse layers preserve the variance of their input. Measured on test splits: with
      the host's He conv init it lifted event_digits (with the new Top-K, 0.787 -> 0.847 at T = 1) but
      hurt bearing (RMSE 0.122 -> 0.147, 3 seeds, worse on each).
    * **Time**: ``t = time_horizon * sigmoid(t_a t_sample + t_b)`` with the ``+`` sign of the paper, ``t_a``,
      ``t_b`` affine in u (per head); ``t_sample`` the query's timestamp (``pair_time="query"``: the paper's "the
      sample's timestamp", per query as in the released code), the query-key gap ``|t_q - t_k|`` (``"delta"``,
      tuned) or the key's (``"key"``); 1 without timestamps. The paper prints ``t = sigma(.)`` and "t in [0, 1]"
      (T = 1) but also "t in [0, T]" without defining T. Since ``a <= phi t <= T`` (eq. 17), at T = 1 two
      softmax weights differ by at most a factor e and the layer nearly mean-pools its K keys; tuned: T = 10.
      Measured on event_digits' test split, cpu preset, 3 seeds (RESULTS.md): T = 1 0.847 +- 0.027, T learned
      from 1 (``learn_horizon``) 0.847 +- 0.029, T = 10 0.883 +- 0.019 (query), delta 0.887 +- 0.006.
    * **Euler**: ``euler_steps`` steps of ``t/steps`` (``euler_dt=0``: eq. 2 approximates the same solution
      that eq. 17 gives at time t, so it integrates over [0, t]); released: 5 fixed steps of 0.5 that ignore t.
    * **Output** (``quadrature``): ``sum alpha t v`` (eq. 19); released TF code: ``sum alpha v`` (dt = 1).
    * **Padding** keys get logit ``-inf`` in every profile (the paper has no padding; the released code
      multiplies the logits by the mask, which gives padded keys weight ``e^0``); a query without any valid key
      outputs 0.
    * Not implemented: causal masking, the NAC-FC ablation.
    """

    def __init__(
        self,
        in_features: int,
        d_model: int = 64,
        n_heads: int = 8,
        mode: str = "exact",
        topk: int | None = 8,
        sparsity: float = 0.5,
        compat: str = "paper",
        phi_activation: str = "sigmoid",
        dropout: float = 0.0,
        seed: int = 22222,
        options: NACOptions | Mapping[str, Any] | None = None,
        **overrides: Any,
    ):
        super().__init__()
        check_attention(mode, d_model, n_heads, topk, phi_activation)
        opt = resolve_options(compat, options, **overrides)
        self.opt, self.compat = opt, compat
        self.in_features, self.d_model, self.n_heads = in_features, d_model, n_heads
        self.head_dim = d_model // n_heads
        self.mode, self.topk, self.phi_activation = mode, topk, phi_activation
        self.pair_time, self.time_horizon = opt.pair_time, opt.time_horizon
        gate_wiring = build_autoncp(units_sensory(d_model), 0, in_features, sparsity, seed)
        self.gates = nn.ModuleDict(
            {
                name: NCPCell(
                    gate_wiring,
                    input_group="inter",
                    output_group="inter",
                    disabled=("command", "motor"),
                    activation="linear",
                    dense_input=opt.dense_sensory,
                    init=opt.ncp_init,
                )
                for name in ("q", "k", "v")
            }
        )
        if self.gates["q"].out_features != d_model:  # pragma: no cover - the sizing rule guarantees it
            raise ConfigError(f"AutoNCP gave {self.gates['q'].out_features} sensory neurons for d_model {d_model}")
        n_motor = 1 if opt.tied_heads else 2
        cells = 1 if opt.shared_backbone else n_heads
        bb_wiring = build_autoncp(units_backbone(d_model), n_motor, 2 * self.head_dim, sparsity, seed)
        self.backbone = NCPCell(
            bb_wiring,
            input_group="inter",
            output_group="motor",
            activation=opt.backbone_activation,
            dense_input=False,
            n_cells=cells,
            init=opt.ncp_init,
        )
        self.backbone.prepare(opt.backbone_unfolds)  # a static plan: torch.compile / torch.export trace through it
        # time gate: t_a and t_b affine in the pair u, per head (or shared)
        self.time_weight = nn.Parameter(torch.empty(cells, 2 * self.head_dim, 2))
        self.time_bias = nn.Parameter(torch.zeros(cells, 2))
        bound = 1.0 / math.sqrt(2 * self.head_dim)
        nn.init.uniform_(self.time_weight, -bound, bound)
        # T: fixed, or learned per head (or shared) as log T from time_horizon
        log_t = torch.full((cells,), math.log(self.time_horizon))
        if opt.learn_horizon:
            self.log_horizon = nn.Parameter(log_t)
        else:
            self.register_buffer("log_horizon", log_t, persistent=False)  # old checkpoints load unchanged
        self.learn_horizon = opt.learn_horizon
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(d_model, d_model)

    # ------------------------------------------------------------------------------------------
    def _check(self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None) -> None:
        if x.dim() != 3 or x.shape[-1] != self.in_features:
            raise ValueError(f"NAC expects x of shape (B, T, {self.in_features}), got {tuple(x.shape)}")
        if x.shape[1] < 1:
            raise ValueError("NAC needs sequences of length >= 1")
        if t is not None and tuple(t.shape) != tuple(x.shape[:2]):
            raise ValueError(f"NAC timestamps must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(t.shape)}")
        if mask is not None and tuple(mask.shape) != tuple(x.shape[:2]):
            raise ValueError(f"NAC mask must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(mask.shape)}")

    def _heads(self, z: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (H*B, T, D), head-major so that per-head cells see (H, B*..., .) views."""
        B, T, _ = z.shape
        return z.reshape(B, T, self.n_heads, self.head_dim).permute(2, 0, 1, 3).reshape(self.n_heads * B, T, -1)

    def _cells(self, z: torch.Tensor) -> torch.Tensor:
        """(H*B, ...) -> (cells, ...) view for the per-head backbone; identity when shared."""
        return z if self.backbone.n_cells == 1 else z.reshape(self.n_heads, -1, *z.shape[1:])

    @torch.no_grad()  # indices and validity only: no graph for autograd to record
    def select(self, q: torch.Tensor, k: torch.Tensor, key_mask: torch.Tensor | None):
        """Key indices ``(G, Tq, K_eff)`` and validity for head-major ``q, k: (G, T, D)``."""
        G, Tk = k.shape[0], k.shape[1]
        if self.topk is None or self.topk >= Tk:
            idx = torch.arange(Tk, device=k.device).expand(G, q.shape[1], Tk)
            ok = (
                torch.ones(G, 1, Tk, dtype=torch.bool, device=k.device)
                if key_mask is None
                else key_mask.bool()[:, None, :]
            ).expand(G, q.shape[1], Tk)
            return idx, ok
        if self.opt.topk_method == "block":
            return block_topk(q, k, self.topk, key_mask, spare_blocks=self.opt.topk_spare_blocks)
        return exact_topk(q, k, self.topk, key_mask)

    def forward(
        self,
        x: torch.Tensor,
        t: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        return_details: bool = False,
    ):
        """``x: (B, T, C)``, ``t: (B, T)`` timestamps, ``mask: (B, T)`` True for real steps.

        Returns ``(B, T, d_model)``; with ``return_details`` also a dict of per-pair tensors
        ``(B, H, T, K_eff)``: ``phi``, ``omega``, ``t``, ``logits``, ``attn``, ``index``, ``valid``.
        """
        self._check(x, t, mask)
        B, T, _ = x.shape
        H, D = self.n_heads, self.head_dim
        q, k, v = (self._heads(self.gates[n].scan(x)) for n in ("q", "k", "v"))  # (G, T, D), G = H*B
        key_mask = None if mask is None else mask.bool().repeat(H, 1)  # (G, T)
        idx, ok = self.select(q, k, key_mask)  # (G, T, Ke)
        ke = idx.shape[-1]
        k_sel = flat_gather(k, idx)  # (G, T, Ke, D)
        u = torch.cat([q[:, :, None, :].expand_as(k_sel), k_sel], dim=-1)  # (G, T, Ke, 2D)
        uc = self._cells(u)
        # the time gate t_a, t_b = u W_t + b_t is read in the backbone's pass over the pairs
        zz, ta_tb = self.backbone(uc, unfolds=self.opt.backbone_unfolds, head=(self.time_weight, self.time_bias))
        z = _split_last(zz)
        z_phi, z_omega = (z[0], z[0]) if self.opt.tied_heads else (z[0], z[1])
        phi = {"sigmoid": torch.sigmoid, "tanh": tanh, "linear": lambda a: a}[self.phi_activation](z_phi)
        omega = F.softplus(z_omega) + self.opt.eps
        t_a, t_b = _split_last(ta_tb)
        t_s = self._pair_time(t, idx, B, T, ke)
        horizon = self.log_horizon.exp()
        horizon = horizon[0] if self.backbone.n_cells == 1 else horizon.reshape(-1, *([1] * (t_a.dim() - 1)))
        tau = horizon * torch.sigmoid(t_a * self._cells(t_s) + t_b)
        if self.mode == "steady":
            logits = steady_logits(phi, omega)
        elif self.mode == "exact":
            logits = exact_logits(phi, omega, tau)
        else:
            logits = euler_logits(phi, omega, tau, self.opt.euler_steps, self.opt.euler_dt or None)
        shape = (H * B, T, ke)
        logits, phi, omega, tau = (a.reshape(shape) for a in (logits, phi, omega, tau))
        attn = _masked_softmax(logits, ok)
        w = self.dropout(attn)
        if self.opt.quadrature == "time":
            w = w * tau
        o = (w[..., None] * flat_gather(v, idx)).sum(-2)  # (G, T, D)
        o = o.reshape(H, B, T, D).permute(1, 2, 0, 3).reshape(B, T, H * D)
        y = self.out(o.to(self.out.weight.dtype))  # a bfloat16 model's time gate and softmax ran in float32
        if not return_details:
            return y
        view = lambda a: a.reshape(H, B, T, ke).transpose(0, 1)
        details = {
            "phi": view(phi),
            "omega": view(omega),
            "t": view(tau),
            "logits": view(logits),
            "attn": view(attn),
            "index": view(idx),
            "valid": view(ok),
        }
        return y, details

    def _pair_time(self, t: torch.Tensor | None, idx: torch.Tensor, B: int, T: int, ke: int) -> torch.Tensor:
        """``t_sample`` per pair, ``(G, T, Ke)`` (or broadcastable)."""
        if t is None:
            return torch.ones(1, 1, 1, dtype=torch.float32, device=idx.device).expand(self.n_heads * B, T, ke)
        tg = t.to(torch.float32).repeat(self.n_heads, 1)  # (G, T)
        if self.pair_time == "query":
            return tg[:, :, None].expand(-1, -1, ke)
        tk = flat_gather(tg[..., None], idx)[..., 0]  # (G, T, Ke)
        return tk if self.pair_time == "key" else (tg[:, :, None] - tk).abs()

    def extra_repr(self) -> str:
        return (
            f"in={self.in_features}, d_model={self.d_model}, heads={self.n_heads}, mode={self.mode}, "
            f"topk={self.topk}, compat={self.compat}"
        )
