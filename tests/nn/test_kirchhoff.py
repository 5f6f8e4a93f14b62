"""Kirchhoff Neural Cell and Cascaded Kirchhoff Block (CHONN, paper 000): the closed forms of Eqs. (45)-(47)
on the cells, and the block's equations and parameter counts by formula (the scan kernel:
tests/ops/test_knc_scan.py)."""

import math

import pytest
import torch

from neurodyn.nn.kirchhoff import CascadedKirchhoffBlock, KirchhoffCell, ckb_parameter_count
from neurodyn.ops.knc_scan import (
    knc_impulse_response,
    knc_scan_ref,
    knc_transfer_function,
    merge_sequences,
    scan_sequences,
)

D64 = torch.float64


def _lti_cell(D=1, N=1, K=1, seed=0):
    torch.manual_seed(seed)
    cell = KirchhoffCell(D, N, directions=K, selective=False).double()
    with torch.no_grad():
        cell.log_lambda.copy_(torch.rand(K, D, N, dtype=D64) * 2 - 1)
        cell.dt_bias.copy_(torch.randn(K, D, dtype=D64) * 0.5)
        cell.b.copy_(torch.randn(K, D, N, dtype=D64))
        cell.c.copy_(torch.randn(K, D, N, dtype=D64))
        cell.d.copy_(torch.randn(K, D, dtype=D64))
    return cell


def _cell_abcd(cell):
    """Fixed coefficients of Eq. (44) for direction 0: a = alpha, b = beta (the ZOH injection)."""
    delta = torch.nn.functional.softplus(cell.dt_bias[0])[:, None]
    lam = cell.lam[0]
    a = torch.exp(-delta * lam)
    return a, (1 - a) / lam * cell.b[0], cell.c[0], cell.d[0]


def _impulse(L, D=1):
    u = torch.zeros(1, 1, D, L, dtype=D64)
    u[..., 0] = 1.0
    return u


def test_single_cell_impulse_response_is_the_closed_form_of_eq45():
    L = 64
    for N in (1, 4):  # N = 1 is Eq. (45) literally; N > 1 a sum of such first-order terms
        cell = _lti_cell(D=2, N=N, seed=N)
        h = cell(_impulse(L, 2))[0, 0]  # (D, L)
        a, b, c, d = _cell_abcd(cell)
        assert ((a > 0) & (a < 1)).all()
        t = torch.arange(L, dtype=D64)
        closed = (c * b)[..., None] * a[..., None] ** t
        closed = closed.sum(1)
        closed[:, 0] += d
        torch.testing.assert_close(h, closed, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(h, knc_impulse_response(a, b, c, d, L), rtol=1e-12, atol=1e-13)
        # frequency response: DFT of the (decayed) impulse response = H(e^{i w}) of Eq. (45)
        Lf = 4096
        hl = cell(_impulse(Lf, 2))[0, 0]
        z = torch.exp(2j * math.pi * torch.arange(Lf, dtype=D64) / Lf)
        H = knc_transfer_function(a, b, c, d, z)
        torch.testing.assert_close(torch.fft.fft(hl, dim=-1), H, rtol=1e-8, atol=1e-8)


def _lti_block(order, aggregate="last", seed=0, D=2, N=2):
    torch.manual_seed(seed)
    blk = CascadedKirchhoffBlock(
        D, order=order, d_state=N, dims=1, scan="uni", selective=False, aggregate=aggregate
    ).double()
    for r, cell in enumerate(blk.cells):
        src = _lti_cell(D, N, seed=seed * 10 + r)
        cell.load_state_dict(src.state_dict())
    return blk


@pytest.mark.parametrize("order", [1, 2, 4])
def test_cascade_transfer_function_is_the_product_of_eq46(order):
    Lf = 2048
    blk = _lti_block(order, aggregate="last", seed=order)
    u = torch.zeros(1, 2, Lf, dtype=D64)
    u[..., 0] = 1.0
    h = blk.cascade(u)[0]  # impulse response of the cascade, (D, Lf)
    z = torch.exp(2j * math.pi * torch.arange(Lf, dtype=D64) / Lf)
    H = torch.ones(2, Lf, dtype=torch.complex128)
    for cell in blk.cells:
        H = H * knc_transfer_function(*_cell_abcd(cell), z)
    torch.testing.assert_close(torch.fft.fft(h, dim=-1), H, rtol=1e-8, atol=1e-8)
    # the block's sum of stage outputs (Eq. 36): sum_r prod_{l <= r} H_l
    blk.aggregate = "sum"
    hs = blk.cascade(u)[0]
    Hs, P = torch.zeros_like(H), torch.ones_like(H)
    for cell in blk.cells:
        P = P * knc_transfer_function(*_cell_abcd(cell), z)
        Hs = Hs + P
    torch.testing.assert_close(torch.fft.fft(hs, dim=-1), Hs, rtol=1e-8, atol=1e-8)


def test_strictly_recurrent_cascade_is_eq47():
    """d = 0: H(z) = prod c_l b_l / prod (1 - a_l z^-1); with N = 1 its impulse response is the
    convolution of geometric sequences (checked in the time domain)."""
    L = 200
    blk = _lti_block(3, aggregate="last", seed=7, D=1, N=1)
    with torch.no_grad():
        for cell in blk.cells:
            cell.d.zero_()
    u = torch.zeros(1, 1, L, dtype=D64)
    u[..., 0] = 1.0
    h = blk.cascade(u)[0, 0]
    t = torch.arange(L, dtype=D64)
    want = torch.zeros(L, dtype=D64)
    want[0] = 1.0
    gain = 1.0
    for cell in blk.cells:
        a, b, c, _ = (v.reshape(()) for v in _cell_abcd(cell))
        gain = gain * c * b
        g = a**t
        want = torch.stack([(want[: k + 1] * g[: k + 1].flip(0)).sum() for k in range(L)])
    torch.testing.assert_close(h, gain * want, rtol=1e-10, atol=1e-12)


def test_bidirectional_cell_is_forward_plus_flipped_backward():
    torch.manual_seed(4)
    D, N, L, B = 3, 4, 11, 2
    bi = KirchhoffCell(D, N, directions=2, dt_rank=2).double()
    fwd, bwd = (KirchhoffCell(D, N, directions=1, dt_rank=2).double() for _ in range(2))
    for k, cell in enumerate((fwd, bwd)):
        cell.load_state_dict({name: p[k : k + 1] for name, p in bi.state_dict().items()})
    u = torch.randn(B, D, L, dtype=D64)
    got = merge_sequences(bi(scan_sequences(u, "bi")), (L,), "bi")
    want = fwd(u[:, None])[:, 0] + bwd(u.flip(-1)[:, None])[:, 0].flip(-1)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_selective_cell_coefficients_follow_eq33_34():
    torch.manual_seed(5)
    cell = KirchhoffCell(4, 3, directions=1, dt_rank=2).double()
    u = torch.randn(2, 1, 4, 7, dtype=D64)
    delta, b, c = cell.coefficients(u)
    W = cell.x_proj[0]
    low = torch.einsum("ed,bdl->bel", W[:2], u[:, 0])
    pre = torch.einsum("dr,brl->bdl", cell.dt_proj_weight[0], low) + cell.dt_bias[0][:, None]
    torch.testing.assert_close(delta[:, 0], torch.nn.functional.softplus(pre))
    torch.testing.assert_close(b[:, 0], torch.einsum("nd,bdl->bnl", W[2:5], u[:, 0]))
    torch.testing.assert_close(c[:, 0], torch.einsum("nd,bdl->bnl", W[5:8], u[:, 0]))
    alpha = torch.exp(-delta[:, 0, :, :, None] * cell.lam[0][None, :, None, :])
    assert ((alpha > 0) & (alpha < 1)).all()
    y = cell(u)[:, 0]
    want = knc_scan_ref(u[:, 0], delta[:, 0], cell.lam[0], b[:, 0], c[:, 0], cell.d[0])
    torch.testing.assert_close(y, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "kw",
    [
        dict(d_model=16, order=1, d_state=8, dims=1, scan="bi"),
        dict(d_model=16, order=3, d_state=8, dims=1, scan="uni", expand=2, dt_rank=3),
        dict(d_model=12, order=2, d_state=4, dims=2, scan="cross", conv_pointwise=False, out_norm=True),
        dict(d_model=8, order=4, d_state=2, dims=2, scan="bi", norm="none", out_proj=True, selective=False),
    ],
)
def test_block_shape_and_parameter_count(kw):
    blk = CascadedKirchhoffBlock(**kw)
    shape = (2, 10, kw["d_model"]) if kw["dims"] == 1 else (2, 5, 6, kw["d_model"])
    x = torch.randn(*shape)
    y = blk(x)
    assert y.shape == x.shape
    count_kw = {k: v for k, v in kw.items() if k != "d_model" and k != "order"}
    assert sum(p.numel() for p in blk.parameters()) == ckb_parameter_count(kw["d_model"], kw["order"], **count_kw)
    # residual off returns the branch alone
    torch.testing.assert_close(blk(x, residual=False) + x, y)


def test_block_equations_31_to_38_by_hand():
    torch.manual_seed(6)
    m = 6
    blk = CascadedKirchhoffBlock(m, order=3, d_state=2, dims=1, scan="bi", expand=1.5).double()
    x = torch.randn(2, 9, m, dtype=D64)
    xn = torch.nn.functional.layer_norm(x, (m,), blk.norm.weight, blk.norm.bias)
    Wu, Wg = blk.in_proj.weight.chunk(2, dim=0)
    u = torch.nn.functional.silu(blk.conv(torch.einsum("blm,dm->bdl", xn, Wu)))
    g = torch.nn.functional.silu(xn @ Wg.T)
    y, total = u, 0
    for cell in blk.cells:  # the default merge: the mean of the K = 2 directions
        y = merge_sequences(cell(scan_sequences(y, "bi")), (9,), "bi") / 2
        total = total + y
    want = x + (total.movedim(1, -1) * g) @ blk.out_proj.weight.T
    torch.testing.assert_close(blk(x), want)
    # "prev_output_plus_input": cell r >= 2 is driven by u + y_{r-1}
    blk.cascade_input = "prev_output_plus_input"
    y1 = merge_sequences(blk.cells[0](scan_sequences(u, "bi")), (9,), "bi") / 2
    y2 = merge_sequences(blk.cells[1](scan_sequences(u + y1, "bi")), (9,), "bi") / 2
    y3 = merge_sequences(blk.cells[2](scan_sequences(u + y2, "bi")), (9,), "bi") / 2
    torch.testing.assert_close(blk.cascade(u), y1 + y2 + y3)


def test_block_rejects_bad_input_and_config():
    from neurodyn.errors import ConfigError

    with pytest.raises(ConfigError, match="order"):
        CascadedKirchhoffBlock(8, order=0)
    with pytest.raises(ConfigError, match="cross"):
        CascadedKirchhoffBlock(8, dims=1, scan="cross")
    with pytest.raises(ValueError, match="channels last"):
        CascadedKirchhoffBlock(8, dims=1)(torch.randn(2, 8, 5))


def test_block_backward_is_finite_and_reaches_every_parameter():
    """Every parameter's gradient is finite, non-zero and correct: in float64 it matches the central finite
    difference of the loss along a random direction of that parameter, and the input gradient passes gradcheck."""
    torch.manual_seed(0)
    blk = CascadedKirchhoffBlock(8, order=2, d_state=4, dims=2, scan="cross")
    x = torch.randn(2, 4, 4, 8, requires_grad=True)
    blk(x).square().mean().backward()
    for name, p in blk.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    blk = blk.double()
    x64 = x.detach().double()
    blk.zero_grad()
    loss = lambda: blk(x64).square().mean()  # noqa: E731
    loss().backward()
    eps = 1e-6
    for name, p in blk.named_parameters():
        v = torch.randn_like(p)
        with torch.no_grad():
            p.add_(eps * v)
            up = loss()
            p.sub_(2 * eps * v)
            down = loss()
            p.add_(eps * v)
        fd, ad = ((up - down) / (2 * eps)).item(), (p.grad * v).sum().item()
        assert abs(fd - ad) <= 1e-6 * max(1e-3, abs(ad)), (name, fd, ad)
    assert torch.autograd.gradcheck(blk, (x64[:1].clone().requires_grad_(True),), fast_mode=True)


# ---------------------------------------------------------------------------------------------------
# scale at initialisation: every stage of the cascade starts at unit gain for every direction count

_SCALE_CASES = [("uni", 1), ("bi", 1), ("bi", 2), ("cross", 2)]


def _init_scale(order, scan, dims, seed, merge=None, d_model=16):
    """Per-stage gains ``std(y_r) / std(y_{r-1})`` (``y_0 = u``) of a fresh block, and the gradient norm at its
    first layer (``in_proj``) for a fixed random linear read-out of the block output."""
    torch.manual_seed(seed)
    kw = {} if merge is None else {"merge": merge}
    blk = CascadedKirchhoffBlock(d_model, order=order, d_state=8, dims=dims, scan=scan, **kw)
    shape = (4, 128, d_model) if dims == 1 else (4, 12, 12, d_model)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(100 + seed))
    w = torch.randn(*shape, generator=torch.Generator().manual_seed(200 + seed))
    with torch.no_grad():
        u, _ = blk.drive(x)
        stds = [u.std().item()] + [y.std().item() for y in blk.stages(u)]
    (blk(x) * w).sum().backward()
    return [b / a for a, b in zip(stds, stds[1:])], blk.in_proj.weight.grad.norm().item()


@pytest.mark.parametrize("scan,dims", _SCALE_CASES)
def test_every_cascade_stage_starts_at_unit_scale_and_gradients_do_not_grow_with_order(scan, dims):
    for seed in (0, 1):
        grad1 = None
        for order in (1, 2, 3, 4):
            gains, grad = _init_scale(order, scan, dims, seed)
            assert len(gains) == order
            for r, gain in enumerate(gains, 1):
                assert 0.5 <= gain <= 2.0, f"{scan} order {order}: stage {r} gain {gain:.3g} (all {gains})"
            grad1 = grad if order == 1 else grad1
            assert 0.1 <= grad / grad1 <= 10.0, (
                f"{scan} order {order}: first-layer gradient {grad / grad1:.3g}x order 1"
            )


def test_summed_directions_grow_as_k_to_the_r():
    """The old merge (directions summed after every cell): stage r carries about K^r times the input's
    scale, which the unit-scale test above rejects."""
    gains, _ = _init_scale(3, "cross", 2, 0, merge="sum")
    assert all(g > 3.0 for g in gains) and math.prod(gains) > 40, gains
    gains, _ = _init_scale(3, "bi", 1, 0, merge="sum")
    assert all(g > 1.8 for g in gains), gains
    assert math.prod(gains) > 7


@pytest.mark.parametrize("merge", ["mean", "sum", "norm"])
def test_merge_modes(merge):
    """mean = sum / K exactly; norm = a LayerNorm over the channels after every merge (counted)."""
    torch.manual_seed(8)
    kw = dict(d_model=6, order=3, d_state=4, dims=1, scan="bi")
    blk = CascadedKirchhoffBlock(**kw, merge=merge).double()
    assert sum(p.numel() for p in blk.parameters()) == ckb_parameter_count(**kw, merge=merge)
    u = torch.randn(2, 6, 9, dtype=D64)
    y, total = u, 0
    for r, cell in enumerate(blk.cells):
        y = merge_sequences(cell(scan_sequences(y, "bi")), (9,), "bi")
        if merge == "mean":
            y = y / 2
        elif merge == "norm":
            y = torch.nn.functional.layer_norm(
                y.movedim(1, -1), (6,), blk.merge_norms[r].weight, blk.merge_norms[r].bias
            ).movedim(-1, 1)
        total = total + y
    torch.testing.assert_close(blk.cascade(u), total)
    from neurodyn.errors import ConfigError

    with pytest.raises(ConfigError, match="merge"):
        CascadedKirchhoffBlock(6, merge="max")


def test_rms_coefficients_make_every_stage_homogeneous_of_degree_one():
    """coef_norm="rms": Delta, b, c come from the RMS-normalised cell input, so every stage satisfies
    y_r(a u) = a y_r(u) for a > 0, and an order-4 cascade stays finite for a large input; with Eq. (33)'s raw
    coefficients (coef_norm="none") the state path is cubic per cell, so the stage gain grows with the scale."""
    torch.manual_seed(3)
    u = torch.randn(2, 8, 6, 6, dtype=D64)
    for coef_norm in ("none", "rms"):
        blk = CascadedKirchhoffBlock(8, order=4, d_state=4, dims=2, scan="cross", coef_norm=coef_norm).double()
        ref = blk.stages(u)
        scaled = blk.stages(50.0 * u)
        if coef_norm == "rms":
            for r, (y, z) in enumerate(zip(ref, scaled), 1):
                scale = 50.0 * y.abs().max().item()  # eps = 1e-6 in the RMS: homogeneous to ~1e-7
                torch.testing.assert_close(z, 50.0 * y, rtol=1e-5, atol=1e-5 * scale, msg=f"stage {r}")
        else:
            ratio = (scaled[-1].std() / ref[-1].std()).item()
            assert not math.isfinite(ratio) or ratio > 500.0, ratio
    # "cascade": the first cell keeps Eq. (33), every later cell is homogeneous; the stages start at unit gain
    torch.manual_seed(3)
    blk = CascadedKirchhoffBlock(8, order=4, d_state=4, dims=2, scan="cross", coef_norm="cascade").double()
    assert [c.coef_norm for c in blk.cells] == ["none", "rms", "rms", "rms"]
    seqs = scan_sequences(u, "cross")
    ref = 50.0 * blk.cells[1](seqs)
    torch.testing.assert_close(blk.cells[1](50.0 * seqs), ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    with torch.no_grad():
        stds = [u.std().item()] + [y.std().item() for y in blk.stages(u)]
    assert all(0.5 <= b / a <= 2.0 for a, b in zip(stds, stds[1:])), stds
    cell = KirchhoffCell(4, 3, directions=1, coef_norm="rms").double()
    v = torch.randn(2, 1, 4, 7, dtype=D64)
    for a, b in zip(cell.coefficients(v), cell.coefficients(3.0 * v)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-9)
    from neurodyn.errors import ConfigError

    with pytest.raises(ConfigError, match="coef_norm"):
        KirchhoffCell(4, coef_norm="layer")
