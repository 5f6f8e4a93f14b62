"""GeoMaNO's Table 3 driver (neurodyn_lab.geomano.table3): every row of the paper's table has a variant that builds,
and the table of recorded runs reads one-file records as the older runs wrote them."""

import json

import pytest

import neurodyn.models as ndm
from neurodyn.experiments import load_experiment
from neurodyn_lab.geomano.table3 import PAPER, VARIANTS, ablation_table
from neurodyn_lab.registry import COMMANDS


@pytest.mark.slow
def test_ablation_driver_covers_table_3_and_is_registered(tmp_path):
    assert COMMANDS["geomano/table3"].module == "neurodyn_lab.geomano.table3"
    rows = {(b,) + tuple(row) for b in VARIANTS for _, row in VARIANTS[b].values() if row}
    assert rows == set(PAPER)  # every row of Table 3 has a variant, and no more
    for b in VARIANTS:
        for ov, _ in VARIANTS[b].values():  # every variant builds
            cfg = load_experiment({"darcy": "geomano/darcy", "ns": "geomano/navier_stokes"}[b], "tiny", ov)
            m = dict(cfg["model"])
            m.pop("name")
            ndm.build("geomano", **m)
    for seed, val in ((0, 0.02), (1, 0.03)):
        rec = {
            "label": "2d-0011",
            "bench": "darcy",
            "seed": seed,
            "scale": "cpu",
            "params": 10,
            "epochs": 3,
            "final_rel_l2": val,
            "train_seconds": 30.0,
            "paper_row": ["2d", False, "0011"],
            "overrides": VARIANTS["darcy"]["2d-0011"][0],
        }
        (tmp_path / f"darcy-2d-0011-s{seed}.json").write_text(json.dumps(rec))
    table = ablation_table(tmp_path)
    assert "| darcy | 2D | – | 0011 | 2d-0011 | 10 | 0,1 | 3 | 0.0250 +- 0.0071 | 0.00362 |" in table


def test_the_recorded_ablation_reads_its_kernel_options_from_todays_override_keys():
    """The records of Table 3 spell their overrides as today's config does (``model.ssm.kind``), so the table names
    every variant's SSM and coefficient from them."""
    table = ablation_table("geomano/table3")
    assert "| darcy | 2D | – | 0011 | 2d-0011 |" in table and "| darcy | Vanilla | – | None | 1d-none |" in table
