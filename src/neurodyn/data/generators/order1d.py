"""CHONN's order-defined 1-D operator family (Methods, Eqs. 39-43): learn x -> y with

    (I - tau^2 d_ss)^n y = x      on the periodic domain s in [0, 1),
    y_hat(k) = H_n(k) x_hat(k),   H_n(k) = (1 + tau^2 k^2)^(-n),

tau = 0.08, 256 points, n = 1..4 (targets T1-T4). The target is computed exactly in Fourier space from
the sampled input (rfft, multiply, irfft): y is the exact solution of the equation for the periodic
trigonometric interpolant of x, with no solver error.

Wavenumber (a choice; the paper only writes k): on [0, 1) the Fourier mode exp(2 pi i m s) has angular
wavenumber k = 2 pi m, so ``wavenumber="angular"`` (default, faithful to Eq. 40) uses k = 2 pi m. With
tau = 0.08 that is strongly smoothing (H_1 = 0.80, 0.14, 0.038 at m = 1, 5, 10). ``wavenumber="index"``
uses k = m (the milder reading in which Eq. 40 would not hold on [0, 1)).

Input mixture (the paper: "low-frequency components, broadband oscillatory components and localized
Gaussian pulses"; amplitudes and ranges are not given, we take the implementation notes' suggestion):

    x(s) = sum_{m=1}^{low_modes} (A_m cos 2 pi m s + B_m sin 2 pi m s),           A, B ~ N(0, low_amplitude^2)
         + sum_{m=low_modes+1}^{broadband_max_mode} m^(-broadband_decay) (C_m cos + D_m sin)(2 pi m s),
                                                                                 C, D ~ N(0, broadband_amplitude^2)
         + sum_{p=1}^{P} G_p exp(-d(s, s_p)^2 / (2 w_p^2)),  P ~ U{pulses_min..pulses_max},
                                                             G_p ~ U(-pulse_amplitude, pulse_amplitude),
                                                             s_p ~ U[0, 1), w_p ~ U(pulse_width_min, pulse_width_max)

defaults 4 / 1.0, 32 / 0.5 / 1.0, 1..3 / 2.0 / (0.005, 0.03). d is the periodic distance; each pulse is
summed over its three nearest periodic images, so it is periodic to < 1e-8 for widths up to 0.25.
No mean (m = 0) term is drawn; the pulses carry a mean. ``mixture_params`` draws the random numbers (on
CPU, from the sample's own generator, always the same count and order per sample) and
``evaluate_mixture`` evaluates x at any points, so tests can rebuild x on a finer grid.

Splits (the paper: 12000 / 2000 / 2000 generated with independent seeds 42 / 43 / 44). Our store makes
one file per (config, seed). With ``split_sizes=(12000, 2000, 2000)`` and ``split_seeds=(42, 43, 44)``
one file holds all three splits: sample i of split k is drawn from ``sample_rng(split_seeds[k], i_local)``
exactly as sample i_local of a file generated alone with seed split_seeds[k]; the run's own ``seed``
is then not used, and the file must hold exactly sum(split_sizes) samples (checked before any work).
The first split_sizes[0] samples are train, the next split_sizes[1] validation, the last split_sizes[2]
test, which is what ``split_indices(n, n_train, n_test, n_val)`` selects. Without split_sizes, sample i
comes from ``sample_rng(seed, i)`` as in every other generator (so three separate files with seeds 42,
43, 44 give the same samples as the combined file).

The input x does not depend on ``order`` or ``tau``: the T1..T4 datasets of one seed share their inputs.

Stored per sample: ``fields/x`` (N, 1) input, ``fields/y`` (N, 1) target; ``coords/s`` = m / N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...errors import ConfigError
from .base import Generator, as_numpy, register_generator, sample_rng


@dataclass
class Order1DConfig:
    resolution: int = 256
    tau: float = 0.08
    order: int = 1  # n in (I - tau^2 d_ss)^n y = x; 1..8
    wavenumber: str = "angular"  # angular (k = 2 pi m) | index (k = m)
    low_modes: int = 4
    low_amplitude: float = 1.0
    broadband_max_mode: int = 32
    broadband_amplitude: float = 0.5
    broadband_decay: float = 1.0
    pulses_min: int = 1
    pulses_max: int = 3
    pulse_amplitude: float = 2.0
    pulse_width_min: float = 0.005
    pulse_width_max: float = 0.03
    split_sizes: tuple = ()  # e.g. (12000, 2000, 2000): one file, one seed per split
    split_seeds: tuple = ()  # e.g. (42, 43, 44)


MAX_ORDER = 8


def transfer(
    n: int, tau: float, resolution: int, wavenumber: str = "angular", dtype=torch.float64, device=None
) -> torch.Tensor:
    """H_n on the rfft bins m = 0..N/2: (1 + tau^2 k^2)^(-n), k = 2 pi m (angular) or m (index)."""
    m = torch.arange(resolution // 2 + 1, dtype=dtype, device=device)
    k = 2 * math.pi * m if wavenumber == "angular" else m
    return (1.0 + tau**2 * k**2) ** (-n)


def apply_order_operator(x: torch.Tensor, n: int, tau: float, wavenumber: str = "angular") -> torch.Tensor:
    """y = (I - tau^2 d_ss)^(-n) x for periodic samples x (..., N) on [0, 1), exactly in Fourier space."""
    N = x.shape[-1]
    return torch.fft.irfft(torch.fft.rfft(x) * transfer(n, tau, N, wavenumber, x.dtype, x.device), n=N)


def mixture_params(cfg: Order1DConfig, rng: torch.Generator) -> dict[str, torch.Tensor]:
    """The random numbers of one input signal (float64, CPU). Always draws the maximal number of pulses
    (unused ones get amplitude 0) so the stream layout does not depend on the drawn count."""
    n_low = cfg.low_modes
    n_bb = max(cfg.broadband_max_mode - cfg.low_modes, 0)
    low = torch.randn(2, n_low, generator=rng, dtype=torch.float64) * cfg.low_amplitude
    bb = torch.randn(2, n_bb, generator=rng, dtype=torch.float64) * cfg.broadband_amplitude
    count = int(torch.randint(cfg.pulses_min, cfg.pulses_max + 1, (1,), generator=rng))
    u = torch.rand(3, cfg.pulses_max, generator=rng, dtype=torch.float64)
    amp = (2 * u[0] - 1) * cfg.pulse_amplitude
    amp[count:] = 0.0
    return {
        "low": low,
        "broadband": bb,
        "pulse_amp": amp,
        "pulse_pos": u[1],
        "pulse_width": cfg.pulse_width_min + (cfg.pulse_width_max - cfg.pulse_width_min) * u[2],
    }


def evaluate_mixture(cfg: Order1DConfig, p: dict[str, torch.Tensor], s: torch.Tensor) -> torch.Tensor:
    """x(s) of the mixture with parameters ``p`` (as from mixture_params, possibly stacked to (B, ...))
    at points ``s`` (L,); returns (B, L) (or (L,) for unstacked parameters)."""
    batched = p["low"].dim() == 3
    if not batched:
        p = {k: v[None] for k, v in p.items()}
    s = s.to(p["low"].dtype)
    out = torch.zeros(p["low"].shape[0], s.shape[0], dtype=s.dtype, device=s.device)
    if cfg.low_modes > 0:
        m = torch.arange(1, cfg.low_modes + 1, dtype=s.dtype, device=s.device)
        ph = 2 * math.pi * m[:, None] * s[None, :]
        out = out + p["low"][:, 0] @ torch.cos(ph) + p["low"][:, 1] @ torch.sin(ph)
    if p["broadband"].shape[-1] > 0:
        m = torch.arange(cfg.low_modes + 1, cfg.broadband_max_mode + 1, dtype=s.dtype, device=s.device)
        ph = 2 * math.pi * m[:, None] * s[None, :]
        w = m ** (-cfg.broadband_decay)
        out = out + (p["broadband"][:, 0] * w) @ torch.cos(ph) + (p["broadband"][:, 1] * w) @ torch.sin(ph)
    d = torch.remainder(s[None, None, :] - p["pulse_pos"][:, :, None] + 0.5, 1.0) - 0.5  # (B, P, L) in [-0.5, 0.5)
    w2 = 2 * p["pulse_width"][:, :, None] ** 2
    bumps = sum(torch.exp(-((d + shift) ** 2) / w2) for shift in (-1.0, 0.0, 1.0))
    out = out + (p["pulse_amp"][:, :, None] * bumps).sum(1)
    return out if batched else out[0]


@register_generator
class Order1DGenerator(Generator, name="order1d", config=Order1DConfig, inputs=("x",), targets=("y",), chunk_size=1000):
    def validate(self, cfg: Order1DConfig) -> None:
        if not (isinstance(cfg.order, int) and 1 <= cfg.order <= MAX_ORDER):
            raise ConfigError(f"order1d order must be an integer in 1..{MAX_ORDER}, got {cfg.order!r}")
        if not (math.isfinite(cfg.tau) and cfg.tau > 0):
            raise ConfigError(f"order1d tau must be > 0, got {cfg.tau}")
        if cfg.wavenumber not in ("angular", "index"):
            raise ConfigError(f"order1d wavenumber must be 'angular' or 'index', got {cfg.wavenumber!r}")
        if cfg.resolution < 8:
            raise ConfigError(f"order1d resolution must be >= 8, got {cfg.resolution}")
        if cfg.low_modes < 0 or cfg.broadband_max_mode < 0:
            raise ConfigError(
                f"order1d low_modes and broadband_max_mode must be >= 0, got {cfg.low_modes} and "
                f"{cfg.broadband_max_mode}"
            )
        top = max(cfg.low_modes, cfg.broadband_max_mode)
        if top >= cfg.resolution // 2:
            raise ConfigError(
                f"order1d mode {top} is not resolved on {cfg.resolution} points: expected "
                f"low_modes and broadband_max_mode < resolution/2 = {cfg.resolution // 2}"
            )
        if not 0 <= cfg.pulses_min <= cfg.pulses_max:
            raise ConfigError(f"order1d needs 0 <= pulses_min <= pulses_max, got {cfg.pulses_min} and {cfg.pulses_max}")
        if not 0 < cfg.pulse_width_min <= cfg.pulse_width_max <= 0.25:
            raise ConfigError(
                f"order1d pulse widths must satisfy 0 < pulse_width_min <= pulse_width_max <= 0.25, "
                f"got {cfg.pulse_width_min} and {cfg.pulse_width_max}"
            )
        for f in ("low_amplitude", "broadband_amplitude", "pulse_amplitude"):
            if not getattr(cfg, f) >= 0:
                raise ConfigError(f"order1d {f} must be >= 0, got {getattr(cfg, f)}")
        if len(cfg.split_sizes) != len(cfg.split_seeds):
            raise ConfigError(
                f"order1d split_sizes {list(cfg.split_sizes)} and split_seeds {list(cfg.split_seeds)} "
                "must have the same length (one seed per split)"
            )
        if any(int(n) < 1 for n in cfg.split_sizes) or any(int(s) < 0 for s in cfg.split_seeds):
            raise ConfigError(
                f"order1d split_sizes must be >= 1 and split_seeds >= 0, got {list(cfg.split_sizes)} "
                f"and {list(cfg.split_seeds)}"
            )
        if len(set(cfg.split_seeds)) != len(cfg.split_seeds):
            raise ConfigError(
                f"order1d split_seeds {list(cfg.split_seeds)} repeat a seed: the splits would share samples"
            )

    def run(self, cfg: Order1DConfig, n_samples: int, seed: int = 0, path: str | Path | None = None, **kw):
        if cfg.split_sizes and n_samples != sum(cfg.split_sizes):
            raise ConfigError(
                f"order1d with split_sizes {list(cfg.split_sizes)} makes exactly {sum(cfg.split_sizes)} "
                f"samples, got n_samples={n_samples}"
            )
        return super().run(cfg, n_samples, seed=seed, path=path, **kw)

    def tag(self, cfg: Order1DConfig) -> str:
        return f"n{cfg.order}_r{cfg.resolution}"

    def coords(self, cfg: Order1DConfig) -> dict[str, np.ndarray]:
        return {"s": np.arange(cfg.resolution) / cfg.resolution}

    def sample_stream(self, cfg: Order1DConfig, index: int, seed: int) -> tuple[int, int]:
        """(seed, index) of the generator stream that sample ``index`` of the file draws from."""
        if not cfg.split_sizes:
            return seed, index
        lo = 0
        for size, s in zip(cfg.split_sizes, cfg.split_seeds):
            if index < lo + size:
                return int(s), index - lo
            lo += size
        raise ConfigError(
            f"order1d sample {index} is beyond split_sizes {list(cfg.split_sizes)} (total {sum(cfg.split_sizes)})"
        )

    def params(self, cfg: Order1DConfig, ids, seed: int) -> dict[str, torch.Tensor]:
        ps = [mixture_params(cfg, sample_rng(*self.sample_stream(cfg, int(i), seed))) for i in ids]
        return {k: torch.stack([p[k] for p in ps]) for k in ps[0]}

    def generate(self, cfg: Order1DConfig, ids, seed, device):
        device = torch.device(device)
        p = {k: v.to(device) for k, v in self.params(cfg, ids, seed).items()}
        s = torch.arange(cfg.resolution, dtype=torch.float64, device=device) / cfg.resolution
        x = evaluate_mixture(cfg, p, s)
        y = apply_order_operator(x, cfg.order, cfg.tau, cfg.wavenumber)
        return {"fields/x": as_numpy(x)[..., None], "fields/y": as_numpy(y)[..., None]}
