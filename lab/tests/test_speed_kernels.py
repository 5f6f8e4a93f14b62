"""The speed page's static kernel table (`neurodyn bench kernels`, sm_80 and sm_90 without a GPU) is its record:
every row of lab/records/speed/kernels_static/kernels.json appears on lab/pages/speed.md as this file formats it, and
the verdicts the page states against issue 56's static floors are recomputed from the same rows."""

import json
from pathlib import Path

LAB = Path(__file__).resolve().parents[1]
RECORD = LAB / "records" / "speed" / "kernels_static" / "kernels.json"
PAGE = LAB / "pages" / "speed.md"
HEADER = (
    "| kernel | shape | dir | sm_90 programs x warps | sm_90 registers / spill B | sm_90 instr/el | sm_90 x floor "
    "| sm_80 registers / spill B | sm_80 instr/el | sm_80 x floor |"
)
# issue 56's static floors on sm_90 at the benchmark shapes: instructions per element (forward, backward)
FLOORS = {"selective_scan": (14, 40), "knc_scan": (18, 50), "head_scan": (16, 45)}


def rows() -> list[dict]:
    return json.loads(RECORD.read_text())


def table(records: list[dict]) -> list[str]:
    """The page's table: one line per (kernel, shape, direction), sm_90 and sm_80 side by side."""
    by = {(r["kernel"], r["shape"], r["direction"], r["arch"]): r for r in records}
    keys = list(dict.fromkeys((r["kernel"], r["shape"], r["direction"]) for r in records))
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for kernel, shape, direction in keys:
        h, a = by[kernel, shape, direction, "sm_90"], by[kernel, shape, direction, "sm_80"]
        lines.append(
            f"| {kernel} | {shape} | {direction} | {h['programs']} x {h['warps']} | {h['registers']} / "
            f"{h['spill_bytes']} | {h['instr_per_element']} | {h['predicted_floor_ratio']} | {a['registers']} / "
            f"{a['spill_bytes']} | {a['instr_per_element']} | {a['predicted_floor_ratio']} |"
        )
    return lines


def verdicts(records: list[dict]) -> list[str]:
    """The page's verdict lines against the static floors (sm_90, the benchmark shapes)."""
    out = []
    bench = {(r["kernel"], r["direction"]): r for r in records if r["arch"] == "sm_90" and "/" not in r["shape"]}
    for kernel, (fwd, bwd) in FLOORS.items():
        f, b = bench[kernel, "fwd"]["instr_per_element"], bench[kernel, "bwd"]["instr_per_element"]
        met = "met" if f <= fwd and b <= bwd else "not met"
        out.append(f"- {kernel}: {f} forward (<= {fwd}), {b} backward (<= {bwd}): {met}")
    grid = [r for r in records if r["kernel"] == "scan_2d" and r["shape"].endswith("64x64 K4") and r["arch"] == "sm_90"]
    programs = min(r["programs"] for r in grid)
    out.append(
        f"- scan_2d at 64 x 64: {programs} programs in its launch of the four directions (>= 1,024): "
        f"{'met' if programs >= 1024 else 'not met'}"
    )
    clean = all(r["launchable"] and r["spill_bytes"] == 0 and r["stack_bytes"] == 0 for r in records)
    verdict = "met" if clean else "not met"
    out.append(f"- every kernel launchable without spill or stack on sm_80 and sm_90, every shape: {verdict}")
    return out


def test_the_record_has_both_architectures_for_every_row():
    records = rows()
    assert {r["arch"] for r in records} == {"sm_80", "sm_90"}
    assert len(records) == 2 * len({(r["kernel"], r["shape"], r["direction"]) for r in records})


def test_the_page_shows_the_records_table_and_verdicts():
    page = PAGE.read_text().splitlines()
    for line in table(rows()) + verdicts(rows()):
        assert line in page, f"speed.md lacks: {line}"


def test_a_changed_number_would_fail():
    records = rows()
    records[0] = dict(records[0], instr_per_element=records[0]["instr_per_element"] + 1)
    page = PAGE.read_text().splitlines()
    assert any(line not in page for line in table(records))
