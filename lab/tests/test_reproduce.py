"""``python -m neurodyn_lab reproduce``: every paper's dry run prints its table's plan (a row per model, the paper's
number beside it) and a cost above zero from the records' measured step times, and writes nothing; one small table
runs end to end at tiny scale into a temporary records folder, resumes without training again, and writes the page
section with our numbers beside the paper's."""

import json
import re

import pytest

from neurodyn_lab.paths import RECORDS
from neurodyn_lab.reproduce import command
from neurodyn_lab.reproduce.tables import PAPERS, all_tables

COST = re.compile(r"Estimated cost of the runs to go: ([0-9.e-]+) (CPU|GPU)-hours")


@pytest.mark.parametrize("paper", PAPERS)
def test_every_papers_dry_run_prints_its_plan_and_a_cost(paper, capsys):
    before = sorted(RECORDS.glob(f"{paper}/reproduce_*"))
    assert command.main([paper, "--dry-run"]) == 0
    out = capsys.readouterr().out
    table = next(iter(all_tables()[paper].values()))
    assert table.title in out
    for row in table.rows:
        line = next(ln for ln in out.splitlines() if ln.startswith(f"| {row.label} | {row.preset}"))
        assert f"| {row.paper} |" in line, line  # the paper's number beside the row
        assert "measured" in line or "scaled" in line, line  # and what its estimate rests on
    cost = COST.search(out)
    assert cost and float(cost.group(1)) > 0 and cost.group(2) == "CPU"
    assert sorted(RECORDS.glob(f"{paper}/reproduce_*")) == before  # a dry run writes nothing


def test_a_gpu_dry_run_says_its_hours_are_the_cpu_estimate(capsys):
    assert command.main(["chonn", "--scale", "paper", "--device", "cuda", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert COST.search(out).group(2) == "GPU" and "No record holds a GPU timing yet" in out
    assert "paper-scale run(s) in chonn/order_protocol" in out  # the paper protocol's own runs measured it


def test_an_unknown_table_lists_the_papers_tables(capsys):
    assert command.main(["stssm", "--table", "table9", "--dry-run"]) == 2
    assert "table1, table5" in capsys.readouterr().err


@pytest.mark.slow
def test_a_small_table_end_to_end_at_tiny_scale(tmp_path, data_dir, capsys):
    out = tmp_path / "bearing"
    argv = ["nac", "--table", "bearing", "--scale", "tiny", "--seeds", "0", "--records", str(out)]
    assert command.main(argv) == 0
    printed = capsys.readouterr().out
    section = (out / "table.md").read_text()
    for label, paper in (("nac", "37.75 (PRONOSTIA)"), ("gru", "44.22"), ("mha", "45.36")):
        record = json.loads((out / "runs" / f"{label}-s0" / "result.json").read_text())
        ours = f"{record['final_score']:.4g} (1 seed)"
        assert f"| {label} | {label}/bearing | {ours} | {paper} |" in section
    assert section in printed and not list(out.rglob("*.pt"))
    # resumed: every run recorded, nothing left to train, the cost to go is zero
    assert command.main([*argv, "--dry-run"]) == 0
    again = capsys.readouterr().out
    assert "(3 runs recorded)" in again and float(COST.search(again).group(1)) == 0
