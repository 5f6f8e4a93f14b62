"""linear_scan against a plain loop, on both backends, forward and gradients."""

import pytest
import torch

from neurodyn.ops import linear_scan

from .helpers import FAST_BACKENDS, rel_err


def _loop(a, x, h0, dim, reverse):
    a, x = torch.broadcast_tensors(a, x)
    a, x = a.movedim(dim, 0), x.movedim(dim, 0)
    h = h0 if h0 is not None else torch.zeros_like(x[0])
    out = [None] * x.shape[0]
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        h = a[t] * h + x[t]
        out[t] = h
    return torch.stack(out).movedim(0, dim)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("dim,reverse,L", [(0, False, 1), (1, True, 37), (2, False, 300), (-1, True, 1000)])
def test_matches_loop(backend, dim, reverse, L, device):
    if backend == "cpp" and device.type != "cpu":
        pytest.skip("the C++ kernel takes CPU tensors")
    shape = [3, 4, 5]
    shape[dim] = L
    a = torch.rand(*shape, dtype=torch.float64, device=device, requires_grad=True)
    x = torch.randn(*shape, dtype=torch.float64, device=device, requires_grad=True)
    h0_shape = list(shape)
    h0_shape.pop(dim)
    h0 = torch.randn(*h0_shape, dtype=torch.float64, device=device, requires_grad=True)
    ref = _loop(a, x, h0, dim, reverse)
    out = linear_scan(a, x, h0, dim=dim, reverse=reverse, backend=backend)
    assert out.device == a.device and rel_err(out, ref) < 1e-12
    g = torch.randn_like(ref)
    for gf, gr in zip(
        torch.autograd.grad((out * g).sum(), [a, x, h0]), torch.autograd.grad((ref * g).sum(), [a, x, h0])
    ):
        assert rel_err(gf, gr) < 1e-12


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_broadcast_decay_and_gradcheck(backend):
    a = torch.rand(2, 6, 1, dtype=torch.float64, requires_grad=True)  # broadcast over the last dim
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, x: linear_scan(a, x, dim=1, backend=backend), (a, x))


def test_bad_h0_shape():
    with pytest.raises(ValueError, match=r"h0 has shape \(3,\), expected \(2, 4\)"):
        linear_scan(torch.rand(2, 5, 4), torch.rand(2, 5, 4), torch.zeros(3), dim=1)


def test_torch_backend_one_chunk_path_for_wide_problems():
    """P * Q >= SEQUENTIAL_WIDTH on CPU: chunk_scan runs one L-step loop with h0 entering directly."""
    from neurodyn.ops.selective_scan import chunked as sc

    a = torch.rand(64, 70, 40, dtype=torch.float64, requires_grad=True)  # P * Q = 2560
    x = torch.randn(64, 70, 40, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(64, 40, dtype=torch.float64, requires_grad=True)
    assert 64 * 40 >= sc.SEQUENTIAL_WIDTH
    ref = _loop(a, x, h0, 1, False)
    out = linear_scan(a, x, h0, dim=1, backend="torch")
    assert rel_err(out, ref) < 1e-12
    g = torch.randn_like(ref)
    for gf, gr in zip(
        torch.autograd.grad((out * g).sum(), [a, x, h0]), torch.autograd.grad((ref * g).sum(), [a, x, h0])
    ):
        assert rel_err(gf, gr) < 1e-12
