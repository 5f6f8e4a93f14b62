"""Kirchhoff-cell scan (ops.knc_scan, CHONN paper 000): the scan on selective_scan against a direct loop of
its recurrence and against knc_scan_ref (forward and gradients, float64 and float32), the ZOH solution of
Eq. (18), the closed forms of Eqs. (44)-(45), and the scan layouts through ops.cross_scan."""

import math

import pytest
import torch

from neurodyn.ops import VMAMBA_ORDER, cross_scan, cross_scan_indices
from neurodyn.ops.knc_scan import (
    ZOHInput,
    knc_impulse_response,
    knc_phi,
    knc_scan,
    knc_scan_ref,
    knc_transfer_function,
    merge_sequences,
    n_directions,
    scan_sequences,
)

D64 = torch.float64


def _direct_loop(u, delta, lam, b, c, d):
    """Eqs. (32)-(34) written out per channel, state and step (no broadcasting tricks)."""
    batch, D, L = u.shape
    N = lam.shape[1]
    y = torch.zeros(batch, D, L, dtype=u.dtype)
    for s in range(batch):
        for i in range(D):
            v = [0.0] * N
            for t in range(L):
                acc = float(d[i]) * float(u[s, i, t])
                for n in range(N):
                    x = float(delta[s, i, t]) * float(lam[i, n])
                    alpha = math.exp(-x)
                    beta = (1 - math.exp(-x)) / float(lam[i, n]) * float(b[s, n, t])
                    v[n] = alpha * v[n] + beta * float(u[s, i, t])
                    acc += float(c[s, n, t]) * v[n]
                y[s, i, t] = acc
    return y


def test_knc_scan_equals_direct_loop_of_the_recurrence():
    torch.manual_seed(1)
    B, D, N, L = 2, 3, 2, 9
    u = torch.randn(B, D, L, dtype=D64)
    delta = torch.rand(B, D, L, dtype=D64) + 0.05
    lam = torch.rand(D, N, dtype=D64) * 3 + 0.2
    b, c = torch.randn(B, N, L, dtype=D64), torch.randn(B, N, L, dtype=D64)
    d = torch.randn(D, dtype=D64)
    want = _direct_loop(u, delta, lam, b, c, d)
    for backend in ("auto", "torch"):
        got = knc_scan(u, delta, lam, b, c, d, "zoh", backend=backend)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(knc_scan_ref(u, delta, lam, b, c, d), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("disc", ["zoh", "euler"])
@pytest.mark.parametrize("groups", [0, 1, 2])  # 0: fixed (D, N) b and c
@pytest.mark.parametrize("reverse", [False, True])
def test_knc_scan_matches_reference_forward_and_gradients(disc, groups, reverse, device):
    torch.manual_seed(2)
    B, D, N, L = 2, 4, 3, 13
    u = torch.randn(B, D, L, dtype=D64)
    delta = torch.rand(B, D, L, dtype=D64) * 0.8 + 1e-3
    lam = torch.rand(D, N, dtype=D64) * 4 + 0.1
    shape = (D, N) if groups == 0 else (B, groups, N, L)
    b, c, d = torch.randn(*shape, dtype=D64), torch.randn(*shape, dtype=D64), torch.randn(D, dtype=D64)
    args = tuple(t.to(device).requires_grad_() for t in (u, delta, lam, b, c, d))
    y = knc_scan(*args, disc, reverse=reverse)
    assert y.device == args[0].device
    y_ref = knc_scan_ref(*args, disc, reverse=reverse)
    torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
    w = torch.randn_like(y)
    g = torch.autograd.grad((y * w).sum(), args)
    g_ref = torch.autograd.grad((y_ref * w).sum(), args)
    for a, e in zip(g, g_ref):
        torch.testing.assert_close(a, e, rtol=1e-8, atol=1e-9)


def test_zoh_input_function_gradcheck_and_float32_agreement():
    torch.manual_seed(3)
    delta = (torch.rand(2, 4, 5, dtype=D64) + 0.01).requires_grad_()
    lam = (torch.rand(4, 3, dtype=D64) + 0.5).requires_grad_()
    bt = torch.randn(2, 2, 5, 3, dtype=D64, requires_grad=True)
    assert torch.autograd.gradcheck(ZOHInput.apply, (delta, lam, bt))
    want = knc_phi(delta.unsqueeze(-1) * lam[None, :, None, :]) * bt.repeat_interleave(2, dim=1)
    torch.testing.assert_close(ZOHInput.apply(delta, lam, bt), want)
    x = torch.tensor([0.0, 1e-9, 1e-3, 0.5, 3.0, 40.0])
    exact = torch.tensor(
        [1.0, 1.0, (1 - math.exp(-1e-3)) / 1e-3, (1 - math.exp(-0.5)) / 0.5, (1 - math.exp(-3.0)) / 3.0, 1 / 40.0]
    )
    torch.testing.assert_close(knc_phi(x), exact, rtol=1e-6, atol=1e-6)


def test_zoh_step_is_the_exact_solution_of_the_rc_ode_for_constant_input():
    """dv/dt = -lambda v + b u with constant u: v(t) = (b u / lambda)(1 - exp(-lambda t)) (Eqs. 18-21)."""
    D, N, L = 3, 2, 40
    lam = torch.tensor([[0.5, 2.0], [1.0, 4.0], [3.0, 0.1]], dtype=D64)
    b = torch.tensor([[1.0, -0.5], [2.0, 1.0], [0.3, 0.7]], dtype=D64)
    dt = torch.tensor([0.05, 0.2, 0.11], dtype=D64)
    u = torch.full((1, D, L), 1.7, dtype=D64)
    eye = torch.eye(N, dtype=D64)
    t = dt[:, None] * torch.arange(1, L + 1, dtype=D64)  # (D, L)
    for n in range(N):  # read out one state at a time with c = e_n
        c = eye[n].expand(D, N)
        v = knc_scan(u, dt, lam, b, c, None, "zoh")
        exact = (b[:, n, None] * 1.7 / lam[:, n, None]) * (1 - torch.exp(-lam[:, n, None] * t))
        torch.testing.assert_close(v[0], exact, rtol=1e-12, atol=1e-12)


def test_scan_layouts_match_ops_cross_scan_and_merge_is_their_adjoint():
    x = torch.randn(2, 3, 4, 5, dtype=D64)  # (B, D, H, W)
    seqs = scan_sequences(x, "cross")  # (B, K, D, L)
    ref = cross_scan(x.movedim(1, -1), VMAMBA_ORDER).movedim(-1, 2)
    torch.testing.assert_close(seqs, ref)
    y = torch.randn_like(seqs)
    for scan in ("uni", "bi", "cross"):
        s = scan_sequences(x, scan)
        lhs = (s * y[:, : s.shape[1]]).sum()
        rhs = (x * merge_sequences(y[:, : s.shape[1]], (4, 5), scan)).sum()
        torch.testing.assert_close(lhs, rhs)
    assert scan_sequences(torch.randn(2, 3, 7), "bi").shape == (2, 2, 3, 7)


def test_knc_scan_matches_reference_in_float32():
    torch.manual_seed(4)
    B, D, N, L = 2, 4, 3, 17
    u = torch.randn(B, D, L, requires_grad=True)
    delta = (torch.rand(B, D, L) * 0.5 + 1e-2).requires_grad_()
    lam = (torch.rand(D, N) * 3 + 0.2).requires_grad_()
    b = torch.randn(B, 2, N, L, requires_grad=True)
    c = torch.randn(B, 2, N, L, requires_grad=True)
    d = torch.randn(D, requires_grad=True)
    args = (u, delta, lam, b, c, d)
    y, y_ref = knc_scan(*args), knc_scan_ref(*args)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-5)
    w = torch.randn_like(y)
    for a, e in zip(torch.autograd.grad((y * w).sum(), args), torch.autograd.grad((y_ref * w).sum(), args)):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_impulse_response_and_transfer_function_are_the_time_invariant_scan():
    """knc_impulse_response(alpha, beta, c, d) is knc_scan of an impulse; H(z) on the unit circle is its DFT."""
    torch.manual_seed(5)
    D, N, L = 3, 2, 256
    lam = torch.rand(D, N, dtype=D64) + 0.5
    dt = torch.rand(D, dtype=D64) * 0.5 + 0.1
    b, c, d = torch.randn(D, N, dtype=D64), torch.randn(D, N, dtype=D64), torch.randn(D, dtype=D64)
    u = torch.zeros(1, D, L, dtype=D64)
    u[..., 0] = 1.0
    alpha = torch.exp(-dt[:, None] * lam)
    beta = (1 - alpha) / lam * b
    h = knc_impulse_response(alpha, beta, c, d, L)
    torch.testing.assert_close(knc_scan(u, dt, lam, b, c, d, "zoh")[0], h, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(knc_scan_ref(u, dt, lam, b, c, d, "zoh")[0], h, rtol=1e-12, atol=1e-12)
    z = torch.exp(2j * math.pi * torch.arange(L, dtype=D64) / L)
    H = knc_transfer_function(alpha, beta, c, d, z)
    torch.testing.assert_close(H, torch.fft.fft(h), rtol=1e-8, atol=1e-8)  # h decays to < 1e-10 within L


def _layout_by_index(x, scan):
    """The traversals as index permutations of the row-major flattening (the pre-ops kirchhoff layouts)."""
    flat = x.reshape(*x.shape[:2], -1)
    if scan == "uni":
        idx = torch.arange(flat.shape[-1])[None]
    elif scan == "bi":
        idx = torch.stack([torch.arange(flat.shape[-1]), torch.arange(flat.shape[-1]).flip(0)])
    else:
        idx = cross_scan_indices(*x.shape[2:], VMAMBA_ORDER)
    return flat[:, :, idx].transpose(1, 2)


@pytest.mark.parametrize(
    "scan, shape", [("uni", (7,)), ("bi", (7,)), ("uni", (3, 4)), ("bi", (3, 4)), ("cross", (3, 4))]
)
def test_scan_layouts_are_exact_permutations_and_merge_sums_pairs(scan, shape):
    x = torch.randn(2, 5, *shape)
    seqs = scan_sequences(x, scan)
    assert seqs.shape[1] == n_directions(scan, len(shape))
    assert torch.equal(seqs, _layout_by_index(x, scan))
    # merging the traversals of x sums K copies of x, bit for bit as the pairwise sum (d0 + d2) + (d1 + d3)
    y = torch.randn_like(seqs)
    want = torch.zeros_like(x).reshape(2, 5, -1)
    idx = _layout_by_index(torch.arange(x[0, 0].numel()).reshape(1, 1, *shape), scan)[0, :, 0]
    g = [torch.zeros_like(want).index_copy(-1, idx[k], y[:, k]) for k in range(seqs.shape[1])]
    want = {1: lambda: g[0], 2: lambda: g[0] + g[1], 4: lambda: (g[0] + g[2]) + (g[1] + g[3])}[len(g)]()
    assert torch.equal(merge_sequences(y, shape, scan), want.reshape(x.shape))


def test_scan_modes_are_checked_with_one_clear_sentence():
    from neurodyn.errors import ConfigError

    with pytest.raises(ConfigError, match="scan must be one of 'uni', 'bi', 'cross'"):
        n_directions("quad", 2)
    with pytest.raises(ConfigError, match="needs a 2-D grid"):
        scan_sequences(torch.randn(1, 2, 5), "cross")
