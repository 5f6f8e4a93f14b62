"""Slice encoder / decoder: softmax assignment of N physical tokens to M latent tokens (Transolver, LaMO).

Shared by Transolver's physics attention, LaMO's latent SSM and (later) GeoMaNO. For physical tokens
``X: (B, N, D)`` and ``H`` heads of ``d_h = D / H`` channels (Wu et al. 2024, Eqs. 1-2; LaMO Eqs. 9-10 in
the authors' code form)::

    X_x, X_f = Proj_x(X), Proj_f(X)                          # (B, H, N, d_h) each; Linear, or Conv2d 3x3
                                                              #   over the (H, W) index grid of a structured mesh
    W        = softmax( Linear_{d_h -> M}(X_x) / tau_h )      # (B, H, N, M): each point's weights over the
                                                              #   M latent tokens sum to one; tau_h learnable
    Z        = (W^T X_f) / (sum_n W[:, :, n, :] + eps)        # (B, H, M, d_h): weighted means (slice tokens)
    decoder  : Y[n] = sum_m W[n, m] Z'[m]                      # the same W maps latent tokens back (deslice)

The head outputs are concatenated to ``(B, N, D)``; the output projection (``to_out``) belongs to the layer
that uses the slices (one per block in Transolver and LaMO, also when the slice weights are shared).

Choices (paper vs. code, docs/papers/notes-lamo.md 2.3 and 2.6):

* ``value_projection=True`` (code) projects the values with a separate ``Proj_f``; ``False`` takes the
  values from the same projection as the weights (closest to the paper's ``Z = W^T X``).
* ``normalize=True`` (code) divides by the total weight of each slice (weighted mean); ``False`` gives the
  paper's plain sum ``Z = W^T X``.
* ``clamp``: the structured-mesh code clamps ``tau`` to [0.1, 5]; the point-cloud code does not.
* ``Linear_{d_h -> M}`` is orthogonally initialised (code); the projections like ``nn.Linear``.

Decoders (``SliceDecoder``): ``"shared"`` (the code; reuses the encoder's ``W``, mesh-independent),
``"separate"`` (own parameters: its own ``softmax(Linear(Proj(X)) / tau)`` computed from the physical
tokens, still mesh-independent) and ``"literal"`` (paper Eqs. 14-15: ``W = softmax(Linear_{d_h -> N}(Z))``
over the N points, ``Y = W^T Z``; it needs a fixed number of points ``n_points`` and is not
discretisation-invariant, which is why the code does not use it).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError, check_choice

__all__ = ["SliceEncoder", "SliceDecoder", "PhysicsAttention", "deslice", "pool", "slice_clamp"]

PROJECTIONS = ("linear", "conv2d")


def slice_clamp(clamp, structured: bool):
    """A config's slice-temperature clamp: None -> [0.1, 5] on structured meshes (none on point clouds),
    () -> off."""
    if clamp is None:
        return (0.1, 5.0) if structured else None
    return None if len(tuple(clamp)) == 0 else clamp


def pool(values: torch.Tensor, weights: torch.Tensor, normalize: bool = True, eps: float = 1e-5) -> torch.Tensor:
    """Slice tokens from ``values (B, H, N, c)`` and ``weights (B, H, N, M)`` -> ``(B, H, M, c)``.

    ``Z[m] = sum_n W[n, m] V[n] / (sum_n W[n, m] + eps)`` (weighted mean; ``normalize=False``: the plain sum).
    """
    tokens = torch.einsum("bhnc,bhnm->bhmc", values, weights)
    if normalize:
        tokens = tokens / (weights.sum(2)[..., None] + eps)
    return tokens


def deslice(tokens: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``Y[b, n, h*d_h + c] = sum_m weights[b, h, n, m] tokens[b, h, m, c]`` -> ``(B, N, H * d_h)``."""
    out = torch.einsum("bhmc,bhnm->bnhc", tokens, weights)
    return out.reshape(out.shape[0], out.shape[1], -1)


class SliceEncoder(nn.Module):
    """Physical tokens ``(B, N, D)`` -> slice tokens ``(B, H, M, d_h)`` and weights ``(B, H, N, M)``.

    Args:
        dim: channels ``D`` of the physical tokens (``n_heads * d_h``).
        n_heads: slice heads ``H`` (LaMO's "encoder heads", separate from its SSM heads).
        n_slices: latent tokens ``M``.
        projection: ``"linear"`` (point clouds, irregular meshes) or ``"conv2d"`` (structured meshes and
            grids: a ``kernel x kernel`` convolution over the index grid; then call with ``grid=(H, W)``).
        temperature: initial ``tau`` of every head; ``clamp``: ``(low, high)`` bounds applied to ``tau`` in
            the forward pass, or None.
        value_projection, normalize: see the module docstring.
        eps: added to the slice weight totals.
    """

    def __init__(
        self,
        dim: int,
        n_heads: int = 8,
        n_slices: int = 64,
        projection: str = "linear",
        kernel: int = 3,
        temperature: float = 0.5,
        clamp: Sequence[float] | None = None,
        value_projection: bool = True,
        normalize: bool = True,
        eps: float = 1e-5,
    ):
        super().__init__()
        check_choice("slice projection", projection, PROJECTIONS)
        if dim < 1 or n_heads < 1 or dim % n_heads:
            raise ConfigError(f"slice encoder needs dim ({dim}) divisible by n_heads ({n_heads}).")
        if n_slices < 1:
            raise ConfigError(f"slice encoder needs n_slices >= 1, got {n_slices}.")
        if not temperature > 0:
            raise ConfigError(f"slice temperature must be > 0, got {temperature}.")
        self.dim, self.n_heads, self.n_slices = int(dim), int(n_heads), int(n_slices)
        self.head_dim = self.dim // self.n_heads
        self.projection, self.eps, self.normalize = projection, float(eps), bool(normalize)
        self.clamp = None if clamp is None else (float(clamp[0]), float(clamp[1]))

        def proj() -> nn.Module:
            if projection == "linear":
                return nn.Linear(self.dim, self.dim)
            return nn.Conv2d(self.dim, self.dim, kernel, 1, kernel // 2)

        self.in_project_x = proj()
        self.in_project_fx = proj() if value_projection else None
        self.in_project_slice = nn.Linear(self.head_dim, self.n_slices)
        nn.init.orthogonal_(self.in_project_slice.weight)
        self.temperature = nn.Parameter(torch.full((1, self.n_heads, 1, 1), float(temperature)))

    def _project(self, layer: nn.Module, x: torch.Tensor, grid) -> torch.Tensor:
        b, n, _ = x.shape
        if self.projection == "conv2d":
            if grid is None or grid[0] * grid[1] != n:
                raise ValueError(
                    f"a conv2d slice projection needs the index grid (H, W) with H * W = N = {n}; got grid={grid}."
                )
            y = layer(x.transpose(1, 2).reshape(b, self.dim, *grid)).reshape(b, self.dim, n).transpose(1, 2)
        else:
            y = layer(x)
        return y.reshape(b, n, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, N, d_h)

    def tau(self) -> torch.Tensor:
        return self.temperature if self.clamp is None else self.temperature.clamp(*self.clamp)

    def weights_from(self, x_mid: torch.Tensor) -> torch.Tensor:
        """Slice weights ``softmax(Linear(x_mid) / tau)`` over the M slices, ``(B, H, N, M)``."""
        return torch.softmax(self.in_project_slice(x_mid) / self.tau(), dim=-1)

    def weights(self, x: torch.Tensor, grid=None) -> torch.Tensor:
        """``(B, N, D)`` -> slice weights ``(B, H, N, M)`` (each row sums to one over M)."""
        return self.weights_from(self._project(self.in_project_x, x, grid))

    def forward(
        self, x: torch.Tensor, grid=None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, N, D)`` -> ``(tokens (B, H, M, d_h), weights (B, H, N, M))``.

        ``mask (B, N)`` (True on real points of padded point clouds) zeroes the weights of padded points, so the
        tokens pool the real points only (the weights returned for the padded points are zero too)."""
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"slice encoder takes physical tokens (batch, N, {self.dim}); got shape {tuple(x.shape)}.")
        x_mid = self._project(self.in_project_x, x, grid)
        w = self.weights_from(x_mid)
        if mask is not None:
            w = w * mask[:, None, :, None].to(w.dtype)
        values = x_mid if self.in_project_fx is None else self._project(self.in_project_fx, x, grid)
        return pool(values, w, self.normalize, self.eps), w


class SliceDecoder(nn.Module):
    """Latent tokens ``(B, H, M, d_h)`` -> physical tokens ``(B, N, H * d_h)`` (heads concatenated).

    ``mode="shared"``: ``deslice(tokens, encoder_weights)`` (no parameters). ``mode="separate"``: an own
    ``SliceEncoder``-style assignment computed from the physical tokens ``x`` (needs ``x``; ``kwargs`` are
    passed to it). ``mode="literal"``: paper Eqs. 14-15 with ``n_points`` fixed.
    """

    MODES = ("shared", "separate", "literal")

    def __init__(
        self, mode: str = "shared", dim: int = 0, n_heads: int = 8, n_slices: int = 64, n_points: int = 0, **kwargs
    ):
        super().__init__()
        check_choice("slice decoder mode", mode, self.MODES)
        self.mode = mode
        if mode == "separate":
            self.assign = SliceEncoder(dim, n_heads, n_slices, value_projection=False, **kwargs)
        elif mode == "literal":
            if n_points < 1:
                raise ConfigError(
                    "the literal (paper Eq. 14) slice decoder maps to a fixed number of points; set "
                    "n_points >= 1 (the mesh size), or use decoder 'shared' or 'separate'."
                )
            if dim % n_heads:
                raise ConfigError(f"slice decoder needs dim ({dim}) divisible by n_heads ({n_heads}).")
            self.n_points = int(n_points)
            self.to_points = nn.Linear(dim // n_heads, self.n_points)

    def forward(
        self, tokens: torch.Tensor, weights: torch.Tensor | None = None, x: torch.Tensor | None = None, grid=None
    ) -> torch.Tensor:
        if self.mode == "shared":
            return deslice(tokens, weights)
        if self.mode == "separate":
            return deslice(tokens, self.assign.weights(x, grid))
        n = weights.shape[2] if weights is not None else (x.shape[1] if x is not None else self.n_points)
        if n != self.n_points:
            raise ValueError(
                f"the literal slice decoder was built for n_points={self.n_points} but the input has "
                f"{n} points; it is not mesh-independent (use decoder 'shared' or 'separate')."
            )
        w = torch.softmax(self.to_points(tokens), dim=-1)  # (B, H, M, N), softmax over the N points
        out = torch.einsum("bhmn,bhmc->bnhc", w, tokens)
        return out.reshape(out.shape[0], out.shape[1], -1)


class PhysicsAttention(nn.Module):
    """Transolver's physics attention (Wu et al. 2024, Eqs. 1-4) on top of a slice encoder.

    ``x (B, N, D) -> (B, N, D)``: slice (``SliceEncoder``), per-head softmax attention among the M slice
    tokens with ``q, k, v = Linear_{d_h -> d_h}`` (no bias, shared by the heads, scale ``d_h^-1/2``),
    deslice with the same weights, concatenate heads, ``to_out = Linear(D, D)``. Cost O(N M D + M^2 D).
    ``encoder`` may be shared between layers (pass an existing ``SliceEncoder``).
    """

    def __init__(
        self,
        dim: int,
        n_heads: int = 8,
        n_slices: int = 64,
        projection: str = "linear",
        encoder: SliceEncoder | None = None,
        dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__()
        self.encoder = encoder if encoder is not None else SliceEncoder(dim, n_heads, n_slices, projection, **kwargs)
        dh = self.encoder.head_dim
        self.scale = dh**-0.5
        self.to_q = nn.Linear(dh, dh, bias=False)
        self.to_k = nn.Linear(dh, dh, bias=False)
        self.to_v = nn.Linear(dh, dh, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, grid=None, mask: torch.Tensor | None = None) -> torch.Tensor:
        tokens, w = self.encoder(x, grid, mask)
        q, k, v = self.to_q(tokens), self.to_k(tokens), self.to_v(tokens)
        attn = self.dropout(torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1))
        return self.to_out(deslice(attn @ v, w))
