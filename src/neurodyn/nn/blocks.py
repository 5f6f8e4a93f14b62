"""Pre-norm residual token block with a channel MLP (the Transformer / Transolver / LaMO layer).

For tokens ``h: (B, *tokens, D)`` and a token mixer ``mix`` (attention, physics attention, latent SSM)::

    h = h + mix( LayerNorm_1(h) )                 # LaMO Eq. 11
    h = h + MLP( LayerNorm_2(h) )                 # LaMO Eq. 12: channel mixing, D -> r D -> D, GELU

``mix`` receives the normalised tokens and any extra keyword arguments given to ``forward`` (e.g. the
index grid of a structured mesh). With ``out_channels`` the block also holds the final projection of the
model, ``Linear(LayerNorm_3(h))`` (Transolver's and LaMO's last layer; the operator's ``Q``).
"""

from __future__ import annotations

from torch import nn

from .mlp import ChannelMLP

__all__ = ["ResidualBlock"]


class ResidualBlock(nn.Module):
    """``h + mix(LN(h))`` then ``h + MLP(LN(h))``; see the module docstring.

    Args:
        dim: channels D.
        mixer: token-mixing module called as ``mixer(LN_1(h), **kwargs)``, returning the shape of ``h``.
        mlp_ratio: hidden width of the MLP as a multiple of D (0 disables the MLP branch).
        act: MLP activation name (``neurodyn.nn.mlp.ACTIVATIONS``).
        out_channels: if > 0, ``forward`` returns ``Linear(LN_3(h))`` with that many channels.
    """

    def __init__(self, dim: int, mixer: nn.Module, mlp_ratio: float = 4.0, act: str = "gelu", out_channels: int = 0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.mixer = mixer
        hidden = int(round(dim * mlp_ratio))
        self.ln_2 = nn.LayerNorm(dim) if hidden > 0 else None
        self.mlp = ChannelMLP(dim, dim, hidden, act) if hidden > 0 else None
        if out_channels > 0:
            self.ln_3 = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, out_channels)
        else:
            self.ln_3 = self.head = None

    def forward(self, h, **kwargs):
        h = h + self.mixer(self.ln_1(h), **kwargs)
        if self.mlp is not None:
            h = h + self.mlp(self.ln_2(h))
        if self.head is not None:
            return self.head(self.ln_3(h))
        return h
