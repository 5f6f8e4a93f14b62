"""Input factories and comparison helpers for the scan tests."""

from __future__ import annotations

import pytest
import torch


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Norm-wise relative error ||a - b|| / ||b|| (absolute when b is all zero)."""
    a, b = a.double(), b.double()
    den = b.norm().item()
    return (a - b).norm().item() / (den if den > 0 else 1.0)


def scan_inputs(
    batch=2,
    d=4,
    L=33,
    n=5,
    *,
    dtype=torch.float64,
    bc="var",
    groups=1,
    with_z=True,
    with_D=True,
    with_bias=True,
    with_h0=False,
    delta_scale=0.5,
):
    """Random selective-scan arguments; bc is 'var' (input-dependent B, C), 'fixed' or 'mixed'."""
    g = torch.Generator().manual_seed(1234 + L + 7 * d + n)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    args = {
        "u": r(batch, d, L),
        "delta": torch.rand(batch, d, L, generator=g, dtype=dtype) * delta_scale,
        "A": -torch.rand(d, n, generator=g, dtype=dtype) * 2 - 0.1,
    }
    var_shape = (batch, n, L) if groups == 1 else (batch, groups, n, L)
    args["B"] = r(*var_shape) if bc in ("var", "mixed") else r(d, n)
    args["C"] = r(*var_shape) if bc == "var" else r(d, n)
    args["D"] = r(d) if with_D else None
    args["z"] = r(batch, d, L) if with_z else None
    args["delta_bias"] = r(d) * 0.2 if with_bias else None
    args["initial_state"] = r(batch, d, n) if with_h0 else None
    return args


def grads(out_and_last, inputs, seed=0):
    """Gradients of a fixed random projection of (out, last_state) w.r.t. ``inputs``."""
    out, last = out_and_last
    g = torch.Generator().manual_seed(seed)
    go = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype)
    gl = torch.randn(last.shape, generator=g, dtype=torch.float64).to(last.dtype)
    loss = (out * go).sum() + (last * gl).sum()
    return torch.autograd.grad(loss, inputs, allow_unused=True)


def cpp_available() -> bool:
    """Whether the compiled CPU kernels load (builds them on the first call): for test bodies only. A test that needs
    the kernels is marked ``pytest.mark.needs_kernel`` instead, so that importing or collecting it never builds them
    (``tests/conftest.py``)."""
    from neurodyn.ops import cpu_kernel

    return cpu_kernel.get() is not None


FAST_BACKENDS = ["torch", pytest.param("cpp", marks=pytest.mark.needs_kernel)]


def nac_gates(n=4096, seed=0, signed=False):
    """Random NAC gate values in float64: phi (in [-1, 1] when ``signed``, else [0, 1]), omega in
    [0.05, 3.05], times t in [0, 2] and initial logits a0, each of length ``n``."""
    g = torch.Generator().manual_seed(seed)
    phi = torch.rand(n, generator=g, dtype=torch.float64) * (2 if signed else 1) - (1 if signed else 0)
    omega = 0.05 + 3 * torch.rand(n, generator=g, dtype=torch.float64)
    t = 2 * torch.rand(n, generator=g, dtype=torch.float64)
    a0 = torch.randn(n, generator=g, dtype=torch.float64)
    return phi, omega, t, a0


# the Triton kernel tests' devices: the interpreter on CPU tensors (small tiles patched in, so that the blocks, chunks
# and partial tiles of small test sizes are all exercised), and, with a GPU, CUDA at the same small tiles and at the
# production tiles (nothing patched)
TRITON_DEVICES = ["cpu"] + (["cuda", "cuda-production"] if torch.cuda.is_available() else [])


def triton_device(name: str) -> str:
    """The torch device of a ``TRITON_DEVICES`` entry."""
    return "cuda" if name.startswith("cuda") else name


def triton_setup(monkeypatch, request, small_tiles: dict) -> None:
    """A Triton kernel test's set-up by its ``device`` parameter: the interpreter (``TRITON_INTERPRET=1``) and the
    ``small_tiles`` (module -> {attribute: value}) for ``cpu``; compiled kernels for CUDA (with the variable set, CUDA
    tensors would be interpreted too), the small tiles for ``cuda`` and the production ones for ``cuda-production``.
    A test without a ``device`` parameter runs in the interpreter with the small tiles."""
    callspec = getattr(request.node, "callspec", None)
    device = callspec.params.get("device", "cpu") if callspec is not None else "cpu"
    if device.startswith("cuda"):
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    if device != "cuda-production":
        for module, values in small_tiles.items():
            for name, value in values.items():
                monkeypatch.setattr(module, name, value)
