"""The fused CPU kernels as PyTorch operators (``torch.ops.neurodyn.*``, each op's ``cpu.py``, made by
:func:`neurodyn.ops.custom_op.define_op`).

* ``torch.library.opcheck`` on every operator with small valid inputs: the schema (no output aliases an input or
  another output, nothing is mutated), the fake against the real outputs (shapes, dtypes, strides; the sizes cross
  the kernels' checkpoint chunks and row tiles, so a fake that mirrors a blocking constant wrongly fails), the
  autograd registration (the forward operators' formulas, which call the backward operators) and AOTAutograd with
  dynamic shapes (the forward cases with inputs that require grad run their backward through it);
* every wrapper that reaches a kernel (``selective_scan``, ``knc_scan``, ``head_scan``, ``selective_scan_2d``,
  ``linear_scan``, ``ncp_mlp``) under ``torch.compile(fullgraph=True)``, forward and every gradient against eager,
  with the kernel counted, and under ``torch.export`` (the forward operator in the graph, the program run against
  eager).
"""

from __future__ import annotations

import functools

import pytest
import torch

from neurodyn.ops import cpu_kernel, head_scan, knc_scan, linear_scan, ncp_mlp, selective_scan, selective_scan_2d
from neurodyn.ops.custom_op import OPS

pytestmark = pytest.mark.needs_kernel

F64 = torch.float64


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _randn(g, *shape, dtype=F64, grad=False):
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad)


def _step(g, *shape, dtype=F64, grad=False):  # positive steps
    return (torch.rand(*shape, generator=g, dtype=dtype) * 0.5 + 0.05).requires_grad_(grad)


def _decay(g, *shape, dtype=F64, grad=False):  # negative A
    return (-torch.rand(*shape, generator=g, dtype=dtype) - 0.1).requires_grad_(grad)


def _detach(ts):
    return [t.detach() if isinstance(t, torch.Tensor) else t for t in ts]


# ---------------------------------------------------------------------------------------------------------------
# opcheck: one case per operator and configuration (optional tensors present / absent, each form, ...)


def _selective_scan_cases():
    g = _gen(1)
    b, d, L, n = 2, 3, 70, 8  # L crosses the 64-step checkpoint chunk
    full = (
        _randn(g, b, d, L, grad=True),
        _step(g, b, d, L, grad=True),
        _decay(g, d, n, grad=True),
        _randn(g, b, 1, L, n, grad=True),
        _randn(g, d, n, grad=True),
        _randn(g, d, grad=True),
        _randn(g, b, d, n, grad=True),
    )
    yield "fwd_var_B_fixed_C_D_h0", "selective_scan_fwd", (*full, True, False)
    yield (
        "fwd_fixed_B_zoh_no_ckpt",
        "selective_scan_fwd",
        (
            _randn(g, b, d, L),
            _step(g, b, d, L),
            _decay(g, d, n),
            _randn(g, d, n),
            _randn(g, b, 3, L, n),
            None,
            None,
            False,
            True,
        ),
    )
    u, dl, A, B, C, D, h0 = _detach(full)
    _, _, ckpt = OPS["cpp"]["selective_scan_fwd"](u, dl, A, B, C, D, h0, True, False)
    yield (
        "bwd_D_h0_glast",
        "selective_scan_bwd",
        (u, dl, A, B, C, D, h0, ckpt, _randn(g, b, d, L), _randn(g, b, d, n), False),
    )
    yield "bwd_plain", "selective_scan_bwd", (u, dl, A, B, C, None, None, ckpt, _randn(g, b, d, L), None, False)


def _linear_scan_cases():
    g = _gen(2)
    yield (
        "h0_reverse",
        "linear_scan",
        (_step(g, 2, 5, 3, grad=True), _randn(g, 2, 5, 3, grad=True), _randn(g, 2, 3, grad=True), True),
    )
    yield "plain", "linear_scan", (_step(g, 2, 5, 3), _randn(g, 2, 5, 3), None, False)


def _scan2d_cases():
    g = _gen(3)
    b, d, H, W, n = 2, 3, 11, 5, 8  # H crosses the 8-row checkpoint block
    args = (
        _randn(g, b, d, H, W, grad=True),
        _step(g, b, d, H, W, grad=True),
        _decay(g, d, n, grad=True),
        _randn(g, b, H, W, n, grad=True),
        _randn(g, b, H, W, n, grad=True),
        _randn(g, d, grad=True),
        _randn(g, d, n, grad=True),
    )
    for form in (0, 1, 2):
        yield f"fwd_form{form}", "scan2d_fwd", (*args, form, True)
    plain = _detach(args)
    yield "fwd_no_D_no_ckpt", "scan2d_fwd", (*plain[:5], None, plain[6], 0, False)
    _, ckpt = OPS["cpp"]["scan2d_fwd"](*plain, 2, True)
    yield "bwd_alg2", "scan2d_bwd", (*plain, 2, ckpt, _randn(g, b, d, H, W))


def _head_scan_cases():
    g = _gen(4)
    b, S, L, H, P, G, N = 2, 2, 37, 2, 8, 1, 4  # float64: 8 lanes; L crosses the 32-step chunk
    args = (
        _randn(g, b, S, L, H * P, grad=True),
        _step(g, b, S, L, H, grad=True),
        _decay(g, S, H, grad=True),
        _randn(g, b, S, L, G, N, grad=True),
        _randn(g, b, S, L, G, N, grad=True),
        _randn(g, S, H * P, grad=True),
    )
    yield "fwd_D", "head_scan_fwd", (*args, True)
    yield "fwd_no_D_no_ckpt", "head_scan_fwd", (*_detach(args[:5]), None, False)
    plain = _detach(args)
    _, ckpt = OPS["cpp"]["head_scan_fwd"](*plain, True)
    yield "bwd", "head_scan_bwd", (*plain, ckpt, _randn(g, b, S, L, H * P))
    g32 = [t.float() for t in plain]  # float32: 16 lanes per block
    u32 = torch.randn(b, S, L, H * 16, generator=g)
    yield "fwd_float32", "head_scan_fwd", (u32, *g32[1:5], None, True)


def _ncp_args(g, M=37, grad=True, io=True, patterns=True, middle=4):
    C, a, widths = 2, 5, (6, middle, 2)  # M = 37 rows: 3 tiles of 16, the last partial; middle = 0: an empty layer
    e = torch.empty(0, dtype=F64)
    w_in = [_randn(g, C, a, 6, grad=grad), e, _randn(g, C, a, 2, grad=grad)]  # layer 1 without an input term
    bias = [_randn(g, C, h, grad=grad) for h in widths]
    w_rec = [e] + [_randn(g, C, p, h, grad=grad) for p, h in zip(widths, widths[1:])]
    mask = [torch.tensor([1.0, 1, 0, 1, 1, 1], dtype=F64), torch.ones(middle, dtype=F64), torch.ones(2, dtype=F64)]
    pat = lambda *s: (torch.rand(*s, generator=g) < 0.6).to(F64)  # noqa: E731
    p_in, p_rec = ([pat(a, 6), e, pat(a, 2)], [e, pat(6, middle), pat(middle, 2)]) if patterns else ([], [])
    io_t = (
        [
            _randn(g, C, a, grad=grad),
            _randn(g, C, a, grad=grad),
            _randn(g, C, a, 3, grad=grad),
            _randn(g, C, 3, grad=grad),
        ]
        if io
        else [e] * 4
    )
    return _randn(g, C, M, a, grad=grad), w_in, bias, w_rec, mask, p_in, p_rec, io_t


def _ncp_cases():
    g = _gen(5)
    x, w_in, bias, w_rec, mask, p_in, p_rec, io = _ncp_args(g)
    yield "fwd_patterns_io_head", "ncp_mlp_fwd", (x, w_in, bias, w_rec, mask, 1, p_in, p_rec, io)
    x2, w_in2, bias2, w_rec2, mask2, _, _, io2 = _ncp_args(g, M=16, grad=False, io=False, patterns=False)
    yield "fwd_dense_plain", "ncp_mlp_fwd", (x2, w_in2, bias2, w_rec2, mask2, 2, [], [], io2)
    x3, w_in3, bias3, w_rec3, mask3, p_in3, p_rec3, io3 = _ncp_args(g, middle=0)
    yield "fwd_empty_layer", "ncp_mlp_fwd", (x3, w_in3, bias3, w_rec3, mask3, 1, p_in3, p_rec3, io3)
    for label, (xx, wi, bb, wr, mm, pi, pr, ii), act in (
        ("bwd_patterns_io_head", _ncp_args(g, grad=False), 3),
        ("bwd_dense_plain", _ncp_args(g, grad=False, io=False, patterns=False), 0),
        ("bwd_empty_layer", _ncp_args(g, grad=False, middle=0), 1),
    ):
        *saved, y, head = OPS["cpp"]["ncp_mlp_fwd"](xx, wi, bb, wr, mm, act, pi, pr, ii)
        ghead = _randn(g, *head.shape) if head.numel() else torch.empty(0, dtype=F64)
        yield label, "ncp_mlp_bwd", (xx, wi, bb, wr, mm, saved, _randn(g, *y.shape), act, pi, pr, ii, ghead)


# "operator-label" of every case the makers above yield, in their order: named here so that collecting the tests never
# runs a kernel (the backward cases take a forward's checkpoints); test_opcheck_cases_are_the_ones_named checks it
OPCHECK_CASES = [
    "selective_scan_fwd-fwd_var_B_fixed_C_D_h0",
    "selective_scan_fwd-fwd_fixed_B_zoh_no_ckpt",
    "selective_scan_bwd-bwd_D_h0_glast",
    "selective_scan_bwd-bwd_plain",
    "linear_scan-h0_reverse",
    "linear_scan-plain",
    "scan2d_fwd-fwd_form0",
    "scan2d_fwd-fwd_form1",
    "scan2d_fwd-fwd_form2",
    "scan2d_fwd-fwd_no_D_no_ckpt",
    "scan2d_bwd-bwd_alg2",
    "head_scan_fwd-fwd_D",
    "head_scan_fwd-fwd_no_D_no_ckpt",
    "head_scan_bwd-bwd",
    "head_scan_fwd-fwd_float32",
    "ncp_mlp_fwd-fwd_patterns_io_head",
    "ncp_mlp_fwd-fwd_dense_plain",
    "ncp_mlp_fwd-fwd_empty_layer",
    "ncp_mlp_bwd-bwd_patterns_io_head",
    "ncp_mlp_bwd-bwd_dense_plain",
    "ncp_mlp_bwd-bwd_empty_layer",
]


@functools.cache
def _cases() -> dict[str, tuple]:
    """``{"operator-label": args}`` of every opcheck case (made once, on first use: it runs the kernels)."""
    out = {}
    for make in (_selective_scan_cases, _linear_scan_cases, _scan2d_cases, _head_scan_cases, _ncp_cases):
        out.update({f"{op}-{label}": args for label, op, args in make()})
    return out


@pytest.mark.slow
def test_opcheck_cases_are_the_ones_named():
    assert list(_cases()) == OPCHECK_CASES


def test_every_operator_has_an_opcheck_case():
    assert {case.split("-")[0] for case in OPCHECK_CASES} == set(OPS["cpp"])


@pytest.mark.parametrize("case", OPCHECK_CASES)
@pytest.mark.slow
def test_opcheck(case):
    # every test: schema, autograd registration, fake against real, AOTAutograd with dynamic shapes
    result = torch.library.opcheck(OPS["cpp"][case.split("-")[0]], _cases()[case])
    assert set(result.values()) == {"SUCCESS"}, result


def test_fakes_mirror_the_kernels_blocking_constants():
    from neurodyn.ops.head_scan.cpu import head_lanes
    from neurodyn.ops.selective_scan.cpu import SCAN_CHUNK

    ext = cpu_kernel.get()
    assert SCAN_CHUNK == ext.chunk_size()
    assert head_lanes(torch.float32) == ext.head_scan_lanes(False)
    assert head_lanes(torch.float64) == ext.head_scan_lanes(True)


def test_kernel_tests_are_constants_for_dynamo():
    """``available`` (and selective_scan's mamba-ssm test) carry the mark torch's assume_constant_result sets."""
    from neurodyn.ops.selective_scan import interface as ss

    probe = torch.compiler.assume_constant_result(lambda: None)
    marks = vars(probe)
    assert marks
    for fn in (cpu_kernel.available, ss._mamba_available):
        assert {k: getattr(fn, k, None) for k in marks} == marks


def test_forward_operators_carry_their_gradient_and_backward_operators_are_first_order():
    """A forward operator called on inputs that require grad differentiates through its registered formula (which
    calls the backward operator): here the linear scan's, against autograd through a plain loop. A backward
    operator has no formula of its own."""
    g = _gen(6)
    a, x, h0 = _step(g, 2, 5, 3, grad=True), _randn(g, 2, 5, 3, grad=True), _randn(g, 2, 3, grad=True)
    h = OPS["cpp"]["linear_scan"](a, x, h0, False)
    assert h.requires_grad
    hs, prev = [], h0
    for t in range(5):
        prev = a[:, t] * prev + x[:, t]
        hs.append(prev)
    want = torch.stack(hs, 1)
    torch.testing.assert_close(h, want)
    w = torch.randn(h.shape, generator=g, dtype=F64)
    for got, ref in zip(
        torch.autograd.grad((h * w).sum(), (a, x, h0)), torch.autograd.grad((want * w).sum(), (a, x, h0))
    ):
        torch.testing.assert_close(got, ref)
    u, dl, A, B, C, D, h0 = (
        _randn(g, 1, 2, 9),
        _step(g, 1, 2, 9),
        _decay(g, 2, 8),
        _randn(g, 2, 8),
        _randn(g, 2, 8),
        None,
        None,
    )
    _, _, ckpt = OPS["cpp"]["selective_scan_fwd"](u, dl, A, B, C, D, h0, True, False)
    gout = _randn(g, 1, 2, 9, grad=True)
    grads = OPS["cpp"]["selective_scan_bwd"](u, dl, A, B, C, D, h0, ckpt, gout, None, False)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        grads[0].sum().backward()


# ---------------------------------------------------------------------------------------------------------------
# the wrappers under torch.compile(fullgraph=True) and torch.export


def _wrapper_cases():
    f32 = torch.float32
    g = _gen(7)
    r = lambda *s: _randn(g, *s, dtype=f32, grad=True)  # noqa: E731
    pos = lambda *s: _step(g, *s, dtype=f32, grad=True)  # noqa: E731
    neg = lambda *s: _decay(g, *s, dtype=f32, grad=True)  # noqa: E731
    b, d, L, n = 2, 4, 70, 5  # n = 5: padded to 8 in the wrapper
    x, w_in, bias, w_rec, mask, p_in, p_rec, io = _ncp_args(_gen(8))
    ncp_leaves = [x, w_in[0], w_in[2], *bias, w_rec[1], w_rec[2], *io]
    mask = [m.detach() for m in mask]

    def ncp(x, w0, w2, b0, b1, b2, r1, r2, sc, sh, hw, hb):
        return ncp_mlp(
            x,
            [w0, None, w2],
            [b0, b1, b2],
            [None, r1, r2],
            mask,
            "tanh",
            pattern_in=[p_in[0], None, p_in[2]],
            pattern_rec=[None, p_rec[1], p_rec[2]],
            in_scale=sc,
            in_shift=sh,
            head=(hw, hb),
        )

    return {
        "selective_scan": (
            "selective_scan_fwd",
            lambda u, de, A, B, C, D, z, bias, h0: selective_scan(
                u, de, A, B, C, D, z, bias, True, True, initial_state=h0, backend="cpp"
            ),
            (r(b, d, L), r(b, d, L), neg(d, n), r(b, n, L), r(b, 2, n, L), r(d), r(b, d, L), r(d), r(b, d, n)),
        ),
        "selective_scan_reverse_fixed_BC": (
            "selective_scan_fwd",
            lambda u, de, A, B, C: selective_scan(u, de, A, B, C, delta_softplus=True, reverse=True, backend="cpp"),
            (r(b, d, L), r(b, d, L), neg(d, n), r(d, n), r(d, n)),
        ),
        "knc_scan": (
            "selective_scan_fwd",
            lambda u, de, lam, B, C, D: knc_scan(u, de, lam, B, C, D, backend="cpp"),
            (r(b, d, L), pos(b, d, L), pos(d, n), r(b, n, L), r(b, n, L), r(d)),
        ),
        "head_scan": (
            "head_scan_fwd",
            lambda u, de, A, B, C, D: head_scan(u, de, A, B, C, D, backend="heads"),
            (r(2, 2, 37, 32), pos(2, 2, 37, 2), neg(2, 2), r(2, 2, 37, 1, 4), r(2, 2, 37, 1, 4), r(2, 32)),
        ),
        "scan_2d": (
            "scan2d_fwd",
            lambda x, de, A, B, C, D: selective_scan_2d(
                x, de, A, B, C, D, R="0011", delta_softplus=True, correction_form="eq9", backend="cpp"
            ),
            (r(2, 3, 11, 5), r(2, 3, 11, 5), neg(3, n), r(2, n, 11, 5), r(2, n, 11, 5), r(3)),
        ),
        "linear_scan": (
            "linear_scan",
            lambda a, x, h0: linear_scan(a, x, h0, dim=1, reverse=True, backend="cpp"),
            (pos(2, 9, 3), r(2, 9, 3), r(2, 3)),
        ),
        "ncp_mlp": ("ncp_mlp_fwd", ncp, tuple(ncp_leaves)),
    }


def _wrapper_params():
    return list(_wrapper_cases())  # (making the cases runs no kernel: collecting builds nothing)


def _forward_backward(fn, args):
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum((o * torch.linspace(-1, 1, o.numel(), dtype=o.dtype).view_as(o)).sum() for o in outs)
    return outs, torch.autograd.grad(loss, args)


def _close(got, want, tol):
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * max(1.0, b.abs().max().item()))


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", _wrapper_params())
@pytest.mark.slow
def test_wrapper_compiles_fullgraph_forward_and_backward(name, backend, kernel_calls):
    fwd_op, fn, args = _wrapper_cases()[name]
    want = _forward_backward(fn, args)
    torch._dynamo.reset()
    kernel_calls.clear()
    got = _forward_backward(torch.compile(fn, fullgraph=True, backend=backend), args)
    bwd_op = fwd_op.replace("_fwd", "_bwd")
    assert kernel_calls[fwd_op] > 0 and (bwd_op == fwd_op or kernel_calls[bwd_op] > 0), dict(kernel_calls)
    _close(got[0] + got[1], want[0] + want[1], 1e-4 if backend == "inductor" else 1e-6)


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.mark.parametrize("name", _wrapper_params())
@pytest.mark.slow
def test_wrapper_exports(name, kernel_calls):
    fwd_op, fn, args = _wrapper_cases()[name]
    args = tuple(a.detach() for a in args)
    ep = torch.export.export(_Fn(fn), args)
    assert f"neurodyn.{fwd_op}.default" in {str(node.target) for node in ep.graph.nodes}
    kernel_calls.clear()
    got = ep.module()(*args)
    assert kernel_calls[fwd_op] > 0, dict(kernel_calls)
    want = fn(*args)
    _close(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), 1e-6)


def test_export_leaves_no_traced_tensor_in_the_dft_cache():
    """The truncated DFT matrices (ops.spectral) are cached per size; non-strict export runs the Python code on fake
    tensors, which must not be cached (the next call, eager or exported, got a tensor without data)."""
    from neurodyn.ops import spectral

    class Dft(torch.nn.Module):
        def forward(self, x):
            return x @ spectral.rdft_matrix(x.shape[-1], 3, x.dtype, x.device)

    x = torch.randn(2, 13)  # a size no other test uses: a cache miss while exporting
    spectral._CACHE.pop(("rdft", 13, 3, x.dtype, x.device), None)
    ep = torch.export.export(Dft(), (x,))
    assert all(type(t) is torch.Tensor for t in spectral._CACHE.values())
    torch.testing.assert_close(ep.module()(x), Dft()(x))
    torch.testing.assert_close(Dft()(x), torch.view_as_real(torch.fft.rfft(x)[:, :3]).transpose(-1, -2).reshape(2, 6))
