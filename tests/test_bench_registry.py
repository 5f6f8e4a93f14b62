"""Every benchmark script is reachable through ``neurodyn bench NAME`` (``neurodyn.bench.BENCHMARKS``)."""
import inspect
from pathlib import Path

import pytest

from neurodyn.bench import BENCHMARKS, load_script

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks"
LIBRARIES: set[str] = set()  # scripts that only serve other scripts (none so far): exempt from the registry


def test_every_benchmark_script_is_registered():
    scripts = {p.name for p in SCRIPTS.glob("*.py")}
    registered = {b.script for b in BENCHMARKS.values() if not b.module}
    assert not registered - scripts, "registry entries without a script"
    assert scripts - LIBRARIES == registered, f"not in neurodyn.bench.BENCHMARKS: {sorted(scripts - registered)}"


@pytest.mark.parametrize("script", sorted({b.script for b in BENCHMARKS.values() if not b.module}))
def test_every_registered_script_has_a_run_entry(script):
    """Each script loads as ``neurodyn bench`` loads it and exposes ``run(scale, argv)``."""
    module = load_script(SCRIPTS / script, f"neurodyn_bench_test_{Path(script).stem}")
    params = list(inspect.signature(module.run).parameters)
    assert params[:2] == ["scale", "argv"], params


def test_every_entry_has_a_description():
    for name, bench in BENCHMARKS.items():
        assert bench.description and len(bench.description) < 200, name


@pytest.mark.parametrize("name", sorted(n for n, b in BENCHMARKS.items() if b.module))
def test_module_benchmarks_run_without_a_checkout(name, tmp_path, monkeypatch):
    """A module entry (``neurodyn bench kernels``) is a module of the package with ``run(scale, argv)``: it needs no
    benchmarks folder (run from an empty directory, no ``--dir``)."""
    import importlib

    from neurodyn import bench

    b = BENCHMARKS[name]
    assert not b.script
    module = importlib.import_module(b.module)
    assert list(inspect.signature(module.run).parameters)[:2] == ["scale", "argv"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(bench.ENV, raising=False)
    calls = []
    monkeypatch.setattr(module, "run", lambda scale, argv: calls.append((scale, argv)) or 0)
    assert bench.run(name, "cpu", ["--x"]) == 0 and calls == [("cpu", [*b.args, "--x"])]
