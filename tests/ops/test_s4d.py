"""S4D kernel + FFT convolution against the step-by-step recurrence and a direct convolution."""

import math

import pytest
import torch

from neurodyn.ops import fft_conv, s4d_kernel, s4d_recurrent

from .helpers import rel_err


def _ssm(H=3, N2=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.complex(
        -0.5 * torch.ones(H, N2, dtype=torch.float64), math.pi * torch.arange(N2, dtype=torch.float64).repeat(H, 1)
    )  # S4D-Lin
    B = torch.randn(H, N2, generator=g, dtype=torch.cdouble)
    C = torch.randn(H, N2, generator=g, dtype=torch.cdouble)
    log_dt = torch.empty(H, dtype=torch.float64).uniform_(math.log(1e-3), math.log(1e-1), generator=g)
    return A, B, C, log_dt


def _direct(u, K):
    """y[t] = sum_{l < L_k, l <= t} K[l] u[t - l], by an explicit double sum."""
    L, Lk = u.shape[-1], K.shape[-1]
    y = torch.zeros_like(u)
    for t in range(L):
        for l in range(min(Lk, t + 1)):
            y[..., t] += K[:, l] * u[..., t - l]
    return y


def test_kernel_equals_recurrence():
    A, B, C, log_dt = _ssm()
    u = torch.randn(2, 3, 200, dtype=torch.float64)
    D = torch.randn(3, dtype=torch.float64)
    y_conv = fft_conv(u, s4d_kernel(A, B, C, log_dt, 200), D)
    y_rec, state = s4d_recurrent(u, A, B, C, log_dt, D, return_state=True)
    assert rel_err(y_conv, y_rec) < 1e-12
    # the state carries over: running the second half from the first half's state continues exactly
    y1, s1 = s4d_recurrent(u[..., :120], A, B, C, log_dt, D, return_state=True)
    y2 = s4d_recurrent(u[..., 120:], A, B, C, log_dt, D, state=s1)
    assert rel_err(torch.cat([y1, y2], -1), y_rec) < 1e-12


def test_kernel_is_vandermonde_with_zoh():
    A, B, C, log_dt = _ssm(H=1, N2=2)
    K = s4d_kernel(A, B, C, log_dt, 5)
    dtA = log_dt.exp()[:, None] * A
    Bbar = (dtA.exp() - 1) / A * B
    for l in range(5):
        assert torch.allclose(K[0, l], 2 * (C * Bbar * torch.exp(dtA * l)).sum().real)
    assert torch.allclose(s4d_kernel(A, None, C, log_dt, 3)[0, 0], 2 * (C * (dtA.exp() - 1) / A).sum().real)


@pytest.mark.parametrize("window", [1, 4, 17])
def test_window_truncates_memory(window):
    A, B, C, log_dt = _ssm()
    u = torch.randn(2, 3, 40, dtype=torch.float64)
    K = s4d_kernel(A, B, C, log_dt, 40, window=window)
    assert K.shape == (3, window)
    assert torch.allclose(K, s4d_kernel(A, B, C, log_dt, 40)[:, :window])
    y = fft_conv(u, K)
    assert rel_err(y, _direct(u, K)) < 1e-12
    # output at t depends on inputs t - window + 1 .. t only
    jac = torch.autograd.functional.jacobian(lambda v: fft_conv(v, K)[0, 0, 30], u)[0, 0]
    dep = (jac.abs() > 1e-14).nonzero().flatten().tolist()
    assert set(dep) <= set(range(30 - window + 1, 31))


def test_bidirectional_is_flipped_sum_and_sees_both_sides():
    A, B, C, log_dt = _ssm()
    A2, B2, C2, log_dt2 = _ssm(seed=1)
    u = torch.randn(1, 3, 30, dtype=torch.float64)
    Kf, Kb = s4d_kernel(A, B, C, log_dt, 30), s4d_kernel(A2, B2, C2, log_dt2, 30)
    y = fft_conv(u, Kf, K_rev=Kb)
    want = s4d_recurrent(u, A, B, C, log_dt) + s4d_recurrent(u.flip(-1), A2, B2, C2, log_dt2).flip(-1)
    assert rel_err(y, want) < 1e-12
    jac = torch.autograd.functional.jacobian(lambda v: fft_conv(v, Kf, K_rev=Kb)[0, 0, 15], u)[0, 0]
    assert (jac[:15].abs() > 0).any() and (jac[16:].abs() > 0).any()


def test_gradients_flow_to_parameters():
    A, B, C, log_dt = _ssm(H=2, N2=2)
    params = [t.requires_grad_(True) for t in (A, B, C, log_dt)]
    u = torch.randn(1, 2, 16, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda A, B, C, ldt: fft_conv(u, s4d_kernel(A, B, C, ldt, 16)), params)


def test_float32_and_errors():
    A, B, C, log_dt = _ssm()
    K = s4d_kernel(A.to(torch.cfloat), B.to(torch.cfloat), C.to(torch.cfloat), log_dt.float(), 64)
    assert K.dtype == torch.float32
    u = torch.randn(2, 3, 64)
    assert rel_err(fft_conv(u, K), _direct(u.double(), K.double())) < 1e-5
    with pytest.raises(TypeError, match="A must be a complex tensor"):
        s4d_kernel(A.real, B, C, log_dt, 8)
    with pytest.raises(ValueError, match=r"C has shape \(2, 4\), expected \(H, N/2\) = \(3, 4\)"):
        s4d_kernel(A, B, C[:2], log_dt, 8)
    with pytest.raises(ValueError, match=r"K has shape \(2, 64\), expected \(H, L_k\) with H = 3"):
        fft_conv(u, K[:2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("window", [None, 7])
def test_real_arithmetic_kernel_matches_complex_vandermonde_forward_and_backward(dtype, window):
    from neurodyn.ops.s4d import s4d_kernel_ref

    cdt = torch.cdouble if dtype == torch.float64 else torch.cfloat
    g = torch.Generator().manual_seed(3)
    H, N2, L = 4, 6, 50
    re = -(torch.rand(H, N2, generator=g, dtype=torch.float64) + 0.1)
    im = torch.randn(H, N2, generator=g, dtype=torch.float64) * 20
    params = [
        re.to(dtype),
        im.to(dtype),
        torch.randn(H, N2, 2, generator=g, dtype=torch.float64).to(dtype),
        torch.randn(H, N2, 2, generator=g, dtype=torch.float64).to(dtype),
        (torch.rand(H, generator=g, dtype=torch.float64) * 4 - 5).to(dtype),
    ]
    params = [p.requires_grad_() for p in params]

    def run(fn):
        A = torch.complex(params[0], params[1])
        K = fn(
            A,
            torch.view_as_complex(params[2]).to(cdt),
            torch.view_as_complex(params[3]).to(cdt),
            params[4],
            L,
            window=window,
        )
        w = torch.randn(K.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(dtype)
        return K, torch.autograd.grad((K * w).sum(), params)

    K, gr = run(s4d_kernel)
    K_ref, g_ref = run(s4d_kernel_ref)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    assert K.dtype == dtype and K.shape == (H, min(L, window or L))
    assert rel_err(K, K_ref) < tol
    for a, e in zip(gr, g_ref):
        assert rel_err(a, e) < tol
    if dtype == torch.float64:
        assert torch.autograd.gradcheck(
            lambda a, b, c, d: s4d_kernel(
                torch.complex(a, b), torch.view_as_complex(c), torch.view_as_complex(d), params[4].detach()[:2], 9
            ),
            [p.detach()[:2, :3].clone().requires_grad_() for p in params[:4]],
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("L,Lk", [(4, 4), (64, 64), (100, 7), (128, 128)])
def test_toeplitz_convolution_matches_fft_forward_and_backward(dtype, L, Lk):
    from neurodyn.ops.s4d import _causal_fft_only, _causal_toeplitz

    g = torch.Generator().manual_seed(L + Lk)
    u = torch.randn(3, 2, 5, L, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    K = torch.randn(5, Lk, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    w = torch.randn(3, 2, 5, L, generator=g, dtype=torch.float64).to(dtype)
    outs = []
    for fn in (_causal_toeplitz, _causal_fft_only):
        y = fn(u, K)
        outs.append((y, *torch.autograd.grad((y * w).sum(), (u, K))))
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for a, e in zip(*outs):
        assert a.dtype == dtype and rel_err(a, e) < tol
    torch.testing.assert_close(
        outs[0][0].double(),
        _direct(u.detach().double().reshape(-1, 5, L), K.detach().double()).reshape(3, 2, 5, L),
        rtol=tol * 10,
        atol=tol * 10,
    )
