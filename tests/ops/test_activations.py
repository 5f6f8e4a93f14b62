"""ops.activations.tanh against torch.tanh (the reference) in value and gradient."""

import torch

from neurodyn.ops.activations import tanh


def test_float32_tanh_matches_float64_reference():
    x = torch.linspace(-40.0, 40.0, 200001)
    x.requires_grad_(True)
    y = tanh(x)
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    (gx,) = torch.autograd.grad(y, x, g)
    xd = x.detach().double()
    ref = torch.tanh(xd)
    assert (y.detach().double() - ref).abs().max() < 3e-7
    assert y.detach().abs().max() <= 1.0
    assert ((gx.double() - g.double() * (1 - ref**2)).abs() / (1 + g.double().abs())).max() < 1e-6


def test_float64_is_torch_tanh_exactly():
    x = torch.randn(1000, dtype=torch.float64, requires_grad=True)
    assert torch.equal(tanh(x), torch.tanh(x))
    assert torch.autograd.gradcheck(tanh, (x[:20].detach().clone().requires_grad_(True),))
