"""Every speed benchmark of the package is reachable through ``neurodyn bench NAME`` (``neurodyn.bench.BENCHMARKS``),
from an installed wheel: a module of ``neurodyn.bench`` with ``run(scale, argv)``, no checkout needed."""

import importlib
import inspect
import pkgutil

import pytest

import neurodyn.bench as bench
from neurodyn.bench import BENCHMARKS
from neurodyn.errors import ConfigError, NeurodynError

HELPERS = {"measure"}  # modules that serve the benchmarks, not benchmarks themselves


def test_every_benchmark_module_is_registered():
    modules = {m.name for m in pkgutil.iter_modules(bench.__path__)} - HELPERS
    assert {b.module for b in BENCHMARKS.values()} == modules


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_entry_runs_from_its_module_without_a_checkout(name, tmp_path, monkeypatch):
    b = BENCHMARKS[name]
    assert b.description and len(b.description) < 200, name
    module = importlib.import_module(f"neurodyn.bench.{b.module}")
    assert list(inspect.signature(module.run).parameters)[:2] == ["scale", "argv"]
    monkeypatch.chdir(tmp_path)  # an empty folder: nothing of a checkout is read
    calls = []
    monkeypatch.setattr(module, "run", lambda scale, argv: calls.append((scale, argv)) or 0)
    assert bench.run(name, "tiny", ["--x"]) == 0 and calls == [("tiny", [*b.args, "--x"])]


def test_an_unknown_name_or_scale_is_one_sentence():
    with pytest.raises(NeurodynError, match="Did you mean 'step-speed'"):
        bench.run("step-sped")
    with pytest.raises(ConfigError, match="unknown scale 'huge'"):
        bench.run("scan", "huge")
