"""``neurodyn bench kernels``: a static report of every Triton kernel, compiled for sm_80 and sm_90 on a CPU.

    neurodyn bench kernels [--arch sm_80 sm_90] [--kernels scan_2d ncp_mlp ...] [--shapes bench paper]
                           [--json FILE]

No GPU is needed, only ``triton`` (its compiler, ``ptxas`` and ``cuobjdump`` ship in the wheel). Each kernel is
launched through the project's own launchers (:func:`neurodyn.ops.triton_loader.load`'s compiled build) on CPU
tensors of the benchmark's and the seed models' paper shapes, under a stand-in driver whose target is
``GPUTarget("cuda", 80 | 90, 32)``; ``JITFunction.run`` is called with ``warmup=True`` (compile, do not launch), so
each kernel gets exactly the specialisation a real launch gives (integers equal to 1 made constants, 16-divisibility
of pointers and integers). Per launch: the grid and warps (the launch), registers, stack and spill stores (ptxas's
log), dynamic shared memory (Triton's metadata), the SASS (``cuobjdump -sass``) and its loops (backward branches).

Per (kernel, direction, arch, shape) row:

* ``programs``, ``warps``; ``registers``, ``spill_bytes``, ``stack_bytes``, ``shared_bytes``; blocks per SM (from
  registers, warps and shared memory against the SM's 65,536 registers, 2,048 threads, 32 blocks and its shared
  memory, 1 KiB reserved per block); ``launchable``: the shared memory within the per-block limit and at least one
  block per SM.
* ``sass_per_iteration``: the SASS instructions of the main loop's body (the largest outermost loop; a kernel with no
  loop counts its whole body as one iteration, and so does one whose loops run a fixed count inside one pass,
  :data:`PASS_LOOP_TRIPS`, with those loops counted as many times as they run).
* ``instr_per_element``: SASS instructions per warp per iteration x 32 / the elements a warp handles per iteration,
  i.e. the loop instructions a thread executes per element (summed over the kernels of one direction); the elements
  are the useful ``(channel, state, step)`` triples (``(row, neuron)`` pairs for the NCP backbone, real sizes, not the
  padded tiles), spread evenly over the programs and iterations. Global loads and stores per element likewise
  (table only).
* ``predicted_floor_ratio``: the issue-rate model's time over the memory floor (below).

**Issue-rate model** (an estimate, not a measurement). Each kernel's warp instructions (outside loops once, loop
bodies times their trip count, per warp of every program) are split by pipe; per SM and clock a warp scheduler issues
one instruction (4 per SM), the FP32 pipe takes 4 warp instructions on sm_90 (128 lanes) and 2 on sm_80, FP64 2 and
1, the integer pipe 2, the load/store unit 1 (32 lanes: LDG, STG, LDS, STS, atomics, local), the shuffle unit 1
(SHFL) and the special-function unit 0.5 (MUFU: 16 lanes). A kernel's time is the busiest of these over the SMs it
occupies (``min(SMs, programs)``; fewer than four resident warps per SM issue from fewer schedulers) divided by an
achieved fraction ``EFFICIENCY = 0.6`` of the peak, plus ``LAUNCH_S = 2 us`` per launch. Assumed: no stall beyond that
fraction (latency hidden), loops executing their static body (an inner loop counted once), every program running
the same trips. The memory floor is the bytes an ideal kernel moves (forward: the scanned inputs read once and the
output written once; backward: the inputs and the output's gradient read, one gradient per input written; z, the
gate, and parameters of ``O(channels x states)`` not counted) at the card's achievable bandwidth (about 90 % of its
peak: A100-SXM4-80GB 1.8 TB/s, 108 SMs at 1.41 GHz; H100-SXM5 3.0 TB/s, 132 SMs at 1.755 GHz).

The launch calls of each kernel are the small functions of :data:`CASES` (one per kernel and shape), so that a
launcher's new signature is one place to update; :data:`TRIPS` gives each kernel's main-loop trip count from its
launch arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

KERNELS = ("selective_scan", "head_scan", "knc_scan", "scan_2d", "linear_scan", "ncp_mlp")
JSON_KEYS = (
    "kernel",
    "direction",
    "arch",
    "shape",
    "programs",
    "warps",
    "registers",
    "spill_bytes",
    "stack_bytes",
    "shared_bytes",
    "launchable",
    "sass_per_iteration",
    "instr_per_element",
    "predicted_floor_ratio",
)
EFFICIENCY = 0.6
LAUNCH_S = 2e-6


@dataclass(frozen=True)
class Arch:
    """A target: compute capability, the card the model assumes, and its limits and rates."""

    name: str
    capability: int
    card: str
    sms: int
    clock_hz: float
    bandwidth: float  # achievable bytes / s
    shared_per_block: int  # opt-in maximum of dynamic shared memory per block
    shared_per_sm: int
    fp32_rate: float  # warp instructions per SM per clock
    fp64_rate: float
    regs_per_sm: int = 65536
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32


ARCHS = {
    "sm_80": Arch("sm_80", 80, "A100-SXM4-80GB", 108, 1.41e9, 1.8e12, 166912, 167936, 2.0, 1.0),
    "sm_90": Arch("sm_90", 90, "H100-SXM5-80GB", 132, 1.755e9, 3.0e12, 232448, 233472, 4.0, 2.0),
}
_RATES = {"issue": 4.0, "int": 2.0, "lsu": 1.0, "shfl": 1.0, "mufu": 0.5}
_PIPES = {
    "mufu": ("MUFU",),
    "shfl": ("SHFL",),
    "lsu": (
        "LDG",
        "STG",
        "LDS",
        "STS",
        "LDSM",
        "STSM",
        "LDL",
        "STL",
        "ATOM",
        "ATOMG",
        "ATOMS",
        "RED",
        "REDG",
        "LDGSTS",
        "LD",
        "ST",
    ),
    "fp32": ("FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "FCHK", "FRND", "FSWZADD", "FMUL2", "FFMA2", "FADD2"),
    "fp64": ("DFMA", "DMUL", "DADD", "DSETP", "DMNMX"),
    "int": (
        "IMAD",
        "IADD3",
        "LOP3",
        "ISETP",
        "SEL",
        "SHF",
        "LEA",
        "IABS",
        "IMNMX",
        "VIADD",
        "VIMNMX",
        "POPC",
        "FLO",
        "PRMT",
        "IADD",
        "IMUL",
        "LOP",
        "SHL",
        "SHR",
        "I2F",
        "F2I",
        "F2F",
        "I2FP",
        "F2IP",
    ),
}
_PIPE_OF = {op: pipe for pipe, ops in _PIPES.items() for op in ops}
_LOADS = ("LDG",)
_STORES = ("STG", "ATOM", "ATOMG", "RED", "REDG")


# ---------------------------------------------------------------------------------------------------------------
# compiling through the launchers


@dataclass
class Launch:
    """One captured launch: the kernel's name, grid, bound arguments, compiled kernel, ptxas log, compile seconds."""

    name: str
    grid: tuple[int, ...]
    args: dict
    kernel: object
    log: str
    seconds: float
    direction: str = ""


class Recorder:
    """Captures the launches made inside ``with recorder(direction):`` blocks (compiled, never run)."""

    def __init__(self):
        self.launches: list[Launch] = []
        self.direction = ""

    @contextlib.contextmanager
    def __call__(self, direction: str) -> Iterator[None]:
        self.direction = direction
        try:
            yield
        finally:
            self.direction = ""


class _StandIn:
    """The driver Triton asks for the current device, stream and target: a GPU of ``capability`` that is not there
    (the fake device's number is the capability, so that each target has its own kernel cache)."""

    def __init__(self, capability: int):
        self.capability = capability

    def get_current_device(self):
        return self.capability

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.capability, 32)

    def get_active_torch_device(self):
        return torch.device("cpu")

    def __getattr__(self, name):
        raise AttributeError(name)


def _check_compiled_build() -> None:
    """One clear error where nothing can compile: no triton, or triton imported under ``TRITON_INTERPRET=1``."""
    from ..ops import triton_loader

    if not triton_loader.triton_importable():
        raise RuntimeError("neurodyn bench kernels needs the triton package (pip install 'neurodyn[triton]')")
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if triton_loader.interpreter_requested() or not isinstance(tl.standard._sum_combine, JITFunction):
        raise RuntimeError(
            "neurodyn bench kernels compiles the kernels: unset TRITON_INTERPRET (with it, triton "
            "interprets every kernel and nothing compiles)"
        )


@contextlib.contextmanager
def stand_in(arch: Arch, recorder: Recorder, cache_dir: str) -> Iterator[None]:
    """Within: Triton compiles for ``arch`` into ``cache_dir``, every kernel launch is compiled and recorded instead of
    run, and ptxas's log is kept with each launch."""
    import triton
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        out = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out):
            kernel = original(self, *args, grid=grid, warmup=True, **kwargs)
        bound = dict(zip(self.arg_names, args))
        bound.update(kwargs)
        recorder.launches.append(
            Launch(
                self.fn.__name__,
                tuple(grid),
                bound,
                kernel,
                out.getvalue(),
                time.perf_counter() - t0,
                recorder.direction,
            )
        )
        return kernel

    knobs = triton.knobs
    saved = (knobs.cache.dir, knobs.nvidia.dump_ptxas_log)
    active = driver._active  # (None until something asked: asking would create the CUDA driver)
    driver.set_active(_StandIn(arch.capability))
    JITFunction.run = run
    knobs.cache.dir, knobs.nvidia.dump_ptxas_log = cache_dir, True
    try:
        yield
    finally:
        JITFunction.run = original
        knobs.cache.dir, knobs.nvidia.dump_ptxas_log = saved
        driver.set_active(active)


def _compiled(name: str):
    """The compiled build of kernel module ``name`` (no CUDA needed to build it)."""
    from ..ops import triton_loader

    return triton_loader.load(name, torch.device("cuda"))


# ---------------------------------------------------------------------------------------------------------------
# SASS


def _tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def sass(cubin: bytes) -> list[tuple[int, str]]:
    """``(address, instruction)`` of every SASS instruction of a cubin (``cuobjdump -sass``)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        text = subprocess.run([_tool("cuobjdump"), "-sass", f.name], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return [
        (int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;/]*?)\s*;", text)
    ]


def opcode(instruction: str) -> str:
    """The base opcode: ``@!P0 LDG.E.128 R4, ...`` -> ``LDG``."""
    return re.sub(r"^@!?U?P[T0-9]+\s+", "", instruction).split()[0].split(".")[0]


def all_loops(instructions: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """Every loop, as ``(first, last)`` instruction indices: the ranges of the backward branches."""
    index = {addr: i for i, (addr, _) in enumerate(instructions)}
    found = []
    for i, (addr, text) in enumerate(instructions):
        m = re.search(r"\bBRA\b[^0-9]*0x([0-9a-f]+)", text)
        if m and opcode(text) == "BRA":
            target = int(m.group(1), 16)
            if target < addr and target in index:
                found.append((index[target], i))
    return sorted(set(found))


def loops(instructions: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """The outermost loops, as ``(first, last)`` instruction indices: the ranges of backward branches not inside
    another's (the self-branch after ``EXIT`` excluded)."""
    found = all_loops(instructions)
    return [r for r in found if not any(o != r and o[0] <= r[0] and r[1] <= o[1] for o in found)]


def executed_body(ops: list[str], main: tuple[int, int], inner: list[tuple[int, int]], inner_trips: float) -> Counter:
    """The opcodes one trip of the ``main`` loop executes: its body, with the largest loop inside it (the scans' loop
    over the states within a chunk) counted ``inner_trips`` times instead of once."""
    first, last = main
    body = Counter(ops[first : last + 1])
    inside = [r for r in inner if first < r[0] and r[1] < last]
    if inside and inner_trips > 1:
        a, b = max(inside, key=lambda r: r[1] - r[0])
        for op, c in Counter(ops[a : b + 1]).items():
            body[op] += c * (inner_trips - 1)
    return body


@dataclass
class Kernel:
    """The static facts of one compiled launch."""

    name: str
    programs: int
    warps: int
    registers: int
    spill_bytes: int
    stack_bytes: int
    shared_bytes: int
    body: Counter  # opcode counts of the main loop's body (the whole kernel without a loop)
    rest: Counter  # outside it (other loops counted once)
    trips: float
    seconds: float
    nested: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def sass_per_iteration(self) -> int:
        return sum(self.body.values())


def _ptxas(log: str) -> tuple[int, int, int]:
    """``(registers, stack bytes, spill store bytes)`` from ptxas's ``-v`` log (its last function's figures)."""
    regs = re.findall(r"Used (\d+) registers", log)
    stack = re.findall(r"(\d+) bytes stack frame", log)
    spill = re.findall(r"(\d+) bytes spill stores", log)
    last = lambda xs: int(xs[-1]) if xs else 0  # noqa: E731
    return last(regs), last(stack), last(spill)


def analyse(launch: Launch) -> Kernel:
    """A launch's resources and loop structure."""
    k = launch.kernel
    instructions = sass(k.asm["cubin"])
    regs, stack, spill = _ptxas(launch.log)
    if not regs:  # (a kernel taken from a cache: no ptxas log) -- the cubin's own figures
        regs, stack = _res_usage(k.asm["cubin"])
    outer = loops(instructions)
    ops = [opcode(t) for _, t in instructions]
    if outer and launch.name in PASS_LOOP_TRIPS:
        body, rest = Counter(ops), Counter()
        more = PASS_LOOP_TRIPS[launch.name](launch.args) - 1  # each loop's trips after the one in the whole body
        for first, last in outer:
            for op, c in Counter(ops[first : last + 1]).items():
                body[op] += c * more
        outer = []
    elif outer:
        first, last = max(outer, key=lambda r: r[1] - r[0])
        inner_trips = INNER_TRIPS.get(launch.name, lambda a: 1)(launch.args)
        body = executed_body(ops, (first, last), all_loops(instructions), inner_trips)
        rest = Counter(ops[:first] + ops[last + 1 :])
    else:
        body, rest = Counter(ops), Counter()
    all_backward = len(re.findall(r"\bBRA\b", "\n".join(t for _, t in instructions)))
    trips = TRIPS.get(launch.name, lambda a: 1)(launch.args) if outer else 1
    grid = [int(g) for g in launch.grid] + [1] * (3 - len(launch.grid))
    return Kernel(
        launch.name,
        math.prod(grid),
        int(launch.args.get("num_warps", 4)),
        regs,
        spill,
        stack,
        int(k.metadata.shared),
        body,
        rest,
        float(trips),
        launch.seconds,
        nested=len(outer) > 0 and all_backward > len(outer) + 1,
    )


def _res_usage(cubin: bytes) -> tuple[int, int]:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        text = subprocess.run(
            [_tool("cuobjdump"), "-res-usage", f.name], check=True, capture_output=True, text=True
        ).stdout
    finally:
        os.unlink(f.name)
    m = re.search(r"REG:(\d+) STACK:(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


# ---------------------------------------------------------------------------------------------------------------
# occupancy and the issue-rate model


def blocks_per_sm(k: Kernel, arch: Arch) -> int:
    """Resident blocks per SM (0: the kernel cannot launch)."""
    if k.shared_bytes > arch.shared_per_block or k.registers > 255:
        return 0
    threads = 32 * k.warps
    regs = 32 * k.warps * (-(-max(k.registers, 1) // 8) * 8)
    by_shared = arch.shared_per_sm // (k.shared_bytes + 1024) if k.shared_bytes else arch.blocks_per_sm
    return max(0, min(arch.blocks_per_sm, arch.threads_per_sm // threads, arch.regs_per_sm // regs, by_shared))


def _pipes(counts: Counter) -> Counter:
    out = Counter()
    for op, c in counts.items():
        out["issue"] += c
        pipe = _PIPE_OF.get(op)
        if pipe:
            out[pipe] += c
    return out


def predicted_seconds(k: Kernel, arch: Arch) -> float:
    """The issue-rate model's time of one launch (module docstring)."""
    per_warp = _pipes(k.body)
    per_warp = Counter({p: c * k.trips for p, c in per_warp.items()}) + _pipes(k.rest)
    warps = k.programs * k.warps
    sms = max(1, min(arch.sms, k.programs))
    resident = max(1, blocks_per_sm(k, arch)) * k.warps
    per_sm = min(resident, math.ceil(k.programs / sms) * k.warps)
    rates = dict(_RATES, issue=min(4.0, float(per_sm)), fp32=arch.fp32_rate, fp64=arch.fp64_rate)
    clocks = max(c * warps / (rates[p] * sms) for p, c in per_warp.items())
    return clocks / arch.clock_hz / EFFICIENCY + LAUNCH_S


# ---------------------------------------------------------------------------------------------------------------
# cases: the launch calls, one small function per kernel and shape


@dataclass(frozen=True)
class Case:
    """A kernel at one shape: ``launch(rec)`` calls the launchers inside ``with rec("fwd")`` / ``with rec("bwd")``;
    ``elements``: useful elements per direction; ``floor``: memory-floor bytes per direction."""

    kernel: str
    shape: str
    scale: str  # "bench" (the GPU benchmark's shapes) or "paper" (a seed model's paper preset)
    launch: Callable
    elements: int
    floor: dict


def _e(*shape, dtype=torch.float32) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype)


def _bytes(*shapes, size=4) -> int:
    return sum(math.prod(s) for s in shapes) * size


def _selective(
    kernel: str, batch: int, dim: int, n: int, L: int, groups: int, zoh: bool, extras: bool, label: str, scale: str
) -> Case:
    """The selective scan (Mamba's call: D, z, bias, softplus) or the Kirchhoff scan (ZOH), B and C ``(batch, G, n,
    L)``."""

    def launch(rec):
        from ..ops.selective_scan.triton_op import scan_blocks

        k = _compiled("selective_scan")
        bl, bd = scan_blocks(dim, n, L)
        u, delta, A = _e(batch, dim, L), _e(batch, dim, L), _e(dim, n)
        B, C, D = _e(batch, groups, n, L), _e(batch, groups, n, L), _e(dim)
        z, bias = (_e(batch, dim, L), _e(dim)) if extras else (None, None)
        with rec("fwd"):
            _, _, ckpt = k.fwd(u, delta, A, B, C, D, z, bias, None, extras, False, True, bl, bd, zoh)
        with rec("bwd"):
            k.bwd(u, delta, A, B, C, D, z, bias, None, ckpt, _e(batch, dim, L), None, extras, False, bl, bd, zoh)

    io = [(batch, dim, L)] * 2 + [(batch, groups, n, L)] * 2
    fwd = _bytes(*io, (batch, dim, L))
    return Case(
        kernel,
        label,
        scale,
        launch,
        batch * dim * n * L,
        {"fwd": fwd, "bwd": _bytes(*io, (batch, dim, L)) + _bytes(*io)},
    )


def _head(batch: int, S: int, L: int, heads: int, P: int, N: int, label: str, scale: str) -> Case:
    """The multi-head scan in its time-major layout (one B, C group)."""

    def launch(rec):
        from ..ops.selective_scan.triton_op import scan_blocks

        k = _compiled("selective_scan")
        bl, bd = scan_blocks(heads * P, N, L)
        u, dt, A = _e(batch, S, L, heads * P), _e(batch, S, L, heads), _e(S, heads)
        B, C, D = _e(batch, S, L, 1, N), _e(batch, S, L, 1, N), _e(S, heads * P)
        with rec("fwd"):
            _, ckpt = k.head_fwd(u, dt, A, B, C, D, True, bl, bd)
        with rec("bwd"):
            k.head_bwd(u, dt, A, B, C, D, ckpt, _e(batch, S, L, heads * P), bl, bd)

    io = [(batch, S, L, heads * P), (batch, S, L, heads), (batch, S, L, N), (batch, S, L, N)]
    return Case(
        "head_scan",
        label,
        scale,
        launch,
        batch * S * heads * P * N * L,
        {"fwd": _bytes(*io, io[0]), "bwd": _bytes(*io, io[0]) + _bytes(*io)},
    )


def _linear(P: int, L: int, Q: int, label: str, scale: str) -> Case:
    def launch(rec):
        from ..ops.linear_scan.triton_op import linear_blocks

        k = _compiled("linear_scan")
        bl, bq = linear_blocks(L, Q)
        a, x = _e(P, L, Q), _e(P, L, Q)
        with rec("fwd"):
            h = k.fwd(a, x, None, False, bl, bq)
        with rec("bwd"):
            k.bwd(a, h, None, _e(P, L, Q), False, bl, bq)

    s = (P, L, Q)
    return Case("linear_scan", label, scale, launch, P * L * Q, {"fwd": _bytes(s, s, s), "bwd": _bytes(s, s, s, s, s)})


_PAPER_DIRS = [0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1]  # row, row_rev, col, col_rev: (transpose, flip rows, flip columns)


def _scan2d(batch: int, dim: int, n: int, side: int, per_direction: bool, form: int, label: str, scale: str) -> Case:
    """GeoMaNO's 2-D scan, the paper's four directions in one launch (softplus, bias, D; delta, B, C shared by the
    directions (the benchmark) or one per direction (the model))."""
    K = 4

    def launch(rec):
        from ..ops.scan_2d.triton_op import scan2d_blocks

        k = _compiled("scan_2d")
        blocks = scan2d_blocks(batch, K, dim, n, side, side, True)
        lead = (batch, K) if per_direction else (batch,)
        x, delta = _e(batch, dim, side, side), _e(*lead, dim, side, side)
        B, C = _e(*lead, n, side, side), _e(*lead, n, side, side)
        A, R, D, bias = _e(K, dim, n), _e(K, dim, n), _e(K, dim), _e(K, dim)
        with rec("fwd"):
            y, ckpt, dsum = k.fwd(x, delta, A, B, C, D, R, bias, _PAPER_DIRS, True, form, True, *blocks)
        with rec("bwd"):
            k.bwd(x, delta, A, B, C, D, R, bias, _PAPER_DIRS, True, form, ckpt, dsum, _e(*y.shape), *blocks)

    lead = (batch, K) if per_direction else (batch,)
    y = (batch, K, dim, side, side) if per_direction else (batch, dim, side, side)
    io = [(batch, dim, side, side), (*lead, dim, side, side), (*lead, n, side, side), (*lead, n, side, side)]
    return Case(
        "scan_2d",
        label,
        scale,
        launch,
        batch * K * dim * n * side * side,
        {"fwd": _bytes(*io, y), "bwd": _bytes(*io, y) + _bytes(*io)},
    )


def _ncp(cells: int, rows: int, a: int, widths: tuple[int, ...], label: str, scale: str) -> Case:
    """NAC's backbone: the input into the first layer only, tanh, the sensory scaling; packed as
    :func:`neurodyn.ops.ncp_mlp.pack_layers` packs it."""

    def launch(rec):
        from ..ops.ncp_mlp.triton_op import ncp_blocks, packed_input_width, packed_width

        k = _compiled("ncp_mlp")
        packed = [packed_width(h) for h in widths]
        inputs = [1] + [0] * (len(widths) - 1)
        A = packed_input_width(a)
        bm = ncp_blocks(rows, sum(packed))
        x, sc, sh = _e(cells, rows, a), _e(cells, a), _e(cells, a)
        w_in, bias = _e(cells, A * packed[0]), _e(cells, sum(packed))
        w_rec, mask = _e(cells, sum(p * h for p, h in zip(packed, packed[1:]))), _e(sum(packed))
        with rec("fwd"):
            k.fwd(x, w_in, bias, w_rec, mask, sc, sh, packed, inputs, 1, widths[-1], bm)
        with rec("bwd"):
            k.bwd(x, w_in, bias, w_rec, mask, sc, sh, _e(cells, rows, widths[-1]), packed, inputs, 1, bm)

    x, y = (cells, rows, a), (cells, rows, widths[-1])
    return Case(
        "ncp_mlp", label, scale, launch, cells * rows * sum(widths), {"fwd": _bytes(x, y), "bwd": _bytes(x, y, x)}
    )


CASES: list[Case] = [
    # the GPU benchmark's shapes (benchmarks/gpu.py, full scale, L = 4096)
    _selective("selective_scan", 8, 1024, 16, 4096, 1, False, True, "B8 D1024 N16 L4096", "bench"),
    _head(8, 1, 4096, 16, 64, 16, "B8 heads16x64 N16 L4096", "bench"),
    _selective("knc_scan", 8, 256, 16, 4096, 1, True, False, "B8 D256 N16 L4096 ZOH", "bench"),
    _scan2d(8, 64, 16, 64, False, 0, "B8 D64 N16 64x64 K4", "bench"),
    _scan2d(8, 64, 16, 128, False, 0, "B8 D64 N16 128x128 K4", "bench"),
    _linear(8 * 1024, 4096, 1, "(8192, 4096, 1)", "bench"),
    _ncp(4, 65536, 16, (73, 33, 2), "C4 M65536 a16 73/33/2", "bench"),
    # the seed models' paper presets (their own batch)
    _head(4, 4, 1936, 1, 128, 64, "lamo/darcy B4 S4 L1936 128ch N64", "paper"),
    _scan2d(4, 64, 16, 8, True, 1, "geomano/darcy B4 D64 N16 8x8 K4", "paper"),
    _selective("knc_scan", 20, 80, 16, 4096, 4, True, False, "chonn_fno/ns B20 D80 N16 L4096 G4", "paper"),
    _selective("knc_scan", 16, 1024, 16, 16, 4, True, False, "chonn_unet/poisson B16 D1024 N16 L16 G4", "paper"),
    _selective("knc_scan", 16, 512, 16, 64, 4, True, False, "chonn_unet/poisson B16 D512 N16 L64 G4", "paper"),
    _ncp(8, 32 * 128, 4, (33, 16, 2), "nac/bearing C8 M4096 a4 33/16/2", "paper"),
    _ncp(8, 32 * 256 * 8, 16, (146, 67, 2), "nac/event_digits C8 M65536 a16 146/67/2", "paper"),
]

# the trips of the loop nested in a kernel's main loop (the scans' states within a chunk), from its launch arguments
INNER_TRIPS: dict[str, Callable[[dict], float]] = {
    "_selective_scan_fwd_kernel": lambda a: a["n"],
    "_selective_scan_bwd_kernel": lambda a: a["n"],
}

# kernels with no main loop whose loops run a fixed count inside one pass (the NCP backward's walks over the first
# layer's 16-neuron chunks): every outermost loop counted that many times, the whole kernel one iteration
PASS_LOOP_TRIPS: dict[str, Callable[[dict], float]] = {
    "_ncp_bwd_kernel": lambda a: -(-(a["WIDTHS"][0] // a["CH"]) // a["UNROLL"]),  # (each trip: UNROLL chunks)
}

# each kernel's main-loop trip count per program, from its launch arguments
TRIPS: dict[str, Callable[[dict], float]] = {
    "_selective_scan_fwd_kernel": lambda a: a["nchunks"],
    "_selective_scan_bwd_kernel": lambda a: a["nchunks"],
    "_linear_scan_fwd_kernel": lambda a: a["nchunks"],
    "_linear_scan_bwd_kernel": lambda a: a["nchunks"],
    "_s2_fwd_kernel": lambda a: a["nseg"] / a["nblk"],  # (frame rows)
    "_s2_bwd_kernel": lambda a: a["nseg"] / a["nblk"],  # (frame rows)
    "_s2_carry_kernel": lambda a: a["nblk"],
}


# ---------------------------------------------------------------------------------------------------------------
# rows


def per_element(kernels: list[Kernel], ops, elements: int) -> float:
    """Loop instructions (of the opcodes ``ops``; all when None) one thread executes per element: each kernel's main
    loop body x its trips x its warps x 32 lanes, summed over the kernels, over the elements."""
    count = lambda k: sum(c for op, c in k.body.items() if ops is None or op in ops)  # noqa: E731
    return sum(count(k) * k.trips * k.programs * k.warps * 32 for k in kernels) / elements


def rows_of(case: Case, arch: Arch, cache_dir: str) -> list[dict]:
    """The case's rows on ``arch`` (one per direction), each with its kernels' facts (``"kernels"``, table only)."""
    rec = Recorder()
    with stand_in(arch, rec, cache_dir):
        case.launch(rec)
    out = []
    for direction in ("fwd", "bwd"):
        kernels = [analyse(launch) for launch in rec.launches if launch.direction == direction]
        if not kernels:
            continue
        seconds = sum(predicted_seconds(k, arch) for k in kernels)
        main = max(kernels, key=lambda k: k.sass_per_iteration * k.trips * k.programs * k.warps)
        instr = per_element(kernels, None, case.elements)
        row = {
            "kernel": case.kernel,
            "direction": direction,
            "arch": arch.name,
            "shape": case.shape,
            "programs": main.programs,
            "warps": main.warps,
            "registers": max(k.registers for k in kernels),
            "spill_bytes": max(k.spill_bytes for k in kernels),
            "stack_bytes": max(k.stack_bytes for k in kernels),
            "shared_bytes": max(k.shared_bytes for k in kernels),
            "launchable": all(blocks_per_sm(k, arch) > 0 for k in kernels),
            "sass_per_iteration": main.sass_per_iteration,
            "instr_per_element": round(instr, 2),
            "predicted_floor_ratio": round(seconds / (case.floor[direction] / arch.bandwidth), 2),
        }
        row["_table"] = dict(
            blocks_per_sm=min(blocks_per_sm(k, arch) for k in kernels),
            launches=len(kernels),
            loads_per_element=round(per_element(kernels, _LOADS, case.elements), 3),
            stores_per_element=round(per_element(kernels, _STORES, case.elements), 3),
            predicted_us=round(seconds * 1e6, 1),
            floor_us=round(case.floor[direction] / arch.bandwidth * 1e6, 2),
            compile_s=round(sum(k.seconds for k in kernels), 1),
            nested=any(k.nested for k in kernels),
            scale=case.scale,
        )
        out.append(row)
    return out


def report(archs=("sm_80", "sm_90"), kernels=KERNELS, scales=("bench", "paper"), progress=None) -> list[dict]:
    """Every row of the selected kernels, targets and shape sets (``"_table"``: the table-only columns)."""
    _check_compiled_build()
    out = []
    with tempfile.TemporaryDirectory(prefix="neurodyn-kernels-") as cache:
        for case in CASES:
            if case.kernel not in kernels or case.scale not in scales:
                continue
            for name in archs:
                try:
                    rows = rows_of(case, ARCHS[name], cache)
                except Exception as exc:  # noqa: BLE001 - one kernel that does not compile is a row, not the end
                    why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                    rows = [
                        {"kernel": case.kernel, "direction": d, "arch": name, "shape": case.shape, "error": why}
                        for d in ("fwd", "bwd")
                    ]
                out += rows
                if progress:
                    progress(rows)
    return out


_COLUMNS = [
    ("kernel", 14),
    ("dir", 3),
    ("arch", 5),
    ("shape", 40),
    ("programs", 8),
    ("warps", 5),
    ("regs", 4),
    ("spill", 5),
    ("stack", 5),
    ("smem", 6),
    ("blk/SM", 6),
    ("ok", 3),
    ("sass/it", 7),
    ("instr/el", 8),
    ("ld/el", 6),
    ("st/el", 6),
    ("pred us", 8),
    ("floor us", 8),
    ("x floor", 7),
    ("compile s", 9),
]


def format_row(r: dict) -> str:
    if "error" in r:
        return f"{r['kernel']:14s} {r['direction']:3s} {r['arch']:5s} {r['shape']:40s} error: {r['error']}"
    t = r["_table"]
    vals = [
        r["kernel"],
        r["direction"],
        r["arch"],
        r["shape"],
        r["programs"],
        r["warps"],
        r["registers"],
        r["spill_bytes"],
        r["stack_bytes"],
        r["shared_bytes"],
        t["blocks_per_sm"],
        "yes" if r["launchable"] else "NO",
        r["sass_per_iteration"],
        f"{r['instr_per_element']:.1f}",
        f"{t['loads_per_element']:.2f}",
        f"{t['stores_per_element']:.2f}",
        f"{t['predicted_us']:.1f}",
        f"{t['floor_us']:.1f}",
        f"{r['predicted_floor_ratio']:.1f}",
        f"{t['compile_s']:.1f}",
    ]
    cells = [f"{v:<{w}s}" if i < 4 else f"{v!s:>{w}s}" for i, (v, (_, w)) in enumerate(zip(vals, _COLUMNS))]
    return " ".join(cells)


def header() -> str:
    return " ".join(f"{h:<{w}s}" if i < 4 else f"{h:>{w}s}" for i, (h, w) in enumerate(_COLUMNS))


def json_rows(rows: list[dict]) -> list[dict]:
    """The rows with exactly :data:`JSON_KEYS` (a row that failed to compile keeps its error in place of the
    figures: ``launchable`` false, the others null)."""
    out = []
    for r in rows:
        if "error" in r:
            out.append({k: r.get(k) for k in JSON_KEYS} | {"launchable": False})
        else:
            out.append({k: r[k] for k in JSON_KEYS})
    return out


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench kernels [--arch ...] [--kernels ...] [--shapes bench paper] [--json FILE]`` (``scale`` is
    ignored: the shapes are the benchmark's and the paper presets')."""
    p = argparse.ArgumentParser(prog="neurodyn bench kernels", description=__doc__.split("\n")[0])
    p.add_argument("--arch", nargs="*", default=list(ARCHS), choices=list(ARCHS))
    p.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=list(KERNELS))
    p.add_argument("--shapes", nargs="*", default=["bench", "paper"], choices=["bench", "paper"])
    p.add_argument("--json", type=Path, default=None, help="write the rows to this file")
    args = p.parse_args(argv)
    print(header(), flush=True)

    def show(rows):
        for r in rows:
            print(format_row(r), flush=True)

    rows = report(args.arch, args.kernels, args.shapes, progress=show)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_rows(rows), indent=1) + "\n")
        print(f"wrote {len(rows)} rows to {args.json}")
    return 0
