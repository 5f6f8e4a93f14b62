"""1-D viscous Burgers, the PDEBench benchmark as the ST-SSM paper uses it.

Equation (PDEBench's form and viscosity convention)::

    u_t + (u^2 / 2)_x = (nu / pi) u_xx,   x in [0, 1) periodic,

with ``nu = 0.001``: PDEBench's ``epsilon`` (its files are labelled ``Nu0.001``, and the ST-SSM paper
writes ``nu = 0.001``); the viscosity actually applied is nu/pi ~= 3.18e-4. ``nu_over_pi=False`` solves
``u_t + (u^2/2)_x = nu u_xx`` instead (the Cole-Hopf test uses that).

Discretisation: second-order finite volume on ``solve_resolution`` cells of width dx = 1/N, cell
centres x_i = (i + 1/2) dx (PDEBench's grid). Piecewise-linear MUSCL reconstruction with a limited slope
(``limiter``: ``"mc"`` monotonised central, PDEBench's choice, default; ``"minmod"``; ``"vanleer"``), an
advective face flux (``flux``: ``"godunov"``, the exact Riemann flux of the convex flux u^2/2, default;
``"roe"``, PDEBench's 0.5(f- + f+) - 0.5 |(u- + u+)/2| (u+ - u-), identical to Godunov except at
transonic rarefactions where it lacks the entropy fix; ``"rusanov"``, the local Lax-Friedrichs flux),
a central-difference viscous flux -nu_eff (u_{i+1} - u_i)/dx, and SSP-RK2 (Heun) in time. PDEBench
advances with a two-stage midpoint predictor-corrector instead; both are second order, SSP-RK2 also
keeps the scheme TVD. On the paper data (nu = 0.001/pi, 1024 cells) the Godunov and PDEBench's Roe-type
flux agree to 2e-8 relative, and halving the CFL number changes the data by 6e-5; the 1024-cell data
differ from a 4096-cell solve by ~2e-3 (relative L2 over a trajectory).

Time step: per sample, as PDEBench, dt = cfl * min(dx / max|u|, dx^2 / (2 nu_eff)) (cfl = 0.25),
shortened to land exactly on every stored frame time. The step is per sample, not per chunk, so a
sample does not depend on which other samples share its chunk.

Frames: ``n_frames`` equispaced times on [0, t_final], t = 0 included. The default (20 frames,
t_final = 1.33) is PDEBench's saving grid (every 0.01 to t = 2) restricted to its first 140 steps and
taken every 7th step, as the ST-SSM paper describes ("20 steps up to 1.4 s", dt = 0.07): t = 0, 0.07,
..., 1.33. That "first 140 steps" means indices 0..139 is our reading; ``t_final=1.4, n_frames=21``
holds both readings (frames 0..19 and 1..20).

Initial conditions (``init``):

- ``"pdebench"`` (default), PDEBench's ``init_multi`` with k_tot = ``n_modes`` = 4 and
  ``n_waves`` = 2 chosen wavenumbers: draw ``n_waves`` wavenumbers from {1..n_modes} with
  replacement and let c_k count how often k was drawn; amplitudes A_k ~ U(0, 1) and phases
  phi_k ~ U(0, 2 pi) for every k = 1..n_modes; then

      u0(x) = sum_{k=1}^{n_modes} A_k sin(2 pi k c_k x / (x_{N-1} - x_0) + phi_k)

  evaluated at the cell centres. As in PDEBench, wavenumbers not drawn contribute the constant
  A_k sin(phi_k) (a random mean), a wavenumber drawn twice doubles its frequency, and the period is
  x_{N-1} - x_0 = 1 - dx rather than 1 (so u0 at the first and last cell coincide). Then with
  probability 0.1 take |u0|; multiply by a random sign; with probability 0.1 multiply by the window
  0.5 (tanh((x - xL)/0.01) - tanh((x - xR)/0.01)), xL ~ U(0.1, 0.45), xR ~ U(0.55, 0.9). Each of these
  is drawn independently here (PDEBench's JAX code reuses PRNG keys between some of them, which
  correlates them; we do not reproduce that).
- ``"sines"``: u0 = sum_{i=1}^{n_waves} A_i sin(2 pi k_i x + phi_i), k_i ~ U{1..n_modes},
  A_i ~ U(0, 1), phi_i ~ U(0, 2 pi): a plain periodic zero-mean variant.

Stored per sample: ``fields/u`` (n_frames, resolution, 1) (the solve grid subsampled every
``solve_resolution // resolution``-th cell, as the ST-SSM paper downsamples 1024 -> 128/64/32),
``params/nu`` (the PDEBench-convention nu); ``coords/t`` (n_frames,), ``coords/x`` (resolution,)
cell centres.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import ConfigError, DataError
from .base import Generator, as_numpy, register_generator, sample_rng, single_threaded_on_cpu, solve_grid

LIMITERS = ("mc", "minmod", "vanleer")
FLUXES = ("godunov", "roe", "rusanov")
INITS = ("pdebench", "sines")
P_ABS = 0.1  # PDEBench: probability of taking |u0|
P_WINDOW = 0.1  # PDEBench: probability of the tanh window
WINDOW_WIDTH = 0.01


@dataclass
class BurgersConfig:
    resolution: int = 1024  # stored cells
    solve_resolution: int = 0  # cells the PDE is solved on (0: = resolution); a multiple of resolution
    nu: float = 0.001  # PDEBench's epsilon; the applied viscosity is nu/pi (see nu_over_pi)
    nu_over_pi: bool = True  # True: u_t + (u^2/2)_x = (nu/pi) u_xx (PDEBench); False: nu u_xx
    t_final: float = 1.33  # last stored time
    n_frames: int = 20  # stored frames, equispaced on [0, t_final], t = 0 included
    init: str = "pdebench"  # pdebench | sines
    n_modes: int = 4  # wavenumbers 1..n_modes (PDEBench k_tot)
    n_waves: int = 2  # wavenumbers drawn per sample (PDEBench num_choise_k)
    cfl: float = 0.25  # dt = cfl * min(dx / max|u|, dx^2 / (2 nu_eff)); at most 0.5
    limiter: str = "mc"  # mc | minmod | vanleer
    flux: str = "godunov"  # godunov | roe | rusanov


# ------------------------------------------------------------------------------------------------
# The finite-volume scheme
# ------------------------------------------------------------------------------------------------


def limited_slope(a: torch.Tensor, b: torch.Tensor, limiter: str) -> torch.Tensor:
    """Limited cell slope (times dx) from the backward difference ``a`` and forward difference ``b``."""
    if limiter == "mc":  # sign(c) min(2|a|, 2|b|, |c|) where ab > 0, c = (a + b)/2; else 0
        c = (a + b).mul_(0.5)
        m = torch.minimum(torch.minimum(a.abs(), b.abs()).mul_(2), c.abs())
        return c.sign_().mul_(m).mul_(a * b > 0)
    if limiter == "minmod":
        return (torch.sign(a) + torch.sign(b)).mul_(0.5).mul_(torch.minimum(a.abs(), b.abs()))
    if limiter == "vanleer":  # 2ab / (a + b) where ab > 0; else 0
        ab = a * b
        pos = ab > 0
        return (2 * ab).div_(torch.where(pos, a + b, torch.ones_like(a))).mul_(pos)
    raise ConfigError(f"burgers limiter must be one of {', '.join(LIMITERS)}, got {limiter!r}")


def advective_flux(um: torch.Tensor, up: torch.Tensor, flux: str) -> torch.Tensor:
    """Numerical flux of f(u) = u^2/2 at a face with left state ``um`` and right state ``up``."""
    if flux == "godunov":
        # exact Riemann solution of the convex flux: max(f(max(u-, 0)), f(min(u+, 0)))
        return torch.maximum(um.clamp(min=0).square_(), up.clamp(max=0).square_()).mul_(0.5)
    central = (um * um).add_(up * up).mul_(0.25)
    if flux == "roe":
        return central.sub_((um + up).abs_().mul_(up - um), alpha=0.25)
    if flux == "rusanov":
        return central.sub_(torch.maximum(um.abs(), up.abs()).mul_(up - um), alpha=0.5)
    raise ConfigError(f"burgers flux must be one of {', '.join(FLUXES)}, got {flux!r}")


def burgers_rhs(u: torch.Tensor, dx: float, nu_eff: float, limiter: str = "mc", flux: str = "godunov") -> torch.Tensor:
    """du/dt of the cell averages ``u`` (B, N) of u_t + (u^2/2)_x = nu_eff u_xx, periodic, width ``dx``."""
    n = u.shape[-1]
    p = torch.cat([u[:, -2:], u, u[:, :2]], dim=1)  # (B, N+4), cell i is p[:, i+2]
    d = p[:, 1:] - p[:, :-1]  # d[j] = p[j+1] - p[j], (B, N+3)
    hs = limited_slope(d[:, :-1], d[:, 1:], limiter).mul_(0.5)  # half slopes of p[1..N+2], (B, N+2)
    um = p[:, 1:-2] + hs[:, :-1]  # left state at faces p[j]|p[j+1], j=1..N+1
    up = p[:, 2:-1] - hs[:, 1:]  # right state at the same faces
    f = advective_flux(um, up, flux)  # (B, N+1): faces i-1/2, i = 0..N
    if nu_eff:
        f.sub_(d[:, 1 : n + 2], alpha=nu_eff / dx)
    return (f[:, :-1] - f[:, 1:]).mul_(1.0 / dx)


BLOCK_CELLS = 16384
"""Samples are integrated in blocks of about this many cells (16 samples at 1024 cells): the arrays of a
block stay in cache, which is 2-4x faster per sample than whole chunks. A sample's result does not
depend on the blocking (its time step is its own)."""


def solve_burgers(
    u0: torch.Tensor,
    times,
    nu_eff: float,
    cfl: float = 0.25,
    limiter: str = "mc",
    flux: str = "godunov",
    ids=None,
    seed=None,
    growth_limit: float = 10.0,
) -> torch.Tensor:
    """Integrate cell averages ``u0`` (B, N) on [0, 1) periodic; returns (B, len(times), N) at ``times``.

    ``times`` is increasing with ``times[0] == 0``. Each sample has its own step
    dt = cfl * min(dx / max|u|, dx^2 / (2 nu_eff)) (PDEBench's rule), shortened to hit every time
    exactly. Raises DataError (naming the sample index ``ids[b]`` and ``seed``) when a sample stops
    being finite or grows beyond ``growth_limit * (1 + max|u0|)`` (Burgers has a maximum principle, so
    that means the scheme became unstable).
    """
    b, n = u0.shape
    times = [float(t) for t in times]
    if times[0] != 0.0 or any(t1 <= t0 for t0, t1 in zip(times, times[1:])):
        raise ConfigError(f"burgers frame times must start at 0 and increase, got {times}")
    ids = np.arange(b) if ids is None else np.asarray(ids)
    block = max(1, BLOCK_CELLS // n)
    return torch.cat(
        [
            _solve_block(u0[s : s + block], times, nu_eff, cfl, limiter, flux, ids[s : s + block], seed, growth_limit)
            for s in range(0, b, block)
        ]
    )


def _solve_block(u0, times, nu_eff, cfl, limiter, flux, ids, seed, growth_limit):
    # Every sample lands exactly on every frame time, so all rows start a frame interval together;
    # rows that reach the frame early are written out and dropped from the working set (index ops
    # only then, not at every step: they are slow with several threads on a busy machine).
    b, n = u0.shape
    dx = 1.0 / n
    out = torch.empty(b, len(times), n, dtype=u0.dtype, device=u0.device)
    out[:, 0] = u0
    bound = growth_limit * (1.0 + u0.abs().amax(dim=1))
    dt_diff = 0.5 * dx * dx / nu_eff if nu_eff > 0 else math.inf
    for j in range(1, len(times)):
        interval = times[j] - times[j - 1]
        rows = torch.arange(b, device=u0.device)
        u, lim = out[:, j - 1], bound
        t = torch.zeros(b, dtype=torch.float64, device=u0.device)  # time since times[j - 1]
        while rows.numel():
            amax = u.abs().amax(dim=1)
            bad = ~torch.isfinite(amax) | (amax > lim)
            if bool(bad.any()):
                k = int(bad.nonzero()[0, 0])
                raise DataError(
                    f"burgers solver blew up (non-finite or growing values) for sample "
                    f"{int(ids[int(rows[k])])} (seed {seed}) at t = {times[j - 1] + float(t[k]):.4g}; "
                    "lower cfl or check the initial condition"
                )
            dt = cfl * torch.minimum(dx / amax.clamp(min=1e-8), torch.full_like(amax, dt_diff)).to(torch.float64)
            rem = interval - t
            last = dt >= rem
            dt = torch.where(last, rem, dt)
            h = dt.to(u.dtype)[:, None]
            u1 = burgers_rhs(u, dx, nu_eff, limiter, flux).mul_(h).add_(u)  # SSP-RK2 (Heun)
            u = burgers_rhs(u1, dx, nu_eff, limiter, flux).mul_(h).add_(u1).add_(u).mul_(0.5)
            t = t + dt
            if bool(last.any()):
                out[rows[last], j] = u[last]
                keep = ~last
                rows, u, t, lim = rows[keep], u[keep], t[keep], lim[keep]
    return out


# ------------------------------------------------------------------------------------------------
# Initial conditions
# ------------------------------------------------------------------------------------------------


def _draws(cfg: BurgersConfig, seed: int, i: int) -> dict[str, torch.Tensor]:
    """Every random number sample ``i`` uses, always drawn in the same order (CPU, float64)."""
    g = sample_rng(seed, i)
    f64 = torch.float64
    if cfg.init == "pdebench":
        return dict(
            picks=torch.randint(1, cfg.n_modes + 1, (cfg.n_waves,), generator=g),
            amp=torch.rand(cfg.n_modes, generator=g, dtype=f64),
            phase=2 * math.pi * torch.rand(cfg.n_modes, generator=g, dtype=f64),
            u_abs=torch.rand((), generator=g, dtype=f64) < P_ABS,
            sign=torch.where(torch.rand((), generator=g, dtype=f64) < 0.5, 1.0, -1.0).to(f64),
            window=torch.rand((), generator=g, dtype=f64) < P_WINDOW,
            xl=0.1 + 0.35 * torch.rand((), generator=g, dtype=f64),
            xr=0.55 + 0.35 * torch.rand((), generator=g, dtype=f64),
        )
    return dict(
        k=torch.randint(1, cfg.n_modes + 1, (cfg.n_waves,), generator=g).to(f64),
        amp=torch.rand(cfg.n_waves, generator=g, dtype=f64),
        phase=2 * math.pi * torch.rand(cfg.n_waves, generator=g, dtype=f64),
    )


@register_generator
class BurgersGenerator(Generator, name="burgers", config=BurgersConfig, inputs=("u",), targets=("u",), chunk_size=64):
    field_labels = {"u": "velocity"}

    def validate(self, cfg: BurgersConfig) -> None:
        fine = solve_grid("burgers", cfg, 8, nodes=False)
        for name in ("nu", "cfl", "t_final"):
            v = getattr(cfg, name)
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise ConfigError(f"burgers {name} must be a number, got {v!r}")
        if not cfg.nu >= 0:
            raise ConfigError(f"burgers nu must be >= 0 (a viscosity), got {cfg.nu}")
        if not 0 < cfg.cfl <= 0.5:
            raise ConfigError(
                f"burgers cfl must be in (0, 0.5] for the MUSCL/SSP-RK2 scheme to be stable, got {cfg.cfl}"
            )
        if not cfg.t_final > 0 or not math.isfinite(cfg.t_final):
            raise ConfigError(f"burgers t_final must be a finite time > 0, got {cfg.t_final}")
        if cfg.n_frames < 2:
            raise ConfigError(f"burgers n_frames must be >= 2 (t = 0 and t_final), got {cfg.n_frames}")
        if cfg.init not in INITS:
            raise ConfigError(f"burgers init must be one of {', '.join(INITS)}, got {cfg.init!r}")
        if cfg.limiter not in LIMITERS:
            raise ConfigError(f"burgers limiter must be one of {', '.join(LIMITERS)}, got {cfg.limiter!r}")
        if cfg.flux not in FLUXES:
            raise ConfigError(f"burgers flux must be one of {', '.join(FLUXES)}, got {cfg.flux!r}")
        if cfg.n_modes < 1 or cfg.n_waves < 1:
            raise ConfigError(f"burgers n_modes and n_waves must be >= 1, got {cfg.n_modes} and {cfg.n_waves}")
        # the highest frequency of the initial condition (a wavenumber drawn n_waves times in pdebench
        # mode) needs at least 4 cells per wavelength on the solve grid
        kmax = cfg.n_modes * (cfg.n_waves if cfg.init == "pdebench" else 1)
        if fine < 8 * kmax:
            raise ConfigError(
                f"burgers solve_resolution {fine} is too coarse for initial wavenumbers up to "
                f"{kmax}: expected at least {8 * kmax} cells"
            )

    def tag(self, cfg: BurgersConfig) -> str:
        fine = cfg.solve_resolution or cfg.resolution
        return f"nu{cfg.nu:g}_r{cfg.resolution}" + (f"from{fine}" if fine != cfg.resolution else "")

    def frame_times(self, cfg: BurgersConfig) -> np.ndarray:
        return np.linspace(0.0, cfg.t_final, cfg.n_frames)

    def coords(self, cfg: BurgersConfig) -> dict[str, np.ndarray]:
        fine = cfg.solve_resolution or cfg.resolution
        x = (np.arange(fine) + 0.5) / fine
        return {"t": self.frame_times(cfg), "x": x[:: fine // cfg.resolution]}

    def nu_eff(self, cfg: BurgersConfig) -> float:
        return cfg.nu / math.pi if cfg.nu_over_pi else cfg.nu

    def initial_condition(self, cfg: BurgersConfig, ids, seed: int, device) -> torch.Tensor:
        """(B, solve_resolution) float64 initial cell values of samples ``ids``."""
        fine = cfg.solve_resolution or cfg.resolution
        x = (torch.arange(fine, dtype=torch.float64) + 0.5) / fine
        rows = []
        for i in ids:
            d = _draws(cfg, seed, int(i))
            if cfg.init == "pdebench":
                counts = torch.bincount(d["picks"] - 1, minlength=cfg.n_modes).to(torch.float64)
                k = torch.arange(1, cfg.n_modes + 1, dtype=torch.float64) * counts
                period = float(x[-1] - x[0])
                u = (
                    d["amp"][:, None] * torch.sin(2 * math.pi * k[:, None] * x[None] / period + d["phase"][:, None])
                ).sum(0)
                if d["u_abs"]:
                    u = u.abs()
                u = u * d["sign"]
                if d["window"]:
                    u = u * 0.5 * (torch.tanh((x - d["xl"]) / WINDOW_WIDTH) - torch.tanh((x - d["xr"]) / WINDOW_WIDTH))
            else:
                u = (d["amp"][:, None] * torch.sin(2 * math.pi * d["k"][:, None] * x[None] + d["phase"][:, None])).sum(
                    0
                )
            rows.append(u)
        return torch.stack(rows).to(device)

    def generate(self, cfg: BurgersConfig, ids, seed, device):
        fine = cfg.solve_resolution or cfg.resolution
        with single_threaded_on_cpu(device):
            u0 = self.initial_condition(cfg, ids, seed, device)
            traj = solve_burgers(
                u0, self.frame_times(cfg), self.nu_eff(cfg), cfg.cfl, cfg.limiter, cfg.flux, ids=ids, seed=seed
            )
        traj = traj[:, :, :: fine // cfg.resolution]
        return {"fields/u": as_numpy(traj)[..., None], "params/nu": np.full(len(ids), cfg.nu, dtype=np.float32)}
