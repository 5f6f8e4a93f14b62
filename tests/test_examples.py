"""Every script in examples/ runs at tiny scale, from a fresh folder, and prints what its docstring promises."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PROMISES = {  # script: words its output must hold
    "train_seed_model.py": "validation rel. L2 after 1 epochs",
    "predict_physical_units.py": "rel. L2 per sample",
    "time_series_classifier.py": "1-NN accuracy",
    "selective_scan_backends.py": "torch: max |out - ref|",
    "point_cloud_from_file.py": "test metrics (lamo/elasticity_geofno, scale tiny;",
}


def test_every_example_is_listed():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(PROMISES)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(PROMISES))
def test_example_runs_at_tiny_scale(script, tmp_path):
    env = {**os.environ, "NEURODYN_DATA": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--tiny"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert PROMISES[script] in done.stdout, done.stdout[-2000:]
    if script == "selective_scan_backends.py":  # every backend that ran agrees with the sequential reference
        errors = [float(line.split("=")[1].split()[0]) for line in done.stdout.splitlines() if "max |out" in line]
        assert errors and max(errors) < 1e-4, done.stdout
