"""Every benchmark script is reachable through ``neurodyn bench NAME`` (``neurodyn.bench.BENCHMARKS``)."""
import inspect
from pathlib import Path

import pytest

from neurodyn.bench import BENCHMARKS, load_script

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks"
LIBRARIES: set[str] = set()  # scripts that only serve other scripts (none so far): exempt from the registry


def test_every_benchmark_script_is_registered():
    scripts = {p.name for p in SCRIPTS.glob("*.py")}
    registered = {b.script for b in BENCHMARKS.values()}
    assert not registered - scripts, "registry entries without a script"
    assert scripts - LIBRARIES == registered, f"not in neurodyn.bench.BENCHMARKS: {sorted(scripts - registered)}"


@pytest.mark.parametrize("script", sorted({b.script for b in BENCHMARKS.values()}))
def test_every_registered_script_has_a_run_entry(script):
    """Each script loads as ``neurodyn bench`` loads it and exposes ``run(scale, argv)``."""
    module = load_script(SCRIPTS / script, f"neurodyn_bench_test_{Path(script).stem}")
    params = list(inspect.signature(module.run).parameters)
    assert params[:2] == ["scale", "argv"], params


def test_every_entry_has_a_description():
    for name, bench in BENCHMARKS.items():
        assert bench.description and len(bench.description) < 200, name
