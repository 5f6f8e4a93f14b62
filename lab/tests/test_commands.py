"""The lab's command line: every command of ``python -m neurodyn_lab run NAME`` loads its module and finds
``run(scale, argv)``; every module with such an entry point is reachable as a command; the lab imports no private
name of the library (nor of another lab file) and no compatibility function of the library (only the one-time
rewrite of the records did)."""

import ast
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neurodyn_lab.registry import COMMANDS

LAB = Path(__file__).resolve().parents[1]
PACKAGE = LAB / "neurodyn_lab"
SHIMS = {"upgrade_config", "move_fields", "FIELD_MOVES", "LEGACY_COMPAT", "LEGACY_DEFAULTS", "old_generate_from"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_run_entry(name):
    module = importlib.import_module(COMMANDS[name].module)
    assert list(inspect.signature(module.run).parameters)[:2] == ["scale", "argv"], name
    assert COMMANDS[name].description and len(COMMANDS[name].description) < 200


def test_every_entry_point_is_a_command():
    modules = {
        ".".join(p.relative_to(LAB).with_suffix("").parts)
        for p in PACKAGE.rglob("*.py")
        if "\ndef run(scale" in p.read_text()
    }
    assert modules and modules == {c.module for c in COMMANDS.values()}


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or "", [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield node.lineno, "", [a.name for a in node.names]


def private_or_shim_imports(root: Path) -> list[str]:
    """``from neurodyn... import _name`` or a compatibility function, and ``_name`` of another lab file."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        for line, module, names in _imports(path):
            ours = module.split(".")[0] in ("neurodyn", "neurodyn_lab") or not module
            for name in names:
                parts = name.split(".")
                if ours and (any(p.startswith("_") and not p.startswith("__") for p in parts) or name in SHIMS):
                    bad.append(f"{path.name}:{line} {name}")
    return bad


def test_no_private_name_nor_compatibility_function_is_imported():
    assert private_or_shim_imports(PACKAGE) == []
    assert private_or_shim_imports(LAB / "tests") == []


def test_the_import_check_finds_one(tmp_path):
    (tmp_path / "probe.py").write_text(
        "from neurodyn.models.registry import upgrade_config, build\n"
        "from neurodyn_lab.chonn.common import _hidden\nfrom os import _exit\n"
    )
    assert private_or_shim_imports(tmp_path) == ["probe.py:1 upgrade_config", "probe.py:2 _hidden"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(LAB), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "neurodyn_lab", *args], capture_output=True, text=True, env=env)


def test_the_command_line_lists_and_refuses_an_unknown_command():
    listed = _cli("list")
    assert listed.returncode == 0 and all(name in listed.stdout for name in COMMANDS)
    unknown = _cli("run", "lamo/nothing")
    assert unknown.returncode != 0 and "unknown lab command 'lamo/nothing'" in unknown.stderr
