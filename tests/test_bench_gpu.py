"""``neurodyn bench gpu --scale tiny`` end to end on the CPU: the JSON's structure, the memory floor of the selective
scan counted by hand, and every ratio and GPU-hour figure recomputed from the measured numbers it reports; and, with
fakes, what a GPU run needs: a failing row (a kernel out of resources, memory) reported without stopping the run,
each backend's rows within their own budget, the loop timings."""

import json
import math

import pytest

from neurodyn.bench import BENCHMARKS
from neurodyn.bench import gpu as GPU


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu")
    gpu = GPU
    argv = [
        "--device",
        "cpu",
        "--models",
        "lamo",
        "nac",
        "--modes",
        "fp32",
        "bf16",
        "--repeats",
        "2",
        "--out",
        str(out),
        "--data-dir",
        str(out / "data"),
    ]
    assert gpu.run("tiny", argv) == 0
    return json.loads((out / "gpu.json").read_text()), (out / "report.md").read_text(), gpu


def test_it_is_registered():
    assert BENCHMARKS["gpu"].module == "gpu"


def test_every_op_length_and_backend_has_a_row(report):
    res, md, gpu = report
    lengths = gpu.SETTINGS["tiny"]["lengths"]
    assert {(r["op"], r["L"], r["backend"]) for r in res["ops"]} == {
        (op, L, be) for op in gpu.OPS for L in lengths for be in gpu.BACKENDS
    }
    for r in res["ops"]:
        if r["backend"] == "torch":
            assert "skipped" not in r and "error" not in r and r["fwd_ms"] > 0 and r["fwdbwd_ms"] > 0
            assert r["fwd_loop_ms"] > 0 and r["fwdbwd_loop_ms"] > 0 and "fwd_graph_ms" not in r  # (no graph on CPU)
        elif "skipped" in r:  # a backend an op refuses (triton without CUDA or the interpreter): its own message
            assert "backend" in r["skipped"] or "triton" in r["skipped"].lower()
    assert "## Ops against the memory floor" in md and "## Paper protocols" in md


def test_floors_and_ratios_come_from_the_measured_numbers(report):
    res, _, gpu = report
    bw = res["bandwidth"]
    assert bw["bytes_per_s"] == pytest.approx(bw["bytes"] / (bw["ms"] / 1e3))
    for r in (r for r in res["ops"] if "skipped" not in r):
        for k in ("fwd", "fwdbwd"):
            assert r[f"{k}_gbps"] == pytest.approx(r[f"bytes_{k}"] / (r[f"{k}_ms"] / 1e3) / 1e9)
            assert r[f"floor_{k}_ms"] == pytest.approx(r[f"bytes_{k}"] / bw["bytes_per_s"] * 1e3)
            assert r[f"{k}_x_floor"] == pytest.approx(r[f"{k}_ms"] / r[f"floor_{k}_ms"])
    # the selective scan's floor by hand, float32: u, delta (B, D, L) and B, C (B, N, L) read, y (B, D, L) written;
    # the backward reads them and dy again and writes du, ddelta, dB, dC; z (B, D, L) and the parameters A (D, N),
    # D, bias (D) in their own column
    s = gpu.SETTINGS["tiny"]
    b, d, n, L = s["batch"], s["width"], s["state"], s["lengths"][0]
    core = 2 * b * d * L + 2 * b * n * L
    row = next(r for r in res["ops"] if (r["op"], r["L"], r["backend"]) == ("selective_scan", L, "torch"))
    assert row["bytes_fwd"] == 4 * (core + b * d * L)
    assert row["bytes_bwd"] == 4 * (2 * core + b * d * L)
    assert row["bytes_fwdbwd"] == row["bytes_fwd"] + row["bytes_bwd"]
    assert row["bytes_extra"] == 4 * (b * d * L + d * n + 2 * d)


def test_model_steps_ratios_and_protocol_hours(report):
    res, _, _ = report
    steps = [r for r in res["models"] if "skipped" not in r]
    assert {(r["group"], r["role"], r["mode"]) for r in steps} == {
        (g, role, m) for g in ("lamo", "nac") for role in ("seed", "baseline") for m in ("fp32", "bf16")
    }
    for r in steps:
        assert r["per_sample_ms"] == pytest.approx(r["step_ms"] / r["batch"]) and r["peak_mb"] >= 0
    pairs = {(r["group"], r["mode"]): r for r in res["ratios"]}
    assert set(pairs) == {(g, m) for g in ("lamo", "nac") for m in ("fp32", "bf16")}
    by = {(r["group"], r["role"], r["mode"]): r for r in steps}
    for (g, m), ratio in pairs.items():
        seed, base = by[(g, "seed", m)], by[(g, "baseline", m)]
        assert seed["batch"] == base["batch"]  # equal batch
        assert ratio["ratio"] == pytest.approx(seed["per_sample_ms"] / base["per_sample_ms"])
    protocols = {(p["preset"], p["mode"]): p for p in res["protocols"]}
    lamo = protocols[("lamo/darcy", "fp32")]
    # LaMO's Darcy protocol: 1000 training samples in batches of 4 for 500 epochs (the paper's)
    assert (lamo["epochs"], lamo["batch"], lamo["steps_per_epoch"]) == (500, 4, 250)
    assert lamo["step_s"] == pytest.approx(by[("lamo", "seed", "fp32")]["per_sample_ms"] * 4 / 1e3)
    for p in res["protocols"]:
        assert p["gpu_hours"] == pytest.approx(p["epochs"] * p["steps_per_epoch"] * p["step_s"] / 3600)


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
def test_every_triton_kernel_is_benchmarked(monkeypatch):
    """The ``triton`` rows of the ops reach every Triton kernel module (run in the interpreter at toy sizes) and report
    fwd and fwd+bwd ms and GB/s."""
    from neurodyn.ops import triton_loader

    if not triton_loader.triton_importable():
        pytest.skip("triton is not installed")
    import torch

    gpu = GPU
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    loaded, load = set(), triton_loader.load
    monkeypatch.setattr(triton_loader, "load", lambda name, device: loaded.add(name) or load(name, device))
    toy = dict(batch=1, width=4, state=2, width_2d=2, width_knc=2, heads=2)
    for op in gpu.OPS:
        row = gpu.measure_op(op, 16, "triton", toy, torch.device("cpu"), 1e9, 1, 0)
        assert "skipped" not in row, row
        assert all(row[k] > 0 for k in ("fwd_ms", "fwdbwd_ms", "fwd_gbps", "fwdbwd_gbps"))
    assert loaded == set(triton_loader.kernel_modules()) == {"selective_scan", "linear_scan", "scan_2d", "ncp_mlp"}


# ---------------------------------------------------------------------------------------------------------------
# a GPU run's robustness, with fakes


@pytest.fixture(scope="module")
def gpu():
    return GPU


class OutOfResources(Exception):
    """Stands for triton's: a kernel that needs more shared memory than the GPU has."""


def test_a_failing_row_is_reported_and_the_run_goes_on(gpu, monkeypatch):
    """Every exception of one row is that row's error (triton's OutOfResources, CUDA out of memory, a compile
    error); a backend the op refuses is skipped with the op's message; the other rows are measured."""
    import torch

    real = gpu.op_case
    failures = {
        "ncp_mlp": OutOfResources("out of resource: shared memory, Required: 248832, Hardware limit: 232448"),
        "scan_2d": torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        "linear_scan": ValueError("linear_scan: backend='triton' needs CUDA tensors"),
    }

    def op_case(op, L, s, device):
        if op in failures:
            raise failures[op]
        return real(op, L, s, device)

    monkeypatch.setattr(gpu, "op_case", op_case)
    toy = dict(batch=1, width=4, state=2, width_2d=2, width_knc=2, heads=2)
    rows = gpu.op_rows(gpu.OPS, (16,), ("torch",), toy, torch.device("cpu"), 1e9, 1, 0, budget=math.inf)
    by = {r["op"]: r for r in rows}
    assert set(by) == set(gpu.OPS)
    assert by["ncp_mlp"]["error"].startswith("OutOfResources: out of resource: shared memory")
    assert by["scan_2d"]["error"].startswith("OutOfMemoryError: CUDA out of memory")
    assert "backend='triton'" in by["linear_scan"]["skipped"]
    assert all(by[op]["fwd_ms"] > 0 for op in gpu.OPS if op not in failures)
    md = gpu.markdown(
        {
            "device_name": "x",
            "torch": "t",
            "scale": "tiny",
            "command": "c",
            "seconds": 1.0,
            "bandwidth": {"bytes": 2**21, "bytes_per_s": 1e9},
            "ops": rows,
            "models": [],
            "ratios": [],
            "protocol_scale": "tiny",
            "protocols": [],
        }
    )
    assert "error: OutOfResources" in md and "skipped: linear_scan" in md


def test_a_failure_while_timing_is_the_rows_error(gpu, monkeypatch):
    """A call that works once and then fails (a backward that does not launch) gives an error row, not a crash."""
    import torch

    real = gpu.op_case

    def op_case(op, L, s, device):
        args, call, label, core = real(op, L, s, device)
        calls = []

        def flaky(be, *a):
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered")
            return call(be, *a)

        return args, flaky, label, core

    monkeypatch.setattr(gpu, "op_case", op_case)
    toy = dict(batch=1, width=4, state=2, width_2d=2, width_knc=2, heads=2)
    row = gpu.measure_op("selective_scan", 16, "torch", toy, torch.device("cpu"), 1e9, 1, 0)
    assert row["error"].startswith("RuntimeError: Triton Error [CUDA]: an illegal memory access")


def test_each_backend_has_its_own_budget(gpu):
    """Rows started after a backend's budget are skipped; the next backend starts with its whole budget."""
    import torch

    now = [0.0]
    measured = []

    def measure(op, L, backend, *args):
        measured.append((op, L, backend))
        now[0] += 10.0  # every row takes 10 s
        return {
            "op": op,
            "L": L,
            "backend": backend,
            "fwd_ms": 1.0,
            "fwd_x_floor": 1.0,
            "fwdbwd_ms": 1.0,
            "fwdbwd_x_floor": 1.0,
        }

    rows = gpu.op_rows(
        ("a", "b"),
        (1, 2, 3),
        ("torch", "triton"),
        {},
        torch.device("cpu"),
        1e9,
        1,
        0,
        budget=25.0,
        clock=lambda: now[0],
        measure=measure,
    )
    assert len(rows) == 12
    for backend in ("torch", "triton"):  # rows started at 0, 10 and 20 s of the backend's budget; 30 s is past it
        assert [(r["op"], r["L"]) for r in rows if r["backend"] == backend and "skipped" not in r] == [
            ("a", 1),
            ("a", 2),
            ("a", 3),
        ]
        assert all("op budget (25 s) spent" in r["skipped"] for r in rows if r["backend"] == backend and r["op"] == "b")


def test_loop_timing_calls_back_to_back(gpu):
    import torch

    calls = []
    ms = gpu.time_loop_ms(lambda: calls.append(1), torch.device("cpu"), 7)
    assert len(calls) == 8 and ms >= 0  # one warm-up call, then the timed loop
    assert gpu.graph_ms(lambda: None, torch.device("cpu"), 3) is None  # no CUDA graph on the CPU


def test_floor_bytes_by_hand(gpu):
    import torch

    u, delta, A, B = torch.zeros(2, 3, 5), torch.zeros(2, 3, 5), torch.zeros(3, 4), torch.zeros(2, 4, 5)
    y = torch.zeros(2, 3, 5, dtype=torch.bfloat16)
    floor = gpu.floor_bytes((u, delta, A, B), (0, 1, 3), y)
    assert floor == {"fwd": 4 * (30 + 30 + 40) + 2 * 30, "bwd": 2 * 4 * (30 + 30 + 40) + 2 * 30, "extra": 4 * 12}
