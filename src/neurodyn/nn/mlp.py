"""Pointwise (per grid point) MLPs on channels-last tensors, and activations by name.

``ChannelMLP`` maps ``(..., C_in) -> (..., C_out)`` with ``nn.Linear`` layers, i.e. it acts on the last axis
and is the same function at every grid point (a stack of 1x1 convolutions). FNO uses it for lifting and
projection. ``PointwiseConv`` is the channels-first counterpart (FNO's per-layer skip ``W``). ``FeedForward`` is
fourierflow's weight-normalised feed-forward (FFNO, ST-SSM).

A ``Linear -> act -> Linear`` MLP on a large grid is bound by memory traffic, not arithmetic: the hidden
layer (e.g. 128 channels on 8 x 85 x 85 points, 30 MB) is written, activated, read back and kept for the
backward pass. ``ChannelMLP`` therefore runs such MLPs through ``neurodyn.ops.fused_mlp``, which processes rows in
cache-sized tiles and recomputes the hidden tile in the backward pass instead of storing it; the plain
``nn.Sequential`` path (``mlp.fused = False``) is its reference. The fused path supports first-order
gradients only (no ``create_graph`` double backward); switch it off for that.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError, unknown_name
from ..ops.activations import tanh
from ..ops.fused_mlp import FUSABLE, fused_mlp

__all__ = ["ChannelMLP", "PointwiseConv", "FeedForward", "Tanh", "activation", "wn_linear", "ACTIVATIONS"]


class Tanh(nn.Module):
    """``nn.Tanh`` through :func:`neurodyn.ops.activations.tanh` (several times faster on CPU in float32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh(x)


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "gelu": nn.GELU,
    "relu": nn.ReLU,
    "tanh": Tanh,
    "silu": nn.SiLU,
    "elu": nn.ELU,
    "identity": nn.Identity,
}


def activation(name: str) -> nn.Module:
    """A fresh activation module by name (one of ``ACTIVATIONS``)."""
    if not isinstance(name, str):
        raise ConfigError(f"activation must be given by name (one of {', '.join(ACTIVATIONS)}); got {name!r}.")
    key = name.lower()
    if key not in ACTIVATIONS:
        raise unknown_name("activation", name, ACTIVATIONS)
    return ACTIVATIONS[key]()


_make_activation = activation  # ChannelMLP's argument named ``activation`` shadows the function


class PointwiseConv(nn.Module):
    """1x1 convolution on channels-first tensors: ``(B, C_in, *spatial) -> (B, C_out, *spatial)``.

    ``y[b, o, p] = sum_i W[o, i] x[b, i, p] + bias[o]`` at every grid point ``p``, computed as one batched
    GEMM over the flattened grid, for any number of spatial axes. Initialised like ``nn.Linear``.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__()
        lin = nn.Linear(in_channels, out_channels, bias=bias)
        self.weight = lin.weight
        self.bias = lin.bias
        self.in_channels = in_channels
        self.out_channels = out_channels

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, bias={self.bias is not None}"

    def forward(self, x: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
        """``W x + bias``, plus ``add`` (same shape as the output) fused into the GEMM if given."""
        b, c, *spatial = x.shape
        flat = x.reshape(b, c, -1)
        w = self.weight.expand(b, -1, -1)
        if add is not None:
            y = torch.baddbmm(add.reshape(b, self.out_channels, -1), w, flat)
            if self.bias is not None:
                y = y + self.bias[:, None]
        elif self.bias is not None:
            y = torch.baddbmm(self.bias[None, :, None], w, flat)
        else:
            y = torch.bmm(w, flat)
        return y.view(b, self.out_channels, *spatial)


class ChannelMLP(nn.Sequential):
    """``Linear -> act -> ... -> Linear`` over the last axis of a channels-last tensor.

    Args:
        in_channels, out_channels: sizes of the first input and last output.
        hidden_channels: width of each hidden layer: an int (one hidden layer; ``0`` means none, i.e. a
            single ``Linear``) or a sequence of ints (one hidden layer per entry).
        activation: name of the activation between layers (none after the last layer).

    Parameter count: ``sum_l (c_l * c_{l+1} + c_{l+1})`` over consecutive sizes
    ``c = (in, *hidden, out)``.
    """

    def __init__(
        self, in_channels: int, out_channels: int, hidden_channels: int | Sequence[int] = 0, activation: str = "gelu"
    ):
        if isinstance(hidden_channels, int):
            hidden = [hidden_channels] if hidden_channels > 0 else []
        else:
            hidden = [int(h) for h in hidden_channels]
        sizes = [int(in_channels), *hidden, int(out_channels)]
        if any(s < 1 for s in sizes):
            raise ConfigError(
                f"ChannelMLP sizes must be positive; got in={in_channels}, hidden={hidden_channels}, "
                f"out={out_channels}."
            )
        layers: list[nn.Module] = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(_make_activation(activation))
        super().__init__(*layers)
        self.in_channels = sizes[0]
        self.out_channels = sizes[-1]
        self.activation_name = str(activation).lower()
        # fused (tiled, recomputing) path for one hidden layer on large inputs; see the module docstring
        self.fused = len(hidden) == 1 and self.activation_name in FUSABLE

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused and x.numel() // max(x.shape[-1], 1) * self[0].out_features >= 1 << 20:
            first, last = self[0], self[-1]
            params = (first.weight, first.bias, last.weight, last.bias)
            kind = x.device.type
            if torch.is_autocast_enabled(kind):
                # the fused MLP's tiled matmuls write into slices (out=), which autocast does not cast: cast the
                # input and weights to the autocast dtype here, as autocast casts the plain path's nn.Linear layers
                dtype = torch.get_autocast_dtype(kind)
                with torch.autocast(kind, enabled=False):
                    return fused_mlp(x.to(dtype), *(p.to(dtype) for p in params), self.activation_name)
            return fused_mlp(x, *params, self.activation_name)
        return super().forward(x)


def wn_linear(in_features: int, out_features: int, weight_norm: bool = True) -> nn.Linear:
    """``nn.Linear``, weight-normalised (``W = g v / |v|`` per output row: ``out`` extra parameters) if asked."""
    lin = nn.Linear(in_features, out_features)
    if weight_norm:
        lin = nn.utils.parametrizations.weight_norm(lin)
    return lin


class FeedForward(nn.Sequential):
    """fourierflow's ``FeedForward``: ``Linear(H -> fH) -> act -> ... -> Linear(fH -> H)`` [+ LayerNorm(H)].

    ``n_layers`` linear maps (hidden width ``factor * dim``), ``act`` between them, optional weight norm
    and a final LayerNorm. At ``dim = 64, factor = 4, n_layers = 2`` with weight norm: 33,408 parameters.
    """

    def __init__(
        self,
        dim: int,
        factor: int = 4,
        n_layers: int = 2,
        weight_norm: bool = True,
        layer_norm: bool = False,
        act: str = "gelu",
    ):
        if n_layers < 1 or factor < 1:
            raise ConfigError(f"FeedForward needs n_layers >= 1 and factor >= 1; got {n_layers}, {factor}.")
        layers: list[nn.Module] = []
        for i in range(n_layers):
            a = dim if i == 0 else dim * factor
            b = dim if i == n_layers - 1 else dim * factor
            layers.append(wn_linear(a, b, weight_norm))
            if i < n_layers - 1:
                layers.append(activation(act))
        if layer_norm:
            layers.append(nn.LayerNorm(dim))
        super().__init__(*layers)
