"""selective_scan (torch and C++ paths) against the sequential reference selective_scan_ref."""

import pytest
import torch

from neurodyn.ops import selective_scan, selective_scan_ref
from neurodyn.ops.selective_scan import resolve_backend

from .helpers import FAST_BACKENDS, cpp_available, grads, rel_err, scan_inputs

NAMES = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state"]

# (batch, d, L, n, bc, groups, reverse, h0, softplus): L values straddle the 64-step chunks
CASES = [
    (2, 3, 1, 4, "var", 1, False, False, True),
    (2, 3, 63, 5, "var", 1, False, True, True),
    (1, 4, 65, 3, "var", 2, True, True, False),
    (2, 4, 130, 16, "fixed", 1, False, False, True),
    (2, 4, 129, 9, "mixed", 1, True, False, True),
    (1, 6, 257, 4, "var", 3, False, True, True),
    pytest.param((1, 2, 4097, 3, "var", 1, True, True, True), marks=pytest.mark.slow),  # 64 chunks: seconds
]


def _run(fn, args, reverse, softplus, **kw):
    return fn(
        args["u"],
        args["delta"],
        args["A"],
        args["B"],
        args["C"],
        args["D"],
        args["z"],
        args["delta_bias"],
        softplus,
        True,
        reverse=reverse,
        initial_state=args["initial_state"],
        **kw,
    )


def _leaves(args):
    for v in args.values():
        if v is not None:
            v.requires_grad_(True)
    return [args[k] for k in NAMES if args[k] is not None]


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize(
    "case",
    CASES,
    ids=lambda c: f"b{c[0]}d{c[1]}L{c[2]}n{c[3]}-{c[4]}-g{c[5]}{'-rev' if c[6] else ''}{'-h0' if c[7] else ''}",
)
def test_float64_matches_reference(backend, case):
    batch, d, L, n, bc, groups, reverse, h0, softplus = case
    args = scan_inputs(batch, d, L, n, bc=bc, groups=groups, with_h0=h0)
    leaves = _leaves(args)
    ref = _run(selective_scan_ref, args, reverse, softplus)
    fast = _run(selective_scan, args, reverse, softplus, backend=backend)
    assert fast[0].dtype == torch.float64
    assert rel_err(fast[0], ref[0]) < 1e-10
    assert rel_err(fast[1], ref[1]) < 1e-10
    for name, gf, gr in zip([k for k in NAMES if args[k] is not None], grads(fast, leaves), grads(ref, leaves)):
        assert gf is not None and gf.shape == gr.shape, name
        assert rel_err(gf, gr) < 1e-10, name


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("bc,groups,reverse", [("var", 2, False), ("fixed", 1, True)])
def test_float32_matches_reference(backend, bc, groups, reverse):
    args = scan_inputs(2, 4, 300, 16, dtype=torch.float32, bc=bc, groups=groups, with_h0=True)
    leaves = _leaves(args)
    ref = _run(selective_scan_ref, args, reverse, True)
    fast = _run(selective_scan, args, reverse, True, backend=backend)
    assert fast[0].dtype == torch.float32
    assert rel_err(fast[0], ref[0]) < 1e-5
    for gf, gr in zip(grads(fast, leaves), grads(ref, leaves)):
        assert rel_err(gf, gr) < 1e-5


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_gradcheck(backend):
    args = scan_inputs(1, 2, 7, 3, bc="var", groups=2, with_h0=True)
    names = [k for k in NAMES if args[k] is not None]
    leaves = _leaves(args)

    def f(*xs):
        kw = dict(zip(names, xs))
        out, last = selective_scan(
            kw["u"],
            kw["delta"],
            kw["A"],
            kw["B"],
            kw["C"],
            kw["D"],
            kw["z"],
            kw["delta_bias"],
            True,
            True,
            reverse=True,
            initial_state=kw["initial_state"],
            backend=backend,
        )
        return out, last

    assert torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-7)


def test_backends_agree_without_optional_inputs():
    args = scan_inputs(2, 3, 100, 4, bc="fixed", with_z=False, with_D=False, with_bias=False)
    out_ref = selective_scan_ref(args["u"], args["delta"], args["A"], args["B"], args["C"])
    for backend in ["torch"] + (["cpp"] if cpp_available() else []):
        out = selective_scan(args["u"], args["delta"], args["A"], args["B"], args["C"], backend=backend)
        assert rel_err(out, out_ref) < 1e-12


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_extreme_delta_long_sequence_is_finite(backend):
    L = 65536
    g = torch.Generator().manual_seed(0)
    u = torch.randn(1, 2, L, generator=g)
    # delta spans 1e-6 .. 1e3 (log-uniform), A down to -16
    delta = torch.exp(torch.empty(1, 2, L).uniform_(-13.8, 6.9, generator=g))
    A = -torch.tensor([[1.0, 4.0, 16.0, 0.01], [0.5, 2.0, 8.0, 1e-3]])
    B, C = torch.randn(1, 4, L, generator=g), torch.randn(1, 4, L, generator=g)
    leaves = [t.requires_grad_(True) for t in (u, delta, A, B, C)]
    out, last = selective_scan(u, delta, A, B, C, return_last_state=True, backend=backend)
    assert torch.isfinite(out).all() and torch.isfinite(last).all()
    gs = torch.autograd.grad(out.sum() + last.sum(), leaves)
    assert all(torch.isfinite(x).all() for x in gs)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_extreme_delta_matches_reference(backend):
    args = scan_inputs(1, 3, 200, 4, with_z=False, with_bias=False, with_h0=True)
    args["delta"] = torch.exp(torch.empty(1, 3, 200, dtype=torch.float64).uniform_(-13.8, 6.9))
    leaves = _leaves(args)
    ref = _run(selective_scan_ref, args, False, False)
    fast = _run(selective_scan, args, False, False, backend=backend)
    assert rel_err(fast[0], ref[0]) < 1e-10
    for gf, gr in zip(grads(fast, leaves), grads(ref, leaves)):
        assert rel_err(gf, gr) < 1e-10


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_accumulate_in_float32(backend, dtype):
    args = scan_inputs(2, 4, 200, 8, dtype=torch.float32, with_h0=False)
    half = {k: (v.to(dtype) if v is not None else None) for k, v in args.items()}
    leaves = _leaves(half)
    out = _run(selective_scan, half, False, True, backend=backend)
    ref = _run(selective_scan_ref, {k: (v.float() if v is not None else None) for k, v in half.items()}, False, True)
    assert out[0].dtype == dtype and out[1].dtype == torch.float32
    assert rel_err(out[0], ref[0]) < (1e-2 if dtype == torch.bfloat16 else 2e-3)
    gs = grads(out, leaves)
    assert all(g.dtype == dtype and torch.isfinite(g.float()).all() for g in gs)


def test_reverse_last_state_is_state_at_position_zero():
    args = scan_inputs(1, 2, 10, 3, with_z=False, with_D=False)
    _, last = selective_scan_ref(
        args["u"], args["delta"], args["A"], args["B"], args["C"], return_last_state=True, reverse=True
    )
    flipped = {k: (v.flip(-1) if v is not None and v.dim() == 3 else v) for k, v in args.items()}
    _, last_f = selective_scan_ref(
        flipped["u"], flipped["delta"], flipped["A"], flipped["B"], flipped["C"], return_last_state=True
    )
    assert torch.allclose(last, last_f)


def test_initial_state_continues_a_split_sequence():
    args = scan_inputs(2, 3, 90, 4, with_z=False, with_bias=False)
    u, dl, A, B, C, D = (args[k] for k in ("u", "delta", "A", "B", "C", "D"))
    full = selective_scan(u, dl, A, B, C, D, backend="torch")
    y1, h = selective_scan(
        u[..., :40], dl[..., :40], A, B[..., :40], C[..., :40], D, return_last_state=True, backend="torch"
    )
    y2 = selective_scan(u[..., 40:], dl[..., 40:], A, B[..., 40:], C[..., 40:], D, initial_state=h)
    assert rel_err(torch.cat([y1, y2], -1), full) < 1e-12


def test_auto_backend_on_cpu():
    u = torch.zeros(1, 1, 1)
    assert resolve_backend("auto", u) == ("cpp" if cpp_available() else "torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        resolve_backend("cuda", u)


def test_mamba_backend_requires_cuda():
    a = scan_inputs(1, 2, 5, 3)
    with pytest.raises(RuntimeError, match="mamba"):
        selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"], backend="mamba")


def test_auto_dispatches_to_mamba_for_cuda_tensors_without_triton(monkeypatch):
    """mamba-ssm is auto's CUDA choice when the Triton kernels are off (tests/ops/test_triton_scan.py: with them)."""
    from neurodyn.ops.selective_scan import interface as ss

    monkeypatch.setenv("NEURODYN_NO_TRITON", "1")

    class FakeCuda:
        is_cuda = True
        device = torch.device("cpu")

    monkeypatch.setattr(ss, "_mamba_fn", lambda: lambda *a, **k: None)
    assert ss.resolve_backend("auto", FakeCuda()) == "mamba"
    assert ss.resolve_backend("auto", FakeCuda(), initial_state=torch.zeros(1)) != "mamba"
    monkeypatch.delenv("NEURODYN_NO_TRITON")
    assert ss.resolve_backend("auto", FakeCuda()) == ("triton" if ss.triton_loader.available() else "mamba")
    monkeypatch.undo()
    monkeypatch.setenv("NEURODYN_NO_MAMBA_SSM", "1")
    assert ss._mamba_fn() is None  # the environment switch turns the dispatch off


BAD = [
    ("u", lambda a: a.update(u=a["u"][0]), ValueError, r"u has shape \(3, 7\), expected \(batch, d, L\)"),
    ("delta", lambda a: a.update(delta=a["delta"][..., :5]), ValueError, r"delta has shape \(2, 3, 5\)"),
    ("A", lambda a: a.update(A=a["A"][:2]), ValueError, r"A has shape \(2, 4\), expected \(d, n\) with d = 3"),
    ("B", lambda a: a.update(B=a["B"][..., :6]), ValueError, r"B has shape \(2, 4, 6\), expected .*\(2, 4, 7\)"),
    (
        "C",
        lambda a: a.update(C=torch.zeros(2, 2, 4, 7, dtype=torch.float64)),
        ValueError,
        r"C has shape \(2, 2, 4, 7\): its groups dimension 2 must divide d = 3",
    ),
    (
        "D",
        lambda a: a.update(D=torch.zeros(4, dtype=torch.float64)),
        ValueError,
        r"D has shape \(4,\), expected \(d,\)",
    ),
    ("z", lambda a: a.update(z=torch.zeros(2, 3, dtype=torch.float64)), ValueError, r"z has shape \(2, 3\)"),
    (
        "initial_state",
        lambda a: a.update(initial_state=torch.zeros(2, 3, 5, dtype=torch.float64)),
        ValueError,
        r"initial_state has shape \(2, 3, 5\), expected \(batch, d, n\) = \(2, 3, 4\)",
    ),
    ("u int", lambda a: a.update(u=torch.zeros(2, 3, 7, dtype=torch.int64)), TypeError, r"u must be a real floating"),
    ("A complex", lambda a: a.update(A=a["A"].to(torch.complex128)), TypeError, r"A must be a real"),
]


@pytest.mark.parametrize("name,mutate,exc,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_name_the_argument(name, mutate, exc, msg):
    a = scan_inputs(2, 3, 7, 4, with_h0=True)
    mutate(a)
    for fn in (selective_scan, selective_scan_ref):  # the dispatcher and the reference refuse alike
        with pytest.raises(exc, match=msg):
            fn(
                a["u"],
                a["delta"],
                a["A"],
                a["B"],
                a["C"],
                a["D"],
                a["z"],
                a["delta_bias"],
                initial_state=a["initial_state"],
            )


WIDE = [  # (bc, groups, reverse, with_z, with_D, with_bias, softplus): b * d * n = 2 * 64 * 16 = 2048 recurrences
    ("var", 1, False, True, True, True, True),
    ("fixed", 1, True, False, True, False, True),
    ("mixed", 4, False, True, False, True, False),
    ("var", 4, True, False, False, False, True),
]


@pytest.mark.parametrize("chunks", ["sequential", "chunked"])
@pytest.mark.parametrize("case", WIDE, ids=lambda c: f"{c[0]}-g{c[1]}{'-rev' if c[2] else ''}")
def test_torch_backend_wide_problems_one_chunk_or_many(chunks, case, monkeypatch):
    """On CPU with >= SEQUENTIAL_WIDTH parallel recurrences the pure-PyTorch scan runs each outer block as one
    plain loop (selective_scan/sequential.SequentialBlock: the carried state and the gradient from the next block
    enter the loop directly); forced back to sqrt(L) inner chunks it takes the closed-form path. Both equal the
    reference, over three outer blocks, with an initial state and a last-state gradient."""
    from neurodyn.ops.selective_scan import chunked as sc

    bc, groups, reverse, with_z, with_D, with_bias, softplus = case
    if chunks == "chunked":
        monkeypatch.setattr(sc, "SEQUENTIAL_WIDTH", 10**9)
    args = scan_inputs(
        2, 64, 150, 16, bc=bc, groups=groups, with_h0=True, with_z=with_z, with_D=with_D, with_bias=with_bias
    )
    assert 2 * 64 * 16 >= sc.SEQUENTIAL_WIDTH or chunks == "chunked"
    leaves = _leaves(args)
    ref = _run(selective_scan_ref, args, reverse, softplus)
    out = _run(selective_scan, args, reverse, softplus, backend="torch", block=64)
    assert rel_err(out[0], ref[0]) < 1e-12 and rel_err(out[1], ref[1]) < 1e-12
    for gf, gr in zip(grads(out, leaves), grads(ref, leaves)):
        assert rel_err(gf, gr) < 1e-11
