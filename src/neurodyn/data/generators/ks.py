"""1-D Kuramoto-Sivashinsky, the ST-SSM / MemNO benchmark (Buitrago et al.'s fork of Brandstetter et al.'s LPSDA).

Equation (ST-SSM paper eq. 6 = LPSDA's ``KS`` with its ``viscosity`` parameter on the fourth derivative)::

    u_t + u u_x + u_xx + nu u_xxxx = 0,   x in [0, L) periodic, L = 64,

with nu in {0.075, 0.1, 0.125}. In Fourier space, with q = 2 pi k / L::

    v_t = (q^2 - nu q^4) v - (i q / 2) FFT(u^2).

Discretisation: pseudo-spectral on the grid x_j = j L / N (LPSDA's ``linspace(0, (1 - 1/N) L, N)``),
N = ``solve_resolution`` (default 512), with the 2/3 rule on the nonlinear term (modes k > (N-1)//3
of FFT(u^2) are zeroed; ``dealias=False`` keeps them, as LPSDA's un-dealiased right-hand side does;
at N = 512, t <= 2.5 the two differ by 4e-6 relative at nu = 0.075 and 8e-9 at nu = 0.125).
The derivative of the Nyquist mode is set to zero. Time stepping: ETDRK4 (Cox-Matthews in the
Kassam-Trefethen form), its coefficients

    Q = h mean((e^{z/2} - 1)/z),  f1 = h mean((-4 - z + e^z (4 - 3z + z^2))/z^3),
    f2 = h mean((2 + z + e^z (z - 2))/z^3),  f3 = h mean((-4 - 3z - z^2 + e^z (4 - z))/z^3)

evaluated by the contour integral (mean over M = 32 points z = h lambda + e^{2 pi i (m - 1/2)/M} of
a unit circle around each h lambda) in complex128. The fixed internal step ``dt`` must divide the
frame interval; the state is float64 / complex128 throughout. LPSDA itself integrates with
``solve_ivp(Radau, rtol=atol=1e-9)``. At the default dt = 1e-3 ETDRK4 is within 3e-8 (relative L2) of
its dt -> 0 limit at N = 512 for nu = 0.075, the stiffest case, and agrees with a Radau solve
(rtol 1e-10) to 1e-10 on the test problem: below the float32 storage precision.

Frames: ``n_frames`` equispaced times on [0, t_final], t = 0 included (paper: 26 frames on [0, 2.5],
dt = 0.1; LPSDA's README makes 51 frames on [0, 5], the paper keeps the first 26).

Initial conditions, u0(x) = sum_{i=1}^{n_waves} A_i sin(2 pi k_i x / L + phi_i), A_i ~ U[-0.5, 0.5],
phi_i ~ U[0, 2 pi):

- ``init="stssm"`` (default), the ST-SSM paper's App. F.2: 21 waves (i = 0..20), k_i ~ U{1..8};
- ``init="lpsda"``, the LPSDA code as the paper ran it (``N = 10`` waves,
  ``np.random.randint(1, lmax=8)`` so k_i ~ U{1..7}).

``n_waves`` / ``k_max`` override the recipe's values when > 0.

``nu`` is one number or a list: with a list, sample i uses ``nu[i % len(nu)]`` (a mixed-viscosity
dataset with balanced counts). Stored per sample: ``fields/u`` (n_frames, resolution, 1), the solve
grid subsampled every ``solve_resolution // resolution``-th point (the ST-SSM paper's 512 -> 128/64/32),
``params/nu`` (n,); ``coords/t`` (n_frames,), ``coords/x`` (resolution,).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...errors import ConfigError, DataError
from .base import Generator, as_numpy, register_generator, sample_rng, single_threaded_on_cpu

INITS = {"stssm": (21, 8), "lpsda": (10, 7)}  # init -> (number of waves, largest wavenumber)
AMPLITUDE = 0.5  # A_i ~ U[-AMPLITUDE, AMPLITUDE]
CONTOUR_POINTS = 32
DT_MAX = 0.02
"""Largest internal step accepted. ETDRK4 stays stable on these problems even at dt = 0.1, but its
error grows as dt^4: relative to dt = 5e-4 at nu = 0.075 it is 3e-8 at dt = 1e-3, 1.3e-4 at 0.01,
1e-3 at 0.02 and 1e-2 at 0.05, so larger steps are refused rather than silently degrading the data."""
RESOLVE = 2.5
"""The dealiased cut-off wavenumber must reach RESOLVE / sqrt(nu) (2.5 times the neutral wavenumber,
where the linear damping nu q^4 - q^2 is ~33/nu). Measured against a 1024-point solve (L = 64, the
default initial conditions), the grids this admits are accurate to ~1e-3 relative or better (nu = 0.075:
N = 384 -> 2e-4, 512 -> 5e-6; nu = 0.125: N = 256 -> 6e-4); the refused N = 256 at nu = 0.075 errs by 2e-2."""
BLOCK_MODES = 8192
"""Samples are integrated in blocks of about this many Fourier modes (31 at N = 512), which keeps the
working arrays in cache. Results do not depend on the blocking beyond FFT round-off."""


@dataclass
class KSConfig:
    resolution: int = 512  # stored points
    solve_resolution: int = 0  # points the PDE is solved on (0: = resolution); a multiple of resolution
    length: float = 64.0  # L, the period
    nu: Any = 0.1  # > 0; or a list of values, sample i uses nu[i % len(nu)]
    t_final: float = 2.5  # last stored time
    n_frames: int = 26  # stored frames, equispaced on [0, t_final], t = 0 included
    dt: float = 0.001  # ETDRK4 step; must divide t_final / (n_frames - 1)
    init: str = "stssm"  # stssm (21 waves, k <= 8) | lpsda (10 waves, k <= 7)
    n_waves: int = 0  # 0: the recipe's
    k_max: int = 0  # 0: the recipe's
    dealias: bool = True  # 2/3 rule on u^2


def nu_values(cfg: KSConfig) -> tuple[float, ...]:
    return tuple(cfg.nu) if isinstance(cfg.nu, (list, tuple)) else (cfg.nu,)


def wavenumbers(n: int, length: float) -> torch.Tensor:
    """q_k = 2 pi k / L for the rfft modes k = 0..n/2 (float64)."""
    return 2 * math.pi / length * torch.arange(n // 2 + 1, dtype=torch.float64)


def ks_linear(n: int, length: float, nu: float) -> torch.Tensor:
    """Symbol of the linear part, q^2 - nu q^4, on the rfft modes (float64, (n//2 + 1,))."""
    q = wavenumbers(n, length)
    return q**2 - nu * q**4


def ks_nonlinear_symbol(n: int, length: float, dealias: bool = True) -> torch.Tensor:
    """-i q / 2 on the rfft modes, zero at the Nyquist mode and (dealias) for k > (n - 1) // 3 (complex128)."""
    q = wavenumbers(n, length)
    keep = torch.ones_like(q, dtype=torch.bool)
    keep[-1] = n % 2 == 1  # Nyquist mode of an even grid: derivative set to zero
    if dealias:
        keep &= torch.arange(q.numel()) <= (n - 1) // 3
    return torch.where(keep, -0.5j * q.to(torch.complex128), torch.zeros((), dtype=torch.complex128))


def etdrk4_coefficients(lin: torch.Tensor, h: float, m: int = CONTOUR_POINTS) -> dict[str, torch.Tensor]:
    """ETDRK4 coefficients E, E2, Q, f1, f2, f3 for the diagonal linear symbol ``lin`` (real, any shape).

    The phi-function combinations are averaged over ``m`` points of a unit circle around each h*lin
    (Kassam & Trefethen 2005), in complex128, which avoids the cancellation of the direct formulas.
    """
    lin = lin.to(torch.float64)
    r = torch.exp(2j * math.pi * (torch.arange(m, dtype=torch.float64) + 0.5) / m).to(lin.device)
    z = h * lin.to(torch.complex128)[..., None] + r
    ez = torch.exp(z)
    z3 = z**3

    def avg(expr):
        return h * expr.mean(dim=-1).real

    return dict(
        E=torch.exp(h * lin),
        E2=torch.exp(0.5 * h * lin),
        Q=avg((torch.exp(0.5 * z) - 1) / z),
        f1=avg((-4 - z + ez * (4 - 3 * z + z * z)) / z3),
        f2=avg((2 + z + ez * (z - 2)) / z3),
        f3=avg((-4 - 3 * z - z * z + ez * (4 - z)) / z3),
    )


def etdrk4_solve(
    u0: torch.Tensor,
    lin: torch.Tensor,
    g: torch.Tensor,
    h: float,
    n_steps: int,
    save_every: int,
    ids=None,
    seed=None,
    growth_limit: float = 100.0,
) -> torch.Tensor:
    """ETDRK4 for v_t = lin v + g FFT(ifft(v)^2), v = rfft(u).

    ``u0``: (B, N) float64; ``lin``: (K,) or (B, K) real symbol; ``g``: (K,) complex symbol of the
    nonlinear term; K = N//2 + 1. Returns (B, 1 + n_steps // save_every, N) float64: u0 and every
    ``save_every``-th step. Raises DataError naming the sample ``ids[b]`` and ``seed`` when a sample
    becomes non-finite or exceeds ``growth_limit * (1 + max|u0|)``.
    """
    b, n = u0.shape
    ids = np.arange(b) if ids is None else np.asarray(ids)
    lin = lin.to(u0.device)
    block = max(1, BLOCK_MODES // (n // 2 + 1))
    outs = []
    with single_threaded_on_cpu(u0.device):
        for s in range(0, b, block):
            lin_b = lin if lin.dim() == 1 else lin[s : s + block]
            outs.append(
                _etdrk4_block(
                    u0[s : s + block],
                    etdrk4_coefficients(lin_b, h),
                    g.to(u0.device),
                    n_steps,
                    save_every,
                    ids[s : s + block],
                    seed,
                    growth_limit,
                )
            )
    return torch.cat(outs)


def _etdrk4_block(u0, c, g, n_steps, save_every, ids, seed, growth_limit):
    n = u0.shape[-1]
    E, E2, Q, f1, f2, f3 = (c[k] for k in ("E", "E2", "Q", "f1", "f2", "f3"))

    def nl(v):
        u = torch.fft.irfft(v, n=n)
        return g * torch.fft.rfft(u * u)

    bound = growth_limit * (1.0 + u0.abs().amax(dim=1))
    frames = [u0]
    v = torch.fft.rfft(u0)
    for step in range(1, n_steps + 1):
        nv = nl(v)
        a = E2 * v + Q * nv
        na = nl(a)
        bb = E2 * v + Q * na
        nb = nl(bb)
        cc = E2 * a + Q * (2 * nb - nv)
        nc = nl(cc)
        v = E * v + f1 * nv + 2 * f2 * (na + nb) + f3 * nc
        if step % save_every == 0:
            u = torch.fft.irfft(v, n=n)
            amax = u.abs().amax(dim=1)
            bad = ~torch.isfinite(amax) | (amax > bound)
            if bool(bad.any()):
                k = int(bad.nonzero()[0, 0])
                raise DataError(
                    f"ks solver blew up (non-finite or growing values) for sample {int(ids[k])} "
                    f"(seed {seed}) at step {step}; lower dt"
                )
            frames.append(u)
    return torch.stack(frames, dim=1)


@register_generator
class KSGenerator(Generator, name="ks", config=KSConfig, inputs=("u",), targets=("u",), chunk_size=128):
    field_labels = {"u": "solution"}

    def recipe(self, cfg: KSConfig) -> tuple[int, int]:
        waves, kmax = INITS[cfg.init]
        return cfg.n_waves or waves, cfg.k_max or kmax

    def validate(self, cfg: KSConfig) -> None:
        if cfg.init not in INITS:
            raise ConfigError(f"ks init must be one of {', '.join(INITS)}, got {cfg.init!r}")
        nus = nu_values(cfg)
        if not nus or not all(
            isinstance(v, numbers.Real) and not isinstance(v, bool) and v > 0 and math.isfinite(v) for v in nus
        ):
            raise ConfigError(f"ks nu must be a number > 0 or a non-empty list of them, got {cfg.nu!r}")
        for name in ("length", "t_final", "dt"):
            v = getattr(cfg, name)
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise ConfigError(f"ks {name} must be a number, got {v!r}")
        if not cfg.length > 0 or not math.isfinite(cfg.length):
            raise ConfigError(f"ks length must be a finite period > 0, got {cfg.length}")
        if cfg.resolution < 8:
            raise ConfigError(f"ks resolution must be >= 8 points, got {cfg.resolution}")
        fine = cfg.solve_resolution or cfg.resolution
        if fine < cfg.resolution or fine % cfg.resolution:
            raise ConfigError(
                f"ks solve_resolution {fine} cannot be subsampled to resolution {cfg.resolution}: "
                "expected a multiple of it (e.g. 512 -> 64)"
            )
        if fine % 2:
            raise ConfigError(f"ks solve_resolution must be even, got {fine}")
        if cfg.n_waves < 0 or cfg.k_max < 0:
            raise ConfigError(f"ks n_waves and k_max must be >= 0 (0: the recipe's), got {cfg.n_waves} and {cfg.k_max}")
        _, kmax = self.recipe(cfg)
        kept = (fine - 1) // 3 if cfg.dealias else fine // 2 - 1
        if kmax > kept:
            n_min = 3 * kmax + 1 if cfg.dealias else 2 * kmax + 2
            raise ConfigError(
                f"ks solve_resolution {fine} keeps wavenumbers up to {kept} only, below the initial "
                f"condition's k_max = {kmax}; expected solve_resolution >= {n_min + n_min % 2}"
            )
        # the grid must resolve the dissipation range (see RESOLVE)
        q_cut = 2 * math.pi * kept / cfg.length
        need = RESOLVE / math.sqrt(min(nus))
        if q_cut < need:
            k_need = math.ceil(need * cfg.length / (2 * math.pi))
            n_min = 3 * k_need + 1 if cfg.dealias else 2 * k_need + 2
            n_min += n_min % 2
            sugg = cfg.resolution * math.ceil(n_min / cfg.resolution)
            raise ConfigError(
                f"ks solve_resolution {fine} is too coarse for nu = {min(nus)} on length {cfg.length}: "
                f"its cut-off wavenumber {q_cut:.3g} is below {RESOLVE}/sqrt(nu) = {need:.3g}; "
                f"expected solve_resolution >= {n_min} (e.g. resolution={cfg.resolution} "
                f"solve_resolution={sugg + sugg % 2})"
            )
        if not cfg.t_final > 0 or not math.isfinite(cfg.t_final):
            raise ConfigError(f"ks t_final must be a finite time > 0, got {cfg.t_final}")
        if cfg.n_frames < 2:
            raise ConfigError(f"ks n_frames must be >= 2 (t = 0 and t_final), got {cfg.n_frames}")
        interval = cfg.t_final / (cfg.n_frames - 1)
        if not 0 < cfg.dt <= min(DT_MAX, interval):
            raise ConfigError(
                f"ks dt must be in (0, {min(DT_MAX, interval):g}] (at most {DT_MAX} for ETDRK4 "
                f"accuracy and at most the frame interval {interval:g}), got {cfg.dt}"
            )
        steps = round(interval / cfg.dt)
        if abs(steps * cfg.dt - interval) > 1e-9 * interval:
            raise ConfigError(
                f"ks dt = {cfg.dt} does not divide the frame interval t_final / (n_frames - 1) = "
                f"{interval:g}; expected e.g. dt = {interval / max(1, steps):.6g}"
            )

    def tag(self, cfg: KSConfig) -> str:
        fine = cfg.solve_resolution or cfg.resolution
        nus = "-".join(f"{v:g}" for v in nu_values(cfg))
        return f"nu{nus}_r{cfg.resolution}" + (f"from{fine}" if fine != cfg.resolution else "")

    def frame_times(self, cfg: KSConfig) -> np.ndarray:
        return np.linspace(0.0, cfg.t_final, cfg.n_frames)

    def coords(self, cfg: KSConfig) -> dict[str, np.ndarray]:
        fine = cfg.solve_resolution or cfg.resolution
        x = np.arange(fine) * (cfg.length / fine)
        return {"t": self.frame_times(cfg), "x": x[:: fine // cfg.resolution]}

    def sample_nu(self, cfg: KSConfig, ids) -> np.ndarray:
        nus = nu_values(cfg)
        return np.array([nus[int(i) % len(nus)] for i in ids], dtype=np.float64)

    def initial_condition(self, cfg: KSConfig, ids, seed: int, device) -> torch.Tensor:
        """(B, solve_resolution) float64 initial values of samples ``ids`` on the solve grid."""
        fine = cfg.solve_resolution or cfg.resolution
        waves, kmax = self.recipe(cfg)
        x = torch.arange(fine, dtype=torch.float64) * (cfg.length / fine)
        rows = []
        for i in ids:
            g = sample_rng(seed, int(i))
            amp = AMPLITUDE * (2 * torch.rand(waves, generator=g, dtype=torch.float64) - 1)
            phase = 2 * math.pi * torch.rand(waves, generator=g, dtype=torch.float64)
            k = torch.randint(1, kmax + 1, (waves,), generator=g).to(torch.float64)
            rows.append(
                (amp[:, None] * torch.sin(2 * math.pi / cfg.length * k[:, None] * x[None] + phase[:, None])).sum(0)
            )
        return torch.stack(rows).to(device)

    def solve(self, cfg: KSConfig, u0: torch.Tensor, nu: np.ndarray, ids=None, seed=None) -> torch.Tensor:
        """Trajectories (B, n_frames, solve_resolution) float64 from ``u0`` with per-sample ``nu``."""
        fine = u0.shape[-1]
        interval = cfg.t_final / (cfg.n_frames - 1)
        per_frame = round(interval / cfg.dt)
        h = interval / per_frame
        uniq, inv = np.unique(np.asarray(nu, dtype=np.float64), return_inverse=True)
        lins = torch.stack([ks_linear(fine, cfg.length, float(v)) for v in uniq])
        lin = lins[0] if len(uniq) == 1 else lins[torch.as_tensor(inv)]
        g = ks_nonlinear_symbol(fine, cfg.length, cfg.dealias)
        return etdrk4_solve(u0, lin, g, h, per_frame * (cfg.n_frames - 1), per_frame, ids=ids, seed=seed)

    def generate(self, cfg: KSConfig, ids, seed, device):
        fine = cfg.solve_resolution or cfg.resolution
        nu = self.sample_nu(cfg, ids)
        with single_threaded_on_cpu(device):
            traj = self.solve(cfg, self.initial_condition(cfg, ids, seed, device), nu, ids=ids, seed=seed)
        traj = traj[:, :, :: fine // cfg.resolution]
        return {"fields/u": as_numpy(traj)[..., None], "params/nu": nu.astype(np.float32)}
