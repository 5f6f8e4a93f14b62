"""GeoMaNO's geometry-aware encoder and decoder (Sec. 4.1, Eqs. 6-7): soft patch assignment kept as a 2-D grid.

Encoder (Eq. 6) for physical features ``X: (B, P, c_in)`` on P grid points (input function, context and
the grid coordinates) and a latent grid of ``L = h x w`` tokens::

    Y = MLP(X)                          # lifting c_in -> 2D -> D, GELU ("Linear = biased FFN with activation")
    W = softmax(Linear_{D -> L}(Y))     # (B, P, L): every point's weights over the L latent patches sum to 1
    Z = LayerNorm(W^T Y)                # (B, L, D) -> reshaped row-major to the token grid (B, h, w, D)
    Z = Z + E_pos                       # optional learned (h, w, D) embedding ("Pos. Emb.", Table 3)

The latent tokens keep a 2-D arrangement ("the input is not flattened"), which the GeoMamba kernel's
conv, cross-scan and 2-D scan use. Differences from LaMO's / Transolver's slice encoder
(``neurodyn.nn.slice``), whose ``pool`` / ``deslice`` this module reuses: one head, the assignment reads
the lifted features directly (no extra ``Proj_x`` and no temperature), the slice tokens are the plain sum
``W^T Y`` normalised by LayerNorm (``reduce="mean"`` gives Transolver's weighted mean instead), and the
tokens form a grid.

Decoder (Eq. 7) -- ``mode``:

* ``"shared"`` (default): ``Y[p] = sum_l W[p, l] Z[l]`` with the encoder's W (Transolver's "deslice"; the
  decoder as the inverse of the encoder, independent of the resolution).
* ``"separate"``: the same with its own ``W' = softmax(Linear_{D -> L}(Y))`` computed from the lifted
  features (own parameters, still resolution independent).
* ``"literal"``: Eq. 7 as printed, ``W = softmax_P(Linear_{D -> P}(Z))`` (B, L, P), ``Y = W^T Z``; its
  ``Linear_{D -> P}`` ties the model to ``n_points`` grid points.

then the head: ``"ln_linear"`` (default) ``Linear(LN(Y))`` (Transolver's last layer) or ``"linear_ln"``
``LN(Linear(Y))`` as Eq. 7 prints it, which for a single output channel always returns the LN bias (so
it is refused for ``out_channels = 1``).

Spatial information: a point-wise assignment cannot tell two points with the same input value apart, so the
features must contain the coordinates (the model appends them; ``docs/papers/notes-geomano.md`` 2.1 item 2).
``assign_prior > 0`` (not in the paper) adds ``-assign_prior * |x_p - c_l|^2 / delta^2`` to the
assignment logits (``c_l`` the centre of latent cell l in [0, 1]^2, ``delta`` the cell size), which makes
neighbouring latent tokens cover neighbouring regions from the first step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError, check_choice
from .mlp import ChannelMLP
from .slice import deslice, pool

__all__ = ["GeoEncoder", "GeoDecoder", "latent_centres"]

DECODERS = ("shared", "separate", "literal")
HEADS = ("ln_linear", "linear_ln")


def latent_centres(grid: Sequence[int], dtype=None, device=None) -> torch.Tensor:
    """Centres ``((i + 1/2) / h, (j + 1/2) / w)`` of the ``h x w`` latent cells on [0, 1]^2, row-major ``(L, 2)``."""
    h, w = (int(s) for s in grid)
    ii = (torch.arange(h, dtype=dtype, device=device) + 0.5) / h
    jj = (torch.arange(w, dtype=dtype, device=device) + 0.5) / w
    return torch.stack(torch.meshgrid(ii, jj, indexing="ij"), dim=-1).reshape(h * w, 2)


class GeoEncoder(nn.Module):
    """Eq. 6: ``X (B, P, c_in)`` -> ``(Z (B, h, w, D), W (B, P, L), Y (B, P, D))``; see the module docstring."""

    def __init__(
        self,
        in_channels: int,
        dim: int,
        latent_grid: Sequence[int] = (8, 8),
        lift_hidden: int = 0,
        act: str = "gelu",
        reduce: str = "sum",
        pos_embed: bool = False,
        assign_prior: float = 0.0,
        eps: float = 1e-5,
    ):
        super().__init__()
        grid = tuple(int(s) for s in latent_grid)
        if len(grid) != 2 or min(grid) < 1:
            raise ConfigError(f"latent_grid must be (h, w) with h, w >= 1, got {tuple(latent_grid)!r}.")
        check_choice("encoder reduce ('sum': paper LayerNorm(W^T Y), 'mean': Transolver)", reduce, ("sum", "mean"))
        if assign_prior < 0:
            raise ConfigError(f"assign_prior must be >= 0, got {assign_prior}.")
        self.latent_grid, self.dim, self.reduce = grid, int(dim), reduce
        self.n_latent = grid[0] * grid[1]
        self.assign_prior, self.eps = float(assign_prior), float(eps)
        self.lift = ChannelMLP(in_channels, dim, lift_hidden or 2 * dim, act)
        self.assign = nn.Linear(dim, self.n_latent)
        self.norm = nn.LayerNorm(dim)
        if pos_embed:
            self.pos_embed = nn.Parameter(torch.zeros(1, *grid, dim))
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        else:
            self.pos_embed = None

    def weights(self, y: torch.Tensor, coords: torch.Tensor | None = None) -> torch.Tensor:
        """``softmax(Linear(Y) [+ locality prior])`` over the L latent tokens: ``(B, P, D) -> (B, P, L)``."""
        logits = self.assign(y)
        if self.assign_prior > 0:
            if coords is None:
                raise ValueError("assign_prior > 0 needs the point coordinates (B, P, 2).")
            c = latent_centres(self.latent_grid, y.dtype, y.device)
            cell = 1.0 / max(self.latent_grid)
            logits = (
                logits
                - self.assign_prior * torch.cdist(coords.to(y.dtype), c.expand(y.shape[0], -1, -1)).pow(2) / cell**2
            )
        return torch.softmax(logits, dim=-1)

    def forward(self, x: torch.Tensor, coords: torch.Tensor | None = None):
        if x.dim() != 3:
            raise ValueError(f"GeoEncoder takes point features (batch, P, c); got shape {tuple(x.shape)}.")
        y = self.lift(x)  # (B, P, D)
        w = self.weights(y, coords)  # (B, P, L)
        z = pool(y[:, None], w[:, None], normalize=self.reduce == "mean", eps=self.eps)[:, 0]  # (B, L, D)
        z = self.norm(z).reshape(x.shape[0], *self.latent_grid, self.dim)
        if self.pos_embed is not None:
            z = z + self.pos_embed
        return z, w, y


class GeoDecoder(nn.Module):
    """Eq. 7: latent grid ``(B, h, w, D)`` -> point values ``(B, P, out_channels)``; see the module docstring."""

    def __init__(
        self,
        dim: int,
        out_channels: int,
        mode: str = "shared",
        head: str = "ln_linear",
        latent_grid: Sequence[int] = (8, 8),
        n_points: int = 0,
        skip: bool = False,
    ):
        super().__init__()
        check_choice("decoder", mode, DECODERS)
        check_choice("decoder head", head, HEADS)
        if head == "linear_ln" and out_channels == 1:
            raise ConfigError(
                "decoder head 'linear_ln' (Eq. 7 literally: LayerNorm after the last Linear) returns "
                "the LayerNorm bias for a single output channel; use head 'ln_linear'."
            )
        self.mode, self.head_kind, self.skip = mode, head, bool(skip)
        L = int(latent_grid[0]) * int(latent_grid[1])
        if mode == "separate":
            self.assign = nn.Linear(dim, L)
        elif mode == "literal":
            if n_points < 1:
                raise ConfigError(
                    "the literal (Eq. 7) decoder maps to a fixed number of grid points; set n_points "
                    "(H * W of the data) or use decoder 'shared' / 'separate'."
                )
            self.n_points = int(n_points)
            self.to_points = nn.Linear(dim, self.n_points)
        if head == "ln_linear":
            self.norm, self.proj = nn.LayerNorm(dim), nn.Linear(dim, out_channels)
        else:
            self.proj, self.norm = nn.Linear(dim, out_channels), nn.LayerNorm(out_channels)

    def forward(
        self, z: torch.Tensor, w_enc: torch.Tensor | None = None, y: torch.Tensor | None = None
    ) -> torch.Tensor:
        b, d = z.shape[0], z.shape[-1]
        tokens = z.reshape(b, -1, d)  # (B, L, D), row-major
        if self.mode == "shared":
            out = deslice(tokens[:, None], w_enc[:, None])  # (B, P, D)
        elif self.mode == "separate":
            out = deslice(tokens[:, None], torch.softmax(self.assign(y), dim=-1)[:, None])
        else:
            n = y.shape[1] if y is not None else self.n_points
            if n != self.n_points:
                raise ValueError(
                    f"the literal decoder was built for n_points={self.n_points} grid points "
                    "but the input "
                    f"has {n}; it is not resolution independent (use decoder 'shared')."
                )
            w = torch.softmax(self.to_points(tokens), dim=-1)  # (B, L, P): softmax over the points
            out = torch.einsum("blp,bld->bpd", w, tokens)
        if self.skip:
            out = out + y
        if self.head_kind == "ln_linear":
            return self.proj(self.norm(out))
        return self.norm(self.proj(out))
