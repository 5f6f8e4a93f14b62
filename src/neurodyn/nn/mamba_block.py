"""``Mamba``: the Mamba-1 block with mamba-ssm's constructor, parameter names and shapes (Gu & Dao, 2023).

For ``u: (B, L, d_model)``, ``d_inner = int(expand * d_model)``, ``R = dt_rank``, ``N = d_state``::

    x, z   = in_proj(u).chunk(2)                                  # (B, L, d_inner) each
    x      = silu(conv1d(x))                                      # depthwise, kernel d_conv, left padding d_conv - 1
    dt, B, C = x_proj(x).split([R, N, N])
    Delta  = softplus(dt_proj.weight dt + dt_proj.bias)           # (B, L, d_inner)
    h_t    = exp(Delta_t A) h_{t-1} + Delta_t B_t x_t,   A = -exp(A_log)   (d_inner, N)
    y_t    = C_t . h_t + D x_t
    out    = out_proj(y * silu(z))

Strictly causal: one direction, the convolution sees ``t - d_conv + 1 .. t`` and the scan runs forward, so
``out[:, t]`` depends on ``u[:, :t + 1]`` only. The scan is :func:`neurodyn.ops.selective_scan` (mamba-ssm's
CUDA kernel or the Triton kernels on a GPU, the fused C++ kernel on CPU, else the PyTorch scan; ``backend``
forces one).

Parameters (names and shapes as mamba-ssm's ``Mamba``, so a ``state_dict`` loads either way)::

    in_proj.weight (2 d_inner, d_model) [+ bias]     conv1d.weight (d_inner, 1, d_conv) [+ bias (d_inner,)]
    x_proj.weight  (R + 2N, d_inner)                 dt_proj.weight (d_inner, R), dt_proj.bias (d_inner,)
    A_log (d_inner, N)    D (d_inner,)               out_proj.weight (d_model, d_inner) [+ bias]

Initialisation (Mamba-1's): ``A_log = log(1..N)`` in every row (S4D-real), ``D = 1``, ``dt_proj.weight``
``U(-s, s)`` (``dt_init="random"``) or ``s`` (``"constant"``) with ``s = dt_scale / sqrt(R)``, and
``dt_proj.bias = softplus^-1(dt)`` with ``dt`` log-uniform in ``[dt_min, dt_max]`` (floored at ``dt_init_floor``),
so the initial steps lie in that range; the projections and the convolution as PyTorch initialises them.

Step decoding (mamba-ssm's generation interface): :meth:`Mamba.allocate_inference_cache` makes the two states of
one layer, ``conv_state (B, d_inner, d_conv)`` (the last ``d_conv`` inputs of the convolution, oldest first) and
``ssm_state (B, d_inner, N)`` (``h``); :meth:`Mamba.step` takes one token ``(B, 1, d_model)`` and advances both in
place::

    conv_state <- [conv_state[..., 1:], x_t]                      x_t = in_proj(u_t)'s first half
    x          = silu(sum_k conv_state[..., k] * conv1d.weight[:, 0, k] + conv1d.bias)
    h          <- exp(Delta A) h + Delta B x,    y = (C . h + D x) * silu(z),    out = out_proj(y)

``forward(hidden_states, inference_params)`` with an :class:`InferenceParams` (mamba-ssm's fields: ``max_seqlen``,
``max_batch_size``, ``seqlen_offset``, ``key_value_memory_dict``, ...) keeps each layer's states under its
``layer_idx``: at ``seqlen_offset == 0`` it runs the whole prompt through the full forward and leaves the states
after its last token; at ``seqlen_offset > 0`` it decodes token by token with :meth:`step`. The caller advances
``seqlen_offset`` by the tokens it fed, as mamba-ssm's ``decode`` does. Decoding equals the full forward pass on the
whole sequence (``tests/nn/test_mamba_block.py``: float32, within 1e-5).

The one difference from mamba-ssm: **complex A**. mamba-ssm's ``selective_scan_fn`` (the scan under its block)
also takes a complex ``A`` (with ``B``, ``C`` as interleaved real pairs); :func:`neurodyn.ops.selective_scan`
refuses a complex ``A`` with a TypeError. The block itself is unaffected: mamba-ssm's ``Mamba`` builds the real
``A = -exp(A_log)`` as this one does, so state dicts, outputs and decoding agree.

What differs from :class:`neurodyn.nn.mamba.LatentSSM` (LaMO's mixer): that one scans ``directions=("forward",
"backward")`` by default (not causal), has ``n_heads=4`` Mamba-2 heads with one step and one decay per head, an
RMSNorm before the gate, ``d_state=64``, ``d_conv=3`` and ``x_proj`` weights per direction; ``LatentSSM(
LatentSSMConfig(heads=1, norm="none", a_mode="diag", dt_mode="channel", d_state=16, d_conv=4), d, ("forward",))``
is the closest, with other parameter names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice
from ..ops import selective_scan
from .init import inv_softplus

__all__ = ["Mamba", "InferenceParams"]


@dataclass
class InferenceParams:
    """The decoding state of a stack of layers, with the fields of mamba-ssm's ``InferenceParams``
    (``mamba_ssm.utils.generation``), so code written for one runs with the other.

    ``max_seqlen`` / ``max_batch_size``: the longest sequence and the largest batch the caller decodes;
    ``seqlen_offset``: the tokens already processed (0: the next call is the prompt; the caller advances it);
    ``batch_size_offset``: kept for compatibility; ``key_value_memory_dict``: ``layer_idx -> (conv_state,
    ssm_state)``, filled by each :class:`Mamba` layer; ``lengths_per_sample``: kept for compatibility (None)."""

    max_seqlen: int
    max_batch_size: int
    seqlen_offset: int = 0
    batch_size_offset: int = 0
    key_value_memory_dict: dict = field(default_factory=dict)
    lengths_per_sample: torch.Tensor | None = None

    def reset(self, max_seqlen: int, max_batch_size: int) -> None:
        """Start a new sequence: new limits, offset 0 (the layers' states are rewritten by the next prompt)."""
        self.max_seqlen, self.max_batch_size, self.seqlen_offset = max_seqlen, max_batch_size, 0
        if self.lengths_per_sample is not None:
            self.lengths_per_sample.zero_()


class Mamba(nn.Module):
    """Mamba block ``(B, L, d_model) -> (B, L, d_model)`` with mamba-ssm's arguments (module docstring).

    ``use_fast_path`` is accepted for compatibility and changes nothing (the scan dispatches by device);
    ``layer_idx`` is the layer's key in ``inference_params.key_value_memory_dict`` (needed to decode with
    ``inference_params``, as in mamba-ssm). ``backend`` (keyword only, ours) forces a selective-scan backend.
    Decoding: :meth:`allocate_inference_cache`, :meth:`step`, and ``forward(hidden_states, inference_params)``
    (module docstring). Complex ``A`` is the one difference from mamba-ssm (module docstring).
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 16,
        d_conv: int = 4,
        expand: float = 2,
        dt_rank: int | str = "auto",
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_init: str = "random",
        dt_scale: float = 1.0,
        dt_init_floor: float = 1e-4,
        conv_bias: bool = True,
        bias: bool = False,
        use_fast_path: bool = True,
        layer_idx: int | None = None,
        device=None,
        dtype=None,
        *,
        backend: str = "auto",
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.d_state, self.d_conv, self.expand = int(d_model), int(d_state), int(d_conv), expand
        self.d_inner = di = int(expand * self.d_model)
        self.dt_rank = math.ceil(self.d_model / 16) if dt_rank == "auto" else dt_rank
        if not isinstance(self.dt_rank, int) or min(self.d_model, self.d_state, self.d_conv, di, self.dt_rank) < 1:
            raise ConfigError(
                f"Mamba needs d_model, d_state, d_conv, d_inner = int(expand * d_model) and dt_rank "
                f"(an int or 'auto') >= 1; got d_model={d_model}, d_state={d_state}, d_conv={d_conv}, "
                f"expand={expand}, dt_rank={dt_rank!r}."
            )
        if not 0 < dt_min <= dt_max:
            raise ConfigError(f"Mamba needs 0 < dt_min <= dt_max; got dt_min={dt_min}, dt_max={dt_max}.")
        check_choice("Mamba dt_init", dt_init, ("random", "constant"))
        self.use_fast_path, self.layer_idx, self.backend = use_fast_path, layer_idx, backend
        R, N = self.dt_rank, self.d_state
        self.in_proj = nn.Linear(self.d_model, 2 * di, bias=bias, **factory)
        self.conv1d = nn.Conv1d(di, di, self.d_conv, groups=di, padding=self.d_conv - 1, bias=conv_bias, **factory)
        self.x_proj = nn.Linear(di, R + 2 * N, bias=False, **factory)
        self.dt_proj = nn.Linear(R, di, bias=True, **factory)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32, device=device)).repeat(di, 1))
        self.D = nn.Parameter(torch.ones(di, device=device))
        self.out_proj = nn.Linear(di, self.d_model, bias=bias, **factory)
        self._init_dt(dt_init, dt_scale, dt_min, dt_max, dt_init_floor)

    @torch.no_grad()
    def _init_dt(self, dt_init: str, dt_scale: float, dt_min: float, dt_max: float, floor: float) -> None:
        s = dt_scale * self.dt_rank**-0.5
        if dt_init == "constant":
            self.dt_proj.weight.fill_(s)
        else:
            self.dt_proj.weight.uniform_(-s, s)
        log_dt = torch.empty(self.d_inner, device=self.dt_proj.bias.device).uniform_(math.log(dt_min), math.log(dt_max))
        dt = torch.exp(log_dt).clamp_min(floor)
        self.dt_proj.bias.copy_(inv_softplus(dt))
        # the markers mamba-ssm's training code reads: keep this init; no weight decay on A_log and D
        self.dt_proj.bias._no_reinit = True
        self.A_log._no_weight_decay = True
        self.D._no_weight_decay = True

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, d_inner={self.d_inner}, d_state={self.d_state}, d_conv={self.d_conv}, "
            f"dt_rank={self.dt_rank}"
        )

    def forward(self, hidden_states: torch.Tensor, inference_params=None) -> torch.Tensor:
        """``hidden_states (B, L, d_model)`` -> ``(B, L, d_model)``.

        With ``inference_params`` (an :class:`InferenceParams`, or mamba-ssm's): this layer's states live in its
        ``key_value_memory_dict[layer_idx]`` (made on first use); at ``seqlen_offset == 0`` the prompt runs through
        the full forward and the states are left after its last token, at ``seqlen_offset > 0`` the tokens are
        decoded one at a time with :meth:`step` (mamba-ssm takes one; several are decoded in turn)."""
        u = hidden_states
        if not isinstance(u, torch.Tensor) or u.dim() != 3 or u.shape[-1] != self.d_model:
            shape = tuple(u.shape) if isinstance(u, torch.Tensor) else type(u).__name__
            raise ValueError(f"Mamba takes hidden_states of shape (batch, L, {self.d_model}); got {shape}.")
        if inference_params is None:
            return self._forward(u)
        conv_state, ssm_state = self._states_from_cache(inference_params, u.shape[0])
        if inference_params.seqlen_offset > 0:
            return torch.cat([self.step(u[:, t : t + 1], conv_state, ssm_state)[0] for t in range(u.shape[1])], dim=1)
        return self._forward(u, conv_state, ssm_state)

    def _forward(
        self, u: torch.Tensor, conv_state: torch.Tensor | None = None, ssm_state: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The whole sequence at once; with the states given, they are overwritten with those after its last token
        (``conv_state``: the last ``d_conv`` inputs of the convolution, zeros before the first)."""
        L, N = u.shape[1], self.d_state
        x, z = self.in_proj(u).transpose(1, 2).chunk(2, dim=1)  # (B, d_inner, L) each
        if conv_state is not None:
            conv_state.copy_(F.pad(x, (self.d_conv - L, 0)))  # zeros on the left, or the last d_conv
        x = F.silu(self.conv1d(x)[..., :L])  # causal: the right padding dropped
        dt, Bm, Cm = self.x_proj(x.transpose(1, 2)).split([self.dt_rank, N, N], dim=-1)
        delta = (dt @ self.dt_proj.weight.t()).transpose(1, 2)  # (B, d_inner, L); bias in the scan
        cdt = torch.promote_types(self.A_log.dtype, torch.float32)  # A in float32 at least
        A = -torch.exp(self.A_log.to(cdt))
        y = selective_scan(
            x.contiguous(),
            delta.contiguous(),
            A,
            Bm.transpose(1, 2).contiguous(),
            Cm.transpose(1, 2).contiguous(),
            D=self.D.to(cdt),
            z=z.contiguous(),
            delta_bias=self.dt_proj.bias.to(cdt),
            delta_softplus=True,
            return_last_state=ssm_state is not None,
            backend=self.backend,
        )
        if ssm_state is not None:
            y, last = y
            ssm_state.copy_(last)
        return self.out_proj(y.transpose(1, 2))

    def step(
        self, hidden_states: torch.Tensor, conv_state: torch.Tensor, ssm_state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One token ``hidden_states (B, 1, d_model)`` -> ``(out (B, 1, d_model), conv_state, ssm_state)``, the two
        states (:meth:`allocate_inference_cache`) advanced in place (module docstring). Computed in float32 at least;
        the states keep their dtype."""
        b = hidden_states.shape[0] if isinstance(hidden_states, torch.Tensor) and hidden_states.dim() == 3 else None
        if b is None or hidden_states.shape[1:] != (1, self.d_model):
            shape = tuple(hidden_states.shape) if isinstance(hidden_states, torch.Tensor) else hidden_states
            raise ValueError(
                f"Mamba.step decodes one token, hidden_states of shape (batch, 1, {self.d_model}); got {shape}."
            )
        for name, state, want in (
            ("conv_state", conv_state, (b, self.d_inner, self.d_conv)),
            ("ssm_state", ssm_state, (b, self.d_inner, self.d_state)),
        ):
            if not isinstance(state, torch.Tensor) or tuple(state.shape) != want:
                got = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
                raise ValueError(
                    f"Mamba.step needs {name} of shape {want} (allocate_inference_cache({b}, ...)); got {got}."
                )
        dtype = hidden_states.dtype
        cdt = torch.promote_types(torch.promote_types(dtype, self.A_log.dtype), torch.float32)
        x, z = self.in_proj(hidden_states[:, 0]).chunk(2, dim=-1)  # (B, d_inner) each
        conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
        conv_state[:, :, -1] = x
        x = (conv_state.to(cdt) * self.conv1d.weight[:, 0, :].to(cdt)).sum(-1)
        if self.conv1d.bias is not None:
            x = x + self.conv1d.bias.to(cdt)
        x = F.silu(x).to(dtype)
        dt, Bt, Ct = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(F.linear(dt, self.dt_proj.weight).to(cdt) + self.dt_proj.bias.to(cdt))  # (B, d_inner)
        A = -torch.exp(self.A_log.to(cdt))  # (d_inner, N)
        h = (
            torch.exp(delta[..., None] * A) * ssm_state.to(cdt)
            + (delta * x.to(cdt))[..., None] * Bt.to(cdt)[:, None, :]
        )
        ssm_state.copy_(h)
        y = (h * Ct.to(cdt)[:, None, :]).sum(-1) + self.D.to(cdt) * x.to(cdt)
        y = y * F.silu(z.to(cdt))
        return self.out_proj(y.to(dtype)).unsqueeze(1), conv_state, ssm_state

    def allocate_inference_cache(
        self, batch_size: int, max_seqlen: int, dtype: torch.dtype | None = None, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero states for decoding ``batch_size`` sequences: ``conv_state (batch_size, d_inner, d_conv)`` in the
        convolution's dtype and ``ssm_state (batch_size, d_inner, d_state)`` in ``dt_proj``'s (``dtype``: both), on
        the layer's device. ``max_seqlen`` is accepted as mamba-ssm's (the states do not grow with it)."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"allocate_inference_cache needs batch_size >= 1; got {batch_size!r}.")
        device = self.out_proj.weight.device
        conv = torch.zeros(
            batch_size, self.d_inner, self.d_conv, device=device, dtype=dtype or self.conv1d.weight.dtype
        )
        ssm = torch.zeros(
            batch_size, self.d_inner, self.d_state, device=device, dtype=dtype or self.dt_proj.weight.dtype
        )
        return conv, ssm

    def _states_from_cache(self, inference_params, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This layer's ``(conv_state, ssm_state)`` in ``inference_params.key_value_memory_dict[layer_idx]``, made
        on first use; one error naming what is missing or of another batch size."""
        if not (hasattr(inference_params, "seqlen_offset") and hasattr(inference_params, "key_value_memory_dict")):
            raise TypeError(
                f"inference_params must be an InferenceParams (neurodyn.nn.mamba_block or mamba-ssm's, "
                f"with seqlen_offset and key_value_memory_dict); got {type(inference_params).__name__}."
            )
        if self.layer_idx is None:
            raise ValueError(
                "Mamba decodes with inference_params under its layer_idx (the key of its states in "
                "key_value_memory_dict); build it with Mamba(..., layer_idx=i), as in mamba-ssm."
            )
        cache = inference_params.key_value_memory_dict
        if self.layer_idx not in cache:
            cache[self.layer_idx] = self.allocate_inference_cache(batch_size, inference_params.max_seqlen)
        conv_state, ssm_state = cache[self.layer_idx]
        if conv_state.shape[0] != batch_size:
            raise ValueError(
                f"inference_params holds states of {conv_state.shape[0]} sequences for layer "
                f"{self.layer_idx} and hidden_states has {batch_size}; start a new InferenceParams for "
                "another batch."
            )
        return conv_state, ssm_state
