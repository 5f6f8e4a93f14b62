"""The lazily built C++ extension: fallback switch, build failure handling, exp accuracy."""
import threading
import warnings

import pytest
import torch

from neurodyn.ops import cpu_kernel, resolve_backend, selective_scan

from .helpers import cpp_available, grads, rel_err, scan_inputs


def test_env_var_forces_fallback(monkeypatch):
    monkeypatch.setenv("NEURODYN_NO_CPP_EXT", "1")
    assert cpu_kernel.get() is None
    assert resolve_backend("auto", torch.zeros(1, 1, 1)) == "torch"
    a = scan_inputs(1, 2, 9, 3)
    out = selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"])  # runs on the fallback
    assert out.shape == (1, 2, 9)
    with pytest.raises(RuntimeError, match="fused CPU kernel is unavailable"):
        selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"], backend="cpp")


def test_build_failure_warns_once_and_falls_back(monkeypatch):
    def broken():
        raise RuntimeError("no compiler here")

    monkeypatch.delenv("NEURODYN_NO_CPP_EXT", raising=False)
    monkeypatch.setattr(cpu_kernel, "_build", broken)
    monkeypatch.setattr(cpu_kernel, "_STATE", {})
    with pytest.warns(RuntimeWarning, match="no compiler here"):
        assert cpu_kernel.get() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpu_kernel.get() is None  # no second warning
    assert resolve_backend("auto", torch.zeros(1, 1, 1)) == "torch"


def test_build_directory_is_stable(monkeypatch):
    monkeypatch.delenv("NEURODYN_EXT_DIR", raising=False)
    d = cpu_kernel.build_dir()
    assert d == cpu_kernel.build_dir()
    assert torch.__version__.replace("+", "_") in str(d)


@pytest.mark.skipif(not cpp_available(), reason="fused CPU kernel unavailable")
def test_concurrent_get_returns_one_module():
    mods = []
    threads = [threading.Thread(target=lambda: mods.append(cpu_kernel.get())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(m) for m in mods}) == 1 and mods[0] is not None


@pytest.mark.skipif(not cpp_available(), reason="fused CPU kernel unavailable")
@pytest.mark.parametrize("dtype,tol,lo", [(torch.float32, 3e-7, -87.0), (torch.float64, 1e-15, -700.0)])
def test_kernel_exp_is_accurate(dtype, tol, lo):
    x = torch.linspace(lo, 80.0, 100001, dtype=dtype)
    y = cpu_kernel.get().exp_test(x)
    assert ((y - torch.exp(x)).abs() / torch.exp(x)).max() < tol


@pytest.mark.skipif(not cpp_available(), reason="fused CPU kernel unavailable")
@pytest.mark.parametrize("n", [1, 8, 16, 20, 32, 40])
def test_all_state_sizes_match_torch_path(n):
    """Covers every template specialisation of the kernel (padded n = 8, 16, 32, generic)."""
    a = scan_inputs(2, 3, 150, n, with_h0=True)
    leaves = [v.requires_grad_(True) for v in a.values() if v is not None]
    outs = []
    for backend in ("torch", "cpp"):
        out, last = selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"], a["D"], a["z"], a["delta_bias"],
                                   True, True, initial_state=a["initial_state"], backend=backend)
        outs.append((out, last, torch.autograd.grad(out.sum() + last.sum(), leaves)))
    assert rel_err(outs[1][0], outs[0][0]) < 1e-12 and rel_err(outs[1][1], outs[0][1]) < 1e-12
    for g1, g0 in zip(outs[1][2], outs[0][2]):
        assert rel_err(g1, g0) < 1e-12


@pytest.mark.skipif(not cpp_available(), reason="fused CPU kernel unavailable")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("n", [5, 16])
def test_scalar_A_rows_match_reference(dtype, tol, n):
    """Rows whose states share one A take the one-exponential path; mixed with per-state rows, padded
    (n = 5) or not, forward and every gradient equal the sequential reference."""
    a = scan_inputs(2, 4, 97, n, dtype=dtype, with_h0=True)
    A = a["A"].clone()
    A[0] = A[0, 0]          # rows 0 and 2 scalar, 1 and 3 per state
    A[2] = -1.7
    a["A"] = A
    leaves = [v.requires_grad_(True) for v in a.values() if v is not None]
    res = []
    for backend in ("ref", "cpp"):
        out = selective_scan(a["u"], a["delta"], a["A"], a["B"], a["C"], a["D"], a["z"], a["delta_bias"],
                             True, True, initial_state=a["initial_state"], backend=backend)
        res.append((out, grads(out, leaves)))
    (o0, l0), g0 = res[0]
    (o1, l1), g1 = res[1]
    assert rel_err(o1, o0) < tol and rel_err(l1, l0) < tol
    for x, y in zip(g1, g0):
        assert rel_err(x, y) < tol
