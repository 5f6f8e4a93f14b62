"""The GPU benchmark: the scans against the memory floor, every seed model's training step against its baseline's,
and the GPU-hours of the paper protocols, in one run (under 5 minutes on one H100 / H200).

    neurodyn bench gpu                  # cuda when available: ops at L = 1k / 4k / 16k, models at cpu and paper scale
    neurodyn bench gpu --scale tiny     # small shapes, few repeats: runs on the CPU in seconds (the test's run)
    neurodyn bench gpu [--scale tiny] [--device cpu|cuda] [--ops ...] [--models lamo nac ...]
        [--modes fp32 bf16 compiled] [--backends torch triton] [--repeats 5] [--warmup 2] [--threads 1]
        [--compile-budget 90] [--op-budget 45] [--loop-calls 20] [--time-limit 150] [--out bench-results/gpu]

**Memory bandwidth.** The median time of a large device-to-device copy (1 GiB; 64 MiB at tiny scale) gives the
bandwidth ``2 x bytes / time`` (read once, written once), measured in the same run as everything it is compared with.

**Ops** (``neurodyn.ops``, called through their public functions with ``backend=``; a backend the op refuses, such as
``triton`` without its package, is listed as skipped with the op's message, and a row that fails -- a kernel that does
not compile or launch (triton's ``OutOfResources``), memory -- is listed with its error: no row stops the run): the
selective scan (B = 8, D = 1024, N = 16, with D, z, delta_bias and softplus, as Mamba calls it), the multi-head scan
(the same 1024 channels as 16 heads of 64, one decay per head), the linear scan ((8, 1024, L)), GeoMaNO's 2-D scan (8 x
64 channels, N = 16, a sqrt(L) x sqrt(L) grid, the paper's four directions and correction R = 1), the Kirchhoff scan (8
x 256 channels, N = 16, ZOH) and NAC's NCP backbone (``ncp_mlp``: 4 cells of 2 B L query-key pairs, 16 inputs, NAC's
cpu-preset layers of 73 / 33 / 2 neurons with their synapse patterns and the sensory scaling; ``torch`` is its
batched-matmul reference), at L = 1k / 4k / 16k. Each backend's rows run within their own ``--op-budget`` seconds (45; a
row not started within them is listed as skipped), so that the pure-PyTorch scans at L = 16k cannot take the kernels'
time nor the models'. For each: the forward (no autograd) and the forward + backward (a fixed output gradient) in ms, as
the median of single synchronised calls, per call of a loop of ``--loop-calls`` calls (the launch gaps between a call's
kernels show as the difference) and, on CUDA, per replay of a CUDA graph of the forward (the kernels alone, no host
between them); and the memory floor: the scanned inputs (u, delta, B, C; a and x of the linear scan; x of the NCP
backbone) read once and the output written once (``bytes_fwd``); the backward's share, those inputs and the output's
gradient read again and one gradient per such input written (``bytes_bwd``; ``bytes_fwdbwd`` the sum); z and the
parameters in their own column (``bytes_extra``), not in the floor. Then the floors' times at the measured bandwidth
(``floor_ms``), the achieved GB/s (bytes / measured time) and the measured time over the floor (``x_floor``).

**Models** (``step_speed.py``'s cases: each preset's model, task and loss on a random batch of its data's shapes, an
AdamW step): every seed model and its baseline (lamo/darcy vs fno/darcy, geomano/darcy vs fno/darcy, stssm/ks-nu0.1
vs ffno/ks-nu0.1, chonn_unet/poisson vs unet/poisson, chonn_fno/navier_stokes_rollout vs fno/navier_stokes_rollout,
nac/bearing vs gru/bearing) at the presets' cpu and paper scales (tiny at tiny scale), both at the seed preset's
batch size (equal batch), in float32, bf16 autocast (``train.precision=bf16``'s wrapper) and compiled
(``torch.compile`` of the model, float32; its first step, the compilation, is reported apart, and models are compiled
in order until ``--compile-budget`` seconds of compilation are spent; a model not started within ``--time-limit``
seconds of the models' phase, default 150, is listed as skipped, so that the run ends within 5 minutes whatever the
device).
Reported: ms per step and per sample, peak memory (CUDA: ``max_memory_allocated``; CPU: the step's peak-RSS increase)
and the seed / baseline ratio per sample. Paper-scale datasets are stand-ins of the same shapes (``_small_data``).

**Protocols.** The GPU-hours of each paper preset's training (``train.epochs`` x steps per epoch, ``ceil(training
windows / train.batch_size)``, from the paper config; the windows per sample from its data) from the measured paper-
scale step per sample times the preset's own batch (training steps only: evaluation not included). At tiny scale
they are computed from the tiny steps, which only exercises the arithmetic.

Timing: CUDA events around each call (``torch.cuda.synchronize`` before), ``time.perf_counter`` on the CPU (threads
set by ``--threads``); ``--warmup`` calls, then the median of ``--repeats`` (full scale: 2 + 5 per op, 1 + 3 per
model step; tiny: 1 + 3). Writes ``gpu.json`` and ``report.md`` to
``--out`` (default ``bench-results/gpu/``) and prints the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch  # noqa: E402

OUT = Path("bench-results") / "gpu"
OPS = ("selective_scan", "head_scan", "linear_scan", "scan_2d", "knc_scan", "ncp_mlp")
MODES = ("fp32", "bf16", "compiled")
BACKENDS = ("torch", "triton")
# (group, seed preset, baseline preset)
PAIRS = [
    ("lamo", "lamo/darcy", "fno/darcy"),
    ("geomano", "geomano/darcy", "fno/darcy"),
    ("stssm", "stssm/ks-nu0.1", "ffno/ks-nu0.1"),
    ("chonn_unet", "chonn_unet/poisson", "unet/poisson"),
    ("chonn_fno", "chonn_fno/navier_stokes_rollout", "fno/navier_stokes_rollout"),
    ("nac", "nac/bearing", "gru/bearing"),
]
# run scale -> op shapes (batch, channels of the 1-D scans, state size, channels of the 2-D and Kirchhoff scans,
# heads), lengths, repeats, copy size and the preset scales of the models
SETTINGS = {
    "tiny": dict(
        batch=2,
        width=32,
        state=4,
        width_2d=8,
        width_knc=16,
        heads=2,
        lengths=(64, 256),
        repeats=3,
        warmup=1,
        copy_mib=64,
        model_scales=("tiny",),
        op_budget=math.inf,
        loop_calls=3,
    ),
    "full": dict(
        batch=8,
        width=1024,
        state=16,
        width_2d=64,
        width_knc=256,
        heads=16,
        lengths=(1024, 4096, 16384),
        repeats=5,
        warmup=2,
        copy_mib=1024,
        model_scales=("cpu", "paper"),
        model_repeats=3,
        model_warmup=1,
        op_budget=45.0,
        loop_calls=20,
    ),
}


# ------------------------------------------------------------------------------------------------
# timing


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` calls after ``warmup`` (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync(device)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_loop_ms(fn: Callable[[], object], device: torch.device, calls: int) -> float:
    """Milliseconds per call of ``calls`` back-to-back calls of ``fn`` (one event pair, or one clock, around the
    loop, no synchronisation between the calls): with :func:`time_ms`'s synchronised single call, the gaps between
    a call's launches show as the difference."""
    fn()
    sync(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e3 / calls


def graph_ms(fn: Callable[[], object], device: torch.device, calls: int) -> float | None:
    """Milliseconds per replay of a CUDA graph of ``fn`` (its kernels with no host in between), timed over ``calls``
    replays; None on the CPU or when ``fn`` cannot be captured (a host synchronisation inside it)."""
    if device.type != "cuda":
        return None
    try:
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            fn()  # (warm-up on the capture stream)
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
    except Exception:  # noqa: BLE001 - not capturable: reported as absent
        sync(device)
        return None
    return time_loop_ms(graph.replay, device, calls)


def copy_bandwidth(device: torch.device, mib: int, repeats: int) -> dict[str, float]:
    """Bytes per second of a ``mib`` MiB device copy (read + write), the median of ``repeats``."""
    src = torch.empty(mib << 20, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), device, repeats, 2)
    return {"bytes": 2 * src.numel(), "ms": ms, "bytes_per_s": 2 * src.numel() / (ms / 1e3)}


def peak_memory_mb(fn: Callable[[], object], device: torch.device) -> float:
    """Peak memory of one call of ``fn``: CUDA's allocated peak, or the CPU's peak-RSS increase."""
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        sync(device)
        return torch.cuda.max_memory_allocated(device) / 2**20
    from neurodyn.bench import rss_increase_kib

    try:
        return rss_increase_kib(fn) / 1024
    except OSError:
        return float("nan")


# ------------------------------------------------------------------------------------------------
# ops


def op_case(op: str, L: int, s: dict, device: torch.device):
    """``(inputs, call(backend, *inputs) -> output, shape label, core)`` of one op at length ``L``; floating inputs
    that require grad are the differentiable ones; ``core``: the indices of the inputs the memory floor counts (the
    scanned sequences: u, delta, B, C; not z, the gate, nor the parameters)."""
    from neurodyn import ops
    from neurodyn.ops.scan_2d import selective_scan_2d

    g = torch.Generator().manual_seed(0)
    b, d, n = s["batch"], s["width"], s["state"]

    def t(*shape, lo=None, hi=None, grad=True):
        x = torch.randn(*shape, generator=g) if lo is None else lo + (hi - lo) * torch.rand(*shape, generator=g)
        return x.to(device).requires_grad_(grad)

    if op == "selective_scan":
        args = (
            t(b, d, L),
            t(b, d, L, lo=-2.0, hi=0.5),
            t(d, n, lo=-2.0, hi=-0.1),
            t(b, n, L),
            t(b, n, L),
            t(d),
            t(b, d, L),
            t(d, lo=-0.5, hi=0.5),
        )
        return (
            args,
            lambda be, u, dl, A, B, C, D, z, bias: ops.selective_scan(u, dl, A, B, C, D, z, bias, True, backend=be),
            f"B={b} D={d} N={n}",
            (0, 1, 3, 4),
        )
    if op == "head_scan":
        h = s["heads"]
        args = (
            t(b, 1, L, d),
            t(b, 1, L, h, lo=1e-3, hi=0.1),
            t(1, h, lo=-2.0, hi=-0.1),
            t(b, 1, L, 1, n),
            t(b, 1, L, 1, n),
            t(1, d),
        )
        return args, lambda be, *a: ops.head_scan(*a, backend=be), f"B={b} heads={h}x{d // h} N={n}", (0, 1, 3, 4)
    if op == "linear_scan":
        args = (t(b, d, L, lo=0.5, hi=1.0), t(b, d, L))
        return args, lambda be, a, x: ops.linear_scan(a, x, dim=-1, backend=be), f"({b}, {d}, L)", (0, 1)
    if op == "scan_2d":
        d2, side = s["width_2d"], math.isqrt(L)
        args = (
            t(b, d2, side, side),
            t(b, d2, side, side, lo=-2.0, hi=0.5),
            t(d2, n, lo=-2.0, hi=-0.1),
            t(b, n, side, side),
            t(b, n, side, side),
            t(d2),
            t(d2, lo=-0.5, hi=0.5),
        )
        return (
            args,
            lambda be, x, dl, A, B, C, D, bias: selective_scan_2d(
                x, dl, A, B, C, D, 1.0, delta_bias=bias, delta_softplus=True, backend=be
            ),
            f"B={b} D={d2} N={n} {side}x{side}, 4 directions",
            (0, 1, 3, 4),
        )
    if op == "knc_scan":
        dk = s["width_knc"]
        args = (t(b, dk, L), t(b, dk, L, lo=1e-3, hi=0.5), t(dk, n, lo=0.1, hi=4.0), t(b, n, L), t(b, n, L), t(dk))
        return args, lambda be, *a: ops.knc_scan(*a, "zoh", backend=be), f"B={b} D={dk} N={n} ZOH", (0, 1, 3, 4)
    if op == "ncp_mlp":
        return _ncp_case(2 * b * L, t, g, device)
    raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")


def _ncp_case(rows: int, t, g: torch.Generator, device: torch.device):
    """NAC's backbone call (cpu preset): 4 cells, ``rows`` rows (query-key pairs) of 16 features, layers of 73 / 33 /
    2 neurons (input into the first only), about a third of the synapses in the patterns, the sensory scaling."""
    from neurodyn import ops

    cells, a, widths = 4, 16, (73, 33, 2)
    args = (
        t(cells, rows, a),
        t(cells, a, widths[0]),
        *(t(cells, h) for h in widths),
        *(t(cells, p, h) for p, h in zip(widths, widths[1:])),
        t(cells, a, lo=0.5, hi=1.5),
        t(cells, a),
    )
    mask = [torch.ones(h, device=device) for h in widths]
    pattern_in = [(torch.rand(a, widths[0], generator=g) < 0.35).float().to(device), None, None]
    pattern_rec = [None] + [
        (torch.rand(p, h, generator=g) < 0.35).float().to(device) for p, h in zip(widths, widths[1:])
    ]

    def call(be, x, w_in, b0, b1, b2, r1, r2, scale, shift):
        return ops.ncp_mlp(
            x,
            [w_in, None, None],
            [b0, b1, b2],
            [None, r1, r2],
            mask,
            "tanh",
            pattern_in,
            pattern_rec,
            scale,
            shift,
            backend=be,
        )

    return args, call, f"cells={cells} rows={rows} in={a} layers={'/'.join(map(str, widths))}", (0,)


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is an op refusing a backend (unknown, or unavailable here) rather than a failure."""
    text = str(exc).lower()
    return (
        isinstance(exc, (ValueError, RuntimeError, ImportError, NotImplementedError))
        and ("backend" in text or "triton" in text)
        and "outofresources" not in type(exc).__name__.lower()
    )


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def nbytes(*tensors) -> int:
    return sum(x.numel() * x.element_size() for x in tensors)


def floor_bytes(args, core, y) -> dict[str, int]:
    """The memory floor's bytes: ``fwd`` the core inputs read once and the output written once; ``bwd`` the core
    inputs and the output's gradient read, one gradient per core input written; ``extra`` the other inputs (z, the
    parameters), read once, in their own column."""
    inputs = [args[i] for i in core]
    fwd = nbytes(*inputs, y)
    return {
        "fwd": fwd,
        "bwd": 2 * nbytes(*inputs) + nbytes(y),
        "extra": nbytes(*(a for i, a in enumerate(args) if i not in core)),
    }


def measure_op(
    op: str,
    L: int,
    backend: str,
    s: dict,
    device: torch.device,
    bandwidth: float,
    repeats: int,
    warmup: int,
    loop_calls: int = 0,
) -> dict:
    """One row of the ops table, or a row saying why it has none (``skipped``: the op refuses the backend;
    ``error``: anything else that failed -- compilation, a kernel's resources, memory -- so that one row never stops
    the run). Times: ``fwd_ms`` / ``fwdbwd_ms`` the median of single synchronised calls; with ``loop_calls``,
    ``*_loop_ms`` per call of a loop of calls (the launch gaps show as the difference) and, on CUDA, ``fwd_graph_ms``
    per replay of a CUDA graph of the forward (no host between its kernels; absent when not capturable)."""
    row = {"op": op, "L": L, "backend": backend}
    try:
        args, call, row["shape"], core = op_case(op, L, s, device)
        with torch.no_grad():
            y = call(backend, *args)
    except Exception as exc:  # noqa: BLE001 - reported in the row
        key = "skipped" if _refused(exc) else "error"
        return {**row, key: _why(exc) if key == "error" else " ".join(str(exc).split())[:200]}
    try:
        gy = torch.randn_like(y)
        diff = [a for a in args if a.requires_grad]

        def forward():
            with torch.no_grad():
                call(backend, *args)

        def forward_backward():
            torch.autograd.grad(call(backend, *args), diff, gy)

        row["fwd_ms"] = time_ms(forward, device, repeats, warmup)
        row["fwdbwd_ms"] = time_ms(forward_backward, device, repeats, warmup)
        if loop_calls:
            row["fwd_loop_ms"] = time_loop_ms(forward, device, loop_calls)
            row["fwdbwd_loop_ms"] = time_loop_ms(forward_backward, device, loop_calls)
            graph = graph_ms(forward, device, loop_calls)
            if graph is not None:
                row["fwd_graph_ms"] = graph
    except Exception as exc:  # noqa: BLE001 - reported in the row
        return {**row, "error": _why(exc)}
    floor = floor_bytes(args, core, y)
    row["bytes_fwd"], row["bytes_bwd"], row["bytes_extra"] = floor["fwd"], floor["bwd"], floor["extra"]
    row["bytes_fwdbwd"] = floor["fwd"] + floor["bwd"]
    for k in ("fwd", "fwdbwd"):
        ms, bytes_ = row[f"{k}_ms"], row[f"bytes_{k}"]
        row[f"{k}_gbps"] = bytes_ / (ms / 1e3) / 1e9
        row[f"floor_{k}_ms"] = bytes_ / bandwidth * 1e3
        row[f"{k}_x_floor"] = ms / row[f"floor_{k}_ms"]
    return row


def op_rows(
    ops,
    lengths,
    backends,
    s,
    device,
    bandwidth,
    repeats,
    warmup,
    budget: float,
    loop_calls: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    measure=None,
) -> list[dict]:
    """Every (op, length, backend) row, each backend's rows within its own ``budget`` seconds (a row not started
    within it is listed as skipped), so that one slow backend (the pure-PyTorch scans at L = 16k) cannot take another's
    time, nor the models'."""
    measure = measure or measure_op
    rows = []
    for backend in backends:
        deadline = clock() + budget
        for op in ops:
            for L in lengths:
                if clock() > deadline:
                    row = {
                        "op": op,
                        "L": L,
                        "backend": backend,
                        "skipped": f"{backend}'s op budget ({budget:g} s) spent",
                    }
                else:
                    row = measure(op, L, backend, s, device, bandwidth, repeats, warmup, loop_calls)
                rows.append(row)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                print(f"  {op:15s} L={L:<6d} {backend:7s} " + _op_line(row), flush=True)
    return rows


def _op_line(row: dict) -> str:
    if "skipped" in row or "error" in row:
        return ("skipped: " + row["skipped"] if "skipped" in row else "error: " + row["error"])[:100]
    loop = f", loop {row['fwd_loop_ms']:.3f} ms" if "fwd_loop_ms" in row else ""
    return (
        f"fwd {row['fwd_ms']:.3f} ms ({row['fwd_x_floor']:.1f}x floor{loop}), fwd+bwd {row['fwdbwd_ms']:.3f} ms "
        f"({row['fwdbwd_x_floor']:.1f}x floor)"
    )


# ------------------------------------------------------------------------------------------------
# models


def _small_data(preset: str, scale: str) -> list[str]:
    """Overrides that make a paper-scale dataset cheap to generate, or generable at all; only its shapes (and the
    normalizers' statistics) are used: Darcy solved at its own resolution (not 421), Navier-Stokes simulated at its
    stored resolution with a larger step, and a bearing preset's real files (PRONOSTIA, a user's folder) replaced by
    the generator's synthetic bearings (the same 16 features per snapshot and window)."""
    from neurodyn.experiments import load_experiment

    data = load_experiment(preset, scale)["data"]
    if data.get("generator") == "darcy":
        return [f"data.solve_resolution={data['resolution']}"]
    if data.get("generator") == "navier_stokes" and data.get("sim_resolution", 0) > data.get("resolution", 0):
        # simulated at the stored 64^2 with a 20x larger step (the paper's 256^2 at 1e-4: 500 000 steps to t = 50)
        return [f"data.sim_resolution={data['resolution']}", "data.dt=2.0e-3"]
    if data.get("generator") == "bearing" and data.get("source") != "synthetic":
        # 28 bearings, 7 per condition: the paper's 7 training bearings of condition 0; 1024 points per snapshot
        return ["data.source=synthetic", "data.conditions=[0,1,2,3]", "data.n_test=21", "data.n_points=1024"]
    return []


def build_model_case(preset: str, scale: str, batch: int, device: torch.device, data_dir: Path):
    """``(model, task, batch, optimizer, parameters, windows per sample)`` of ``preset`` at ``scale`` with ``batch``
    samples, on ``device``."""
    from neurodyn.bench import step_speed
    from neurodyn.train.trainer import make_optimizer

    model, task, data, _opt, params, _bs = step_speed.build_case(
        preset, [f"train.batch_size={batch}", *_small_data(preset, scale)], data_dir, scale, device
    )
    model.to(device)
    task.to(device)
    data = {k: v.to(device) if torch.is_tensor(v) else v for k, v in data.items()}
    opt = make_optimizer("adamw", model.parameters(), 1e-4, 0.0)  # on the device's parameters, as the Trainer's
    return model, task, data, opt, params


def windows_per_sample(preset: str, scale: str, data_dir: Path, device: torch.device) -> float:
    """Training windows per sample of the preset's data (autoregressive presets train on several per trajectory)."""
    from neurodyn.bench import step_speed
    from neurodyn.data.assembly import build_data, split_sizes
    from neurodyn.experiments import load_experiment
    from neurodyn.train.experiment import train_config

    cfg = load_experiment(preset, scale)
    small = load_experiment(preset, scale, step_speed._small_overrides(cfg) + _small_data(preset, scale))
    os.environ["NEURODYN_DATA"] = str(data_dir)
    data = build_data(small, device, progress=False, train_window_steps=train_config(small).window_steps)
    return len(data["sets"]["train"]) / max(split_sizes(small["data"])[0], 1)


def measure_model(model, task, batch, opt, mode: str, device: torch.device, repeats: int, warmup: int) -> dict:
    """Step ms, peak memory MB (and the compiled mode's first-step seconds) of one model in one mode."""
    from neurodyn.train.precision import with_precision

    run_model = {"fp32": model, "bf16": with_precision(model, "bf16", device)}.get(mode)
    out = {}
    if mode == "compiled":
        run_model = torch.compile(model)
        sync(device)
        t0 = time.perf_counter()
        _train_step(run_model, task, batch, opt)
        sync(device)
        out["compile_s"] = time.perf_counter() - t0

    def step():
        _train_step(run_model, task, batch, opt)

    out["step_ms"] = time_ms(step, device, repeats, warmup)
    out["peak_mb"] = peak_memory_mb(step, device)
    return out


def _train_step(model, task, batch, opt) -> None:
    loss = task.training_loss(model, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def model_rows(
    pairs, model_scales, modes, device, repeats, warmup, data_dir, compile_budget, deadline: float = math.inf
) -> list[dict]:
    """Every (model scale, pair, role, mode) step; pairs at the seed preset's batch size. A model not started by
    ``deadline`` (``time.perf_counter()``) is listed as skipped."""
    from neurodyn.experiments import load_experiment

    rows, compile_spent = [], 0.0
    for scale in model_scales:
        for group, seed, base in pairs:
            batch = int(load_experiment(seed, scale)["train"].get("batch_size", 8))
            for role, preset in (("seed", seed), ("baseline", base)):
                head = {"group": group, "role": role, "preset": preset, "model_scale": scale, "batch": batch}
                if time.perf_counter() > deadline:
                    rows += [{**head, "mode": mode, "skipped": "--time-limit reached"} for mode in modes]
                    continue
                try:
                    model, task, data, opt, params = build_model_case(preset, scale, batch, device, data_dir)
                except Exception as exc:  # noqa: BLE001 - a preset that cannot be built here is reported
                    why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
                    rows += [{**head, "mode": mode, "skipped": why} for mode in modes]
                    continue
                for mode in modes:
                    row = {**head, "mode": mode, "params": params}
                    if mode == "compiled" and compile_spent >= compile_budget:
                        rows.append({**row, "skipped": f"compile budget ({compile_budget:g} s) spent"})
                        continue
                    try:
                        row.update(measure_model(model, task, data, opt, mode, device, repeats, warmup))
                    except Exception as exc:  # noqa: BLE001 - one model that fails a mode is reported, not fatal
                        rows.append({**row, "skipped": f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"})
                        continue
                    compile_spent += row.get("compile_s", 0.0)
                    row["per_sample_ms"] = row["step_ms"] / batch
                    rows.append(row)
                    print(
                        f"  {scale:5s} {preset:34s} {mode:8s} {row['step_ms']:9.2f} ms/step "
                        f"{row['per_sample_ms']:8.3f} ms/sample {row['peak_mb']:8.1f} MB",
                        flush=True,
                    )
                del model, task, data, opt
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """Seed per sample / baseline per sample, for every (scale, group, mode) where both were measured."""
    found = {(r["model_scale"], r["group"], r["mode"], r["role"]): r for r in rows if "per_sample_ms" in r}
    out = []
    for (scale, group, mode, role), seed in found.items():
        base = found.get((scale, group, mode, "baseline"))
        if role == "seed" and base is not None:
            out.append(
                {
                    "model_scale": scale,
                    "group": group,
                    "mode": mode,
                    "seed": seed["preset"],
                    "baseline": base["preset"],
                    "seed_per_sample_ms": seed["per_sample_ms"],
                    "baseline_per_sample_ms": base["per_sample_ms"],
                    "ratio": seed["per_sample_ms"] / base["per_sample_ms"],
                }
            )
    return out


def protocols(rows: list[dict], scale: str, data_dir: Path, device: torch.device) -> list[dict]:
    """GPU-hours of each measured preset's paper protocol from its per-sample step at ``scale`` (fp32 and bf16)."""
    from neurodyn.data.assembly import split_sizes
    from neurodyn.experiments import load_experiment

    out, seen = [], set()
    for preset in dict.fromkeys(r["preset"] for r in rows):
        paper = load_experiment(preset, "paper")
        epochs, own_batch = int(paper["train"]["epochs"]), int(paper["train"].get("batch_size", 8))
        windows = split_sizes(paper["data"])[0] * windows_per_sample(preset, scale, data_dir, device)
        steps = math.ceil(windows / own_batch)
        for r in rows:
            if (
                r["preset"] == preset
                and r["model_scale"] == scale
                and r["mode"] in ("fp32", "bf16")
                and "per_sample_ms" in r
                and (preset, r["mode"]) not in seen
            ):  # a baseline of two seeds: once
                seen.add((preset, r["mode"]))
                step_s = r["per_sample_ms"] * own_batch / 1e3
                out.append(
                    {
                        "preset": preset,
                        "mode": r["mode"],
                        "from_scale": scale,
                        "epochs": epochs,
                        "batch": own_batch,
                        "steps_per_epoch": steps,
                        "measured_batch": r["batch"],
                        "step_s": step_s,
                        "gpu_hours": epochs * steps * step_s / 3600,
                    }
                )
    return out


# ------------------------------------------------------------------------------------------------
# report


def markdown(res: dict) -> str:
    bw = res["bandwidth"]
    lines = [
        f"# GPU benchmark ({res['device_name']}, torch {res['torch']}, scale {res['scale']})",
        "",
        f"Command: `{res['command']}`; {res['seconds']:.0f} s. Memory bandwidth from a "
        f"{bw['bytes'] / 2**21:.0f} MiB copy: {bw['bytes_per_s'] / 1e9:.1f} GB/s.",
        "",
        "## Ops against the memory floor",
        "",
        "Floor: the scanned inputs (u, delta, B, C; a, x; x for the NCP backbone) read once and the output "
        "written once (forward); the backward adds them and the output's gradient read again and their "
        "gradients written (MB bwd). z and the parameters are in their own column (MB extra), not in the floor. "
        "fwd ms: the median of single synchronised calls; loop ms: per call of a loop of calls; graph ms: per "
        "replay of a CUDA graph of the forward (the gap to loop ms is the host's launches).",
        "",
        "| op | shape | L | backend | fwd ms | loop ms | graph ms | GB/s | floor ms | x floor | fwd+bwd ms | "
        "loop ms | GB/s | floor ms | x floor | MB fwd | MB bwd | MB extra |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    opt = lambda r, k, f: format(r[k], f) if k in r else ""  # noqa: E731
    for r in res["ops"]:
        if "skipped" in r or "error" in r:
            why = f"skipped: {r['skipped']}" if "skipped" in r else f"error: {r['error']}"
            lines.append(f"| {r['op']} | {r.get('shape', '')} | {r['L']} | {r['backend']} | {why} |" + " |" * 13)
            continue
        lines.append(
            f"| {r['op']} | {r['shape']} | {r['L']} | {r['backend']} | {r['fwd_ms']:.3f} | "
            f"{opt(r, 'fwd_loop_ms', '.3f')} | {opt(r, 'fwd_graph_ms', '.3f')} | "
            f"{r['fwd_gbps']:.1f} | {r['floor_fwd_ms']:.4f} | {r['fwd_x_floor']:.1f} | "
            f"{r['fwdbwd_ms']:.3f} | {opt(r, 'fwdbwd_loop_ms', '.3f')} | {r['fwdbwd_gbps']:.1f} | "
            f"{r['floor_fwdbwd_ms']:.4f} | {r['fwdbwd_x_floor']:.1f} | {r['bytes_fwd'] / 1e6:.1f} | "
            f"{r['bytes_bwd'] / 1e6:.1f} | {r['bytes_extra'] / 1e6:.1f} |"
        )
    lines += [
        "",
        "## Training steps (equal batch: the seed preset's)",
        "",
        "| scale | group | preset | mode | batch | ms/step | ms/sample | peak MB | compile s |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in res["models"]:
        if "skipped" in r:
            lines.append(
                f"| {r['model_scale']} | {r['group']} | {r['preset']} | {r['mode']} | {r['batch']} | "
                f"skipped: {r['skipped']} | | | |"
            )
            continue
        comp = f"{r['compile_s']:.1f}" if "compile_s" in r else ""
        lines.append(
            f"| {r['model_scale']} | {r['group']} | {r['preset']} | {r['mode']} | {r['batch']} | "
            f"{r['step_ms']:.2f} | {r['per_sample_ms']:.3f} | {r['peak_mb']:.0f} | {comp} |"
        )
    lines += [
        "",
        "## Seed model / baseline, per sample",
        "",
        "| scale | mode | seed | baseline | ratio |",
        "|---|---|---|---|---:|",
    ]
    lines += [
        f"| {r['model_scale']} | {r['mode']} | {r['seed']} | {r['baseline']} | {r['ratio']:.2f} |"
        for r in res["ratios"]
    ]
    lines += [
        "",
        f"## Paper protocols (training steps only, from the {res['protocol_scale']}-scale steps)",
        "",
        "| preset | mode | epochs | steps/epoch | batch | s/step | GPU-hours |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['preset']} | {r['mode']} | {r['epochs']} | {r['steps_per_epoch']} | {r['batch']} | "
        f"{r['step_s']:.4f} | {r['gpu_hours']:.2f} |"
        for r in res["protocols"]
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="neurodyn bench gpu", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--ops", nargs="*", default=list(OPS), choices=OPS)
    p.add_argument("--backends", nargs="*", default=list(BACKENDS))
    p.add_argument("--models", nargs="*", default=[g for g, *_ in PAIRS], choices=[g for g, *_ in PAIRS])
    p.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    p.add_argument("--compile-budget", type=float, default=90.0, help="seconds of torch.compile to spend at most")
    p.add_argument(
        "--time-limit",
        type=float,
        default=150.0,
        help="seconds of the models' phase after which no further model is started (the rest are listed "
        "as skipped); the ops have their own budgets",
    )
    p.add_argument(
        "--op-budget",
        type=float,
        default=None,
        help="seconds each backend's op rows may take (a row not started within them is listed as "
        "skipped); default 45 (tiny: no limit)",
    )
    p.add_argument(
        "--loop-calls",
        type=int,
        default=None,
        help="calls of the loop (and CUDA graph) timings of each op (default 20; tiny 3; 0: none)",
    )
    p.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "neurodyn_gpu_bench_data")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if (args.repeats is not None and args.repeats < 1) or (args.warmup is not None and args.warmup < 0):
        p.error("--repeats must be >= 1 and --warmup >= 0")
    return args


def run(scale: str, argv: list[str]) -> int:
    """``neurodyn bench gpu``: ``tiny`` runs small shapes (CPU-capable); ``cpu`` and ``paper`` the full benchmark."""
    args = parse(list(argv))
    s = SETTINGS["tiny" if scale == "tiny" else "full"]
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    repeats = args.repeats or s["repeats"]
    warmup = s["warmup"] if args.warmup is None else args.warmup
    t0 = time.perf_counter()
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU, {args.threads} thread{'s' if args.threads > 1 else ''}"
    )
    res = {
        "scale": scale,
        "device": str(device),
        "device_name": name,
        "torch": torch.__version__,
        "command": " ".join(["neurodyn bench gpu --scale", scale, *argv]),
        "repeats": repeats,
        "warmup": warmup,
        "settings": s,
    }
    res["bandwidth"] = copy_bandwidth(device, s["copy_mib"], repeats)
    print(f"bandwidth {res['bandwidth']['bytes_per_s'] / 1e9:.1f} GB/s", flush=True)
    op_budget = args.op_budget if args.op_budget is not None else s["op_budget"]
    res["ops"] = op_rows(
        args.ops,
        s["lengths"],
        args.backends,
        s,
        device,
        res["bandwidth"]["bytes_per_s"],
        repeats,
        warmup,
        op_budget,
        s["loop_calls"] if args.loop_calls is None else args.loop_calls,
    )
    pairs = [p for p in PAIRS if p[0] in args.models]
    # the models' steps take longer than the ops' calls: fewer repeats by default (their medians are steadier)
    m_repeats = args.repeats or s.get("model_repeats", repeats)
    m_warmup = s.get("model_warmup", warmup) if args.warmup is None else args.warmup
    models_t0 = time.perf_counter()  # (the models' limit counts from here: the ops have their own budgets)
    res["models"] = model_rows(
        pairs,
        s["model_scales"],
        args.modes,
        device,
        m_repeats,
        m_warmup,
        args.data_dir,
        args.compile_budget,
        models_t0 + args.time_limit,
    )
    res["ratios"] = ratios(res["models"])
    res["protocol_scale"] = s["model_scales"][-1]
    res["protocols"] = protocols(res["models"], res["protocol_scale"], args.data_dir, device)
    res["seconds"] = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps(res, indent=1))
    report = markdown(res)
    (args.out / "report.md").write_text(report)
    print("\n" + report)
    return 0


if __name__ == "__main__":
    from neurodyn.bench import script_main

    sys.exit(script_main(run))
