"""The NCP backbone's Triton kernels (``ncp_mlp(backend="triton")``) against the batched-matmul reference, in Triton's
interpreter (``TRITON_INTERPRET=1``; on CUDA too when there is one, at small and production tiles): forward and every
gradient, float32 and bfloat16 inputs, each activation, row counts, inputs and widths that are not multiples of the
blocks, synapse patterns, the input affine and head, NAC's production widths (its cpu and paper presets' layers); the
automatic choice, and a NAC model whose backbone runs on the kernels. The interpreter computes every product in
float32; on CUDA the backward's products are TF32 (``neurodyn.ops.ncp_mlp.triton_kernels``: about 7e-4 relative
error, measured against float64), which the CUDA cases' gradient tolerance allows."""

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.ops import cpu_kernel, triton_loader
from neurodyn.ops.ncp_mlp import ACT_CODES, fused_available, ncp_mlp, ncp_mlp_ref, resolve_backend
from neurodyn.ops.ncp_mlp import triton_op as ncp_op

from .helpers import TRITON_DEVICES, triton_device, triton_setup

pytestmark = pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed")

DEVICES = TRITON_DEVICES
# norm-wise relative error against float64: float32 arithmetic; bfloat16 inputs, output and input gradient rounded
TOL = {torch.float32: 2e-6, torch.bfloat16: 1e-2}
GRAD_TOL_CUDA = 3e-3  # the backward's TF32 products on a GPU (float32 inputs; bfloat16 keeps its own)


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch, request):
    """Blocks of 16 rows (several blocks and a partial one at test sizes) in the interpreter and the ``cuda`` cases;
    the production blocks in the ``cuda-production`` cases."""
    triton_setup(monkeypatch, request, {ncp_op: {"NCP_BLOCK_M": 16}})


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def _problem(C, rows, a, widths, dtype, device, no_input=(), affine=False, patterns=False, head=False, seed=0):
    """Arguments of ncp_mlp as float64 leaves (the reference's) and as ``dtype`` leaves on ``device``."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    kw = {
        "x": r(C, rows, a),
        "w_in": [None if l in no_input else r(C, a, h) / a**0.5 for l, h in enumerate(widths)],
        "bias": [0.3 * r(C, h) for h in widths],
        "w_rec": [None] + [r(C, p, h) / p**0.5 for p, h in zip(widths, widths[1:])],
        "mask": [(torch.rand(h, generator=g) > 0.2).double() for h in widths],
    }
    if affine:
        kw["in_scale"], kw["in_shift"] = 1.0 + 0.3 * r(C, a), 0.2 * r(C, a)
    if patterns:
        kw["pattern_in"] = [(torch.rand(a, h, generator=g) < 0.4).double() for h in widths]
        kw["pattern_rec"] = [None] + [
            (torch.rand(p, h, generator=g) < 0.4).double() for p, h in zip(widths, widths[1:])
        ]
    if head:
        kw["head"] = (r(C, a, 2), r(C, 2))

    def leaves(dt, dev):
        """The values rounded to ``dtype`` (the reference sees what the kernel sees), as ``dt`` on ``dev``."""

        def conv(v, grad=True):
            if v is None:
                return None
            if isinstance(v, (list, tuple)):
                return type(v)(conv(t, grad) for t in v)
            t = v.to(dtype).to(device=triton_device(dev), dtype=dt)
            return t.requires_grad_() if grad else t

        return {k: conv(v, grad=k not in ("mask", "pattern_in", "pattern_rec")) for k, v in kw.items()}

    return leaves(torch.float64, "cpu"), leaves(dtype, device)


def _flat(kw):
    out = []
    for k in ("x", "w_in", "bias", "w_rec", "in_scale", "in_shift", "head"):
        v = kw.get(k)
        out += [t for t in (v if isinstance(v, (list, tuple)) else [v]) if t is not None]
    return out


def _check(kw_ref, kw, act, dtype):
    y_ref = ncp_mlp_ref(**{**kw_ref, "activation": act})
    y = ncp_mlp(**{**kw, "activation": act}, backend="triton")
    outs_ref, outs = (y_ref, y) if isinstance(y, tuple) else ((y_ref,), (y,))
    g = torch.Generator().manual_seed(3)
    ws = [torch.randn(o.shape, generator=g, dtype=torch.float64) for o in outs_ref]
    for o, o_ref in zip(outs, outs_ref):
        assert o.shape == o_ref.shape and o.dtype == kw["x"].dtype
        assert _rel(o, o_ref) < TOL[dtype], _rel(o, o_ref)
    grads_ref = torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs_ref, ws)), _flat(kw_ref))
    grads = torch.autograd.grad(sum((o * w.to(o)).sum() for o, w in zip(outs, ws)), _flat(kw))
    tol = max(TOL[dtype], GRAD_TOL_CUDA) if kw["x"].is_cuda else TOL[dtype]
    for i, (got, want) in enumerate(zip(grads, grads_ref)):
        assert got.shape == want.shape and got.dtype == _flat(kw)[i].dtype, i
        assert _rel(got, want) < tol, (i, _rel(got, want))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", sorted(ACT_CODES))
def test_triton_ncp_matches_the_reference(device, dtype, act):
    """NAC's layout (a layer without input term), 37 rows (blocks of 16: a partial block), 5 inputs and widths 19 / 7
    / 2 (padded to 16 and 32), two cells."""
    kw_ref, kw = _problem(2, 37, 5, (19, 7, 2), dtype, device, no_input=(2,))
    _check(kw_ref, kw, act, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_ncp_with_patterns_affine_and_head(device, dtype):
    """NCPCell's full call: synapse patterns, the sensory scaling x * in_scale + in_shift and the time-gate head;
    one row and 21 rows; a single layer."""
    for rows, widths in ((21, (12, 9, 3)), (1, (6,))):
        kw_ref, kw = _problem(3, rows, 8, widths, dtype, device, affine=True, patterns=True, head=True, seed=rows)
        _check(kw_ref, kw, "tanh", dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "a,widths",
    [(16, (73, 33, 2)), (16, (146, 67, 2)), (4, (33, 16, 2)), (8, (36, 16, 2))],
    ids=["nac-cpu", "nac-event_digits-paper", "nac-bearing-paper", "nac-bearing-cpu"],
)
def test_triton_ncp_at_nacs_production_widths(device, a, widths):
    """NAC's backbone as its presets build it (the input into the first layer only, the synapse patterns, the
    sensory scaling): the cpu preset's 73 / 33 / 2 neurons (the kernels' widths 80 / 48 / 16), the paper presets'
    146 / 67 / 2 and 33 / 16 / 2, the bearing cpu preset's 36 / 16 / 2; 40 rows."""
    kw_ref, kw = _problem(
        2,
        40,
        a,
        widths,
        torch.float32,
        device,
        no_input=tuple(range(1, len(widths))),
        affine=True,
        patterns=True,
        seed=sum(widths),
    )
    _check(kw_ref, kw, "tanh", torch.float32)


def test_pruned_weights_get_no_gradient():
    kw_ref, kw = _problem(1, 9, 4, (6, 3), torch.float32, "cpu", patterns=True, seed=4)
    y = ncp_mlp(**kw, backend="triton")
    g_in, g_rec = torch.autograd.grad(y.sum(), [kw["w_in"][0], kw["w_rec"][1]])
    assert (g_in[:, kw["pattern_in"][0] == 0] == 0).all() and (g_rec[:, kw["pattern_rec"][1] == 0] == 0).all()
    assert g_in.abs().sum() > 0


def test_dispatch(monkeypatch):
    x = torch.zeros(1, 2, 3)
    assert resolve_backend("auto", x) in ("cpp", "torch")
    monkeypatch.setattr(triton_loader, "is_cuda", lambda t: True)
    assert resolve_backend("auto", x) == "triton" and fused_available(x)
    assert resolve_backend("auto", x.double()) != "triton"  # float64 stays off the kernels
    assert resolve_backend("torch", x) == "torch"
    monkeypatch.setenv("NEURODYN_NO_TRITON", "1")
    assert resolve_backend("auto", x) != "triton"
    with pytest.raises(ValueError, match="ncp_mlp backend"):
        resolve_backend("gpu", x)


def test_explicit_triton_errors(monkeypatch):
    kw_ref, kw = _problem(1, 3, 2, (4,), torch.float32, "cpu")
    with pytest.raises(ValueError, match="float16 / bfloat16 / float32"):
        ncp_mlp(**kw_ref, backend="triton")
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(ValueError, match="ncp_mlp: backend='triton' needs CUDA tensors"):
        ncp_mlp(**kw, backend="triton")


def test_a_nac_model_runs_its_backbone_on_the_kernels(monkeypatch):
    """A NAC layer whose tensors claim CUDA takes the Triton backbone (interpreted here): same output and gradients
    as on the reference path."""
    torch.manual_seed(0)
    model = ndm.build(
        "nac", in_channels=3, out_channels=2, d_model=8, n_heads=2, topk=4, conv_channels=(), dense=(), compat="tuned"
    )
    x, t = torch.randn(2, 9, 3), torch.linspace(0, 1, 9).expand(2, 9).contiguous()
    monkeypatch.setattr(cpu_kernel, "available", lambda: False)  # the reference as the other path
    y_ref = model(x, t)
    g_ref = torch.autograd.grad(y_ref.square().sum(), list(model.parameters()), allow_unused=True)
    loaded, load = [], triton_loader.load
    monkeypatch.setattr(triton_loader, "load", lambda name, device: loaded.append(name) or load(name, device))
    monkeypatch.setattr(triton_loader, "is_cuda", lambda t: True)
    y = model(x, t)
    g = torch.autograd.grad(y.square().sum(), list(model.parameters()), allow_unused=True)
    assert "ncp_mlp" in loaded
    assert _rel(y, y_ref) < 1e-5
    for a, b in zip(g, g_ref):
        assert (a is None) == (b is None)
        if a is not None and b.abs().sum() > 0:
            assert _rel(a, b) < 1e-4


def test_programs_sharing_a_gradient_slot(monkeypatch):
    """More row blocks (5) than copies of the weight-gradient buffers (2): programs add into shared copies."""
    monkeypatch.setattr(triton_loader.load("ncp_mlp", torch.device("cpu")), "GRAD_SLOTS", 2)
    kw_ref, kw = _problem(2, 70, 5, (19, 7, 2), torch.float32, "cpu", affine=True, seed=6)
    _check(kw_ref, kw, "tanh", torch.float32)


def test_the_precision_decision_holds():
    """The measurement behind the kernels' precisions (float64 reference, operands rounded as the tensor cores round
    them, NAC's cpu widths): TF32 products are three orders off float32's, 3xTF32 products within float32's own
    error; the backward's TF32 gradients stay below bf16's rounding (2^-9)."""
    nc = triton_loader.load("ncp_mlp", torch.device("cpu"))
    assert (nc.PRECISION, nc.BACKWARD_PRECISION) == ("tf32x3", "tf32")
    err = nc.tf32_error((73, 33, 2), 16, rows=512)
    ieee_out, ieee_grad = err["ieee"]
    assert err["tf32"][0] > 300 * ieee_out and err["tf32"][1] > 100 * ieee_grad
    assert err["tf32x3"][0] < 3 * ieee_out and err["tf32x3"][1] < 3 * ieee_grad
    assert err["tf32"][1] < 2**-9
