"""Can one first-order block represent T1 exactly? No: the obstruction, shown on the order-family model itself.

Claim checked (the protocol results page section 1, RESULTS.md, chonn.md): "one first-order block
represents T1 exactly", T1 = (I - tau^2 d_ss)^-1 on the periodic unit interval (paper 000, Methods Eqs. 39-43),
a linear operator whose action on a Fourier mode is independent of everything else:
``T1 cos(2 pi m s) = cos(2 pi m s) / (1 + tau^2 (2 pi m)^2)`` (substitute into ``y - tau^2 y'' = x``).

The model is the ``chonn1d/order1d`` preset with ``orders=[1]`` ("o1", 1,825 parameters), at the paper scale and
the cpu scale: ``lift -> CKB(order 1) -> proj`` with the block ``Y = X + W_o(ybar * SiLU(g))`` and
``u, g`` computed from ``Norm(X)``, a LayerNorm over the 16 channels (Eq. 31). The lift makes ``X = w x + b``
from the scalar input at each point, and a LayerNorm output is bounded whatever its input:
``|LN(z)_i| <= 4 |gamma_i| + |beta_i|`` for 16 channels (``|z_i - mean| <= 4 std``). Everything after it is
bounded on bounded inputs (SiLU, the depthwise-separable convolution, the selective cell, whose ZOH state
is a convex-like combination ``|v_k| <= max_j |b_j u_j| / lambda`` because the weights ``(1 - alpha_j)
prod_{m > j} alpha_m`` sum to at most 1, the gate), so for every choice of the 1,825 parameters

    model(x) = c1 x + c0 + r(x),     c1 = proj.w . lift.w,   c0 = proj.w . lift.b + proj.b,   |r(x)| <= M

with ``M`` computed from the parameters (``branch_bound``) and independent of x. The data normalisation
(gaussian, one mean and std per channel) is affine and keeps that form. Hence
``model(s x) / s -> c1 x`` as ``s -> inf``, while ``T1(s x) / s = T1 x``: exactness would need ``T1 x = c1 x``,
and T1 is not a multiple of the identity (its gain falls from 0.80 at mode 1 to 0.006 at mode 32). Scaling
only the Gaussian-amplitude part of an order-family input keeps it inside the data distribution's support,
so the model's error grows without bound along such rays *inside* the data distribution, for every
parameter choice (and since the model is real-analytic in x, it cannot agree with T1 on any open set of
the data's trigonometric amplitudes either). What is missing is a degree of freedom: with the LayerNorm in
front the block has no linear path from x to its output except the scalar residual c1 x.

The checks can fail: the same "asymptotically a multiple of x" probe rejects T1 itself (a model that did
represent T1 would fail it), and the same block without the LayerNorm (``model.norm=none``) has an unbounded
branch (its deviation from c1 x + c0 grows with the input's scale), so the bound is the LayerNorm's doing.
"""

import functools
import math

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.data.generators.order1d import Order1DConfig, apply_order_operator, evaluate_mixture, mixture_params
from neurodyn.experiments import load_experiment

F64 = torch.float64
N_POINTS, TAU = 256, 0.08
SILU_MIN = 0.2785  # |silu(z)| <= max(|z|, 0.2785): its minimum is -0.27846 at z = -1.2785


def o1_model(scale: str, overrides=()) -> torch.nn.Module:
    cfg = load_experiment("chonn1d/order1d", scale, ["model.orders=[1]", *overrides])
    m = dict(cfg["model"])
    name = m.pop("name")
    m.update(in_channels=1, out_channels=1)
    return ndm.build(name, m).to(F64).eval()


def randomize(model: torch.nn.Module, seed: int, spread: float) -> None:
    """Every parameter multiplied by an independent random factor exp(spread * N(0, 1)) and given random
    signs where the sign is free (not the log-rates): a draw from a wide region of parameter space."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            f = torch.exp(spread * torch.randn(p.shape, generator=g, dtype=F64))
            if "log_lambda" in name:
                p.add_(spread * torch.randn(p.shape, generator=g, dtype=F64))
            else:
                sign = torch.where(torch.rand(p.shape, generator=g) < 0.2, -1.0, 1.0).to(F64)
                p.mul_(f * sign)


@torch.no_grad()
def branch_bound(model) -> float:
    """M with |model(x) - c1 x - c0| <= M for every x (module docstring), from the parameters alone."""
    (blk,) = model.blocks
    D = blk.d_inner
    V = 4 * blk.norm.weight.abs() + blk.norm.bias.abs()  # LayerNorm output
    Wu, Wg = blk.in_proj.weight[:D].abs(), blk.in_proj.weight[D:].abs()
    P = Wu @ V
    dw = blk.conv.depthwise
    C = dw.weight.abs().sum((1, 2)) * P + dw.bias.abs()  # depthwise, zero padding
    pw = blk.conv.pointwise
    Q = pw.weight.abs()[:, :, 0] @ C + pw.bias.abs()
    U = Q.clamp_min(SILU_MIN)  # u = SiLU(DSConv(.))
    (cell,) = blk.cells
    R, N = cell.dt_rank, cell.d_state
    xp = cell.x_proj.abs()  # (K, R + 2N, D)
    Bn = xp[:, R : R + N] @ U  # (K, N): |b_k[n]|
    Cn = xp[:, R + N :] @ U  # (K, N): |c_k[n]|
    lam = cell.lam  # (K, D, N)
    state = Bn[:, None, :] * U[None, :, None] / lam  # |v| per (K, D, N)
    y = (Cn[:, None, :] * state).sum(-1) + cell.d.abs() * U[None]  # (K, D)
    ybar = y.sum(0) / (cell.directions if blk.merge == "mean" else 1)
    G = (Wg @ V).clamp_min(SILU_MIN)
    return float((model.proj.weight.abs()[0] * ybar * G).sum()) * 1.001  # knc_phi's clamp: < 1e-6


def order1d_input(seed: int, s: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An order-family input (the generator's own mixture) with its Gaussian-amplitude trigonometric part t
    scaled by s (still in the support of the data distribution): x = s t + pulses; returns (x, t, T1 t) with
    T1 t from the per-mode gains (the oracle)."""
    cfg = Order1DConfig(resolution=N_POINTS, tau=TAU)
    p = mixture_params(cfg, torch.Generator().manual_seed(seed))
    grid = torch.arange(N_POINTS, dtype=F64) / N_POINTS
    trig = dict(p, pulse_amp=torch.zeros_like(p["pulse_amp"]))
    t = evaluate_mixture(cfg, trig, grid)
    pulses = evaluate_mixture(cfg, dict(p, low=p["low"] * 0, broadband=p["broadband"] * 0), grid)
    m_low = torch.arange(1, cfg.low_modes + 1, dtype=F64)
    m_bb = torch.arange(cfg.low_modes + 1, cfg.broadband_max_mode + 1, dtype=F64)
    gain = lambda m: 1 / (1 + TAU**2 * (2 * math.pi * m) ** 2)  # noqa: E731
    t1 = torch.zeros(N_POINTS, dtype=F64)
    for m, (a, b) in zip(m_low, p["low"].T):
        t1 += gain(m) * (a * torch.cos(2 * math.pi * m * grid) + b * torch.sin(2 * math.pi * m * grid))
    w = m_bb ** (-cfg.broadband_decay)
    for m, wm, (a, b) in zip(m_bb, w, p["broadband"].T):
        t1 += gain(m) * wm * (a * torch.cos(2 * math.pi * m * grid) + b * torch.sin(2 * math.pi * m * grid))
    return s * t + pulses, t, t1


def limit_slope_residual(f, t: torch.Tensor, s: float = 1e8) -> float:
    """How far f(s t) / s is from the best multiple of t, relative to |t|: -> 0 as s grows for c1 x + c0 + bounded."""
    z = f(s * t) / s
    c = (z @ t) / (t @ t)
    return float((z - c * t).norm() / t.norm())


def affine_part(model) -> tuple[float, float]:
    """(c1, c0): the residual path proj(lift(x)) = c1 x + c0."""
    with torch.no_grad():
        return (
            float(model.proj.weight @ model.lift.weight),
            float(model.proj.weight @ model.lift.bias + model.proj.bias),
        )


def _run(model, x):
    with torch.no_grad():
        return model(x[None, :, None])[0, :, 0]


def test_the_oracle_t1_is_the_generators_and_not_a_multiple_of_the_identity():
    """The per-mode T1 of the docstring equals the generator's target (its T1), and on order-family inputs
    no multiple of the identity comes near it."""
    for seed in range(4):
        x, t, t1 = order1d_input(seed, 1.0)
        torch.testing.assert_close(apply_order_operator(t, 1, TAU), t1, rtol=1e-12, atol=1e-12)
        c = (t1 @ t) / (t @ t)
        assert (t1 - c * t).norm() / t1.norm() > 0.3


@pytest.mark.parametrize("scale", ["paper", "cpu"])
def test_one_first_order_block_is_c1_x_plus_a_bounded_term_so_it_cannot_be_t1(scale):
    """For the preset's o1 model at initialisation and at random parameters: |model(x) - c1 x - c0| <= M(params)
    for inputs up to 1e8 times the data's scale; hence its error against T1 grows linearly along rays in the
    data distribution, for every parameter choice."""
    for draw in range(4):
        model = o1_model(scale)
        if draw:
            randomize(model, seed=draw, spread=0.5 * draw)
        c1, c0 = affine_part(model)
        M = branch_bound(model)
        assert math.isfinite(M)
        for seed in range(2):
            for s in (1.0, 1e2, 1e4, 1e6, 1e8):
                x, t, t1 = order1d_input(seed, s)
                dev = (_run(model, x) - c1 * x - c0).abs().max().item()
                assert dev <= M, f"draw {draw}, s={s}: |model - c1 x - c0| = {dev:.3g} > M = {M:.3g}"
            # the consequences, at a scale where the bound is small against the linear part: the model's limit
            # slope is c1 t, and its error against T1 is at least s ||T1 t - c1 t|| - M - |c0|
            _, t, t1 = order1d_input(seed, 1.0)
            big = 1e7 * math.sqrt(N_POINTS) * (M + abs(c0)) / t.norm().item()
            assert limit_slope_residual(functools.partial(_run, model), t, big) < 1e-6
            x, t, t1 = order1d_input(seed, big)
            target = big * t1 + apply_order_operator(x - big * t, 1, TAU)
            err = (_run(model, x) - target).abs().max().item()
            gap = big * (t1 - c1 * t).abs().max().item()
            assert err >= gap - M - abs(c0) - 1e-12 * big * t.abs().max().item()
            assert err > 0.5 * gap


def test_the_obstruction_check_has_teeth():
    """A map that is T1 fails the probe the block passes, and without the LayerNorm the block's deviation from
    c1 x + c0 is no longer bounded (it grows with the input's scale)."""
    _, t, _ = order1d_input(0, 1.0)
    assert limit_slope_residual(lambda z: apply_order_operator(z, 1, TAU), t) > 0.1
    model = o1_model("paper", ["model.norm=none"])
    c1, c0 = affine_part(model)
    devs = [
        (_run(model, order1d_input(0, s)[0]) - c1 * order1d_input(0, s)[0] - c0).abs().max().item()
        for s in (1.0, 1e2, 1e4)
    ]
    assert devs[2] > 1e3 * max(devs[0], 1e-3)
    assert limit_slope_residual(lambda z: _run(model, z), t, s=1e4) > 1e-3
