"""Fourier-space convolution (the integral operator of the Fourier Neural Operator).

``SpectralConv`` computes, per sample and for channels-first input ``x: (B, C_in, n_1, ..., n_d)``,

    y = irfftn( R ⊙ rfftn(x) ),        (R x̂)(k)_o = sum_i R_{o i}(k) x̂_i(k),

where ``R(k)`` is a learned complex ``C_out x C_in`` matrix for every *kept* frequency ``k`` and zero for all
others (Li et al., "Fourier Neural Operator for Parametric PDEs", ICLR 2021). The transform pair is the
standard one (forward unnormalised, inverse divided by ``n_1 ... n_d``); any consistent pair gives the same
operator, so the weights mean the same thing at every resolution: the layer is resolution independent and
``y`` always has the spatial size of ``x``.

Which frequencies are kept (``modes = (m_1, ..., m_d)``, one entry per spatial axis):

* last axis (the half-spectrum axis of the real FFT): the ``m_d`` lowest non-negative frequencies
  ``0, 1, ..., m_d - 1``;
* every other axis ``j``: ``m_j`` non-negative **and** ``m_j`` negative frequencies,
  ``0, ..., m_j - 1`` and ``-m_j, ..., -1`` (the two "corners" ``weights1``/``weights2`` of Li et al.'s
  ``fourier_2d.py`` are the two halves of this axis).

So a 2D layer with ``modes=(12, 12)`` keeps ``24 x 12`` complex frequencies per (in, out) channel pair and
has ``2 * C_in * C_out * 24 * 12`` real parameters, exactly like Li et al.'s ``SpectralConv2d(.., 12, 12)``.
A grid can hold these modes when ``2 * m_j <= n_j`` (non-last axes) and ``m_d <= n_d // 2 + 1``; on a smaller
grid the layer keeps the modes it holds (``grid_modes``: the lowest frequencies, with their slice of the weight)
and says so once, as neuraloperator's layer does.

neuraloperator (>= 1.0) counts modes differently: its ``n_modes[j]`` is the *total* number kept along axis
``j`` (centred on zero), and along the last axis it keeps ``n_modes[-1] // 2 + 1``. The same frequency set as
ours is therefore ``n_modes = (2 * m_1, ..., 2 * m_{d-1}, 2 * m_d - 1)`` (or ``2 * m_d - 2``); see
``neuralop_n_modes``.

Implementation. With few kept modes, the transforms are cheaper as matrix products with truncated DFT
matrices than as FFTs followed by slicing (an FFT computes all ``n`` frequencies, then most are thrown
away, and the zero-filled full spectrum has to be built again for the inverse). ``method="dft"`` does:

1. last axis: one real GEMM ``(B*C*n_1..n_{d-1}, n_d) @ (n_d, 2*m_d)`` giving real and imaginary parts
   (the only step besides 4. that touches full-size data);
2. every other axis, on the already small data: ``[Re F; Im F] @ z`` (one batched real GEMM), whose four
   real products are then combined into the complex result;
3. channel mixing: one batched real GEMM over the kept modes, ``(M, 2B, C_in) @ (M, C_in, 2 C_out)``, with
   real and imaginary parts of the input stacked along the batch and those of the weight side by side (the
   weight is stored real, in exactly this layout, so nothing is rebuilt per call); an optional bias is
   added to the zero frequency here;
4. the inverses in reverse order: ``[Re G | Im G] @ [z; i z]`` on the other axes (the small side doubled,
   so the result comes out in the layout the last step needs), then one real GEMM back to full size.

All of it is real arithmetic on contiguous buffers, no large tensor is transposed, and autograd's backward
is again GEMMs. ``method="fft"``
computes the same operator with ``torch.fft`` (truncating axis by axis, so only the small spectra are ever
zero-filled); it is the better choice when many modes are kept. ``method="auto"`` picks per call by a
flop estimate. DFT matrices are built in float64 and cached per (size, modes, dtype, device).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError, check_choice
from ..ops.spectral import dft_axis, dft_stack, idft_axis, idft_side, irdft_matrix, rdft_matrix

__all__ = ["SpectralConv", "neuralop_n_modes", "resolve_modes", "grid_modes", "clamp_modes"]


def neuralop_n_modes(modes: Sequence[int]) -> tuple[int, ...]:
    """neuraloperator's ``n_modes`` that keeps the same frequencies as our ``modes`` (see module doc)."""
    modes = tuple(int(m) for m in modes)
    return tuple(2 * m for m in modes[:-1]) + (2 * modes[-1] - 1,)


def resolve_modes(name: str, modes, grid_size) -> tuple[int, ...]:
    """Modes per axis with ``0`` replaced by ``grid_size[a] // 2`` (all modes, the ST-SSM paper's setting; FFNO,
    FNO-2D-time). ``name`` is the model named in the ConfigError for a malformed ``modes``."""
    if isinstance(modes, int):
        raise ConfigError(
            f"{name} modes must be a tuple with one entry per spatial axis, e.g. (0,) or (32, 32); got {modes!r}."
        )
    modes = tuple(int(m) for m in modes)
    if len(modes) not in (1, 2):
        raise ConfigError(f"{name} supports 1 or 2 spatial axes (len(modes) in (1, 2)); got modes={modes}.")
    if any(m < 0 for m in modes):
        raise ConfigError(f"{name} modes must be >= 0 (0 = all, from grid_size); got {modes}.")
    if any(m == 0 for m in modes):
        grid = tuple(int(g) for g in (grid_size or ()))
        if len(grid) != len(modes) or any(g < 2 for g in grid):
            raise ConfigError(
                f"{name} modes={modes} asks for all modes (0) but grid_size={grid_size!r} does not "
                f"give one size >= 2 per axis; set grid_size (e.g. grid_size=[64]) or the modes."
            )
        modes = tuple(g // 2 if m == 0 else m for m, g in zip(modes, grid))
    return modes


def grid_modes(modes: Sequence[int], grid: Sequence[int], half_axes: Sequence[bool] | None = None) -> tuple[int, ...]:
    """The modes a grid holds: per axis ``min(m, n // 2)`` where both signs are kept (non-last axes of one
    ``SpectralConv``: ``2 m <= n``) and ``min(m, n // 2 + 1)`` on a half-spectrum axis (the real FFT's last axis:
    ``m <= n // 2 + 1``). ``half_axes`` marks the half-spectrum axes (default: the last one only)."""
    modes, grid = tuple(int(m) for m in modes), tuple(int(n) for n in grid)
    half = tuple(half_axes) if half_axes is not None else (False,) * (len(modes) - 1) + (True,)
    return tuple(min(m, n // 2 + 1 if h else n // 2) for m, n, h in zip(modes, grid, half))


_SAID: set = set()


def clamp_modes(
    name: str, modes: Sequence[int], grid: Sequence[int] | None, half_axes: Sequence[bool] | None = None
) -> tuple[int, ...]:
    """``modes`` cut to what ``grid`` holds (:func:`grid_modes`), with one warning line when that changes them (as
    neuraloperator does on a grid smaller than its modes); ``modes`` as they are when ``grid`` is empty (unknown)."""
    modes = tuple(int(m) for m in modes)
    if not grid:
        return modes
    if len(tuple(grid)) != len(modes):
        raise ConfigError(f"{name} grid_size {tuple(grid)} needs one size per axis of modes={modes}.")
    kept = grid_modes(modes, grid, half_axes)
    if min(kept) < 1:
        raise ConfigError(
            f"{name}: a grid of size {tuple(grid)} holds no Fourier mode on some axis; give at least 2 points per axis."
        )
    said = (name, modes, tuple(int(n) for n in grid), kept)
    if kept != modes and said not in _SAID:  # once per process: a run builds its model more than once
        _SAID.add(said)
        warnings.warn(
            f"{name}: modes={modes} do not fit the {tuple(int(n) for n in grid)} grid; using modes={kept} "
            "(what the grid holds: n // 2 per axis, n // 2 + 1 on the real FFT's axis)",
            UserWarning,
            stacklevel=3,
        )
    return kept


class SpectralConv(nn.Module):
    """Fourier integral operator on a regular grid, channels-first: ``(B, C_in, *spatial) -> (B, C_out, *spatial)``.

    Args:
        in_channels, out_channels: channel counts.
        modes: kept modes per spatial axis (1, 2 or 3 axes), meaning as in the module docstring: the last
            axis keeps frequencies ``0..m-1``, every other axis ``0..m-1`` and ``-m..-1``.
        method: ``"dft"`` (truncated DFT matrices and GEMMs), ``"fft"`` (torch.fft) or ``"auto"``.
        bias: add a learned constant per output channel (in the DFT path it is added to the zero frequency
            of the small spectrum, which costs nothing at full resolution).

    Parameters: ``weight`` of shape ``(M, C_in, 2, C_out)``, ``M = prod(kept modes)`` ordered axis by axis
    (frequencies ``0..m-1, -m..-1`` on non-last axes), holding real and imaginary parts (``[:, :, 0]`` and
    ``[:, :, 1]``); ``complex_weight()`` returns it as a complex ``(C_in, C_out, *kept)`` tensor; optional
    ``bias (C_out,)``. Initialisation: real and imaginary parts independent
    ``N(0, 1 / (C_in + C_out))``, so that the per-mode gain is about one; the bias like ``nn.Linear``'s.
    """

    def __init__(
        self, in_channels: int, out_channels: int, modes: Sequence[int] | int, method: str = "auto", bias: bool = False
    ):
        super().__init__()
        if isinstance(modes, int):
            modes = (modes,)
        modes = tuple(int(m) for m in modes)
        if not 1 <= len(modes) <= 3:
            raise ConfigError(f"SpectralConv supports 1 to 3 spatial axes; got modes={modes}.")
        if any(m < 1 for m in modes):
            raise ConfigError(f"SpectralConv modes must be positive integers; got modes={modes}.")
        if in_channels < 1 or out_channels < 1:
            raise ConfigError(f"SpectralConv channels must be positive; got in={in_channels}, out={out_channels}.")
        check_choice("SpectralConv method", method, ("auto", "dft", "fft"))
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.modes = modes
        self.method = method
        self.kept_shape = tuple(2 * m for m in modes[:-1]) + (modes[-1],)
        n_kept = math.prod(self.kept_shape)
        self.weight = nn.Parameter(torch.empty(n_kept, in_channels, 2, out_channels))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, 0.0, (1.0 / (self.in_channels + self.out_channels)) ** 0.5)
        if self.bias is not None:  # like nn.Linear's bias
            bound = 1.0 / self.in_channels**0.5
            nn.init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, modes={self.modes}, method={self.method!r}, "
            f"bias={self.bias is not None}"
        )

    def complex_weight(self) -> torch.Tensor:
        """The weight as complex ``(C_in, C_out, *kept_shape)`` (a differentiable view-based copy)."""
        w = torch.complex(self.weight[:, :, 0], self.weight[:, :, 1])  # (M, Ci, Co)
        return w.permute(1, 2, 0).reshape(self.in_channels, self.out_channels, *self.kept_shape)

    # -- checks ---------------------------------------------------------------------------------------
    def check_input(self, x: torch.Tensor) -> None:
        d = len(self.modes)
        if x.dim() != d + 2 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"SpectralConv input x has shape {tuple(x.shape)}; expected (batch, {self.in_channels}, "
                f"{', '.join(['n'] * d)}) (channels-first, {d} spatial axes)."
            )
        spatial = x.shape[2:]
        if min(grid_modes(self.modes, spatial)) < 1:
            raise ValueError(
                f"SpectralConv input x has spatial size {tuple(spatial)}: a grid holds no Fourier mode "
                "along an axis of fewer than 2 points (but the last); give at least 2 points per axis."
            )

    def _spectrum(self, spatial: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...], torch.Tensor]:
        """The kept modes, their shape and the weight for a grid of size ``spatial``: all of them, or, on a grid
        smaller than the modes, those it holds (:func:`grid_modes`: the lowest frequencies of each axis, both signs
        on the non-last axes) with their slice of the weight, said once (as neuraloperator does)."""
        modes = clamp_modes("SpectralConv", self.modes, tuple(spatial))
        if modes == self.modes:
            return self.modes, self.kept_shape, self.weight
        d = len(modes)
        w = self.weight.view(*self.kept_shape, self.in_channels, 2, self.out_channels)
        for j in range(d - 1):  # frequencies 0..m'-1 and -m'..-1 of the layout 0..m-1, -m..-1
            m, k = self.modes[j], modes[j]
            w = torch.cat([w.narrow(j, 0, k), w.narrow(j, 2 * m - k, k)], dim=j)
        w = w.narrow(d - 1, 0, modes[-1])
        kept = tuple(2 * m for m in modes[:-1]) + (modes[-1],)
        return modes, kept, w.reshape(math.prod(kept), self.in_channels, 2, self.out_channels)

    def _use_dft(self, spatial: Sequence[int], modes: Sequence[int], kept: Sequence[int]) -> bool:
        if self.method != "auto":
            return self.method == "dft"
        # Multiply-adds per (batch, channel) slice of the forward transform: the full-size GEMM of the last
        # axis, then the complex GEMMs of the other axes on the already reduced data; against an FFT of the
        # full grid, ~2.5 n log2 n flops but (with MKL on CPU, measured) ~8x slower per flop than GEMMs.
        # The crossover is ~2*m_d = n_d/4 in 1D (n=1024: m=128) and beyond 2*m = n/2 in 2D.
        d = len(spatial)
        numel = math.prod(spatial)
        dft = numel * 2 * modes[-1]
        for j in range(d - 1):
            rest = math.prod(kept[:j]) * math.prod(spatial[j + 1 : d - 1]) * 2 * modes[-1]
            dft += 4 * modes[j] * spatial[j] * rest
        fft = 8 * 2.5 * numel * math.log2(max(numel, 2))
        return dft <= fft

    # -- forward --------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.check_input(x)
        modes, kept, weight = self._spectrum(x.shape[2:])
        if self._use_dft(x.shape[2:], modes, kept):
            return self._forward_dft(x, modes, kept, weight)
        return self._forward_fft(x, modes, kept, weight)

    def _mix(
        self, t: torch.Tensor, batch: int, weight: torch.Tensor, dc_bias: float = 0.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``t: (M, 2B, C_in)`` (real parts of the batch, then imaginary) -> real, imag ``(M, B, C_out)``.

        With a bias, ``dc_bias * bias`` is added to the real part of mode 0 (the zero frequency), which the
        inverse transform turns into the constant ``bias`` when ``dc_bias`` is the grid's point count.
        """
        m_tot = t.shape[0]
        co = self.out_channels
        p = torch.bmm(t, weight.view(m_tot, self.in_channels, 2 * co)).view(m_tot, 2, batch, 2, co)
        (rr, ri), (ir, ii) = (o.unbind(2) for o in p.unbind(1))
        real, imag = rr - ii, ri + ir
        if self.bias is not None and dc_bias:
            real = torch.cat([real[:1] + dc_bias * self.bias, real[1:]], dim=0)
        return real, imag

    def _forward_dft(self, x: torch.Tensor, modes, kept, weight) -> torch.Tensor:
        b, ci = x.shape[:2]
        co = self.out_channels
        spatial = tuple(x.shape[2:])
        d = len(spatial)
        m_last, n_last = modes[-1], spatial[-1]
        dt, dev = x.dtype, x.device
        # 1. last axis: real DFT by one GEMM -> (B, C, n_1..n_{d-1}, 2, m_d)
        t = x.reshape(-1, n_last) @ rdft_matrix(n_last, m_last, dt, dev)
        # 2. other axes: complex DFT (small data from here on), layout (P, n_j, Q, 2, m_d)
        for j in range(d - 1):
            p = b * ci * math.prod(kept[:j])
            q = math.prod(spatial[j + 1 : d - 1])
            t = dft_axis(t.view(p, spatial[j], q, 2, m_last), dft_stack(spatial[j], modes[j], dt, dev), p)
        # 3. channel mixing per kept mode: (B, C, K.., 2, m_d) -> (M, 2B, C) -> bmm -> (B, C_out, K.., 2, m_d)
        t = t.view(b, ci, *kept[:-1], 2, m_last).permute(*range(2, d + 1), d + 2, d + 1, 0, 1)
        real, imag = self._mix(t.reshape(-1, 2 * b, ci), b, weight, dc_bias=float(math.prod(spatial)))
        t = torch.stack([real, imag], dim=1).view(*kept, 2, b, co)
        t = t.permute(d + 1, d + 2, *range(d - 1), d, d - 1).contiguous()
        # 4. inverse on the other axes, then the last axis by one GEMM back to full size
        for j in range(d - 1):
            p = b * co * math.prod(spatial[:j])
            q = math.prod(kept[j + 1 : d - 1])
            t = idft_axis(t.view(p, kept[j], q, 2, m_last), idft_side(spatial[j], modes[j], dt, dev), p)
        y = t.reshape(-1, 2 * m_last) @ irdft_matrix(n_last, m_last, dt, dev)
        return y.view(b, co, *spatial)

    def _forward_fft(self, x: torch.Tensor, modes, kept, weight) -> torch.Tensor:
        b, ci = x.shape[:2]
        spatial = tuple(x.shape[2:])
        d = len(spatial)
        xf = torch.fft.rfft(x, dim=-1)[..., : modes[-1]]
        for j in range(d - 1):
            n, m = spatial[j], modes[j]
            xf = torch.fft.fft(xf, dim=2 + j)
            xf = torch.cat([xf.narrow(2 + j, 0, m), xf.narrow(2 + j, n - m, m)], dim=2 + j)
        # (B, C, *kept) complex -> (M, 2B, C)
        t = torch.view_as_real(xf).movedim(-1, 0).reshape(2, b, ci, -1).permute(3, 0, 1, 2).reshape(-1, 2 * b, ci)
        real, imag = self._mix(t, b, weight)  # (M, B, Co) each
        out = torch.complex(real, imag).permute(1, 2, 0).reshape(b, self.out_channels, *kept)
        for j in range(d - 1):
            n, m = spatial[j], modes[j]
            zshape = list(out.shape)
            zshape[2 + j] = n - 2 * m
            z = out.new_zeros(zshape)
            out = torch.cat([out.narrow(2 + j, 0, m), z, out.narrow(2 + j, m, m)], dim=2 + j)
            out = torch.fft.ifft(out, dim=2 + j)
        y = torch.fft.irfft(out, n=spatial[-1], dim=-1)
        if self.bias is not None:
            y = y + self.bias.view(-1, *([1] * d))
        return y
