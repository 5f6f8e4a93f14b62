"""``backend="triton"`` as a scan choice of the models: the ``model.ssm`` sections accept it, the scans' automatic
choice takes the Triton kernels for CUDA tensors (a CPU tensor made to claim CUDA: no GPU needed) and keeps the CPU
paths for CPU tensors, and a model built with ``backend="triton"`` computes what the same model computes on the
sequential references: in Triton's interpreter by default, on the GPU with ``pytest --device cuda`` (the ``device``
fixture: compiled kernels, production tiles)."""

import importlib

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.nn.geomamba import GeoMambaKernel
from neurodyn.nn.ssm_config import GeoMambaSSMConfig, KirchhoffSSMConfig, LatentSSMConfig
from neurodyn.ops import head_scan, knc_scan, linear_scan, selective_scan, selective_scan_2d, triton_loader

needs_triton = pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed")
ss_mod, hs_mod, ls_mod, s2_mod = (
    importlib.import_module(f"neurodyn.ops.{m}.interface")
    for m in ("selective_scan", "head_scan", "linear_scan", "scan_2d")
)
knc_mod = importlib.import_module("neurodyn.ops.knc_scan")  # (the package names the function so)


# ---------------------------------------------------------------------------------------------------------------
# the config sections


@pytest.mark.parametrize("section", [LatentSSMConfig, GeoMambaSSMConfig, KirchhoffSSMConfig])
def test_every_scan_section_accepts_triton_and_refuses_unknown_names(section):
    assert section(backend="triton").backend == "triton"
    assert section().backend == "auto"
    with pytest.raises(ConfigError, match=r"ssm\.backend.*'cuda'"):
        section(backend="cuda")


def test_mamba_stays_an_explicit_choice_of_the_mamba_layers_only():
    assert LatentSSMConfig(backend="mamba").backend == "mamba"
    for section in (GeoMambaSSMConfig, KirchhoffSSMConfig):
        with pytest.raises(ConfigError, match="ssm.backend"):
            section(backend="mamba")


def test_the_chonn_blocks_take_the_backend_from_their_section():
    m = ndm.build("chonn1d", orders=(1,), width=8, ssm=dict(d_state=4, backend="triton"))
    cells = [c for c in m.modules() if type(c).__name__ == "KirchhoffCell"]
    assert cells and all(c.backend == "triton" for c in cells)
    with pytest.raises(ConfigError, match="ssm.backend"):
        ndm.build("chonn1d", orders=(1,), ssm=dict(backend="gpu"))


# ---------------------------------------------------------------------------------------------------------------
# the automatic choice


class _Called(Exception):
    """Raised by a spy in place of a Triton kernel: the dispatcher chose the Triton path."""


def _spy(*_args, **_kw):
    raise _Called


def _spy_all(monkeypatch):
    """Replace every Triton entry point of the scans by a spy (nothing runs on a kernel)."""
    monkeypatch.setattr(ss_mod, "selective_scan_triton", _spy)
    monkeypatch.setattr(hs_mod, "head_scan_triton", _spy)
    monkeypatch.setattr(ls_mod, "linear_scan_triton", _spy)
    monkeypatch.setattr(s2_mod, "scan2d_triton", _spy)
    monkeypatch.setattr(knc_mod, "selective_scan_triton", _spy)


def _calls():
    """One call of each scan on small CPU tensors, by name."""
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    b, d, n, L = 1, 2, 3, 5
    H, P = 2, 1
    return {
        "selective_scan": lambda: selective_scan(r(b, d, L), r(b, d, L).abs(), -r(d, n).abs(), r(b, n, L), r(b, n, L)),
        "head_scan": lambda: head_scan(
            r(b, 1, L, H * P), r(b, 1, L, H).abs(), -r(1, H).abs(), r(b, 1, L, 1, n), r(b, 1, L, 1, n)
        ),
        "linear_scan": lambda: linear_scan(torch.rand(2, L, generator=g), r(2, L)),
        "scan_2d": lambda: selective_scan_2d(
            r(b, d, 3, 4), r(b, d, 3, 4).abs(), -r(d, n).abs(), r(b, n, 3, 4), r(b, n, 3, 4), directions=("row",)
        ),
        "knc_scan": lambda: knc_scan(r(b, d, L), r(b, d, L).abs(), r(d, n).abs(), r(b, n, L), r(b, n, L), r(d)),
    }


@needs_triton
@pytest.mark.parametrize("name", sorted(_calls()))
def test_auto_takes_triton_for_cuda_tensors_and_the_cpu_paths_for_cpu_ones(monkeypatch, name):
    _spy_all(monkeypatch)
    call = _calls()[name]
    out = call()  # CPU tensors: a CPU kernel or the PyTorch path, never the spy
    assert torch.isfinite(out).all()
    monkeypatch.setattr(triton_loader, "is_cuda", lambda t: True)  # the same tensors now claim CUDA
    with pytest.raises(_Called):
        call()
    monkeypatch.setenv("NEURODYN_NO_TRITON", "1")  # the kernels taken out of "auto"
    assert torch.isfinite(call()).all()


def test_the_resolved_selective_scan_backend(monkeypatch):
    u = torch.zeros(1, 1, 1)
    assert ss_mod.resolve_backend("auto", u) in ("cpp", "torch")
    assert ss_mod.resolve_backend("triton", u) == "triton"
    assert ss_mod.resolve_backend("mamba", u) == "mamba"
    monkeypatch.setattr(triton_loader, "is_cuda", lambda t: True)
    monkeypatch.setattr(triton_loader, "triton_importable", lambda: True)
    assert ss_mod.resolve_backend("auto", u) == "triton"
    assert ss_mod.resolve_backend("torch", u) == "torch"


@needs_triton
def test_explicit_triton_on_cpu_without_the_interpreter_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    m = ndm.build("chonn1d", orders=(1,), width=8, ssm=dict(d_state=4, backend="triton"))
    with pytest.raises(
        ValueError,
        match=r"backend='triton' needs CUDA tensors .*TRITON_INTERPRET=1.*got tensors on "
        r"cpu",
    ):
        m(torch.randn(1, 6, 1))


# ---------------------------------------------------------------------------------------------------------------
# whole models, in the interpreter


def _pair(build, **ref_kw):
    """Two copies of one model: built with ``backend="triton"`` and with the reference backend, same weights."""
    torch.manual_seed(0)
    m = build("triton")
    ref = build(ref_kw.get("ref", "ref"))
    ref.load_state_dict(m.state_dict())
    return m, ref


@pytest.fixture
def kernels_on(device, monkeypatch):
    """The device the model tests run on (``pytest --device``): CPU tensors in Triton's interpreter, or CUDA tensors
    on the compiled kernels (with ``TRITON_INTERPRET`` set, CUDA tensors would be interpreted too)."""
    if device.type == "cuda":
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    return device


def _check_same(m, ref, *inputs, monkeypatch, device=None):
    """Outputs and gradients (inputs and weights) of ``m`` and ``ref`` agree, and ``m`` ran the Triton kernels (both
    models and the inputs moved to ``device`` first; the tolerances allow TF32 products on a GPU)."""
    loaded, load = [], triton_loader.load
    monkeypatch.setattr(triton_loader, "load", lambda name, device: loaded.append(name) or load(name, device))
    if device is not None:
        m.to(device), ref.to(device)
        inputs = [x.to(device) for x in inputs]
    xs = [x.clone().requires_grad_() for x in inputs]
    xr = [x.clone().requires_grad_() for x in inputs]
    y, yr = m(*xs), ref(*xr)
    assert y.shape == yr.shape
    torch.testing.assert_close(y, yr, rtol=1e-4, atol=1e-5)
    w = torch.randn_like(yr)
    g = torch.autograd.grad((y * w).sum(), xs + list(m.parameters()))
    gr = torch.autograd.grad((yr * w).sum(), xr + list(ref.parameters()))
    for a, b in zip(g, gr):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    assert loaded, "the model never reached a Triton kernel"


@needs_triton
def test_a_chonn_model_on_triton_equals_the_reference(monkeypatch, kernels_on):
    m, ref = _pair(lambda be: ndm.build("chonn1d", orders=(2,), width=8, ssm=dict(d_state=4, backend=be)))
    _check_same(m, ref, torch.randn(2, 11, 1), monkeypatch=monkeypatch, device=kernels_on)


@needs_triton
def test_a_lamo_model_on_triton_equals_the_reference(monkeypatch, kernels_on):
    kw = dict(geometry="point_cloud", in_channels=2, width=8, n_layers=1, mlp_ratio=2, n_slices=5, slice_heads=2)
    m, ref = _pair(lambda be: ndm.build("lamo_mesh", **kw, ssm=dict(d_state=4, heads=2, backend=be)))
    _check_same(m, ref, torch.rand(2, 9, 2), monkeypatch=monkeypatch, device=kernels_on)


@needs_triton
@pytest.mark.parametrize("kind", ["1d", pytest.param("2d", marks=pytest.mark.slow)])  # (2d: over 4 s on one core)
def test_a_geomamba_kernel_on_triton_equals_the_reference(monkeypatch, kernels_on, kind):
    m, ref = _pair(
        lambda be: GeoMambaKernel(6, d_state=3, ssm=kind, correction="learnable", r_init="pattern", scan_backend=be)
    )
    with torch.no_grad():
        m.R.uniform_(-1, 1)
    ref.load_state_dict(m.state_dict())
    _check_same(m, ref, torch.randn(2, 3, 5, 6), monkeypatch=monkeypatch, device=kernels_on)
