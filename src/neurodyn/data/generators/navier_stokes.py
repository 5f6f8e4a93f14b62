"""2-D incompressible Navier-Stokes in vorticity form on the unit torus: the FNO and FFNO benchmarks.

Equation (periodic on [0, 1)^2, velocity u = (psi_y, -psi_x), -Laplacian psi = w):

    dw/dt + u . grad w = nu Laplacian w + f(x, t),        w(x, 0) = w0(x)

Discretisation -- the pseudo-spectral scheme of Li et al. (2021)'s FNO data script, which FFNO's
``fourierflow`` reuses for its torus datasets:

* Fourier-Galerkin in space on the ``sim_resolution``^2 grid x_j = j / n (rfft2 layout, float64);
  psi, u, v, w_x, w_y come from w_hat by spectral division/multiplication (derivative wavenumbers
  with the Nyquist mode zeroed, which is what FNO's "full FFT, keep the real part" amounts to).
* The nonlinear term u . grad w is formed pointwise on the grid (advective form) and transformed
  back; its spectrum is truncated by the square 2/3 rule |k_x|, |k_y| <= (2/3)(n/2) (FNO applies the
  mask to the product only, not to w itself; so do we).
* Time: Crank-Nicolson for the diffusion, the nonlinear term and the forcing explicit (forward
  Euler, evaluated at t_n), constant step ``dt``:

      w_hat^{n+1} = [ (1 - a) w_hat^n + dt (f_hat(t_n) - mask * (u.grad w)_hat^n) ] / (1 + a),
      a = dt nu 4 pi^2 |k|^2 / 2.

  The scheme is first order in time (the explicit Euler part), unconditionally stable in the
  diffusion, and limited by an advective CFL condition; ``validate`` estimates the peak velocity
  from the initial-field law and the forcing (energy inequality) and refuses a fixed ``dt`` whose
  CFL number U dt / dx exceeds ``max_cfl``. ``dt`` is never adapted.
* The mean vorticity (the k = 0 mode) is conserved exactly: the advective term has zero mean by
  Parseval's identity and every forcing used here has zero mean.

Initial vorticity: a periodic Gaussian random field with covariance grf_sigma^2 (-Laplacian + tau^2)^-alpha
(Laplacian eigenvalues 4 pi^2 |k|^2, zero mean), alpha = 2.5, tau = 7, sampled on the simulation grid
with ``grf.periodic_grf_2d`` (all n^2 modes, as FNO's GaussianRF) from resolution-nested normals
(``spectral.nested_normals_2d``). Which amplitude: the papers write N(0, 7^{3/2} (-Laplacian + 49 I)^{-2.5});
FNO's sampler -- the one that made the FNO files, reused by fourierflow for TorusVis -- takes the
amplitude sigma = tau^{(2 alpha - d)/2} = 7^{3/2} and multiplies it by an extra sqrt(2), so its fields
have covariance 2 * 7^3 (-Laplacian + 49)^{-2.5} (pointwise std ~ 0.26 on 256^2). The default
``grf_sigma = sqrt(2) * 7^1.5`` (~ 26.19) reproduces the law of the published datasets; 7 ** 1.5 drops
the sqrt(2), and 7 ** 0.75 is the papers' formula read literally (7^{3/2} as the covariance factor).

Snapshots are recorded every ``record_every`` time units from t = 0 (included) to ``t_final`` and
downsampled from the simulation grid to ``resolution`` by taking every k-th point (FNO's practice:
256 -> 64 is [::4, ::4]).

Generators (all store ``fields/u``: (n, T, s, s, 1) vorticity with T = t_final / record_every + 1
frames, frame 0 being w0; ``fields/f``: the forcing on the stored grid; ``params/nu``: (n,)):

* ``navier_stokes`` -- FNO's datasets (TorusLi in ST-SSM): fixed viscosity ``nu`` and the fixed
  forcing f = 0.1 (sin 2 pi (x + y) + cos 2 pi (x + y)), stored per sample as (s, s, 1).
  NavierStokes_V1e-5_N1200_T20: nu = 1e-5, T = 20; FNO's other files: nu = 1e-3 with T = 50,
  nu = 1e-4 with T = 30. 256^2 simulation, dt = 1e-4, snapshots every 1 time unit, stored 64^2.
  FNO's 'u' key holds frames t = 1..T (our frames 1..T) and its 'a' key w0 (our frame 0).
* ``torus_vis`` / ``torus_vis_force`` -- FFNO's TorusVis / TorusVisForce (Tran et al. 2023, as ST-SSM
  uses them): per sample nu ~ U[nu_min, nu_max) = U[1e-5, 1e-4) and the random forcing

      f(x, t) = scale * sum_{p=1..cycles} sum_{m in {(1,0), (0,1), (1,1)}}
                [a_pm sin(2 pi p m.x + delta t) + b_pm cos(2 pi p m.x + delta t)],   a, b ~ U[0, 1],

  scale = 0.1, cycles = 2 (12 terms, the fourierflow code; the paper's formula also lists an
  (i, j) = (0, 0) term, i.e. a constant, which the code does not have). delta = 0 (TorusVis, static
  forcing, stored (s, s, 1)) or delta = 0.2 (TorusVisForce, stored per frame as (T, s, s, 1), the
  forcing at each snapshot time). The 12 amplitudes are also stored as ``params/forcing_amplitudes``
  (n, 6 * cycles) in the order p = 1..cycles x [sin x, cos x, sin y, cos y, sin(x+y), cos(x+y)].
  fourierflow simulates at 256^2 with dt = 1e-4 to T = 20, records every 0.1 and its loader keeps
  every 10th frame and every 4th point: 20 frames 64^2 at interval 1. We record every 1 time unit
  directly (t = 0..20, 21 frames) and store the forcing at the snapshot times (fourierflow stores
  the value used in the last step before each record, a phase difference of delta * dt = 2e-5).

Each sample's randomness comes from ``sample_rng(seed, i)`` in the order: (torus only) nu, then the
forcing amplitudes, then the GRF normals, drawn mode by mode in shells of growing wavenumber
(``spectral.nested_normals_2d``). So a sample does not depend on the chunking, and its viscosity,
forcing and large scales do not depend on ``sim_resolution`` either: a cpu-scale sample is a coarse
version of the paper-scale sample with the same seed and index (where their configs agree otherwise).
Chunks are integrated in batches (batched FFTs; on CPU in cache-sized sub-batches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import ConfigError, DataError
from .base import Generator, as_numpy, register_generator, sample_rng
from .grf import periodic_grf_2d
from .spectral import (
    dealias_mask_2d,
    derivative_wavenumbers,
    max_dealiased_wavenumber,
    nested_normals_2d,
    rfft2_wavenumbers,
)

FNO_GRF_SIGMA = math.sqrt(2.0) * 7.0**1.5
# Heuristics of the CFL estimate (see ``velocity_estimate``).
_PEAK_TO_RMS = 3.0  # max |u| over the grid relative to the rms velocity of a smooth random field
_RMS_SPREAD = 2.0  # a large draw of ||u0|| relative to its expectation
_CHECK_EVERY = 100  # steps between NaN/Inf checks of the solver state
_CPU_WORKING_SET = 2**19  # bytes of spectral work arrays per CPU sub-batch (measured: 256^2 and 128^2 run
# fastest one sample at a time, 64^2 a few, 32^2 ~ 8-16 at a time)


# ------------------------------------------------------------------------------------------------
# Solver
# ------------------------------------------------------------------------------------------------
class SolverBlowUp(DataError):
    """The integration produced NaN/Inf; ``index`` is the position in the batch, ``time`` the time."""

    def __init__(self, index: int, time: float):
        super().__init__(f"the vorticity of batch member {index} became NaN/Inf by t = {time:g}")
        self.index, self.time = index, time


@dataclass
class SpectralForcing:
    """Forcing f(t) = cos(delta t) f_c + sin(delta t) f_s, given in the rfft2 layout (B or 1, n, n//2+1).

    ``f_s`` may be None when ``delta == 0`` (static forcing f_c).
    """

    f_c: torch.Tensor
    f_s: torch.Tensor | None = None
    delta: float = 0.0


def solve_vorticity(
    w0: torch.Tensor,
    nu,
    forcing: SpectralForcing | None,
    dt: float,
    n_steps: int,
    record_interval: int,
    stride: int = 1,
    check_every: int = _CHECK_EVERY,
) -> torch.Tensor:
    """Integrate the torus vorticity equation with FNO's Crank-Nicolson / explicit scheme.

    Args:
        w0: (B, n, n) initial vorticity on the grid x_j = j/n, indexed [x, y]; float64 recommended.
        nu: viscosity, a float or a (B,) tensor.
        forcing: ``SpectralForcing`` (spectra of the forcing on the same grid) or None.
        dt: time step; ``n_steps`` steps are taken, t_n = n dt.
        record_interval: record the field every this many steps (and at t = 0).
        stride: keep every ``stride``-th grid point of the recorded fields.
    Returns:
        (B, n_steps // record_interval + 1, n / stride, n / stride) vorticity snapshots, dtype of w0.
    Raises:
        SolverBlowUp: when a batch member becomes NaN/Inf (checked every ``check_every`` steps).
    """
    if w0.ndim != 3 or w0.shape[1] != w0.shape[2]:
        raise ConfigError(f"solve_vorticity expects w0 of shape (B, n, n), got {tuple(w0.shape)}")
    bsz, n = w0.shape[0], w0.shape[-1]
    if stride < 1 or n % stride:
        raise ConfigError(f"solve_vorticity stride {stride} must divide the grid size {n}")
    if record_interval < 1 or n_steps < 0:
        raise ConfigError(
            f"solve_vorticity needs record_interval >= 1 and n_steps >= 0, got {record_interval} and {n_steps}"
        )
    rdt, dev = w0.dtype, w0.device
    cdt = torch.complex128 if rdt == torch.float64 else torch.complex64
    kx, ky = rfft2_wavenumbers(n, dev, rdt)
    kxd = derivative_wavenumbers(n, False, dev, rdt)[:, None]
    kyd = derivative_wavenumbers(n, True, dev, rdt)[None, :]
    lap = 4 * math.pi**2 * (kx**2 + ky**2)  # (n, m): symbol of -Laplacian
    inv_lap = torch.where(lap > 0, 1.0 / torch.where(lap > 0, lap, torch.ones_like(lap)), torch.zeros_like(lap))
    two_pi_i = 2j * math.pi
    # multipliers giving (u, v, w_x, w_y) from w_hat: u = psi_y, v = -psi_x, psi_hat = w_hat / |2 pi k|^2
    ops = torch.stack(
        [two_pi_i * kyd * inv_lap, -two_pi_i * kxd * inv_lap, two_pi_i * kxd + 0 * kyd, two_pi_i * kyd + 0 * kxd]
    ).to(cdt)  # (4, n, m)
    mask = dealias_mask_2d(n, device=dev).to(rdt)

    nu_t = torch.as_tensor(nu, dtype=rdt, device=dev).reshape(-1, 1, 1)  # (B or 1, 1, 1)
    half = 0.5 * dt * nu_t * lap  # (B or 1, n, m)
    amp = ((1.0 - half) / (1.0 + half))[..., None]  # [..., None]: acts on
    gain = dt / (1.0 + half)  # view_as_real(w_hat)
    gain_nl = (gain * mask)[..., None]
    f_c = f_s = None
    if forcing is not None:
        f_c = torch.view_as_real(gain * forcing.f_c.to(dev, cdt))
        if forcing.delta != 0.0:
            if forcing.f_s is None:
                raise ConfigError("a drifting forcing (delta != 0) needs its quadrature part f_s")
            f_s = torch.view_as_real(gain * forcing.f_s.to(dev, cdt))

    n_rec = n_steps // record_interval
    out = torch.empty(bsz, n_rec + 1, n // stride, n // stride, dtype=rdt, device=dev)
    out[:, 0] = w0[:, ::stride, ::stride]
    w_h = torch.fft.rfft2(w0)
    w_r = torch.view_as_real(w_h)  # real view, updated in place
    buf = torch.empty(bsz, 4, n, n // 2 + 1, dtype=cdt, device=dev)
    for j in range(n_steps):
        torch.mul(w_h[:, None], ops, out=buf)
        g = torch.fft.irfft2(buf, s=(n, n))  # (B, 4, n, n): u, v, w_x, w_y
        adv = g[:, 0] * g[:, 2]
        adv.addcmul_(g[:, 1], g[:, 3])
        nl = torch.view_as_real(torch.fft.rfft2(adv))
        w_r.mul_(amp).addcmul_(gain_nl, nl, value=-1.0)
        if f_c is not None:
            if f_s is None:
                w_r.add_(f_c)
            else:
                t = j * dt
                w_r.add_(f_c, alpha=math.cos(forcing.delta * t)).add_(f_s, alpha=math.sin(forcing.delta * t))
        if (j + 1) % check_every == 0 or (j + 1) % record_interval == 0:
            finite = torch.isfinite(w_r).flatten(1).all(1)
            if not bool(finite.all()):
                raise SolverBlowUp(int((~finite).nonzero()[0]), (j + 1) * dt)
        if (j + 1) % record_interval == 0:
            out[:, (j + 1) // record_interval] = torch.fft.irfft2(w_h, s=(n, n))[:, ::stride, ::stride]
    return out


# ------------------------------------------------------------------------------------------------
# Forcing terms
# ------------------------------------------------------------------------------------------------
def li_forcing(x: torch.Tensor, y: torch.Tensor, scale: float = 0.1) -> torch.Tensor:
    """FNO's forcing scale * (sin 2 pi (x + y) + cos 2 pi (x + y)) on the grid x[:, None], y[None, :]."""
    th = 2 * math.pi * (x[:, None] + y[None, :])
    return scale * (torch.sin(th) + torch.cos(th))


def random_forcing_quadratures(
    amps: torch.Tensor, x: torch.Tensor, y: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(f_c, f_s), each (B, nx, ny), with f(t) = cos(delta t) f_c + sin(delta t) f_s the FFNO forcing.

    ``amps``: (B, 6 * cycles) amplitudes in the order p = 1..cycles x [sin x, cos x, sin y, cos y,
    sin(x+y), cos(x+y)]. Uses sin(th + d) = sin th cos d + cos th sin d and
    cos(th + d) = cos th cos d - sin th sin d.
    """
    cycles = amps.shape[1] // 6
    X, Y = x[:, None], y[None, :]
    f_c = torch.zeros(amps.shape[0], len(x), len(y), dtype=amps.dtype, device=amps.device)
    f_s = torch.zeros_like(f_c)
    for p in range(1, cycles + 1):
        k = 2 * math.pi * p
        for m, th in enumerate((k * X + 0 * Y, k * Y + 0 * X, k * (X + Y))):
            a = amps[:, 6 * (p - 1) + 2 * m, None, None]  # sin amplitude
            b = amps[:, 6 * (p - 1) + 2 * m + 1, None, None]  # cos amplitude
            s, c = torch.sin(th), torch.cos(th)
            f_c = f_c + a * s + b * c
            f_s = f_s + a * c - b * s
    return scale * f_c, scale * f_s


# ------------------------------------------------------------------------------------------------
# Configs
# ------------------------------------------------------------------------------------------------
@dataclass
class NavierStokesConfig:
    """FNO Navier-Stokes (TorusLi). Defaults: NavierStokes_V1e-5_N1200_T20 (256^2 -> 64^2, dt 1e-4)."""

    resolution: int = 64  # stored grid points per side
    sim_resolution: int = 256  # simulation grid; a multiple of resolution (every k-th point is kept)
    nu: float = 1e-5  # viscosity
    t_final: float = 20.0  # last snapshot time (FNO: 50 for nu 1e-3, 30 for 1e-4, 20 for 1e-5)
    record_every: float = 1.0  # time between snapshots (frames at 0, record_every, ..., t_final)
    dt: float = 1e-4  # solver time step (FNO's delta_t)
    forcing: str = "li"  # li: 0.1 (sin 2pi(x+y) + cos 2pi(x+y)) | none
    forcing_scale: float = 0.1
    grf_alpha: float = 2.5
    grf_tau: float = 7.0
    grf_sigma: float = FNO_GRF_SIGMA  # covariance grf_sigma^2 (-Lap + tau^2)^-alpha; FNO's law
    max_cfl: float = 1.0  # refuse dt when the estimated U dt / dx exceeds this


@dataclass
class TorusVisConfig:
    """FFNO TorusVis: nu ~ U[nu_min, nu_max), random static forcing (forcing_delta = 0)."""

    resolution: int = 64
    sim_resolution: int = 256
    nu_min: float = 1e-5
    nu_max: float = 1e-4
    t_final: float = 20.0
    record_every: float = 1.0
    dt: float = 1e-4
    forcing_scale: float = 0.1
    forcing_cycles: int = 2  # p = 1..cycles: 6 terms each
    forcing_delta: float = 0.0  # phase drift rate; != 0 stores the forcing per frame
    grf_alpha: float = 2.5
    grf_tau: float = 7.0
    grf_sigma: float = FNO_GRF_SIGMA
    max_cfl: float = 1.0


@dataclass
class TorusVisForceConfig(TorusVisConfig):
    """FFNO TorusVisForce: as TorusVis with the forcing drifting in time, delta = 0.2."""

    forcing_delta: float = 0.2


# ------------------------------------------------------------------------------------------------
# Config checks shared by the generators
# ------------------------------------------------------------------------------------------------
_FLOAT_FIELDS = (
    "nu",
    "nu_min",
    "nu_max",
    "t_final",
    "record_every",
    "dt",
    "forcing_scale",
    "forcing_delta",
    "grf_alpha",
    "grf_tau",
    "grf_sigma",
    "max_cfl",
)
_INT_FIELDS = ("resolution", "sim_resolution", "forcing_cycles")


def _coerce_numbers(cfg, gen: str) -> None:
    """Turn numeric strings (e.g. ``nu=1e-5`` parsed by YAML 1.1 as a string) into numbers, in place."""
    for name in _FLOAT_FIELDS + _INT_FIELDS:
        if not hasattr(cfg, name):
            continue
        v = getattr(cfg, name)
        kind = int if name in _INT_FIELDS else float
        try:
            if isinstance(v, bool):
                raise ValueError
            conv = float(v)
            if kind is int:
                if conv != int(conv):
                    raise ValueError
                conv = int(conv)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{gen} {name} must be a{'n integer' if kind is int else ' number'}, got {v!r}") from None
        setattr(cfg, name, conv)


def _steps(cfg, gen: str) -> tuple[int, int]:
    """(n_steps, record_interval) of a config, refusing times that are not whole multiples."""
    for name in ("dt", "record_every", "t_final"):
        if not getattr(cfg, name) > 0:
            raise ConfigError(f"{gen} {name} must be > 0, got {getattr(cfg, name)}")
    per = cfg.record_every / cfg.dt
    if abs(per - round(per)) > 1e-6 * max(1.0, per):
        raise ConfigError(
            f"{gen} record_every={cfg.record_every} must be a whole number of steps dt={cfg.dt}; "
            f"got record_every / dt = {per:.6g}"
        )
    n_rec = cfg.t_final / cfg.record_every
    if abs(n_rec - round(n_rec)) > 1e-6 * max(1.0, n_rec):
        raise ConfigError(f"{gen} t_final={cfg.t_final} must be a whole number of record_every={cfg.record_every}")
    return int(round(per)) * int(round(n_rec)), int(round(per))


def _check_grids(cfg, gen: str) -> None:
    if cfg.resolution < 4:
        raise ConfigError(f"{gen} resolution must be >= 4, got {cfg.resolution}")
    if cfg.sim_resolution < 8 or cfg.sim_resolution % 2:
        raise ConfigError(f"{gen} sim_resolution must be an even number >= 8, got {cfg.sim_resolution}")
    if cfg.sim_resolution % cfg.resolution:
        raise ConfigError(
            f"{gen} sim_resolution {cfg.sim_resolution} cannot be subsampled to resolution "
            f"{cfg.resolution}: expected a multiple of it (e.g. 256 -> 64)"
        )
    if not cfg.grf_alpha > 1.0:
        raise ConfigError(f"{gen} grf_alpha must be > 1 (finite-variance field in 2-D), got {cfg.grf_alpha}")
    if not cfg.grf_tau > 0:
        raise ConfigError(f"{gen} grf_tau must be > 0, got {cfg.grf_tau}")
    if not cfg.grf_sigma >= 0:
        raise ConfigError(f"{gen} grf_sigma must be >= 0, got {cfg.grf_sigma}")
    if not cfg.max_cfl > 0:
        raise ConfigError(f"{gen} max_cfl must be > 0, got {cfg.max_cfl}")


def grf_velocity_rms(n: int, alpha: float, tau: float, sigma: float) -> float:
    """Expected rms velocity sqrt(E ||u0||^2) of the GRF initial vorticity on an n x n grid.

    Mode k of w0 has variance sigma^2 (4 pi^2 |k|^2 + tau^2)^-alpha; its velocity is w_k / (2 pi |k|).
    """
    k = torch.fft.fftfreq(n, d=1.0 / n, dtype=torch.float64)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    k2[0, 0] = 1.0
    var = sigma**2 * (4 * math.pi**2 * k2 + tau**2) ** (-alpha) / (4 * math.pi**2 * k2)
    var[0, 0] = 0.0
    return float(var.sum().sqrt())


def velocity_estimate(cfg, forcing_terms: list[tuple[float, float]], nu_min: float) -> float:
    """Estimated peak |u| over the run, for the CFL check.

    ``forcing_terms``: (amplitude, |k|) of each sinusoid of the largest admissible forcing. The energy
    inequality d||u||/dt <= ||f_u|| - nu 4 pi^2 ||u|| gives ||u(t)|| <= ||u0|| + ||f_u|| min(t, 1/(4 pi^2 nu)),
    with ||f_u|| <= sum amp / (sqrt 2 * 2 pi |k|) (velocity of each forcing term). ||u0|| is taken as
    ``_RMS_SPREAD`` times its expectation, and the peak as ``_PEAK_TO_RMS`` times the rms. An estimate,
    not a bound: it is there to refuse hopeless time steps, not to certify stability.
    """
    u0 = grf_velocity_rms(cfg.sim_resolution, cfg.grf_alpha, cfg.grf_tau, cfg.grf_sigma)
    fu = sum(a / (math.sqrt(2.0) * 2 * math.pi * k) for a, k in forcing_terms)
    growth = cfg.t_final if nu_min <= 0 else min(cfg.t_final, 1.0 / (4 * math.pi**2 * nu_min))
    return _PEAK_TO_RMS * (_RMS_SPREAD * u0 + fu * growth)


def _check_cfl(cfg, gen: str, forcing_terms, nu_min: float) -> None:
    u = velocity_estimate(cfg, forcing_terms, nu_min)
    cfl = u * cfg.dt * cfg.sim_resolution
    if cfl > cfg.max_cfl:
        dt_max = cfg.max_cfl / (u * cfg.sim_resolution)
        raise ConfigError(
            f"{gen} dt={cfg.dt} is too large for sim_resolution {cfg.sim_resolution}: the estimated "
            f"CFL number U dt/dx = {cfl:.3g} (U ~ {u:.3g}) exceeds max_cfl={cfg.max_cfl}; expected "
            f"dt <= {dt_max:.3g} (with record_every a whole number of steps)"
        )


# ------------------------------------------------------------------------------------------------
# Generators
# ------------------------------------------------------------------------------------------------
class _TorusGenerator(Generator):
    """Shared machinery: grid, GRF initial field, batched solve, downsampling, error reporting."""

    field_labels = {"u": "vorticity", "f": "forcing"}

    inputs = ("u",)
    targets = ("u",)
    default_chunk_size = 16
    version = "1"

    def coords(self, cfg) -> dict[str, np.ndarray]:
        x = np.arange(cfg.resolution, dtype=np.float64) / cfg.resolution
        n_rec = int(round(cfg.t_final / cfg.record_every))
        return {"x": x, "y": x.copy(), "t": np.arange(n_rec + 1, dtype=np.float64) * cfg.record_every}

    def validate(self, cfg) -> None:
        g = self.name
        _coerce_numbers(cfg, g)
        _check_grids(cfg, g)
        nu_min = self.check_physics(cfg, g)
        _steps(cfg, g)
        _check_cfl(cfg, g, self._forcing_terms(cfg), nu_min)

    def check_physics(self, cfg, g: str) -> float:
        """Raise ConfigError for an impossible viscosity or forcing; return the smallest viscosity (for the CFL)."""
        raise NotImplementedError

    def viscosity_tag(self, cfg) -> str:
        raise NotImplementedError

    def tag(self, cfg) -> str:
        """``V<viscosity>_r<resolution>[from<sim_resolution>]_T<t_final>`` (the dataset file's name part)."""
        fine = f"from{cfg.sim_resolution}" if cfg.sim_resolution != cfg.resolution else ""
        return f"V{self.viscosity_tag(cfg)}_r{cfg.resolution}{fine}_T{cfg.t_final:g}"

    def _grid(self, cfg, device) -> torch.Tensor:
        return torch.arange(cfg.sim_resolution, dtype=torch.float64, device=device) / cfg.sim_resolution

    def initial_vorticity(self, cfg, rngs, device) -> torch.Tensor:
        """(B, n, n) float64 GRF initial vorticity on the simulation grid (draws first from each rng)."""
        n = cfg.sim_resolution
        xi = torch.stack([nested_normals_2d(r, n) for r in rngs]).to(device)
        return periodic_grf_2d(xi, n, cfg.grf_alpha, cfg.grf_tau, cfg.grf_sigma)

    def _solve(self, cfg, w0, nu, forcing: SpectralForcing | None, ids, seed) -> torch.Tensor:
        """Integrate the chunk; on CPU in sub-batches small enough for the cache (batching large grids on
        a CPU is slower per sample than one at a time), on other devices all at once."""
        n_steps, interval = _steps(cfg, self.name)
        n, bsz = cfg.sim_resolution, w0.shape[0]
        sub = max(1, _CPU_WORKING_SET // (64 * n * (n // 2 + 1))) if w0.device.type == "cpu" else bsz

        def rows(t, sl):
            return t if t is None or t.shape[0] == 1 else t[sl]

        parts = []
        for lo in range(0, bsz, sub):
            sl = slice(lo, lo + sub)
            nu_sl = nu[sl] if torch.is_tensor(nu) and nu.ndim else nu
            f_sl = (
                None
                if forcing is None
                else SpectralForcing(rows(forcing.f_c, sl), rows(forcing.f_s, sl), forcing.delta)
            )
            try:
                parts.append(
                    solve_vorticity(
                        w0[sl], nu_sl, f_sl, cfg.dt, n_steps, interval, stride=cfg.sim_resolution // cfg.resolution
                    )
                )
            except SolverBlowUp as exc:
                raise DataError(
                    f"{self.name} sample {int(ids[lo + exc.index])} (seed {seed}) blew up (NaN/Inf "
                    f"vorticity) by t = {exc.time:g}; expected a finite solution: reduce dt={cfg.dt} "
                    f"or raise sim_resolution={cfg.sim_resolution}"
                ) from None
        return torch.cat(parts)


@register_generator
class NavierStokesGenerator(_TorusGenerator):
    """FNO's Navier-Stokes data (ST-SSM's TorusLi); see the module docstring."""

    name = "navier_stokes"
    config_cls = NavierStokesConfig

    def check_physics(self, cfg: NavierStokesConfig, g: str) -> float:
        if not cfg.nu > 0:
            raise ConfigError(f"{g} nu (viscosity) must be > 0, got {cfg.nu}")
        if cfg.forcing not in ("li", "none"):
            raise ConfigError(f"{g} forcing must be 'li' or 'none', got {cfg.forcing!r}")
        return cfg.nu

    def viscosity_tag(self, cfg: NavierStokesConfig) -> str:
        return f"{cfg.nu:g}"

    def _forcing_terms(self, cfg) -> list[tuple[float, float]]:
        return [(cfg.forcing_scale, math.sqrt(2.0))] * 2 if cfg.forcing == "li" else []

    def generate(self, cfg: NavierStokesConfig, ids, seed, device):
        device = torch.device(device)
        rngs = [sample_rng(seed, int(i)) for i in ids]
        w0 = self.initial_vorticity(cfg, rngs, device)
        x = self._grid(cfg, device)
        f = li_forcing(x, x, cfg.forcing_scale) if cfg.forcing == "li" else torch.zeros_like(w0[0])
        forcing = SpectralForcing(torch.fft.rfft2(f)[None]) if cfg.forcing == "li" else None
        u = self._solve(cfg, w0, cfg.nu, forcing, ids, seed)
        k = cfg.sim_resolution // cfg.resolution
        f_s = f[::k, ::k]
        return {
            "fields/u": as_numpy(u)[..., None],
            "fields/f": np.broadcast_to(as_numpy(f_s)[None, ..., None], (len(ids), *f_s.shape, 1)).copy(),
            "params/nu": np.full(len(ids), cfg.nu, dtype=np.float32),
        }


@register_generator
class TorusVisGenerator(_TorusGenerator):
    """FFNO's TorusVis (static random forcing, random viscosity); see the module docstring."""

    name = "torus_vis"
    config_cls = TorusVisConfig

    def _forcing_terms(self, cfg) -> list[tuple[float, float]]:
        terms = []
        for p in range(1, cfg.forcing_cycles + 1):
            terms += [(cfg.forcing_scale, p)] * 4 + [(cfg.forcing_scale, p * math.sqrt(2.0))] * 2
        return terms

    def check_physics(self, cfg: TorusVisConfig, g: str) -> float:
        if not cfg.nu_min > 0:
            raise ConfigError(f"{g} nu_min (viscosity) must be > 0, got {cfg.nu_min}")
        if not cfg.nu_max >= cfg.nu_min:
            raise ConfigError(f"{g} nu_max must be >= nu_min={cfg.nu_min}, got {cfg.nu_max}")
        if not cfg.forcing_scale >= 0:
            raise ConfigError(f"{g} forcing_scale must be >= 0, got {cfg.forcing_scale}")
        kmax = max_dealiased_wavenumber(cfg.sim_resolution)
        if not 1 <= cfg.forcing_cycles <= kmax:
            raise ConfigError(
                f"{g} forcing_cycles must be between 1 and {kmax} (the largest wavenumber kept by "
                f"2/3 dealiasing at sim_resolution {cfg.sim_resolution}), got {cfg.forcing_cycles}"
            )
        if not math.isfinite(cfg.forcing_delta):
            raise ConfigError(f"{g} forcing_delta must be finite, got {cfg.forcing_delta}")
        return cfg.nu_min

    def viscosity_tag(self, cfg: TorusVisConfig) -> str:
        return f"{cfg.nu_min:g}-{cfg.nu_max:g}"

    def generate(self, cfg: TorusVisConfig, ids, seed, device):
        device = torch.device(device)
        rngs = [sample_rng(seed, int(i)) for i in ids]
        # scalars first, so that they do not depend on the number of GRF normals (which grows with the grid)
        nu = torch.stack(
            [cfg.nu_min + (cfg.nu_max - cfg.nu_min) * torch.rand(1, generator=r, dtype=torch.float64)[0] for r in rngs]
        )
        amps = torch.stack([torch.rand(6 * cfg.forcing_cycles, generator=r, dtype=torch.float64) for r in rngs])
        w0 = self.initial_vorticity(cfg, rngs, device)
        x = self._grid(cfg, device)
        f_c, f_s = random_forcing_quadratures(amps.to(device), x, x, cfg.forcing_scale)
        drift = cfg.forcing_delta != 0.0
        forcing = SpectralForcing(torch.fft.rfft2(f_c), torch.fft.rfft2(f_s) if drift else None, cfg.forcing_delta)
        u = self._solve(cfg, w0, nu.to(device), forcing, ids, seed)
        k = cfg.sim_resolution // cfg.resolution
        f_c, f_s = f_c[:, ::k, ::k], f_s[:, ::k, ::k]
        if drift:
            t = torch.as_tensor(self.coords(cfg)["t"], dtype=torch.float64, device=device)
            ph = cfg.forcing_delta * t[None, :, None, None]
            f = torch.cos(ph) * f_c[:, None] + torch.sin(ph) * f_s[:, None]  # (B, T, s, s)
        else:
            f = f_c
        return {
            "fields/u": as_numpy(u)[..., None],
            "fields/f": as_numpy(f)[..., None],
            "params/nu": as_numpy(nu),
            "params/forcing_amplitudes": as_numpy(amps),
        }


@register_generator
class TorusVisForceGenerator(TorusVisGenerator):
    """FFNO's TorusVisForce: TorusVis with the forcing drifting in time (delta = 0.2)."""

    name = "torus_vis_force"
    version = "1"
    config_cls = TorusVisForceConfig
