"""The S4D block of ST-SSM: parameter count, initialisations, convolution = recurrence, window causality."""

import math

import numpy as np
import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.models import count_parameters
from neurodyn.nn.s4d import S4D, s4d_init


def test_parameter_count_matches_paper():
    # every SSM layer of the paper (S4-FFNO minus FFNO in Tables 1-2) has 20,736 parameters
    assert count_parameters(S4D(64, 64)) == 20_736
    for H, N in ((8, 4), (16, 32), (64, 16)):
        assert count_parameters(S4D(H, N)) == 3 * H * N + 2 * H * H + 4 * H


@pytest.mark.parametrize("init", ["lin", "inv"])
def test_closed_form_inits(init):
    N = 16
    p = s4d_init(init, 3, N)
    n = torch.arange(N // 2, dtype=torch.float64)
    im = math.pi * n if init == "lin" else (N / math.pi) * (N / (2 * n + 1) - 1)
    assert torch.allclose(p["A"].real, torch.full((3, N // 2), -0.5, dtype=torch.float64))
    assert torch.allclose(p["A"].imag, im.expand(3, -1))
    assert torch.all(p["B"] == 1)
    dt = p["log_dt"].exp()
    assert torch.all((dt >= 1e-3) & (dt <= 1e-1))


def test_legs_init_is_the_normal_part_of_hippo_legs():
    N = 16
    p = s4d_init("legs", 2, N)
    n = np.arange(N)
    r = np.sqrt(2 * n + 1)
    A = -np.tril(np.outer(r, r), -1) - np.diag(n + 1)
    S = A + np.outer(np.sqrt(n + 0.5), np.sqrt(n + 0.5))
    eig = np.linalg.eigvals(S)
    ours = p["A"][0].numpy()
    both = np.concatenate([ours, ours.conj()])
    both, eig = both[np.argsort(both.imag)], eig[np.argsort(eig.imag)]
    assert np.allclose(both, eig, atol=1e-8)
    assert np.all(ours.imag > 0) and np.allclose(ours.real, -0.5)
    # B in the eigenbasis: |B_n|^2 over all 2 * (N/2) eigenvectors adds up to |B|^2 = sum (2n+1) = N^2
    assert np.isclose(2 * np.sum(np.abs(p["B"][0].numpy()) ** 2), N**2)


@pytest.mark.parametrize("init", ["legs", "lin", "inv"])
@pytest.mark.parametrize("window", [None, 1, 3])
def test_convolution_equals_recurrent_step(init, window):
    torch.manual_seed(1)
    m = S4D(6, 8, init=init, dt_min=0.05, dt_max=0.5, window=window).double()
    u = torch.randn(2, 3, 40, 6, dtype=torch.float64)  # (..., L, H)
    y = m(u)
    state, ys = None, []
    for t in range(u.shape[-2]):
        yt, state = m.step(u[..., t, :], state)
        ys.append(yt)
    assert torch.allclose(torch.stack(ys, -2), y, rtol=1e-10, atol=1e-10)
    # the recurrent state shape of the full (untruncated) system
    if window is None:
        assert state.shape == (2, 3, 6, 4) and state.is_complex()
    else:
        assert state.shape == (2, 3, 6, window - 1)


def test_block_is_conv_then_gelu_linear_glu():
    m = S4D(4, 8).double()
    u = torch.randn(3, 10, 4, dtype=torch.float64)
    A, B, C, log_dt = m.ssm()
    dtA = log_dt.exp()[:, None] * A
    Bbar = torch.expm1(dtA) / A * B
    K = torch.stack([2 * (C * Bbar * torch.exp(dtA * l)).sum(-1).real for l in range(10)], -1)  # (H, L)
    z = torch.zeros(3, 10, 4, dtype=torch.float64)
    for t in range(10):
        for l in range(t + 1):
            z[:, t] += K[:, l] * u[:, t - l]
    z = z + m.D * u
    a = torch.nn.functional.gelu(z) @ m.output_linear.weight.T + m.output_linear.bias
    want = a[..., :4] * torch.sigmoid(a[..., 4:])
    assert torch.allclose(m(u), want, atol=1e-10)


def test_window_truncates_the_memory():
    K = 3
    m = S4D(5, 8, window=K, dt_min=0.01, dt_max=0.1).double()
    u = torch.randn(1, 12, 5, dtype=torch.float64, requires_grad=True)
    t = 8
    (g,) = torch.autograd.grad(m(u)[0, t].sum(), u)
    g = g[0].abs().sum(-1)
    seen = g > 1e-12 * g.max()  # FFT round-off leaves ~1e-17 elsewhere
    assert seen.tolist() == [t - K < s <= t for s in range(12)]
    # without a window the output sees the whole past (and nothing of the future)
    m.window = None
    (g,) = torch.autograd.grad(m(u)[0, t].sum(), u)
    g = g[0].abs().sum(-1)
    assert (g > 1e-12 * g.max()).tolist() == [s <= t for s in range(12)]


def test_bad_arguments():
    with pytest.raises(ConfigError, match="init"):
        S4D(4, 8, init="legt")
    with pytest.raises(ConfigError, match="d_state"):
        S4D(4, 7)
    with pytest.raises(ConfigError, match="window"):
        S4D(4, 8, window=0)
    with pytest.raises(ValueError, match=r"\(\.\.\., L, 4\)"):
        S4D(4, 8)(torch.randn(2, 4, 10))
