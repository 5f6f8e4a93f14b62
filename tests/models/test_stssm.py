"""ST-SSM: parameter counts of the paper, bidirectionality, temporal causality and window (by autograd),
the zero-damping / integer-frequency kernel = F-FNO Fourier kernel, and a tiny run through the presets."""

import math

import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.models import build, count_parameters
from neurodyn.models.stssm import BiSweep
from neurodyn.nn.spectral import SpectralConv


# -- parameter counts (the paper's numbers fix the architecture) ---------------------------------------
@pytest.mark.parametrize(
    "kwargs, count",
    [
        ({"dims": 1}, 203_713),  # Table 1
        ({"dims": 2}, 369_665),  # Tables 2 and 5
        ({"dims": 2, "factorization": "zigzag"}, 402_945),  # ST-SSM-VM, Table 5
        ({"dims": 2, "factorization": "parallel"}, 503_297),  # ST-SSM-FF, Table 5
        ({"dims": 1, "bidirectional": False}, 203_713),  # App. C.1: 8 forward-only layers, same count
        ({"dims": 2, "bidirectional": False}, 369_665),
        ({"dims": 1, "memory_window": 0}, 203_713 - 20_736),  # App. C.2: no temporal module
        ({"dims": 2, "in_channels": 2, "ctx_channels": 1}, 369_665 + 128),  # TorusVis full context: f and nu
    ],
)
def test_parameter_counts(kwargs, count):
    assert count_parameters(build("stssm", **kwargs)) == count


def _small(**kw):
    base = dict(width=8, d_state=8, dt_min=0.05, dt_max=0.5, projection_channels=16)
    base.update(kw)
    return build("stssm", **base).double()


def _influence(model, x, index):
    """|d y[index] / d x| summed over channels, for the first sample."""
    x = x.clone().requires_grad_(True)
    y = model.forward_sequence(x) if x.dim() == model.config.dims + 3 else model(x)
    (g,) = torch.autograd.grad(y[index].sum(), x)
    return g[0].abs().sum(-1)


# -- bidirectionality (full field of view) -------------------------------------------------------------
def test_bidirectional_output_sees_both_sides_unidirectional_only_one():
    X, x0 = 24, 10
    x = torch.randn(1, X, 1, dtype=torch.float64)  # one frame, no time axis
    g = _influence(_small(dims=1), x, (0, x0))
    assert (g > 0).all()  # every input point matters: left and right of x0
    g = _influence(_small(dims=1, bidirectional=False), x, (0, x0))
    tol = 1e-12 * g.max()
    assert (g[: x0 + 1] > tol).all() and (g[x0 + 1 :] <= tol).all()


@pytest.mark.parametrize("factorization", ["sequential", "parallel", "zigzag"])
def test_2d_variants_have_a_full_field_of_view(factorization):
    x = torch.randn(1, 8, 8, 1, dtype=torch.float64)
    g = _influence(_small(dims=2, factorization=factorization, n_layers_pre=1, n_layers_post=1), x, (0, 3, 4))
    assert (g > 1e-14 * g.max()).all()  # all four quadrants around (3, 4)
    if factorization == "sequential":  # forward-only sweeps x then y: only the lower-left quadrant
        g = _influence(_small(dims=2, bidirectional=False, n_layers_pre=1, n_layers_post=0), x, (0, 3, 4))
        tol = 1e-12 * g.max()
        assert (g[:4, :5] > tol).all() and (g[4:] <= tol).all() and (g[:, 5:] <= tol).all()


# -- temporal causality and the memory window -----------------------------------------------------------
@pytest.mark.parametrize("K", [0, 1, 2, 4])
def test_output_at_t_sees_frames_t_minus_k_plus_1_to_t(K):
    T, t = 9, 6
    model = _small(dims=1, memory_window=K, n_layers_pre=1, n_layers_post=1)
    x = torch.randn(2, T, 12, 1, dtype=torch.float64)
    g = _influence(model, x, (0, t)).sum(-1)  # per input frame
    seen = (g > 1e-12 * g.max()).tolist()
    assert seen == [t - max(K, 1) < s <= t for s in range(T)]


def test_forward_is_the_last_step_of_the_teacher_forced_pass():
    model = _small(dims=2, memory_window=3)
    x = torch.randn(2, 5, 6, 8, 1, dtype=torch.float64)
    y = model(x)
    assert y.shape == (2, 1, 6, 8, 1)
    assert torch.allclose(y[:, 0], model.forward_sequence(x)[:, -1], atol=1e-12)
    # only the last K frames matter
    assert torch.allclose(model(x[:, -3:]), y, atol=1e-12)


def test_context_vector_and_context_fields():
    model = _small(dims=2, in_channels=2, ctx_channels=1)
    x, ctx = torch.randn(3, 4, 8, 8, 2, dtype=torch.float64), torch.rand(3, 1, dtype=torch.float64)
    y = model(x, ctx=ctx)
    assert y.shape == (3, 1, 8, 8, 1)
    assert not torch.allclose(y, model(x, ctx=ctx + 1))
    with pytest.raises(ValueError, match="ctx"):
        model(x)
    with pytest.raises(ValueError, match="frames"):
        model(torch.randn(3, 8, 2, dtype=torch.float64))


def test_bad_configs():
    with pytest.raises(ConfigError, match="factorization"):
        build("stssm", factorization="diagonal")
    with pytest.raises(ConfigError, match="2-D variant"):
        build("stssm", dims=1, factorization="zigzag")
    with pytest.raises(ConfigError, match="residual"):
        build("stssm", residual="both")


# -- the F-FNO special case: zero damping, integer frequencies ---------------------------------------
def test_zero_damping_integer_frequency_kernel_is_an_ffno_fourier_kernel():
    """A bidirectional S4D sweep with Re A = 0, dt Im A_n = 2 pi k_n / L (k_n = 0 .. L/2 - 1) and matched
    C, D is exactly a per-channel F-FNO Fourier layer ``irfft(R_k . rfft(u))`` keeping modes 0 .. L/2 - 1,
    despite the zero-padded (non-circular) convolution: the kernel is L-periodic, and the backward sweep
    supplies the wrapped-around part."""
    torch.manual_seed(3)
    H, L, N = 3, 64, 64  # N/2 = 32 state pairs <-> the 32 Fourier modes 0..31 kept at L = 64
    m = L // 2
    R = torch.randn(H, m, dtype=torch.cdouble)  # diagonal F-FNO weights R_k (one per channel)
    spec = SpectralConv(H, H, (m,), bias=False).double()
    with torch.no_grad():
        spec.weight.zero_()
        for c in range(H):
            spec.weight[:, c, 0, c] = R[c].real
            spec.weight[:, c, 1, c] = R[c].imag

    sweep = BiSweep(H, N, "lin", 1e-3, 1e-1).double()
    dt = 1.0 / L
    k = torch.arange(m, dtype=torch.float64)
    A = torch.complex(torch.full((H, m), -1e-13, dtype=torch.float64), (2 * math.pi * k / (L * dt)).expand(H, m))
    Bbar = torch.expm1(dt * A) / A  # B = 1
    cbar = R / L
    cbar[:, 0] = R[:, 0].real / (2 * L)  # the zero mode counts once (irfft drops Im R_0)
    kappa0 = 2 * cbar.sum(-1).real  # lag-0 tap, which both directions would add
    for block, cb, D in ((sweep.fwd, cbar, torch.zeros(H)), (sweep.bwd, cbar.conj(), -kappa0)):
        with torch.no_grad():
            block.log_dt.fill_(math.log(dt))
            block.log_neg_re_A.copy_(torch.log(-A.real))
            block.im_A.copy_(A.imag)
            block.B.copy_(torch.view_as_real(torch.ones(H, m, dtype=torch.cdouble)))
            block.C.copy_(torch.view_as_real(cb / Bbar))
            block.D.copy_(D)
    u = torch.randn(5, H, L, dtype=torch.float64)
    with torch.no_grad():
        y_ssm = sweep.fwd.conv(u) + sweep.bwd.conv(u.flip(-1)).flip(-1)
        y_ffno = spec(u)
    assert torch.allclose(y_ssm, y_ffno, rtol=0, atol=1e-9 * float(y_ffno.abs().max()))
    # with damping the kernel decays and is no longer the periodic Fourier kernel
    with torch.no_grad():
        sweep.fwd.log_neg_re_A.fill_(math.log(5.0))
        y_damped = sweep.fwd.conv(u) + sweep.bwd.conv(u.flip(-1)).flip(-1)
    assert (y_damped - y_ffno).abs().max() > 1e-2 * y_ffno.abs().max()


# -- a tiny run through the preset ------------------------------------------------------------------
def test_tiny_preset_trains_and_evaluates_by_rollout(data_dir, tmp_path, tiny_run):
    from neurodyn.experiments import load_experiment
    from neurodyn.train.runs import batches

    cfg = load_experiment("stssm/ks-nu0.1", "tiny")
    run = tiny_run(cfg, tmp_path / "run")
    final = run.final
    assert math.isfinite(final["rel_l2"])
    n_steps = cfg["data"]["n_frames"] - cfg["data"]["t_in"]
    assert len(final["rel_l2_per_step"]) == n_steps
    # the reported errors are those of a rollout written here: the saved model fed its own (de-normalised)
    # predictions back, t_in = 4 frames in, one frame out per step, never a true frame after the first t_in
    r = run.restored
    norm, t_in = r.task.u_norm, cfg["data"]["t_in"]
    per_step, horizon = [], []
    with torch.no_grad():
        for b in batches(r.split("test"), 1):
            frames = b["x"]  # (1, t_in, X, 1), physical units
            assert frames.shape[1] == t_in and b["y"].shape[1] == n_steps
            for _ in range(n_steps):
                frames = torch.cat([frames, norm.decode(r.model(norm.encode(frames[:, -t_in:])))], 1)
            pred, true = frames[:, t_in:], b["y"]
            per_step.append((pred - true).flatten(2).norm(dim=2) / true.flatten(2).norm(dim=2))
            horizon.append((pred - true).flatten(1).norm(dim=1) / true.flatten(1).norm(dim=1))
    assert final["rel_l2_per_step"] == pytest.approx(torch.cat(per_step).mean(0).tolist(), rel=1e-5)
    assert final["rel_l2"] == pytest.approx(torch.cat(horizon).mean().item(), rel=1e-5)
    assert final["rel_l2_per_step"][-1] > final["rel_l2_per_step"][0]  # errors accumulate along the rollout
    before, after = run.train_errors()  # training lowered the training error of the initial weights
    assert after < 0.97 * before, (before, after)
