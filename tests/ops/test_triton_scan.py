"""The Triton kernels (``backend="triton"``) against the sequential references, forward and gradients.

Without a GPU the kernels run on CPU tensors in Triton's interpreter (``TRITON_INTERPRET=1``, set by the autouse
fixture below); with one the same tests also run on CUDA. The kernels' block sizes are made small (chunks of 8 steps,
2 or 4 channels per program) so that odd lengths, partial chunks, several channel blocks and channel blocks that
straddle a B/C group are all exercised at sizes the interpreter runs in well under a second each.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from neurodyn.ops import (
    head_scan,
    head_scan_ref,
    knc_scan,
    knc_scan_ref,
    linear_scan,
    selective_scan,
    selective_scan_ref,
    triton_loader,
)
from neurodyn.ops.custom_op import OPS
from neurodyn.ops.linear_scan import triton_op as ls_op
from neurodyn.ops.selective_scan import interface as ss_module
from neurodyn.ops.selective_scan import triton_op as ss_op

from .helpers import TRITON_DEVICES, rel_err, scan_inputs, triton_device, triton_setup

pytestmark = pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed")

DEVICES = TRITON_DEVICES
NAMES = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state"]
# worst norm-wise relative error against the float64 reference: float32 kernels (float32 rounding of the inputs'
# products), bfloat16 inputs (outputs and input-sized gradients rounded to bfloat16, 2^-8)
TOL = {torch.float32: 2e-5, torch.bfloat16: 2e-2, torch.float64: 1e-12}


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch, request):
    """Chunks of 8 steps and small tiles (several chunks and channel blocks at test sizes) in the interpreter and in
    a test's ``cuda`` case; the production tiles in its ``cuda-production`` case (``helpers.triton_setup``). The
    selective-scan chunks of 8 steps are held 4 steps per thread in the forward (2 lanes) and 2 in the backward (4
    lanes), so that the scans across lanes run; 2 channels per program."""
    small = {ss_op: {"SCAN_BLOCK_L": 8, "SCAN_BLOCK_D": 2}, ls_op: {"LINEAR_BLOCK_L": 8, "LINEAR_TILE": 32}}
    for device in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
        small[triton_loader.load("selective_scan", torch.device(device))] = {"FWD_STEPS": 4, "BWD_STEPS": 2}
    triton_setup(monkeypatch, request, small)


def _on(args, device, dtype):
    device = triton_device(device)
    return {k: None if v is None else v.to(device=device, dtype=dtype).requires_grad_() for k, v in args.items()}


def _loss_grads(outs, leaves, seed=0):
    """Gradients of a fixed random projection of the outputs (float64 weights, cast to each output's dtype)."""
    g = torch.Generator().manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=torch.float64).to(o)).sum() for o in outs)
    return torch.autograd.grad(loss, leaves)


def _compare(got, want, tol):
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, i
        assert rel_err(a.cpu(), b.cpu()) < tol, (i, rel_err(a.cpu(), b.cpu()))


# ---------------------------------------------------------------------------------------------------------------
# selective scan

# (bc, groups, reverse, initial state, softplus, z / D / bias); batch 2, d = 6, L = 19, n = 3
SS_CASES = [
    ("var", 1, False, False, True, True),
    ("var", 2, True, True, True, True),  # groups of 3 channels: channel blocks of 2 straddle them
    ("fixed", 1, True, True, False, True),
    ("mixed", 3, False, True, True, False),  # fixed C, grouped B; no z, D, bias
]


def _ss_call(args, reverse, softplus, **kw):
    return selective_scan(
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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "case",
    SS_CASES,
    ids=lambda c: (
        f"{c[0]}-g{c[1]}{'-rev' if c[2] else ''}"
        f"{'-h0' if c[3] else ''}{'-softplus' if c[4] else ''}{'' if c[5] else '-plain'}"
    ),
)
def test_selective_scan_matches_reference(device, dtype, case):
    bc, groups, reverse, h0, softplus, extras = case
    base = scan_inputs(
        2,
        6,
        19,
        3,
        dtype=torch.float64,
        bc=bc,
        groups=groups,
        with_h0=h0,
        with_z=extras,
        with_D=extras,
        with_bias=extras,
    )
    args = _on(base, device, dtype)
    ref_args = {k: None if v is None else v.detach().double().cpu().requires_grad_() for k, v in args.items()}
    leaves = [args[k] for k in NAMES if args[k] is not None]
    ref_leaves = [ref_args[k] for k in NAMES if ref_args[k] is not None]
    out, last = _ss_call(args, reverse, softplus, backend="triton")
    want = selective_scan_ref(**ref_args, delta_softplus=softplus, return_last_state=True, reverse=reverse)
    assert out.dtype == dtype and last.dtype == torch.float32 and out.device.type == device
    _compare((out, last), want, TOL[dtype])
    got_g = _loss_grads((out, last), leaves)
    want_g = _loss_grads(want, ref_leaves)
    for leaf, g in zip(leaves, got_g):
        assert g.dtype == leaf.dtype
    _compare(got_g, want_g, TOL[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_selective_scan_float64_and_single_step(device):
    """float64 inputs accumulate in float64 (exact to rounding); L = 1 and d = 1 (one partial chunk and block)."""
    for L, d in ((1, 3), (11, 1)):
        base = scan_inputs(1, d, L, 3, bc="var", with_h0=True)
        args = _on(base, device, torch.float64)
        leaves = [args[k] for k in NAMES if args[k] is not None]
        got = _ss_call(args, False, True, backend="triton")
        want = _ss_call(args, False, True, backend="ref")
        assert got[1].dtype == torch.float64
        _compare(got, want, TOL[torch.float64])
        _compare(_loss_grads(got, leaves), _loss_grads(want, leaves), TOL[torch.float64])


def test_selective_scan_mixed_dtypes():
    """bfloat16 activations (u, z) with float32 parameters and steps: each gradient in its input's dtype."""
    base = scan_inputs(2, 4, 13, 3, dtype=torch.float64, bc="var", with_h0=True)
    args = {k: v.to(torch.bfloat16 if k in ("u", "z") else torch.float32).requires_grad_() for k, v in base.items()}
    ref_args = {k: v.detach().double().requires_grad_() for k, v in args.items()}
    leaves, ref_leaves = [args[k] for k in NAMES], [ref_args[k] for k in NAMES]
    got = _ss_call(args, True, True, backend="triton")
    want = _ss_call(ref_args, True, True, backend="ref")
    assert got[0].dtype == torch.bfloat16
    _compare(got, want, TOL[torch.bfloat16])
    got_g = _loss_grads(got, leaves)
    assert [g.dtype for g in got_g] == [t.dtype for t in leaves]
    _compare(got_g, _loss_grads(want, ref_leaves), TOL[torch.bfloat16])


@pytest.mark.parametrize("device", DEVICES)
def test_selective_scan_without_grad_saves_no_checkpoints(device):
    args = _on(scan_inputs(1, 3, 9, 2, bc="var"), device, torch.float32)
    args = {k: None if v is None else v.detach() for k, v in args.items()}
    _, _, ckpt = OPS["triton"]["selective_scan_triton"](
        args["u"],
        args["delta"],
        args["A"],
        args["B"].unsqueeze(1),
        args["C"].unsqueeze(1),
        None,
        None,
        None,
        None,
        False,
        False,
        False,
        8,
        2,
        False,
    )
    assert ckpt.numel() == 0
    out = selective_scan(**args, backend="triton")
    torch.testing.assert_close(out, selective_scan(**args, backend="ref"), rtol=1e-5, atol=1e-5)


def test_selective_scan_empty_input_on_triton():
    args = scan_inputs(2, 3, 0, 4, bc="var", with_h0=True, dtype=torch.float32)
    out, last = selective_scan(**args, return_last_state=True, backend="triton")
    assert out.shape == (2, 3, 0)
    torch.testing.assert_close(last, args["initial_state"])


# ---------------------------------------------------------------------------------------------------------------
# linear scan and head scan


def _linear_ref(a, x, h0, reverse):
    """``h_t = a_t h_{t-1} + x_t`` along dim 1, one step at a time."""
    h = h0 if h0 is not None else torch.zeros_like(x[:, 0])
    out = [None] * x.shape[1]
    for t in range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1]):
        h = a[:, t] * h + x[:, t]
        out[t] = h
    return torch.stack(out, 1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("reverse,with_h0", [(False, True), (True, False)])
def test_linear_scan_matches_reference(device, dtype, reverse, with_h0):
    g = torch.Generator().manual_seed(5)
    dev = triton_device(device)
    a = (0.2 + 0.8 * torch.rand(3, 21, 7, generator=g, dtype=torch.float64)).to(dev, dtype).requires_grad_()
    x = torch.randn(3, 21, 7, generator=g, dtype=torch.float64).to(dev, dtype).requires_grad_()
    h0 = torch.randn(3, 7, generator=g, dtype=torch.float64).to(dev, dtype).requires_grad_() if with_h0 else None
    leaves = [t for t in (a, x, h0) if t is not None]
    ref_leaves = [t.detach().double().cpu().requires_grad_() for t in leaves]
    h = linear_scan(a, x, h0, dim=1, reverse=reverse, backend="triton")
    want = _linear_ref(ref_leaves[0], ref_leaves[1], ref_leaves[2] if with_h0 else None, reverse)
    assert h.dtype == dtype
    _compare((h,), (want,), TOL[dtype])
    _compare(_loss_grads((h,), leaves), _loss_grads((want,), ref_leaves), TOL[dtype])


def test_linear_scan_broadcast_and_other_dim():
    """``a`` broadcast against ``x``, the scan along dim -1 (the wrapper's reshape to (P, L, Q) with Q = 1)."""
    g = torch.Generator().manual_seed(6)
    a = (0.5 + 0.5 * torch.rand(4, 1, 13, generator=g)).requires_grad_()
    x = torch.randn(4, 3, 13, generator=g).requires_grad_()
    h = linear_scan(a, x, dim=-1, backend="triton")
    want = linear_scan(a, x, dim=-1, backend="torch")
    torch.testing.assert_close(h, want, rtol=1e-5, atol=1e-5)
    _compare(_loss_grads((h,), [a, x]), _loss_grads((want,), [a, x]), TOL[torch.float32])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,G", [(torch.float32, 2), (torch.bfloat16, 1)])
def test_head_scan_matches_reference(device, dtype, G):
    """The time-major layout read in place: heads of 3 channels and groups of 1 or 2 heads, so that blocks of 2
    channels straddle heads (and groups)."""
    g = torch.Generator().manual_seed(7)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    b, S, L, H, P, N = 2, 2, 11, 2, 3, 3
    base = [
        r(b, S, L, H * P),
        0.1 + torch.rand(b, S, L, H, generator=g, dtype=torch.float64),
        -0.1 - torch.rand(S, H, generator=g, dtype=torch.float64),
        r(b, S, L, G, N),
        r(b, S, L, G, N),
        r(S, H * P),
    ]
    args = [t.to(triton_device(device), dtype).requires_grad_() for t in base]
    ref_args = [t.detach().double().cpu().requires_grad_() for t in args]
    y = head_scan(*args, backend="triton")
    want = head_scan_ref(*ref_args)
    assert y.dtype == dtype
    _compare((y,), (want,), TOL[dtype])
    _compare(_loss_grads((y,), args), _loss_grads((want,), ref_args), TOL[dtype])


# Kirchhoff cell: (discretization, groups (0: fixed b, c), reverse, dtype)
KNC_CASES = [
    ("zoh", 2, True, torch.float32),
    ("zoh", 0, False, torch.bfloat16),
    ("euler", 1, False, torch.float32),
    ("zoh", 2, False, torch.float64),
]  # (float64: the factor's float64 series and switch)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", KNC_CASES, ids=lambda c: f"{c[0]}-g{c[1]}{'-rev' if c[2] else ''}-{str(c[3])[6:]}")
def test_knc_scan_matches_reference(device, case):
    """The cell's exact ZOH input factor in the kernel (x = delta lambda on both sides of its series' 1/4 switch)."""
    disc, groups, reverse, dtype = case
    g = torch.Generator().manual_seed(9)
    B, D, N, L = 2, 6, 3, 19
    shape = (D, N) if groups == 0 else (B, groups, N, L)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    base = [
        r(B, D, L),
        torch.rand(B, D, L, generator=g, dtype=torch.float64) * 0.8 + 1e-3,
        torch.rand(D, N, generator=g, dtype=torch.float64) * 4 + 0.1,
        r(*shape),
        r(*shape),
        r(D),
    ]
    args = [t.to(triton_device(device), dtype).requires_grad_() for t in base]
    ref_args = [t.detach().double().cpu().requires_grad_() for t in args]
    y = knc_scan(*args, disc, reverse=reverse, backend="triton")
    want = knc_scan_ref(*ref_args, disc, reverse=reverse)
    assert y.dtype == dtype
    _compare((y,), (want,), TOL[dtype])
    _compare(_loss_grads((y,), args), _loss_grads((want,), ref_args), TOL[dtype])


# ---------------------------------------------------------------------------------------------------------------
# operators: opcheck, export; the interpreter / compiled split of the kernel modules


def _ss_op_args(grad):
    args = scan_inputs(1, 3, 10, 2, dtype=torch.float32, bc="var", groups=1, with_h0=True)
    t = {k: v.requires_grad_(grad) for k, v in args.items()}
    return (
        t["u"],
        t["delta"],
        t["A"],
        t["B"].unsqueeze(1),
        t["C"].unsqueeze(1),
        t["D"],
        t["z"],
        t["delta_bias"],
        t["initial_state"],
        True,
        True,
        True,
        8,
        2,
        False,
    )


def _opcheck_cases():
    fwd = _ss_op_args(True)
    with torch.no_grad():
        _, _, ckpt = OPS["triton"]["selective_scan_triton"](*fwd)
    bwd = (
        *[t.detach() if isinstance(t, torch.Tensor) else t for t in fwd[:9]],
        ckpt,
        torch.randn(1, 3, 10),
        torch.randn(1, 3, 2),
        True,
        True,
        8,
        2,
        False,
    )
    g = torch.Generator().manual_seed(8)
    a = (0.5 + 0.5 * torch.rand(2, 9, 3, generator=g)).requires_grad_()
    x, h0 = torch.randn(2, 9, 3, generator=g).requires_grad_(), torch.randn(2, 3, generator=g).requires_grad_()
    with torch.no_grad():
        h = OPS["triton"]["linear_scan_triton"](a, x, h0, True, 8, 2)
    gx = torch.Generator().manual_seed(11)
    r = lambda *s: torch.randn(*s, generator=gx).requires_grad_()  # noqa: E731
    dirs = [0, 0, 0, 1, 1, 1]  # ("row", "col_rev")
    s2 = (
        r(1, 2, 5, 3),
        torch.rand(1, 2, 5, 3, generator=gx).requires_grad_(),
        (-0.5 - torch.rand(2, 2, 3, generator=gx)).requires_grad_(),
        r(1, 2, 3, 5, 3),
        r(1, 3, 5, 3),
        r(2, 2),
        r(2, 2, 3),
        r(2, 2),
        dirs,
        True,
        0,
    )
    with torch.no_grad():
        _, ckpt2, dsum2 = OPS["triton"]["scan2d_triton"](*s2, True, 2, 1, 4)  # (two row blocks)
    hs = (
        r(1, 2, 9, 4),
        (0.1 + torch.rand(1, 2, 9, 2, generator=gx)).requires_grad_(),
        (-0.5 - torch.rand(2, 2, generator=gx)).requires_grad_(),
        r(1, 2, 9, 1, 3),
        r(1, 2, 9, 1, 3),
        r(2, 4),
    )
    with torch.no_grad():
        _, ckpt_h = OPS["triton"]["head_scan_triton"](*hs, True, 8, 2)
    ncp = (
        r(2, 19, 5),
        r(2, 16 * 32),
        r(2, 48),
        r(2, 32 * 16),
        (torch.rand(48, generator=gx) > 0.3).float(),
        r(2, 5),
        r(2, 5),
    )  # (widths 32 / 16, the input into the first layer only)
    return {
        "ncp_mlp_triton": (*ncp, [32, 16], [1, 0], 1, 3, 16),
        "ncp_mlp_triton_bwd": (*[t.detach() for t in ncp], torch.randn(2, 19, 3), [32, 16], [1, 0], 1, 16),
        "head_scan_triton": (*hs, True, 8, 2),
        "head_scan_triton_bwd": (*[t.detach() for t in hs], ckpt_h, torch.randn(1, 2, 9, 4), 8, 2),
        "scan2d_triton": (*s2, True, 2, 1, 4),
        "scan2d_triton_bwd": (
            *[t.detach() if isinstance(t, torch.Tensor) else t for t in s2],
            ckpt2,
            dsum2,
            torch.randn(1, 2, 2, 5, 3),
            2,
            1,
            4,
        ),
        "selective_scan_triton": fwd,
        "selective_scan_triton_bwd": bwd,
        "linear_scan_triton": (a, x, h0, True, 8, 2),
        "linear_scan_triton_bwd": (a.detach(), h, h0.detach(), torch.randn(2, 9, 3), True, 8, 2),
    }


_QUICK_CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


@pytest.mark.parametrize("op", list(OPS["triton"]))
def test_opcheck(op):
    """Schema (no output aliases an input or another output), autograd registration, fake against real."""
    result = torch.library.opcheck(OPS["triton"][op], _opcheck_cases()[op], test_utils=_QUICK_CHECKS)
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("op", list(OPS["triton"]))
@pytest.mark.slow
def test_opcheck_aot_dispatch(op):
    """AOTAutograd with dynamic shapes (the forward operators' cases run their backward through it): seconds each."""
    result = torch.library.opcheck(OPS["triton"][op], _opcheck_cases()[op], test_utils=("test_aot_dispatch_dynamic",))
    assert set(result.values()) == {"SUCCESS"}, result


def test_export_captures_the_operator():
    class Scan(torch.nn.Module):
        def forward(self, u, delta, A, B, C):
            return selective_scan(u, delta, A, B, C, delta_softplus=True, reverse=True, backend="triton")

    args = scan_inputs(1, 3, 10, 2, dtype=torch.float32, bc="var", with_z=False, with_D=False, with_bias=False)
    inputs = (args["u"], args["delta"], args["A"], args["B"], args["C"])
    ep = torch.export.export(Scan(), inputs)
    assert "neurodyn.selective_scan_triton.default" in {str(n.target) for n in ep.graph.nodes}
    torch.testing.assert_close(ep.module()(*inputs), Scan()(*inputs))


@pytest.mark.slow
def test_compile_fullgraph_forward_and_backward():
    args = _ss_op_args(True)[:9]

    def fn(u, delta, A, B, C, D, z, bias, h0):
        out, last = selective_scan(u, delta, A, B, C, D, z, bias, True, True, initial_state=h0, backend="triton")
        return out.sum() + (last * last).sum()

    want = torch.autograd.grad(fn(*args), args)
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(fn, fullgraph=True, backend="aot_eager")(*args), args)
    _compare(got, want, 1e-6)


def test_kernel_modules_are_built_per_device_whatever_the_environment(monkeypatch):
    """``triton.jit`` picks interpreter or compiler when it decorates; the loader builds CPU-tensor modules under the
    interpreter and CUDA ones compiled, however ``TRITON_INTERPRET`` was set when neurodyn was imported, and leaves the
    variable as it found it."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    monkeypatch.delenv("TRITON_INTERPRET")
    cpu = triton_loader.load("linear_scan", torch.device("cpu"))
    cuda = triton_loader.load("linear_scan", torch.device("cuda"))
    assert isinstance(cpu._linear_scan_fwd_kernel, InterpretedFunction)
    assert isinstance(cuda._linear_scan_fwd_kernel, JITFunction)
    assert "TRITON_INTERPRET" not in __import__("os").environ
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # then CUDA tensors are interpreted too
    assert triton_loader.load("linear_scan", torch.device("cuda")) is cpu


# ---------------------------------------------------------------------------------------------------------------
# dispatch


class _FakeCuda:
    is_cuda = True
    device = torch.device("cuda")


def test_auto_picks_triton_for_cuda_and_falls_back_without_it(monkeypatch):
    assert ss_module.resolve_backend("auto", _FakeCuda()) == "triton"
    assert ss_module.resolve_backend("auto", torch.zeros(1, 1, 1)) != "triton"
    monkeypatch.setattr(triton_loader, "triton_importable", lambda: False)
    assert ss_module.resolve_backend("auto", _FakeCuda()) in ("mamba", "torch")
    monkeypatch.undo()
    monkeypatch.setenv("NEURODYN_NO_TRITON", "1")
    assert ss_module.resolve_backend("auto", _FakeCuda()) in ("mamba", "torch")


def test_triton_backend_errors(monkeypatch):
    args = scan_inputs(1, 2, 5, 2, dtype=torch.float32, bc="var")
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        selective_scan(**args, backend="triton")
    monkeypatch.setattr(triton_loader, "triton_importable", lambda: False)
    with pytest.raises(RuntimeError, match="needs the triton package"):
        linear_scan(torch.rand(2, 5), torch.rand(2, 5), backend="triton")


def test_package_works_without_triton(tmp_path):
    """With ``import triton`` failing, neurodyn imports, never tries triton at import, and the default backends run
    (a fresh interpreter: triton is already imported here)."""
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "triton" or name.startswith("triton."):
                    raise ImportError("triton blocked")
        sys.meta_path.insert(0, Block())
        import torch
        import neurodyn.ops as ops
        from neurodyn.ops import triton_loader
        from neurodyn.ops.selective_scan import interface as ss
        assert "triton" not in sys.modules
        assert not triton_loader.available()
        class FakeCuda:
            is_cuda = True
            device = torch.device("cuda")
        assert ss.resolve_backend("auto", FakeCuda()) in ("mamba", "torch")
        u = torch.randn(1, 2, 7)
        y = ops.selective_scan(u, u.abs(), -torch.ones(2, 3), torch.randn(1, 3, 7), torch.randn(1, 3, 7),
                               backend="torch")
        h = ops.linear_scan(torch.rand(2, 7), torch.randn(2, 7), backend="torch")
        assert y.shape == (1, 2, 7) and h.shape == (2, 7)
        print("ok")
    """)
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "NEURODYN_NO_CPP_EXT": "1"},
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


# ---------------------------------------------------------------------------------------------------------------
# the compiled path, without a GPU


def _compile_sm90(kernel, constexprs, num_warps=4):  # float32 pointers (bfloat16 for u), int32 scalars
    """Compile ``kernel`` for an H100 (sm_90) the way a launch would, down to a cubin (Triton's own ptxas)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {
        a: "constexpr" if a in constexprs else "*bf16" if a == "u_ptr" else "*fp32" if a.endswith("_ptr") else "i32"
        for a in kernel.arg_names
    }
    compiled = triton.compile(
        ASTSource(fn=kernel, signature=sig, constexprs=constexprs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": num_warps},
    )
    return compiled.asm


@pytest.mark.slow
def test_kernels_compile_for_sm90_without_a_gpu(monkeypatch, tmp_path):
    """The interpreter runs the kernels' Python; this runs Triton's compiler on them (AST -> TTIR -> TTGIR -> LLVM ->
    PTX -> cubin for sm_90, float32 accumulation, bfloat16 u), the path a CUDA launch takes, at the default tiles."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # (the default; unset, triton 3.9 warns that 3.10 changes it)
    monkeypatch.delenv("TRITON_INTERPRET")
    tl = pytest.importorskip("triton.language")
    from triton.runtime.jit import JITFunction

    if not isinstance(tl.standard._sum_combine, JITFunction):
        pytest.skip("triton was imported under TRITON_INTERPRET=1: its own library is interpreted, nothing compiles")
    ss = triton_loader.load("selective_scan", torch.device("cuda"))
    flags = dict(
        ACC=tl.float32,
        LANES=8,
        KU=4,
        JC=4,
        KC=4,
        SU_T=1,
        B_VAR=True,
        C_VAR=False,
        HAS_D=True,
        HAS_Z=True,
        HAS_BIAS=True,
        HAS_H0=True,
        SOFTPLUS=True,
    )
    # the reversed ZOH variant (a bidirectional model's reverse direction), at small tiles; the forward-in-time
    # selective, multi-head and Kirchhoff scans and the linear scan compile at their production tiles, through
    # their launchers, in tests/ops/test_kernel_resources.py
    common = dict(flags, REVERSE=True, ZOH=True, HEAD=False)
    assert "cubin" in _compile_sm90(ss._selective_scan_fwd_kernel, dict(common, BD=16, JU=4, SAVE_CKPT=True))
    assert "cubin" in _compile_sm90(
        ss._selective_scan_bwd_kernel, dict(common, BD=8, LANES=16, JU=2, JC=2, HAS_GLAST=True)
    )
