"""ops.head_scan: the fused multi-head kernel against head_scan_ref (the heads folded into channels and scanned by
the sequential selective_scan_ref), forward and every gradient, float64 and float32; compiled and generic state
counts, several channel blocks per head, groups; the NaN-free range dt in [1e-6, 1e3] at L = 65536; fallbacks and
errors."""

from __future__ import annotations

import pytest
import torch

from neurodyn.ops import head_scan, head_scan_ref, selective_scan_ref

from .helpers import rel_err

needs_kernel = pytest.mark.needs_kernel


def head_inputs(b=2, S=2, L=70, H=2, P=16, G=1, N=16, dtype=torch.float64, seed=0, dt_range=(0.01, 0.5)):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    lo, hi = dt_range
    return {
        "u": r(b, S, L, H * P),
        "dt": lo + (hi - lo) * torch.rand(b, S, L, H, generator=g, dtype=dtype),
        "A": -(0.1 + 2 * torch.rand(S, H, generator=g, dtype=dtype)),
        "B": r(b, S, L, G, N),
        "C": r(b, S, L, G, N),
        "D": r(S, H * P),
    }


def _run(fn, args, **kw):
    leaves = {k: v.clone().requires_grad_(True) for k, v in args.items() if v is not None}
    y = fn(**{k: leaves.get(k) for k in args}, **kw)
    gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(y.dtype)
    grads = torch.autograd.grad((y * gy).sum(), list(leaves.values()))
    return y, dict(zip(leaves, grads))


@needs_kernel
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize(
    "shape",
    [
        dict(),  # N = 16 compiled, L not a multiple of the checkpoint interval
        dict(P=32, N=8, L=31),  # two channel blocks per head (float32), L below one interval
        dict(H=4, G=2, N=5, S=3, L=33),  # groups, a state count that is not compiled in
        dict(N=40, b=1, L=64),  # generic N above one vector of lanes
        dict(N=32, H=1, S=1, L=100),
        dict(N=64, H=1, S=1, b=1, L=40),  # the largest compiled state count (LaMO's paper preset)
    ],
)
def test_kernel_matches_reference_forward_and_gradients(dtype, tol, shape):
    args = head_inputs(dtype=dtype, **shape)
    y, g = _run(head_scan, args, backend="heads")
    ref_args = {k: v.double() for k, v in args.items()}
    y_ref, g_ref = _run(head_scan_ref, ref_args)
    assert y.dtype == dtype
    assert rel_err(y, y_ref) < tol
    for name in g_ref:
        assert rel_err(g[name], g_ref[name]) < tol, name


def test_reference_is_the_per_channel_selective_scan():
    """head_scan_ref equals a scan of one channel at a time with its head's step and decay (no folding)."""
    a = head_inputs(b=1, S=2, L=12, H=2, P=3, G=2, N=4)
    y = head_scan_ref(**a)
    for s in range(2):
        for h in range(2):
            for p in range(3):
                c = h * 3 + p
                yc = selective_scan_ref(
                    a["u"][:, s, :, c][:, None],
                    a["dt"][:, s, :, h][:, None],
                    a["A"][s, h].expand(1, 4),
                    a["B"][:, s, :, h].transpose(1, 2)[:, None],
                    a["C"][:, s, :, h].transpose(1, 2)[:, None],
                    D=a["D"][s, c : c + 1],
                )
                torch.testing.assert_close(y[:, s, :, c], yc[:, 0], rtol=1e-12, atol=1e-12)


@needs_kernel
def test_two_threads_match_one():
    args = head_inputs(b=3, S=2, H=4, P=16, N=16, L=90, dtype=torch.float32)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _run(head_scan, args, backend="heads")
        torch.set_num_threads(2)
        two = _run(head_scan, args, backend="heads")
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(one[0], two[0], rtol=0, atol=0)
    for k in one[1]:
        torch.testing.assert_close(one[1][k], two[1][k], rtol=1e-6, atol=1e-6)


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dt_from_1e_6_to_1e3_is_nan_free_at_L_65536(dtype):
    L = 65536
    args = head_inputs(b=1, S=1, L=L, H=1, P=16, N=8, dtype=dtype)
    g = torch.Generator().manual_seed(3)
    args["dt"] = torch.exp(torch.empty(1, 1, L, 1, dtype=dtype).uniform_(-13.8, 6.9, generator=g))
    args["A"] = torch.tensor([[-16.0]], dtype=dtype)
    y, grads = _run(head_scan, args, backend="heads")
    assert torch.isfinite(y).all()
    assert all(torch.isfinite(v).all() for v in grads.values())


@needs_kernel
def test_extreme_dt_matches_reference():
    args = head_inputs(b=1, S=1, L=200, H=2, P=8, N=8)
    args["dt"] = torch.exp(torch.empty(1, 1, 200, 2, dtype=torch.float64).uniform_(-13.8, 6.9))
    y, g = _run(head_scan, args, backend="heads")
    y_ref, g_ref = _run(head_scan_ref, args)
    assert rel_err(y, y_ref) < 1e-10
    for k in g_ref:
        assert rel_err(g[k], g_ref[k]) < 1e-10, k


@needs_kernel
def test_gradcheck_small():
    args = head_inputs(b=1, S=1, L=9, H=1, P=8, N=3)
    leaves = [args[k].requires_grad_(True) for k in ("u", "dt", "A", "B", "C", "D")]
    assert torch.autograd.gradcheck(lambda *t: head_scan(*t, backend="heads"), leaves, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend", ["auto", "torch", "ref"])
def test_folded_backends_and_small_heads_agree_with_reference(backend):
    """P = 3 is no multiple of the kernel's lanes: 'auto' folds into channels; the other backends always fold."""
    args = head_inputs(b=2, S=2, L=20, H=2, P=3, G=2, N=4)
    y, g = _run(head_scan, args, backend=backend)
    y_ref, g_ref = _run(head_scan_ref, args)
    assert rel_err(y, y_ref) < 1e-12
    for k in g_ref:
        assert rel_err(g[k], g_ref[k]) < 1e-12, k


def test_without_skip_term():
    args = head_inputs(b=1, S=1, L=20, H=1, P=16, N=4)
    args["D"] = None
    y, _ = _run(head_scan, args)
    y_ref, _ = _run(head_scan_ref, args)
    assert rel_err(y, y_ref) < 1e-12


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda a: a.update(u=a["u"][0]), "u has shape"),
        (lambda a: a.update(dt=a["dt"][..., :1].expand(-1, -1, -1, 3)), "dt has shape"),
        (lambda a: a.update(A=a["A"][:, :1]), "A has shape"),
        (lambda a: a.update(B=a["B"][:, :, :-1]), "B has shape"),
        (lambda a: a.update(C=a["C"][..., :-1]), "C has"),
        (lambda a: a.update(D=a["D"][:, :-1]), "D has shape"),
        (lambda a: a.update(u=a["u"].long()), "u must be a real floating tensor"),
    ],
)
def test_bad_arguments_raise_one_clear_error(change, needle):
    args = head_inputs(b=1, S=1, L=5, H=2, P=4, N=3)
    change(args)
    with pytest.raises((ValueError, TypeError), match=needle):
        head_scan(**args)


def test_unknown_backend_and_forced_kernel_on_small_heads():
    args = head_inputs(b=1, S=1, L=5, H=2, P=3, N=3)
    with pytest.raises(ValueError, match="backend"):
        head_scan(**args, backend="gpu")
    with pytest.raises(ValueError, match="multiple of"):
        head_scan(**args, backend="heads")
