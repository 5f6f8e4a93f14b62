"""The selective-scan kernels at their production tiles (the tile ``selective_scan.triton_op.scan_blocks`` picks for the
benchmark shapes), without a GPU.

* In Triton's interpreter, against the references: the production chunk (128 steps, 16 per thread in the forward and
  8 in the backward, 8 and 16 lanes), the production channel blocks (16 and 8) and N = 16, at small batch and width so
  that they run in seconds: L spans three chunks, the last partial; the width is not a multiple of the block.
  (``tests/ops/test_triton_scan.py`` runs the same kernels on small tiles, where the lanes' scans are shorter.)

The same tiles compiled for sm_90 and sm_80 (shared memory, spills, stack, the backwards' registers) are
``tests/ops/test_kernel_resources.py``'s benchmark rows.
"""

from __future__ import annotations

import pytest
import torch

from neurodyn.ops import (
    head_scan,
    head_scan_ref,
    knc_scan,
    knc_scan_ref,
    selective_scan,
    selective_scan_ref,
    triton_loader,
)
from neurodyn.ops.selective_scan.triton_op import scan_blocks

from .helpers import rel_err, scan_inputs

pytestmark = [
    pytest.mark.slow,  # (4-5 s each on one core in the interpreter)
    pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed"),
]

TOL = 2e-5  # float32 against the float64 reference, norm-wise (as tests/ops/test_triton_scan.py)


def _grads(outs, leaves, seed=0):
    g = torch.Generator().manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=torch.float64).to(o)).sum() for o in outs)
    return torch.autograd.grad(loss, leaves)


def _check(got, want, got_leaves, want_leaves):
    for i, (a, b) in enumerate(zip(got, want)):
        assert rel_err(a, b) < TOL, ("output", i, rel_err(a, b))
    for i, (a, b) in enumerate(zip(_grads(got, got_leaves), _grads(want, want_leaves))):
        assert rel_err(a, b) < TOL, ("gradient", i, rel_err(a, b))


def _production_tile(d, n, L):
    """The tile of the benchmark shapes (width 1024, N 16, L 4096) at this width: asserted to be what these tests
    run (a change of ``scan_blocks`` or of the steps per thread must be carried here)."""
    assert scan_blocks(1024, 16, 4096) == (128, 16)
    assert scan_blocks(d, n, L) == (128, 16)
    ss = triton_loader.load("selective_scan", torch.device("cpu"))
    assert ss.geometry(128, 16, False) == dict(J=4, K=4, LANES=8, BD=16, num_warps=4)
    assert ss.geometry(128, 16, True) == dict(J=2, K=4, LANES=16, BD=8, num_warps=4)


@pytest.fixture()
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


NAMES = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state"]


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_selective_scan_at_the_production_tile(interpreter, reverse):
    """Input-dependent B/C in 2 groups of 10 channels (the 16-channel block straddles them), z, D, bias + softplus,
    an initial state; 20 channels (one full block and a partial one), L = 300 (two full chunks and a partial)."""
    d, n, L = 20, 16, 300
    _production_tile(d, n, L)
    base = scan_inputs(1, d, L, n, dtype=torch.float64, bc="var", groups=2, with_h0=True)
    args = {k: v.float().requires_grad_() for k, v in base.items()}
    ref = {k: v.detach().double().requires_grad_() for k, v in args.items()}
    got = selective_scan(**args, delta_softplus=True, return_last_state=True, reverse=reverse, backend="triton")
    want = selective_scan_ref(**ref, delta_softplus=True, return_last_state=True, reverse=reverse)
    _check(got, want, [args[k] for k in NAMES], [ref[k] for k in NAMES])


def test_knc_scan_at_the_production_tile(interpreter):
    """The Kirchhoff cell's ZOH factor on both sides of its polynomial/closed-form switch (x = Delta lambda from
    1e-3 to 3), input-dependent b, c, d."""
    d, n, L = 20, 16, 300
    _production_tile(d, n, L)
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    base = [
        r(1, d, L),
        torch.rand(1, d, L, generator=g, dtype=torch.float64) * 0.8 + 1e-3,
        torch.rand(d, n, generator=g, dtype=torch.float64) * 4 + 0.1,
        r(1, 1, n, L),
        r(1, 1, n, L),
        r(d),
    ]
    args = [t.float().requires_grad_() for t in base]
    ref = [t.detach().double().requires_grad_() for t in args]
    _check((knc_scan(*args, "zoh", backend="triton"),), (knc_scan_ref(*ref, "zoh"),), args, ref)


def test_head_scan_at_the_production_tile(interpreter):
    """The multi-head layout read in place (time-major u, channels contiguous) at the production tile: 2 heads of 10
    channels (blocks of 16 channels straddle them), one group, N = 16, L = 300."""
    H, P, n, L = 2, 10, 16, 300
    _production_tile(H * P, n, L)
    g = torch.Generator().manual_seed(4)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    base = [
        r(1, 1, L, H * P),
        0.1 + torch.rand(1, 1, L, H, generator=g, dtype=torch.float64),
        -0.1 - torch.rand(1, H, generator=g, dtype=torch.float64),
        r(1, 1, L, 1, n),
        r(1, 1, L, 1, n),
        r(1, H * P),
    ]
    args = [t.float().requires_grad_() for t in base]
    ref = [t.detach().double().requires_grad_() for t in args]
    _check((head_scan(*args, backend="triton"),), (head_scan_ref(*ref),), args, ref)
