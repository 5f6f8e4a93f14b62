"""The selective-scan kernels at their production tiles (the tile ``selective_scan.triton_op.scan_blocks`` picks for the
benchmark shapes), without a GPU.

* In Triton's interpreter, against the references: the production chunk (128 steps, 16 per thread in the forward and
  8 in the backward, 8 and 16 lanes), the production channel blocks (16 and 8) and N = 16, at small batch and width so
  that they run in seconds: L spans three chunks, the last partial; the width is not a multiple of the block.
  (``tests/ops/test_triton_scan.py`` runs the same kernels on small tiles, where the lanes' scans are shorter.)
* Compiled for sm_90 and sm_80 through a stand-in driver with a real launch's specialisation (the project's own
  launchers on CPU tensors of the benchmark shapes, ``JITFunction.run(..., warmup=True)``), read with the
  ``cuobjdump`` that ships with Triton: every kernel fits the architecture's shared memory, spills nothing, uses no
  stack, and on sm_90 the backwards hold at most 168 registers per thread (3 blocks of 4 warps per SM).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess

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

pytestmark = pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed")

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


# ---------------------------------------------------------------------------------------------------------------
# compiled for sm_90 and sm_80 without a GPU

SHARED_LIMIT = {90: 232448, 80: 166912}  # bytes of shared memory one block may use (opt-in maximum)
MAX_BWD_REGISTERS = 168  # 3 blocks of 4 warps per SM (65,536 registers)


def _cuobjdump():
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return path if os.path.exists(path) else shutil.which("cuobjdump")


@contextlib.contextmanager
def _stand_in_driver(arch):
    """Triton's compiler targeting ``sm_<arch>`` with no GPU: a driver that names that target, and launches that
    compile (``warmup=True``) instead of running; yields the list the compiled kernels are appended to."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    class Driver:
        def get_current_device(self):  # (one per architecture: Triton caches a device's target and kernels)
            return arch

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return GPUTarget("cuda", arch, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

    captured = []
    run = JITFunction.run
    previous = driver._active  # (reset_active() would look for a GPU driver)

    def compile_only(self, *args, grid, warmup, **kwargs):
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        captured.append((self.fn.__name__, kernel))
        return kernel

    driver.set_active(Driver())
    JITFunction.run = compile_only
    try:
        yield captured
    finally:
        JITFunction.run = run
        driver._active = previous


def _launch(kind, ss):
    """The benchmark shapes' launches (neurodyn bench gpu): selective B 8, D 1024, N 16, L 4096 with input-dependent
    B/C, z, D, bias + softplus; Kirchhoff (ZOH) D 256; multi-head H 16 x P 64, one set and group."""
    E = lambda *s: torch.empty(*s)  # noqa: E731
    b, n, L = 8, 16, 4096
    if kind == "head":
        H, P = 16, 64
        bl, bd = scan_blocks(H * P, n, L)
        args = (E(b, 1, L, H * P), E(b, 1, L, H), E(1, H), E(b, 1, L, 1, n), E(b, 1, L, 1, n), E(1, H * P))
        ss.head_fwd(*args, True, bl, bd)
        ss.head_bwd(*args, E(b, H * P, L // bl, n), E(b, 1, L, H * P), bl, bd)
        return
    d = 1024 if kind == "selective" else 256
    bl, bd = scan_blocks(d, n, L)
    zoh = kind == "knc"
    z = None if zoh else E(b, d, L)
    bias = None if zoh else E(d)
    args = (E(b, d, L), E(b, d, L), E(d, n), E(b, 1, n, L), E(b, 1, n, L), E(d), z, bias, None)
    ss.fwd(*args, not zoh, False, True, bl, bd, zoh)
    ss.bwd(*args, E(b, d, L // bl, n), E(b, d, L), None, not zoh, False, bl, bd, zoh)


@pytest.mark.parametrize("arch", [90, 80])
@pytest.mark.parametrize("kind", ["selective", "knc", "head"])
def test_production_tiles_fit_sm90_and_sm80(kind, arch, monkeypatch, tmp_path):
    """Each kernel compiled at its benchmark shape's tile fits one block's shared memory, spills nothing (no local
    memory), uses no stack; on sm_90 the backward holds at most 168 registers per thread."""
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump (shipped in triton's wheel) not found")
    tl = pytest.importorskip("triton.language")
    from triton.runtime.jit import JITFunction

    if not isinstance(tl.standard._sum_combine, JITFunction):
        pytest.skip("triton was imported under TRITON_INTERPRET=1: its own library is interpreted, nothing compiles")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    ss = triton_loader.load("selective_scan", torch.device("cuda"))
    with _stand_in_driver(arch) as captured:
        _launch(kind, ss)
    assert [name for name, _ in captured] == ["_selective_scan_fwd_kernel", "_selective_scan_bwd_kernel"]
    for name, kernel in captured:
        cubin = tmp_path / f"{name}.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([tool, "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage)
        assert m, usage
        regs, stack, local = int(m.group(1)), int(m.group(2)), int(m.group(4))
        shared = kernel.metadata.shared
        what = f"{kind} {name} sm_{arch}: {regs} registers, stack {stack}, local {local}, shared {shared}"
        assert shared <= SHARED_LIMIT[arch], what
        assert local == 0 and stack == 0, what
        if "bwd" in name and arch >= 90:  # (sm_80 stages the gB/gC atomics through shared memory: uncapped there)
            assert regs <= MAX_BWD_REGISTERS, what
