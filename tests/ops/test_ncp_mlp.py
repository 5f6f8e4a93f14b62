"""Fused NCP backbone (ops.ncp_mlp, csrc/ncp_cpu.cpp) against its batched-matmul reference: forward and every
gradient, float32 / float64, each activation, layers without an input term, row counts that are not a multiple
of the kernel's tile, two threads; and NCPCell's fused forward against its unfused one."""

import pytest
import torch

from neurodyn.nn.ncp import NCPCell, build_autoncp, units_backbone
from neurodyn.ops.ncp_mlp import ACT_CODES, fused_available, ncp_mlp, ncp_mlp_ref

pytestmark = pytest.mark.needs_kernel

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=2e-5)}


def _layers(C, a, widths, dtype, no_input=(), seed=0):
    g = torch.Generator().manual_seed(seed)
    req = dict(dtype=dtype)
    w_in = [
        None if l in no_input else (torch.randn(C, a, h, generator=g, **req) / a**0.5).requires_grad_()
        for l, h in enumerate(widths)
    ]
    bias = [(0.3 * torch.randn(C, h, generator=g, **req)).requires_grad_() for h in widths]
    w_rec = [None] + [
        (torch.randn(C, p, h, generator=g, **req) / p**0.5).requires_grad_() for p, h in zip(widths, widths[1:])
    ]
    mask = [(torch.rand(h, generator=g) > 0.2).to(dtype) for h in widths]
    return w_in, bias, w_rec, mask


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("act", sorted(ACT_CODES))
@pytest.mark.parametrize("rows", [1, 37, 256])
def test_fused_ncp_matches_reference_forward_and_gradients(act, rows, dtype):
    C, a, widths = 3, 8, (36, 16, 2)
    w_in, bias, w_rec, mask = _layers(C, a, widths, dtype, no_input=(1, 2))
    x = torch.randn(C, rows, a, dtype=dtype, requires_grad=True)
    y = ncp_mlp(x, w_in, bias, w_rec, mask, act)
    y_ref = ncp_mlp_ref(x, w_in, bias, w_rec, mask, act)
    assert y.shape == (C, rows, 2)
    torch.testing.assert_close(y, y_ref, **TOL[dtype])
    leaves = [x, w_in[0], *bias, *w_rec[1:]]
    w = torch.randn_like(y)
    for got, want in zip(torch.autograd.grad((y * w).sum(), leaves), torch.autograd.grad((y_ref * w).sum(), leaves)):
        torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_synapse_patterns_match_masked_weights_and_leave_pruned_weights_without_gradient(dtype):
    """Patterns of about a third of the synapses (one target without any, one source without any): the fused op
    equals the reference on W * pattern, and weights outside the pattern get exactly zero gradient."""
    C, a, widths = 2, 8, (36, 16, 2)
    w_in, bias, w_rec, mask = _layers(C, a, widths, dtype, no_input=(1, 2), seed=5)
    mask[-1] = torch.ones(2, dtype=dtype)  # both outputs active
    g = torch.Generator().manual_seed(9)
    p_in = [(torch.rand(a, 36, generator=g) < 0.33).float(), None, None]
    p_in[0][:, 3] = 0.0  # neuron 3 receives no input synapse
    p_rec = [None, (torch.rand(36, 16, generator=g) < 0.36).float(), (torch.rand(16, 2, generator=g) < 0.6).float()]
    p_rec[1][5, :] = 0.0  # neuron 5 of layer 0 feeds nothing
    x = torch.randn(C, 53, a, dtype=dtype, requires_grad=True)
    kw = dict(pattern_in=p_in, pattern_rec=p_rec)
    y = ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", **kw)
    y_ref = ncp_mlp_ref(x, w_in, bias, w_rec, mask, "tanh", **kw)
    torch.testing.assert_close(y, y_ref, **TOL[dtype])
    dense = ncp_mlp(x, w_in, bias, w_rec, mask, "tanh")
    assert (dense - y).abs().max() > 1e-3  # the patterns change the result
    leaves = [x, w_in[0], *bias, *w_rec[1:]]
    got = torch.autograd.grad(y.square().sum(), leaves)
    want = torch.autograd.grad(y_ref.square().sum(), leaves)
    for a_, b_ in zip(got, want):
        torch.testing.assert_close(a_, b_, **TOL[dtype])
    assert (got[1][:, p_in[0] == 0] == 0).all()
    assert (got[-2][:, p_rec[1] == 0] == 0).all() and (got[-1][:, p_rec[2] == 0] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_input_affine_and_linear_head_match_reference(dtype):
    """x * in_scale + in_shift feeds the layers, the head reads the raw x: outputs and every gradient."""
    C, a, widths = 3, 8, (36, 16, 2)
    w_in, bias, w_rec, mask = _layers(C, a, widths, dtype, no_input=(1, 2), seed=11)
    mask[-1] = torch.ones(2, dtype=dtype)
    g = torch.Generator().manual_seed(2)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype).requires_grad_()  # noqa: E731
    scale, shift, hw, hb = r(C, a), r(C, a), r(C, a, 2), r(C, 2)
    x = torch.randn(C, 45, a, dtype=dtype, requires_grad=True)
    kw = dict(in_scale=scale, in_shift=shift, head=(hw, hb))
    y, t = ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", **kw)
    y_ref, t_ref = ncp_mlp_ref(x, w_in, bias, w_rec, mask, "tanh", **kw)
    torch.testing.assert_close(y, y_ref, **TOL[dtype])
    torch.testing.assert_close(t, t_ref, **TOL[dtype])
    torch.testing.assert_close(t_ref, x @ hw + hb[:, None], **TOL[dtype])  # the head reads x, not x * scale + shift
    leaves = [x, scale, shift, hw, hb, w_in[0], *bias, *w_rec[1:]]
    gy, gt = torch.randn_like(y), torch.randn_like(t)
    got = torch.autograd.grad((y * gy).sum() + (t * gt).sum(), leaves, retain_graph=True)
    want = torch.autograd.grad((y_ref * gy).sum() + (t_ref * gt).sum(), leaves)
    for a_, b_ in zip(got, want):
        torch.testing.assert_close(a_, b_, **TOL[dtype])
    # only the head's output used: the layers' parameters get no gradient from it, x gets W_h's
    got = torch.autograd.grad((t * gt).sum(), [x, hw], allow_unused=True)
    torch.testing.assert_close(got[0], gt @ hw.transpose(1, 2), **TOL[dtype])


def test_pattern_count_and_shape_errors():
    w_in, bias, w_rec, mask = _layers(1, 4, (5, 3), torch.float64, no_input=(1,))
    x = torch.randn(1, 7, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="pattern_in needs one entry per layer"):
        ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", pattern_in=[None])
    with pytest.raises(RuntimeError, match="synapse pattern must be"):
        ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", pattern_in=[torch.ones(5, 4), None])
    with pytest.raises(ValueError, match="in_scale and in_shift together"):
        ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", in_scale=torch.ones(1, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="in_shift has shape"):
        ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", in_scale=torch.ones(1, 4), in_shift=torch.ones(1, 3))
    with pytest.raises(ValueError, match="head must be"):
        ncp_mlp(x, w_in, bias, w_rec, mask, "tanh", head=(torch.ones(1, 3, 2), torch.ones(1, 2)))


def test_fused_ncp_with_input_on_every_layer_and_two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        w_in, bias, w_rec, mask = _layers(2, 5, (7, 4, 3), torch.float64, seed=3)
        x = torch.randn(2, 1000, 5, dtype=torch.float64, requires_grad=True)
        y, y_ref = (f(x, w_in, bias, w_rec, mask, "tanh") for f in (ncp_mlp, ncp_mlp_ref))
        torch.testing.assert_close(y, y_ref, **TOL[torch.float64])
        leaves = [x, *w_in, *bias, *w_rec[1:]]
        grads, grads_ref = (torch.autograd.grad(out.square().sum(), leaves) for out in (y, y_ref))
        for got, want in zip(grads, grads_ref):
            torch.testing.assert_close(got, want, **TOL[torch.float64])
    finally:
        torch.set_num_threads(threads)


def test_fused_ncp_gradcheck():
    w_in, bias, w_rec, mask = _layers(2, 3, (4, 3), torch.float64, no_input=(1,), seed=5)
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    leaves = (x, w_in[0], bias[0], bias[1], w_rec[1])
    f = lambda x, wi, b0, b1, wr: ncp_mlp(x, [wi, None], [b0, b1], [None, wr], mask, "sigmoid")  # noqa: E731
    assert torch.autograd.gradcheck(f, leaves)


def test_ncp_cell_fused_forward_equals_the_unfused_one_and_bad_input_is_refused():
    torch.manual_seed(0)
    wiring = build_autoncp(units_backbone(16), 2, 8, 0.5)
    for cells, disabled in ((4, ()), (1, ("command",))):
        cell = NCPCell(wiring, activation="tanh", n_cells=cells, disabled=disabled)
        with torch.no_grad():  # a sensory scaling that is not the identity (it starts as w_in = 1, b_in = 0)
            cell.w_in.add_(0.3 * torch.randn_like(cell.w_in))
            cell.b_in.add_(0.3 * torch.randn_like(cell.b_in))
        head = (torch.randn(cells, 8, 2, requires_grad=True), torch.randn(cells, 2, requires_grad=True))
        u = torch.randn(*((cells,) if cells > 1 else ()), 3, 7, 8, requires_grad=True)
        assert fused_available(u)
        outs = []
        for fused in (True, False):
            cell.fused = fused
            cell.zero_grad()
            y, read = cell(u, unfolds=3, head=head)
            assert read.shape == (*u.shape[:-1], 2)
            loss = y.square().sum() + (read * torch.linspace(-1, 1, read.numel()).reshape(read.shape)).sum()
            grads = torch.autograd.grad(loss, [u, *head, *cell.parameters()], allow_unused=True)
            outs.append(((y, read), grads))
        torch.testing.assert_close(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cell(u, unfolds=3), outs[1][0][0])  # without a head: y alone
        for a, b, p in zip(outs[0][1], outs[1][1], [u, *head, *cell.parameters()]):
            zero = torch.zeros_like(p)  # a parameter one path does not use: no gradient or a zero one
            torch.testing.assert_close(zero if a is None else a, zero if b is None else b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="activation"):
        ncp_mlp(torch.randn(1, 2, 3), [None], [torch.randn(1, 2)], [None], [torch.ones(2)], "gelu")
    with pytest.raises(ValueError, match="cells, rows, features"):
        ncp_mlp(torch.randn(2, 3), [None], [torch.randn(1, 2)], [None], [torch.ones(2)], "tanh")
    with pytest.raises(RuntimeError, match="w_in"):
        ncp_mlp(torch.randn(1, 2, 3), [torch.randn(1, 4, 2)], [torch.randn(1, 2)], [None], [torch.ones(2)], "tanh")
