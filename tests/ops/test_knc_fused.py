"""The Kirchhoff cell on the fused CPU kernel (ops.knc_scan, backend "cpp": the ZOH input factor
(1 - exp(-Delta lambda)) / lambda and its derivatives computed in-kernel) against the sequential reference
knc_scan_ref, forward and gradients, in float64 and float32; the NaN-free range Delta in [1e-6, 1e3];
a long sequence; the kernel's expm1 and psi = -phi' helpers."""

import math

import pytest
import torch

from neurodyn.ops.knc_scan import knc_scan, knc_scan_ref

from .helpers import rel_err

pytestmark = pytest.mark.needs_kernel

D64 = torch.float64


def _args(B, D, N, L, groups, dtype=D64, delta=None, lam=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=D64)  # noqa: E731
    u = r(B, D, L)
    if delta is None:
        delta = torch.rand(B, D, L, generator=g, dtype=D64) * 0.8 + 1e-3
    if lam is None:
        lam = torch.rand(D, N, generator=g, dtype=D64) * 4 + 0.1
    shape = (D, N) if groups == 0 else ((B, N, L) if groups == 1 else (B, groups, N, L))
    b, c, d = r(*shape), r(*shape), r(D)
    return [t.to(dtype).requires_grad_() for t in (u, delta, lam, b, c, d)]


def _fwd_bwd(fn, args, disc, reverse=False, w=None):
    y = fn(*args, disc, reverse=reverse)
    w = torch.randn(y.shape, generator=torch.Generator().manual_seed(9), dtype=D64).to(y.dtype) if w is None else w
    return y, torch.autograd.grad((y * w).sum(), args)


@pytest.mark.parametrize("disc", ["zoh", "euler"])
@pytest.mark.parametrize("groups", [0, 1, 2])
@pytest.mark.parametrize("N", [3, 8, 16, 20])  # padded and the register-resident sizes
@pytest.mark.parametrize("reverse", [False, True])
def test_fused_cell_matches_reference_float64(disc, groups, N, reverse):
    args = _args(2, 4, N, 150, groups, seed=N + groups)  # L > the kernel's checkpoint chunk
    y, g = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args, disc, reverse)
    y_ref, g_ref = _fwd_bwd(knc_scan_ref, args, disc, reverse)
    torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
    for a, e in zip(g, g_ref):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("disc", ["zoh", "euler"])
@pytest.mark.parametrize("groups", [0, 2])
def test_fused_cell_float32_matches_float64_reference(disc, groups):
    args64 = _args(2, 4, 5, 200, groups, seed=3)
    args32 = [t.detach().float().requires_grad_() for t in args64]
    y, g = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args32, disc)
    y_ref, g_ref = _fwd_bwd(knc_scan_ref, args64, disc)
    assert y.dtype == torch.float32
    assert rel_err(y, y_ref) < 1e-5
    for a, e in zip(g, g_ref):
        assert a.dtype == torch.float32
        assert rel_err(a, e) < 1e-4


def test_fused_time_invariant_cell_matches_reference():
    u, delta, lam, b, c, d = _args(2, 4, 6, 70, 0, seed=4)
    dt = (torch.rand(4, dtype=D64) * 0.3 + 0.01).requires_grad_()
    args = [u, dt, lam, b, c, d]
    for disc in ("zoh", "euler"):
        y, g = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args, disc)
        y_ref, g_ref = _fwd_bwd(knc_scan_ref, args, disc)
        torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
        for a, e in zip(g, g_ref):
            torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, D64])
def test_fused_zoh_is_nan_free_and_accurate_for_delta_in_1e_6_to_1e3(dtype):
    """Delta log-uniform over [1e-6, 1e3] and lambda over [1e-3, 1e2]: Delta lambda spans 1e-9 .. 1e5."""
    g = torch.Generator().manual_seed(5)
    B, D, N, L = 2, 4, 8, 96
    delta = 10 ** (torch.rand(B, D, L, generator=g, dtype=D64) * 9 - 6)
    lam = 10 ** (torch.rand(D, N, generator=g, dtype=D64) * 5 - 3)
    args64 = _args(B, D, N, L, 2, delta=delta, lam=lam, seed=5)
    args = [t.detach().to(dtype).requires_grad_() for t in args64]
    y, gr = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args, "zoh")
    y_ref, g_ref = _fwd_bwd(knc_scan_ref, args64, "zoh")
    tol_y, tol_g = (1e-12, 1e-10) if dtype == D64 else (2e-5, 2e-4)
    assert torch.isfinite(y).all() and all(torch.isfinite(t).all() for t in gr)
    assert rel_err(y, y_ref) < tol_y
    for name, a, e in zip("u delta lam b c d".split(), gr, g_ref):
        assert rel_err(a, e) < tol_g, name
    # per element too: every delta and lambda gradient (the ones through the ZOH factor)
    for a, e in zip(gr[1:3], g_ref[1:3]):
        torch.testing.assert_close(a.double(), e, rtol=tol_g * 50, atol=tol_g * e.abs().max().item())


@pytest.mark.slow
def test_fused_cell_long_sequence_matches_reference():
    L = 65536
    g = torch.Generator().manual_seed(6)
    args64 = _args(
        1,
        2,
        4,
        L,
        1,
        delta=torch.rand(1, 2, L, generator=g, dtype=D64) * 0.05 + 1e-4,
        lam=torch.rand(2, 4, generator=g, dtype=D64) * 0.5 + 0.01,
        seed=6,
    )
    with torch.no_grad():  # the reference's forward; its gradients through the generic float64 path
        y_ref = knc_scan_ref(*args64, "zoh")
    y, gr = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args64, "zoh")
    torch.testing.assert_close(y, y_ref, rtol=1e-9, atol=1e-9)
    y_t, g_ref = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="torch"), args64, "zoh")
    torch.testing.assert_close(y_t, y_ref, rtol=1e-9, atol=1e-9)
    for a, e in zip(gr, g_ref):
        assert rel_err(a, e) < 1e-9
    args32 = [t.detach().float().requires_grad_() for t in args64]
    y32, g32 = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args32, "zoh")
    assert rel_err(y32, y_ref) < 1e-4
    for a, e in zip(g32, g_ref):
        assert rel_err(a, e) < 1e-3


def test_fused_and_generic_paths_agree():
    args = _args(2, 6, 5, 40, 2, seed=7)
    for disc in ("zoh", "euler"):
        y, g = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="cpp"), args, disc, True)
        y2, g2 = _fwd_bwd(lambda *a, **k: knc_scan(*a, **k, backend="torch"), args, disc, True)
        torch.testing.assert_close(y, y2, rtol=1e-10, atol=1e-10)
        for a, e in zip(g, g2):
            torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, D64])
def test_kernel_expm1_and_psi(dtype):
    from neurodyn.ops import cpu_kernel

    ext = cpu_kernel.get()
    eps = torch.finfo(dtype).eps
    y = -(10 ** torch.linspace(-12, 1.9, 2001, dtype=D64))
    y = torch.cat([y, -torch.linspace(0, 80, 1001, dtype=D64)])
    e = ext.zoh_test(y.to(dtype), 0).double()
    m = ext.zoh_test(y.to(dtype), 1).double()
    yq = y.to(dtype).double()
    assert ((e - yq.exp()).abs() <= 4 * eps * yq.exp()).all()
    assert ((m - torch.expm1(yq)).abs() <= 4 * eps * torch.expm1(yq).abs() + 1e-300).all()
    x = -yq
    ps = ext.zoh_test(x.to(dtype), 2).double()
    series = sum((-1) ** j * (j + 1) / math.factorial(j + 2) * x**j for j in range(30))
    closed = (-torch.expm1(-x) / x - torch.exp(-x)) / x
    want = torch.where(x < 1, series, closed)  # psi = -phi'(x), both forms accurate there
    assert ((ps - want).abs() <= 16 * eps * want.abs() + 1e-300).all(), (ps - want).abs().div(want).max()
    assert math.isclose(ext.zoh_test(torch.zeros(1, dtype=dtype), 2).item(), 0.5)
