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

What differs from :class:`neurodyn.nn.mamba.LatentSSM` (LaMO's mixer): that one scans ``directions=("forward",
"backward")`` by default (not causal), has ``n_heads=4`` Mamba-2 heads with one step and one decay per head, an
RMSNorm before the gate, ``d_state=64``, ``d_conv=3`` and ``x_proj`` weights per direction; ``LatentSSM(
LatentSSMConfig(heads=1, norm="none", a_mode="diag", dt_mode="channel", d_state=16, d_conv=4), d, ("forward",))``
is the closest, with other parameter names.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice
from ..ops import selective_scan
from .init import inv_softplus

__all__ = ["Mamba"]


class Mamba(nn.Module):
    """Mamba block ``(B, L, d_model) -> (B, L, d_model)`` with mamba-ssm's arguments (module docstring).

    ``use_fast_path`` is accepted for compatibility and changes nothing (the scan dispatches by device);
    ``layer_idx`` is kept as an attribute. ``backend`` (keyword only, ours) forces a selective-scan backend.
    """

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: float = 2,
                 dt_rank: int | str = "auto", dt_min: float = 0.001, dt_max: float = 0.1, dt_init: str = "random",
                 dt_scale: float = 1.0, dt_init_floor: float = 1e-4, conv_bias: bool = True, bias: bool = False,
                 use_fast_path: bool = True, layer_idx: int | None = None, device=None, dtype=None, *,
                 backend: str = "auto"):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.d_state, self.d_conv, self.expand = int(d_model), int(d_state), int(d_conv), expand
        self.d_inner = di = int(expand * self.d_model)
        self.dt_rank = math.ceil(self.d_model / 16) if dt_rank == "auto" else dt_rank
        if not isinstance(self.dt_rank, int) or min(self.d_model, self.d_state, self.d_conv, di, self.dt_rank) < 1:
            raise ConfigError(f"Mamba needs d_model, d_state, d_conv, d_inner = int(expand * d_model) and dt_rank "
                              f"(an int or 'auto') >= 1; got d_model={d_model}, d_state={d_state}, d_conv={d_conv}, "
                              f"expand={expand}, dt_rank={dt_rank!r}.")
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
        s = dt_scale * self.dt_rank ** -0.5
        if dt_init == "constant":
            self.dt_proj.weight.fill_(s)
        else:
            self.dt_proj.weight.uniform_(-s, s)
        log_dt = torch.empty(self.d_inner, device=self.dt_proj.bias.device).uniform_(math.log(dt_min),
                                                                                    math.log(dt_max))
        dt = torch.exp(log_dt).clamp_min(floor)
        self.dt_proj.bias.copy_(inv_softplus(dt))
        # the markers mamba-ssm's training code reads: keep this init; no weight decay on A_log and D
        self.dt_proj.bias._no_reinit = True
        self.A_log._no_weight_decay = True
        self.D._no_weight_decay = True

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, d_inner={self.d_inner}, d_state={self.d_state}, d_conv={self.d_conv}, "
                f"dt_rank={self.dt_rank}")

    def forward(self, hidden_states: torch.Tensor, inference_params=None) -> torch.Tensor:
        """``hidden_states (B, L, d_model)`` -> ``(B, L, d_model)``. Step-by-step decoding (mamba-ssm's
        ``inference_params``) is not implemented: the whole sequence goes in at once."""
        if inference_params is not None:
            raise NotImplementedError("neurodyn.nn.Mamba has no step-by-step decoding (inference_params); pass the "
                                      "whole sequence (the output at t depends on the inputs up to t only)")
        u = hidden_states
        if u.dim() != 3 or u.shape[-1] != self.d_model:
            raise ValueError(f"Mamba takes hidden_states of shape (batch, L, {self.d_model}); got {tuple(u.shape)}.")
        L, N = u.shape[1], self.d_state
        x, z = self.in_proj(u).transpose(1, 2).chunk(2, dim=1)                # (B, d_inner, L) each
        x = F.silu(self.conv1d(x)[..., :L])                                    # causal: the right padding dropped
        dt, Bm, Cm = self.x_proj(x.transpose(1, 2)).split([self.dt_rank, N, N], dim=-1)
        delta = (dt @ self.dt_proj.weight.t()).transpose(1, 2)                 # (B, d_inner, L); bias in the scan
        cdt = torch.promote_types(self.A_log.dtype, torch.float32)             # A in float32 at least
        A = -torch.exp(self.A_log.to(cdt))
        y = selective_scan(x.contiguous(), delta.contiguous(), A, Bm.transpose(1, 2).contiguous(),
                           Cm.transpose(1, 2).contiguous(), D=self.D.to(cdt), z=z.contiguous(),
                           delta_bias=self.dt_proj.bias.to(cdt), delta_softplus=True, backend=self.backend)
        return self.out_proj(y.transpose(1, 2))
