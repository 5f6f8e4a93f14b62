"""2-D shallow water, the PDEBench radial dam break (``2D_rdb_NA_NA.h5``) used by CHONN (Fig. 5a-c):

    h_t  + (h u)_x               + (h v)_y               = 0
    (hu)_t + (h u^2 + g h^2 / 2)_x + (h u v)_y             = 0
    (hv)_t + (h u v)_x             + (h v^2 + g h^2 / 2)_y = 0

on [-L, L]^2 (L = 2.5) with flat bathymetry, g = 1.0 (PDEBench's ``gravity: 1.0``), transmissive
(zero-gradient) boundaries, u = v = 0 and h = h_in = 2 where sqrt(x^2 + y^2) < r, h_out = 1 elsewhere
(CHONN Eq. 65; sampled at cell centres), radius r ~ U(0.3, 0.7) per sample, t in [0, 1], 101 stored
frames (100 steps of 0.01), 128 x 128 cells.

Discretisation (ours; PDEBench used PyClaw's wave-propagation Roe solver with the MC limiter):
cell-centred finite volumes, dimension-unsplit. MUSCL reconstruction of the primitive variables
(h, u, v) with the ``limiter`` (minmod default; mc; none = first order), which keeps the face depths
between neighbouring cell depths (hence positive); numerical flux ``flux`` = HLL with Davis wave-speed
estimates S_L = min(u_L - c_L, u_R - c_R), S_R = max(u_L + c_L, u_R + c_R), c = sqrt(g h) (default) or
Rusanov (local Lax-Friedrichs); SSP-RK2 (Heun) in time. Each sample takes its own adaptive step
dt = min over cells of cfl / ((|u| + c)/dx + (|v| + c)/dy), shortened so that the steps land exactly on
every output time (the remaining interval is split into ceil(remaining / dt_cfl) equal steps), so a
sample does not depend on the other samples of its chunk. Two ghost cells per side copy the edge cells
(transmissive). Mass sum(h) dx dy is conserved to round-off until a wave reaches the boundary (for the
default problem the front stays about 0.5 away from the boundary at t = 1).

The solver stops with a DataError naming the sample and seed when h becomes non-positive or non-finite,
or when a frame needs more than ``max_substeps`` steps.

Stored per sample: ``fields/u`` (T, N, N, C) with T = n_steps + 1 and C = 1 (h only, as PDEBench's
2D SWE file; ``output="h"``) or C = 3 (h, hu, hv; ``output="conserved"``); array axis 1 is x and axis 2
is y (``coords/x``, ``coords/y`` cell centres, ``coords/t`` frame times); ``params/radius`` (n,).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import ConfigError, DataError
from .base import Generator, as_numpy, register_generator, sample_rng


@dataclass
class ShallowWaterConfig:
    resolution: int = 128  # cells per side
    half_width: float = 2.5  # domain [-half_width, half_width]^2
    gravity: float = 1.0
    h_in: float = 2.0
    h_out: float = 1.0
    radius_min: float = 0.3
    radius_max: float = 0.7
    t_end: float = 1.0
    n_steps: int = 100  # stored frames: n_steps + 1 (t = 0 included)
    cfl: float = 0.4
    flux: str = "hll"  # hll | rusanov
    limiter: str = "minmod"  # minmod | mc | none
    output: str = "h"  # h | conserved (h, hu, hv)
    max_substeps: int = 100000  # per stored frame, guard against a collapsing time step


def _minmod(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(a * b > 0, torch.sign(a) * torch.minimum(a.abs(), b.abs()), torch.zeros_like(a))


def _slopes(w: torch.Tensor, dim: int, limiter: str) -> torch.Tensor:
    """Limited slopes of cells 1..n-2 along ``dim`` (length n - 2)."""
    n = w.shape[dim]
    d = w.narrow(dim, 1, n - 1) - w.narrow(dim, 0, n - 1)  # forward differences, n - 1
    a, b = d.narrow(dim, 0, n - 2), d.narrow(dim, 1, n - 2)  # left and right differences of cells 1..n-2
    if limiter == "minmod":
        return _minmod(a, b)
    if limiter == "mc":
        c = 0.5 * (a + b)
        m = torch.minimum(torch.minimum((2 * a).abs(), (2 * b).abs()), c.abs())
        return torch.where(a * b > 0, torch.sign(c) * m, torch.zeros_like(a))
    return torch.zeros_like(a)


def _face_states(w: torch.Tensor, dim: int, limiter: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Left/right states at the n + 1 faces of the n interior cells of ``w`` padded by 2 ghosts (n + 4)."""
    n = w.shape[dim] - 4
    s = _slopes(w, dim, limiter)  # cells 1..n+2
    left = w.narrow(dim, 1, n + 1) + 0.5 * s.narrow(dim, 0, n + 1)  # cells 1..n+1, right edge
    right = w.narrow(dim, 2, n + 1) - 0.5 * s.narrow(dim, 1, n + 1)  # cells 2..n+2, left edge
    return left, right


def _normal_flux(hl, unl, utl, hr, unr, utr, g: float, flux: str) -> torch.Tensor:
    """Numerical flux (mass, normal momentum, tangential momentum) across faces with normal velocity un."""
    cl, cr = torch.sqrt(g * hl), torch.sqrt(g * hr)
    ql = torch.stack((hl, hl * unl, hl * utl))
    qr = torch.stack((hr, hr * unr, hr * utr))
    fl = torch.stack((hl * unl, hl * unl * unl + 0.5 * g * hl * hl, hl * unl * utl))
    fr = torch.stack((hr * unr, hr * unr * unr + 0.5 * g * hr * hr, hr * unr * utr))
    if flux == "rusanov":
        a = torch.maximum(unl.abs() + cl, unr.abs() + cr)
        return 0.5 * (fl + fr) - 0.5 * a * (qr - ql)
    sl = torch.clamp(torch.minimum(unl - cl, unr - cr), max=0.0)
    sr = torch.clamp(torch.maximum(unl + cl, unr + cr), min=0.0)
    return (sr * fl - sl * fr + sl * sr * (qr - ql)) / (sr - sl)


def swe_rhs(
    q: torch.Tensor, dx: float, dy: float, g: float, flux: str = "hll", limiter: str = "minmod"
) -> torch.Tensor:
    """-(dF/dx + dG/dy) for conserved q = (h, hu, hv): (B, 3, Nx, Ny), transmissive boundaries."""
    p = F.pad(q, (2, 2, 2, 2), mode="replicate")
    h = p[:, 0]
    w = torch.stack((h, p[:, 1] / h, p[:, 2] / h), dim=1)  # primitive (h, u, v)
    wx = w[:, :, :, 2:-2]  # x-sweeps on the interior y range
    l, r = _face_states(wx, 2, limiter)
    fx = _normal_flux(l[:, 0], l[:, 1], l[:, 2], r[:, 0], r[:, 1], r[:, 2], g, flux)  # (3, B, Nx+1, Ny)
    wy = w[:, :, 2:-2, :]
    l, r = _face_states(wy, 3, limiter)
    gy = _normal_flux(l[:, 0], l[:, 2], l[:, 1], r[:, 0], r[:, 2], r[:, 1], g, flux)  # (mass, hv, hu)
    gy = gy[[0, 2, 1]]
    div = (fx[:, :, 1:] - fx[:, :, :-1]) / dx + (gy[:, :, :, 1:] - gy[:, :, :, :-1]) / dy
    return -div.transpose(0, 1)


def max_speed(q: torch.Tensor, dx: float, dy: float, g: float) -> torch.Tensor:
    """(B,) max over cells of (|u| + c)/dx + (|v| + c)/dy."""
    h = q[:, 0]
    c = torch.sqrt(g * h)
    s = (q[:, 1].abs() / h + c) / dx + (q[:, 2].abs() / h + c) / dy
    return s.flatten(1).amax(1)


def solve_swe(
    q0: torch.Tensor,
    dx: float,
    dy: float,
    times,
    g: float = 1.0,
    cfl: float = 0.4,
    flux: str = "hll",
    limiter: str = "minmod",
    max_substeps: int = 100000,
    labels=None,
    channels=(0, 1, 2),
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Integrate conserved states q0 (B, 3, Nx, Ny) and return them at ``times`` (increasing, times[0] = 0):
    (B, T, len(channels), Nx, Ny) in ``out_dtype`` (default: q0's). Per-sample adaptive SSP-RK2 steps landing
    on every output time. ``labels`` (sample ids, seed) only serve the error message."""
    q = q0.clone()
    keep = list(channels)
    out_dtype = out_dtype or q.dtype
    out = [q[:, keep].to(out_dtype)]
    b = q.shape[0]
    for k in range(1, len(times)):
        rem = torch.full((b,), float(times[k]) - float(times[k - 1]), dtype=q.dtype, device=q.device)
        for step in range(max_substeps + 1):
            if not bool((rem > 0).any()):
                break
            if step == max_substeps:
                _fail(
                    labels,
                    int((rem > 0).nonzero()[0, 0]),
                    f"needed more than {max_substeps} steps to reach t = {float(times[k]):g} (time step collapsed)",
                )
            dt_cfl = cfl / max_speed(q, dx, dy, g)
            dt = torch.where(rem > 0, rem / torch.ceil(rem / dt_cfl), torch.zeros_like(rem))
            dtb = dt[:, None, None, None]
            q1 = q + dtb * swe_rhs(q, dx, dy, g, flux, limiter)
            q = 0.5 * q + 0.5 * (q1 + dtb * swe_rhs(q1, dx, dy, g, flux, limiter))
            rem = torch.where(dt == rem, torch.zeros_like(rem), rem - dt)
            bad = ~(q[:, 0].flatten(1).amin(1) > 0) | ~torch.isfinite(q.flatten(1)).all(1)
            if bool(bad.any()):
                _fail(
                    labels,
                    int(bad.nonzero()[0, 0]),
                    f"depth h became non-positive or non-finite before t = {float(times[k]):g}",
                )
        out.append(q[:, keep].to(out_dtype))
    return torch.stack(out, dim=1)


def _fail(labels, j: int, what: str):
    if labels is None:
        raise DataError(f"shallow-water solve of batch element {j}: {what}")
    ids, seed = labels
    raise DataError(f"shallow_water sample {int(ids[j])} (seed {seed}): {what}; lower cfl or check the config")


def cell_centres(cfg: ShallowWaterConfig, dtype=torch.float64, device=None) -> torch.Tensor:
    dx = 2 * cfg.half_width / cfg.resolution
    return -cfg.half_width + (torch.arange(cfg.resolution, dtype=dtype, device=device) + 0.5) * dx


@register_generator
class ShallowWaterGenerator(
    Generator, name="shallow_water", config=ShallowWaterConfig, inputs=("u",), targets=("u",), chunk_size=8
):
    field_labels = {"u": "water depth h (and momenta hu, hv)"}

    def validate(self, cfg: ShallowWaterConfig) -> None:
        if cfg.resolution < 4:
            raise ConfigError(f"shallow_water resolution must be >= 4 cells per side, got {cfg.resolution}")
        for f in ("half_width", "gravity", "h_in", "h_out", "t_end"):
            v = getattr(cfg, f)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"shallow_water {f} must be > 0, got {v}")
        if not 0 < cfg.cfl <= 1:
            raise ConfigError(
                f"shallow_water cfl must lie in (0, 1] (the unsplit scheme is unstable above 1; 0.4 "
                f"is the default), got {cfg.cfl}"
            )
        if not 0 < cfg.radius_min <= cfg.radius_max:
            raise ConfigError(
                f"shallow_water needs 0 < radius_min <= radius_max, got {cfg.radius_min} and {cfg.radius_max}"
            )
        if cfg.radius_max >= cfg.half_width:
            raise ConfigError(
                f"shallow_water radius_max {cfg.radius_max} reaches outside the domain "
                f"[-{cfg.half_width}, {cfg.half_width}]^2; expected radius_max < half_width"
            )
        dx = 2 * cfg.half_width / cfg.resolution
        if cfg.radius_min < dx / 2:
            raise ConfigError(
                f"shallow_water radius_min {cfg.radius_min} is below half a cell ({dx / 2:g}): the dam "
                "would contain no cell centre; raise radius_min or the resolution"
            )
        if cfg.n_steps < 1:
            raise ConfigError(f"shallow_water n_steps must be >= 1, got {cfg.n_steps}")
        if cfg.max_substeps < 1:
            raise ConfigError(f"shallow_water max_substeps must be >= 1, got {cfg.max_substeps}")
        for f, allowed in (
            ("flux", ("hll", "rusanov")),
            ("limiter", ("minmod", "mc", "none")),
            ("output", ("h", "conserved")),
        ):
            if getattr(cfg, f) not in allowed:
                raise ConfigError(f"shallow_water {f} must be one of {', '.join(allowed)}, got {getattr(cfg, f)!r}")

    def tag(self, cfg: ShallowWaterConfig) -> str:
        return f"r{cfg.resolution}_T{cfg.n_steps}"

    def coords(self, cfg: ShallowWaterConfig) -> dict[str, np.ndarray]:
        x = cell_centres(cfg).numpy()
        return {"x": x, "y": x.copy(), "t": np.linspace(0.0, cfg.t_end, cfg.n_steps + 1)}

    def radii(self, cfg: ShallowWaterConfig, ids, seed: int) -> torch.Tensor:
        u = torch.stack([torch.rand(1, generator=sample_rng(seed, int(i)), dtype=torch.float64)[0] for i in ids])
        return cfg.radius_min + (cfg.radius_max - cfg.radius_min) * u

    def initial_state(self, cfg: ShallowWaterConfig, radius: torch.Tensor) -> torch.Tensor:
        """(B, 3, N, N) conserved initial state for dam radii ``radius`` (B,)."""
        x = cell_centres(cfg, device=radius.device)
        rr = torch.sqrt(x[:, None] ** 2 + x[None, :] ** 2)
        inside = rr[None] < radius[:, None, None]
        h = torch.full(inside.shape, cfg.h_out, dtype=radius.dtype, device=radius.device).masked_fill(inside, cfg.h_in)
        return torch.stack((h, torch.zeros_like(h), torch.zeros_like(h)), dim=1)

    def generate(self, cfg: ShallowWaterConfig, ids, seed, device):
        device = torch.device(device)
        radius = self.radii(cfg, ids, seed)
        q0 = self.initial_state(cfg, radius.to(device))
        dx = 2 * cfg.half_width / cfg.resolution
        times = np.linspace(0.0, cfg.t_end, cfg.n_steps + 1)
        u = solve_swe(
            q0,
            dx,
            dx,
            times,
            cfg.gravity,
            cfg.cfl,
            cfg.flux,
            cfg.limiter,
            cfg.max_substeps,
            labels=(ids, seed),
            channels=(0,) if cfg.output == "h" else (0, 1, 2),
            out_dtype=torch.float32,
        )
        return {"fields/u": as_numpy(u.permute(0, 1, 3, 4, 2)), "params/radius": as_numpy(radius)}
