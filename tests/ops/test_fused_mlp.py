"""Fused tiled MLP (ops.fused_mlp) against its plain-autograd reference: forward and gradients, float32/64."""

import pytest
import torch

from neurodyn.ops.fused_mlp import FUSABLE, fused_mlp, mlp_ref

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-5)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("act", sorted(FUSABLE))
@pytest.mark.parametrize("tile", [4, 2048])  # several tiles with a remainder; one tile
def test_fused_mlp_matches_reference_forward_and_gradients(act, tile, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 9, 5, dtype=dtype, requires_grad=True)
    w1 = torch.randn(7, 5, dtype=dtype, requires_grad=True)
    b1 = torch.randn(7, dtype=dtype, requires_grad=True)
    w2 = torch.randn(3, 7, dtype=dtype, requires_grad=True)
    b2 = torch.randn(3, dtype=dtype, requires_grad=True)
    args = (x, w1, b1, w2, b2)
    y = fused_mlp(*args, activation=act, tile=tile)
    y_ref = mlp_ref(*args, activation=act)
    assert y.shape == (2, 9, 3)
    torch.testing.assert_close(y, y_ref, **TOL[dtype])
    w = torch.randn_like(y)
    for a, e in zip(torch.autograd.grad((y * w).sum(), args), torch.autograd.grad((y_ref * w).sum(), args)):
        torch.testing.assert_close(a, e, **TOL[dtype])


def test_fused_mlp_gradcheck():
    torch.manual_seed(1)
    args = [torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in ((6, 3), (4, 3), (4,), (2, 4), (2,))]
    assert torch.autograd.gradcheck(lambda *a: fused_mlp(*a, activation="tanh", tile=4), args)
