"""CHONN experiment drivers (neurodyn_lab.chonn): relative gains, plots, the order grid and the commands that run it,
and one tiny end-to-end run of the order benchmark (train, evaluate, report, reuse) into a records folder."""

import json
import math
import shutil

import pytest

from neurodyn_lab.chonn import common, order
from neurodyn_lab.paths import runs_for
from neurodyn_lab.records import load_results
from neurodyn_lab.registry import COMMANDS


def test_relative_gains_pick_the_stronger_baseline_per_metric(tmp_path):
    gains = common.relative_gains(
        {"a": 1.0, "b": 4.0}, {"u": {"a": 2.0, "b": 3.0}, "f": {"a": 4.0, "b": 2.0}}, ["a", "b"]
    )
    assert gains["a"] == (pytest.approx(0.5), "u")
    assert gains["b"] == (pytest.approx(-1.0), "f")
    common.plot_relative_gain(gains, tmp_path / "g.png", "t")
    common.plot_rollout_curves({"chonn_fno": [0.1, 0.2], "fno": [0.1, 0.3]}, tmp_path / "c.png", "t")
    assert (tmp_path / "g.png").stat().st_size > 0 and (tmp_path / "c.png").stat().st_size > 0


def test_default_order_grid_and_registration():
    grid = order.default_order_grid((1, 2, 3, 4))
    assert (1, "o1") in grid and (1, "d1") not in grid  # order 1 and depth 1 are the same model
    assert {(3, "o3"), (3, "d3"), (3, "2x2"), (4, "o4"), (4, "d4")} <= set(grid)
    assert len(grid) == len(set(grid)) == 8
    assert {(4, "2x2"), (4, "d3")} <= set(order.default_order_grid((4,), composite_targets=(4,)))
    for name in ("order", "poisson", "darcy", "rollout"):
        assert COMMANDS[f"chonn/{name}"] == (
            COMMANDS[f"chonn/{name}"].module,
            COMMANDS[f"chonn/{name}"].description,
            (name,),
        )
        assert COMMANDS[f"chonn/{name}"].module == "neurodyn_lab.chonn.experiments"


@pytest.mark.slow
def test_order_benchmark_end_to_end_tiny(tmp_path, data_dir):
    out = tmp_path / "order"
    res = order.run_order_benchmark("tiny", seeds=[0], out_dir=out, grid=[(2, "o2")])
    assert len(res) == 1 and res[0]["target"] == 2 and res[0]["model"] == "o2"
    for k in ("rel_l2_point", "rel_l2_spec", "rel_l2_der", "params", "seconds_per_epoch"):
        assert math.isfinite(res[0][k])
    # a finished run is reused, not trained again
    again = order.run_order_benchmark("tiny", seeds=[0], out_dir=out, grid=[(2, "o2")], train=False)
    assert again == res
    text = order.report_order(res, out, "tiny", [0])
    assert "| T2 | o2 |" in text and (out / "tables.md").exists()
    record = out / "runs" / "T2-o2-s0"
    assert json.loads((record / "result.json").read_text())["model"] == "o2"
    assert (record / "config.yaml").exists() and not list(out.rglob("*.pt"))  # no checkpoint among the records
    # the record is the run's: with the run folders gone (another machine), nothing is trained again
    shutil.rmtree(runs_for(out))
    assert order.run_order_benchmark("tiny", seeds=[0], out_dir=out, grid=[(2, "o2")], train=False) == res
    order.run_order_benchmark("tiny", seeds=[1], out_dir=out, grid=[(2, "o2")])
    records = load_results(out)
    assert [(r["run"], r["seed"]) for r in records] == [("T2-o2-s0", 0), ("T2-o2-s1", 1)]
    assert records[0] == res[0]


def test_corrupt_results_file_is_named(tmp_path):
    (tmp_path / "results.json").write_text("[{")
    with pytest.raises(ValueError, match="results.json is not valid JSON"):
        load_results(tmp_path)
