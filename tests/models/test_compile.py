"""Every headline model under ``torch.compile(model, fullgraph=True)`` and ``torch.export``, fused CPU kernels on.

For each of ``fno``, ``lamo``, ``geomano``, ``stssm``, ``chonn_unet``, ``chonn_fno`` and ``nac`` (tiny configs,
training mode):

* forward + backward compiled against eager within 1e-4: the output and every parameter gradient, in float64 (the
  kernels run in either precision; in float32 the reductions of CHONN-UNet's batch norms alone, summed in another
  order, move its gradients by up to 3e-4 relative, while float64 separates a wrong graph, O(1), from rounding,
  1e-12). It uses the ``aot_eager_decomp_partition`` backend: the decompositions and the forward / backward
  partition inductor compiles, run eagerly (inductor's C++ code generation of a backward takes minutes on one core).
  Plain ``aot_eager`` is not used: it runs ``softplus_backward`` undecomposed, whose fake (meta) strides differ from
  the CPU kernel's for a permuted input (torch 2.13; CHONN's Kirchhoff cell hits it: a ``view`` in the backward
  graph then fails);
* the float32 forward with the default (inductor) backend against eager;
* ``torch.export.export(model, args)`` in float32: the kernels' forward operators are in the graph and the exported
  program matches eager.

Each test counts the calls into the compiled kernels (``cpu_kernel.library``): the models that have a fused kernel run
it compiled and exported, not a fallback. ``fno`` and ``stssm`` have none (spectral / S4D convolutions).

NAC builds its NCP plan (which neurons each backbone update computes: ``torch.nonzero`` of the wiring masks) at
construction (``NCPCell.prepare``), so a fresh model traces with no data-dependent size.
"""

from __future__ import annotations

import copy

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.ops import cpu_kernel

pytestmark = pytest.mark.slow

GRAD_BACKEND = "aot_eager_decomp_partition"
TOL = 1e-4
KERNELS = {
    "lamo": "head_scan",
    "geomano": "scan2d",
    "chonn_unet": "selective_scan",
    "chonn_fno": "selective_scan",
    "nac": "ncp_mlp",
}


def _build(name: str, dtype: torch.dtype = torch.float32):
    """(model, example inputs) of a tiny config in ``dtype``, training mode."""
    model, args = _build32(name)
    if dtype == torch.float32:
        return model, args
    return model.to(dtype), tuple(a.to(dtype) if a.is_floating_point() else a for a in args)


def _build32(name: str):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    grid = lambda *s: (torch.randn(2, *s, 1, generator=g),)  # noqa: E731
    fno = dict(
        in_channels=1, out_channels=1, modes=(4, 4), width=8, n_layers=2, lifting_channels=16, projection_channels=16
    )
    if name == "fno":
        return ndm.build("fno", **fno), grid(12, 12)
    if name == "lamo":  # 2 heads of 16 channels: the head-scan kernel's float32 lane block
        return ndm.build(
            "lamo",
            in_channels=1,
            out_channels=1,
            grid_size=(8, 8),
            width=16,
            n_layers=2,
            ssm=dict(d_state=4, heads=2),
            mlp_ratio=2,
        ), grid(8, 8)
    if name == "geomano":
        return ndm.build("geomano", in_channels=1, width=8, n_layers=1, ssm=dict(d_state=4), latent_grid=(4, 4)), grid(
            8, 8
        )
    if name == "stssm":
        return ndm.build(
            "stssm",
            in_channels=1,
            out_channels=1,
            width=8,
            d_state=4,
            n_layers_pre=1,
            n_layers_post=1,
            projection_channels=16,
            memory_window=2,
        ), (torch.randn(2, 3, 16, 1, generator=g),)
    if name == "chonn_unet":
        return ndm.build("chonn_unet", init_features=4, order=2, ssm=dict(d_state=4)), grid(16, 16)
    if name == "chonn_fno":
        return ndm.build("chonn_fno", ssm=dict(d_state=4), **fno), grid(12, 12)
    if name == "nac":
        x = torch.randn(2, 9, 3, generator=g)
        t = torch.rand(2, 9, generator=g).cumsum(1)
        mask = torch.ones(2, 9, dtype=torch.bool)
        mask[-1, 6:] = False
        return ndm.build("nac", in_channels=3, out_channels=4, conv_channels=(6,), dense=(8,), d_model=8, n_heads=2), (
            x,
            t,
            mask,
        )
    raise AssertionError(name)


MODELS = ["fno", "lamo", "geomano", "stssm", "chonn_unet", "chonn_fno", "nac"]


def _check_kernel(name, calls, passes=("fwd", "bwd")):
    if name not in KERNELS:
        assert not calls, dict(calls)  # fno, stssm: no fused kernel
        return
    if not cpu_kernel.available():
        pytest.skip("the compiled CPU kernels are unavailable")
    for p in passes:
        assert calls[f"{KERNELS[name]}_{p}"] > 0, (p, dict(calls))


def _loss_and_grads(model, args, compiled=None):
    """Output and parameter gradients of a fixed linear loss, through ``compiled`` (a compiled ``model``) if given."""
    y = (model if compiled is None else compiled)(*args)
    weight = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)
    (y * weight).sum().backward()
    return y.detach(), {k: p.grad for k, p in model.named_parameters() if p.requires_grad}


def _close(got, want):
    torch.testing.assert_close(got, want, rtol=TOL, atol=TOL * max(1.0, want.abs().max().item()))


@pytest.mark.parametrize("name", MODELS)
def test_compiled_forward_and_backward_match_eager(name, kernel_calls):
    model, args = _build(name, torch.float64)
    fresh = copy.deepcopy(model)  # compiled before any eager forward, as a user would
    want_y, want_g = _loss_and_grads(model, args)
    torch._dynamo.reset()
    kernel_calls.clear()
    got_y, got_g = _loss_and_grads(fresh, args, torch.compile(fresh, fullgraph=True, backend=GRAD_BACKEND))
    _check_kernel(name, kernel_calls)
    _close(got_y, want_y)
    assert got_g.keys() == want_g.keys()
    for k in want_g:
        assert got_g[k] is not None, f"{k}: no gradient through the compiled model"
        _close(got_g[k], want_g[k])


@pytest.mark.parametrize("name", MODELS)
def test_inductor_forward_matches_eager(name, kernel_calls):
    model, args = _build(name)
    fresh = copy.deepcopy(model)
    torch._dynamo.reset()
    with torch.no_grad():
        want = model(*args)
        kernel_calls.clear()
        got = torch.compile(fresh, fullgraph=True)(*args)
    _check_kernel(name, kernel_calls, passes=("fwd",))
    _close(got, want)


@pytest.mark.parametrize("name", MODELS)
def test_export_captures_the_model(name, kernel_calls):
    model, args = _build(name)
    ep = torch.export.export(copy.deepcopy(model), args)
    targets = {str(node.target) for node in ep.graph.nodes}
    if name in KERNELS:
        assert f"neurodyn.{KERNELS[name]}_fwd.default" in targets
    with torch.no_grad():
        want = model(*args)
        kernel_calls.clear()
        got = ep.module()(*args)
    _check_kernel(name, kernel_calls, passes=("fwd",))
    _close(got, want)
