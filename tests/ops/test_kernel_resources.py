"""Every Triton kernel at its production tiles, compiled for sm_80 and sm_90 through its own launcher (the static
report's cases, :data:`neurodyn.bench.kernel_report.CASES`: the GPU benchmark's shapes and each seed model's paper
shapes, NAC's backbone at its cpu preset's 73 / 33 / 2 neurons and its paper presets' 146 / 67 / 2 and 33 / 16 / 2):
its shared memory within the target's per-block limit (at least one block per SM), no register spill, no stack; on
sm_90 the time scans' backwards (selective, multi-head, Kirchhoff) hold at most 168 registers per thread, so that three
blocks of 4 warps share an SM (sm_80 stages their gradient atomics through shared memory: uncapped there).

No GPU needed (a stand-in driver; ptxas ships in the triton wheel); skipped without triton. Compiling everything takes
minutes on one core (the NCP backward is the longest: one to six minutes), hence ``slow``; each row's compile seconds
are printed (``pytest -s``) and recorded as a property. A row that spills today is an expected failure (strict: it
flips when fixed), with the figures measured when it was marked.
"""

import time

import pytest

from neurodyn.bench import kernel_report as kr
from neurodyn.ops import triton_loader

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed"),
]

SCANS = ("selective_scan", "head_scan", "knc_scan")
MAX_SCAN_BWD_REGISTERS = 168  # 65,536 registers per SM / (3 blocks x 128 threads)

# (kernel, shape, arch) -> the spill measured (ptxas of triton 3.9) when the row was marked; none today
SPILLS: dict[tuple[str, str, str], str] = {}


def _params():
    out = []
    for case in kr.CASES:
        for arch in kr.ARCHS:
            why = SPILLS.get((case.kernel, case.shape, arch))
            marks = [pytest.mark.xfail(strict=True, reason=f"spills today: {why}")] if why else []
            out.append(pytest.param(case, arch, marks=marks, id=f"{case.kernel}-{case.shape}-{arch}"))
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    try:
        kr._check_compiled_build()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    from pathlib import Path

    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump").exists():
        pytest.skip("the triton wheel has no CUDA tools (ptxas, cuobjdump)")
    return str(tmp_path_factory.mktemp("triton-cache"))


@pytest.mark.parametrize("case,arch", _params())
def test_launchable_without_spills(case, arch, cache, record_property):
    t0 = time.perf_counter()
    rows = kr.rows_of(case, kr.ARCHS[arch], cache)
    record_property("compile_s", round(time.perf_counter() - t0, 1))
    assert [r["direction"] for r in rows] == ["fwd", "bwd"]
    limit = kr.ARCHS[arch].shared_per_block
    for r in rows:
        print(
            f"{r['kernel']} {r['direction']} {arch} {r['shape']}: {r['registers']} registers, {r['spill_bytes']} B "
            f"spill, {r['stack_bytes']} B stack, {r['shared_bytes']} B shared, compile {r['_table']['compile_s']} s"
        )
        assert r["shared_bytes"] <= limit and r["launchable"], r
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, r
        if r["kernel"] in SCANS and r["direction"] == "bwd" and arch == "sm_90":
            assert r["registers"] <= MAX_SCAN_BWD_REGISTERS, r
