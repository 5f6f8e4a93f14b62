"""``neurodyn bench gpu --scale tiny`` end to end on the CPU: the JSON's structure, the memory floor of the selective
scan counted by hand, and every ratio and GPU-hour figure recomputed from the measured numbers it reports."""
import json
from pathlib import Path

import pytest

from neurodyn.bench import BENCHMARKS, load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu")
    gpu = load_script(SCRIPT, "neurodyn_bench_test_gpu")
    argv = ["--device", "cpu", "--models", "lamo", "nac", "--modes", "fp32", "bf16", "--repeats", "2", "--out",
            str(out), "--data-dir", str(out / "data")]
    assert gpu.run("tiny", argv) == 0
    return json.loads((out / "gpu.json").read_text()), (out / "report.md").read_text(), gpu


def test_it_is_registered():
    assert BENCHMARKS["gpu"].script == "gpu.py"


def test_every_op_length_and_backend_has_a_row(report):
    res, md, gpu = report
    lengths = gpu.SETTINGS["tiny"]["lengths"]
    assert {(r["op"], r["L"], r["backend"]) for r in res["ops"]} == {
        (op, L, be) for op in gpu.OPS for L in lengths for be in gpu.BACKENDS}
    for r in res["ops"]:
        if r["backend"] == "torch":
            assert "skipped" not in r and r["fwd_ms"] > 0 and r["fwdbwd_ms"] > 0
        elif "skipped" in r:  # a backend an op refuses (triton before its kernels): the op's own message
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
    # the selective scan's floor by hand, float32: u, delta, z (B, D, L); B, C (B, N, L); A (D, N); D, bias (D);
    # y (B, D, L) written; the backward reads the inputs and dy again and writes one gradient per input
    s = gpu.SETTINGS["tiny"]
    b, d, n, L = s["batch"], s["width"], s["state"], s["lengths"][0]
    inputs = 3 * b * d * L + 2 * b * n * L + d * n + 2 * d
    row = next(r for r in res["ops"] if (r["op"], r["L"], r["backend"]) == ("selective_scan", L, "torch"))
    assert row["bytes_fwd"] == 4 * (inputs + b * d * L)
    assert row["bytes_fwdbwd"] == 4 * (inputs + b * d * L) + 4 * (2 * inputs + b * d * L)


def test_model_steps_ratios_and_protocol_hours(report):
    res, _, _ = report
    steps = [r for r in res["models"] if "skipped" not in r]
    assert {(r["group"], r["role"], r["mode"]) for r in steps} == {
        (g, role, m) for g in ("lamo", "nac") for role in ("seed", "baseline") for m in ("fp32", "bf16")}
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


def test_every_triton_kernel_is_benchmarked(monkeypatch):
    """The ``triton`` rows of the ops reach every Triton kernel module (run in the interpreter at toy sizes) and report
    fwd and fwd+bwd ms and GB/s."""
    from neurodyn.ops import triton_kernels

    if not triton_kernels.triton_importable():
        pytest.skip("triton is not installed")
    import torch

    gpu = load_script(SCRIPT, "neurodyn_bench_test_gpu_triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    loaded, load = set(), triton_kernels.load
    monkeypatch.setattr(triton_kernels, "load", lambda name, device: loaded.add(name) or load(name, device))
    toy = dict(batch=1, width=4, state=2, width_2d=2, width_knc=2, heads=2)
    for op in gpu.OPS:
        row = gpu.measure_op(op, 16, "triton", toy, torch.device("cpu"), 1e9, 1, 0)
        assert "skipped" not in row, row
        assert all(row[k] > 0 for k in ("fwd_ms", "fwdbwd_ms", "fwd_gbps", "fwdbwd_gbps"))
    kernels = {f.stem for f in Path(triton_kernels.__file__).parent.glob("*.py")} - {"__init__", "common"}
    assert loaded == kernels
