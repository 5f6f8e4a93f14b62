"""``neurodyn bench kernels`` (:mod:`neurodyn.bench.kernel_report`): the SASS reading, occupancy and issue-rate
arithmetic on hand-made inputs, the JSON rows' keys, and one real compilation through a launcher (with triton)."""

import json
import math
from collections import Counter
from types import SimpleNamespace

import pytest

from neurodyn.bench import kernel_report as kr

SASS = [  # (address, instruction): a prologue, an outer loop holding an inner one, an epilogue and the exit trap
    (0x00, "MOV R1, c[0x0][0x28]"),
    (0x10, "S2R R0, SR_CTAID.X"),
    (0x20, "LDG.E R2, desc[UR4][R4.64]"),  # outer loop starts
    (0x30, "FFMA R3, R2, R2, R3"),  # inner loop starts
    (0x40, "MUFU.EX2 R3, R3"),
    (0x50, "@P0 BRA 0x30"),  # inner loop ends
    (0x60, "SHFL.BFLY PT, R5, R3, 0x1, 0x1f"),
    (0x70, "STG.E desc[UR4][R6.64], R3"),
    (0x80, "@!P1 BRA 0x20"),  # outer loop ends
    (0x90, "EXIT"),
    (0xA0, "BRA 0xa0"),
]


def test_opcode_and_outermost_loops():
    assert kr.opcode("@!P0 LDG.E.128 R4, desc[UR4][R2.64]") == "LDG"
    assert kr.opcode("MUFU.EX2 R3, R3") == "MUFU"
    assert kr.loops(SASS) == [(2, 8)]  # the inner loop lies inside the outer one; the self-branch is no loop


def test_ptxas_log():
    log = (
        "ptxas info    : Function properties for k\n    1464 bytes stack frame, 1936 bytes spill stores, 1980 bytes "
        "spill loads\nptxas info    : Used 255 registers, used 1 barriers, 1464 bytes cumulative stack size\n"
    )
    assert kr._ptxas(log) == (255, 1464, 1936)
    assert kr._ptxas("") == (0, 0, 0)


def _kernel(body, rest=(), programs=1000, warps=4, registers=64, shared=0, trips=10):
    return kr.Kernel("k", programs, warps, registers, 0, 0, shared, Counter(body), Counter(rest), trips, 0.0)


def test_blocks_per_sm():
    h100 = kr.ARCHS["sm_90"]
    # registers: 255 -> 256 per thread, 8 warps = 65,536 registers: one block
    assert kr.blocks_per_sm(_kernel({}, warps=8, registers=255), h100) == 1
    # threads: 4 warps of 32 registers -> 16 blocks by threads (2048 / 128), 16 by registers
    assert kr.blocks_per_sm(_kernel({}, warps=4, registers=32), h100) == 16
    # shared memory: 100 KB + 1 KB reserved per block in 228 KB
    assert kr.blocks_per_sm(_kernel({}, warps=1, registers=16, shared=100_000), h100) == 2
    # over the per-block limit (248,832 B: the NCP backward of the last round): cannot launch
    assert kr.blocks_per_sm(_kernel({}, shared=248_832), h100) == 0
    assert kr.blocks_per_sm(_kernel({}, shared=200_000), kr.ARCHS["sm_80"]) == 0


def test_issue_rate_model_by_hand():
    h100 = kr.ARCHS["sm_90"]
    # 132 programs of 4 warps, 100 FFMA per iteration, 10 iterations: 4,000 warp instructions per SM on one SM each
    k = _kernel({"FFMA": 100}, programs=132, warps=4, trips=10)
    clocks = 4 * 100 * 10 / 4.0  # FP32 pipe: 4 warp instructions per clock; the issue limit is the same 4
    assert kr.predicted_seconds(k, h100) == pytest.approx(clocks / h100.clock_hz / kr.EFFICIENCY + kr.LAUNCH_S)
    # the same count of MUFU: the special-function unit takes 0.5 per clock, 8 times slower
    m = _kernel({"MUFU": 100}, programs=132, warps=4, trips=10)
    assert kr.predicted_seconds(m, h100) - kr.LAUNCH_S == pytest.approx(
        8 * (kr.predicted_seconds(k, h100) - kr.LAUNCH_S)
    )
    # sm_80's FP32 pipe is half as wide
    a100 = kr.ARCHS["sm_80"]
    k80 = _kernel({"FFMA": 100}, programs=108, warps=4, trips=10)
    assert kr.predicted_seconds(k80, a100) == pytest.approx(
        4 * 100 * 10 / 2.0 / a100.clock_hz / kr.EFFICIENCY + kr.LAUNCH_S
    )


def test_instructions_per_element():
    """Body x trips x warps x 32 lanes over the elements: a 64-instruction body, 4 warps, 8 iterations, 10 programs
    and 20,480 elements (each warp handling 64 per iteration) is 64 x 32 / 64 = 32 per element."""
    k = _kernel({"FFMA": 40, "LDG": 20, "STG": 4}, programs=10, warps=4, trips=8)
    elements = 10 * 4 * 8 * 64
    assert kr.per_element([k], None, elements) == pytest.approx(64 * 32 / 64)
    assert kr.per_element([k], kr._LOADS, elements) == pytest.approx(20 * 32 / 64)
    assert kr.per_element([k, k], None, 2 * elements) == pytest.approx(32)


def test_fixed_loops_of_one_pass_count_as_often_as_they_run(monkeypatch):
    """A kernel of :data:`PASS_LOOP_TRIPS` (the NCP backward's loops over the first layer's 16-neuron chunks) has no
    main loop: its one iteration is the whole kernel, each outermost loop counted as many times as it runs."""
    monkeypatch.setattr(kr, "sass", lambda cubin: SASS)
    kernel = SimpleNamespace(asm={"cubin": b""}, metadata=SimpleNamespace(shared=0))
    args = {"WIDTHS": (160, 80, 16), "CH": 16, "UNROLL": 1, "num_warps": 4}  # 10 chunks of the first layer
    log = "ptxas info    : Used 64 registers"
    k = kr.analyse(kr.Launch("_ncp_bwd_kernel", (8, 100), args, kernel, log, 0.0, "bwd"))
    # 11 instructions, of which the outer loop's 7 (indices 2-8) run 10 times
    assert k.sass_per_iteration == 11 + 9 * 7
    # two chunks per trip: the loop runs 5 times
    two = kr.analyse(kr.Launch("_ncp_bwd_kernel", (8, 100), dict(args, UNROLL=2), kernel, log, 0.0, "bwd"))
    assert two.sass_per_iteration == 11 + 4 * 7
    assert k.body["MUFU"] == 10 and k.body["EXIT"] == 1 and not k.rest
    assert k.trips == 1 and not k.nested and k.registers == 64
    # another kernel with the same SASS: the outer loop is its main loop, once per iteration
    main = kr.analyse(kr.Launch("_other_kernel", (8, 100), args, kernel, log, 0.0, "bwd"))
    assert main.sass_per_iteration == 7 and sum(main.rest.values()) == 4


def test_json_rows_have_exactly_the_keys(tmp_path, monkeypatch, capsys):
    row = {k: 1 for k in kr.JSON_KEYS} | {
        "kernel": "scan_2d",
        "direction": "fwd",
        "arch": "sm_90",
        "shape": "s",
        "launchable": True,
        "_table": dict(
            blocks_per_sm=2,
            loads_per_element=1.0,
            stores_per_element=0.5,
            predicted_us=3.0,
            floor_us=1.0,
            compile_s=0.1,
            launches=1,
            nested=False,
            scale="bench",
        ),
    }
    bad = {"kernel": "ncp_mlp", "direction": "bwd", "arch": "sm_80", "shape": "s", "error": "CompilationError: x"}
    monkeypatch.setattr(
        kr, "report", lambda *a, progress=None, **k: (progress([row, bad]) if progress else None) or [row, bad]
    )
    out = tmp_path / "k.json"
    assert kr.run("cpu", ["--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [set(r) for r in rows] == [set(kr.JSON_KEYS)] * 2
    assert rows[1]["launchable"] is False and rows[1]["registers"] is None
    printed = capsys.readouterr().out
    assert "scan_2d" in printed and "error: CompilationError" in printed


def test_every_kernel_has_cases():
    assert {c.kernel for c in kr.CASES} == set(kr.KERNELS)
    assert {c.kernel for c in kr.CASES if c.scale == "bench"} == set(kr.KERNELS)
    for c in kr.CASES:
        assert c.elements > 0 and c.floor["fwd"] > 0 and c.floor["bwd"] > c.floor["fwd"] / 2


@pytest.fixture
def compiled():
    from neurodyn.ops import triton_loader

    if not triton_loader.triton_importable():
        pytest.skip("triton is not installed")
    try:
        kr._check_compiled_build()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def test_one_kernel_compiled_through_its_launcher(compiled, tmp_path):
    """The linear scan at a small shape, for sm_90 and sm_80: two rows with real figures (the stand-in driver put
    back afterwards)."""
    from triton.runtime import driver

    before = driver._active
    case = kr._linear(64, 256, 8, "small", "bench")
    for arch in ("sm_90", "sm_80"):
        rows = kr.rows_of(case, kr.ARCHS[arch], str(tmp_path))
        assert [r["direction"] for r in rows] == ["fwd", "bwd"]
        for r in rows:
            assert r["arch"] == arch and r["registers"] > 0 and r["launchable"]
            assert r["programs"] == 64 and r["sass_per_iteration"] > 10
            assert math.isfinite(r["instr_per_element"]) and r["predicted_floor_ratio"] > 0
    assert driver._active is before
