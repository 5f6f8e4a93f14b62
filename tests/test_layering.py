"""The layering of ARCHITECTURE.md, checked on the source: each package imports only the packages below it, and
the layers under ``train/`` never read a config's ``train`` section (``TrainConfig`` is its one reader)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "neurodyn"
# layer 0: anyone may import these
BASE = {"errors", "config_types", "checkpoint_io", "locks", "files", "progress", "_version"}
# package -> the packages it may import besides BASE (ARCHITECTURE.md's table)
ALLOWED = {"ops": set(), "nn": {"ops"}, "models": {"nn", "ops"}, "data": {"ops"}, "baselines": {"models", "ops"}}
BELOW_TRAIN = tuple(ALLOWED)


def _modules(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


def _imported_packages(path: Path) -> set[str]:
    """The top-level ``neurodyn`` packages (or modules) that ``path`` imports, relative imports resolved."""
    rel = path.relative_to(SRC).with_suffix("").parts
    here = list(rel[:-1]) if rel[-1] != "__init__" else list(rel[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = here[: len(here) - node.level + 1] + (node.module.split(".") if node.module else [])
                names = target[:1] or [a.name for a in node.names]
            elif (node.module or "").split(".")[0] == "neurodyn":
                parts = node.module.split(".")
                names = parts[1:2] or [a.name for a in node.names]
            else:
                continue
            out.update(names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("neurodyn."))
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_the_layers_below(package):
    bad = {}
    for path in _modules(package):
        extra = _imported_packages(path) - BASE - ALLOWED[package] - {package}
        if extra:
            bad[str(path.relative_to(SRC))] = sorted(extra)
    assert not bad, f"{package}/ imports above its layer (ARCHITECTURE.md): {bad}"


def test_train_imports_neither_plots_nor_the_cli():
    bad = {
        str(p.relative_to(SRC)): sorted(_imported_packages(p) & {"plots", "cli", "compare", "bench"})
        for p in _modules("train")
    }
    assert not {k: v for k, v in bad.items() if v}


def test_nn_holds_no_kernel():
    """A reference implementation (``def *_ref``) or an autograd Function belongs to ops/, beside its kernel."""
    bad = []
    for path in _modules("nn"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_ref"):
                bad.append(f"{path.name}: def {node.name}")
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Function") for b in node.bases):
                bad.append(f"{path.name}: class {node.name}")
    assert not bad


def _train_section_reads(path: Path, root: Path = SRC) -> list[str]:
    """Places in ``path`` that read a config's train section: ``X["train"]`` or ``X.get("train", ...)`` where ``X``
    is a config (a name or attribute containing ``cfg``, ``config`` or ``experiment``). ``sets["train"]`` (the
    training split) is not a config."""

    def is_config(node: ast.AST) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return any(word in name.lower() for word in ("cfg", "config", "experiment"))

    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        key = base = None
        if isinstance(node, ast.Subscript):
            key, base = node.slice, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            key, base = node.args[0], node.func.value
        if isinstance(key, ast.Constant) and key.value == "train" and is_config(base):
            hits.append(f"{path.relative_to(root)}:{node.lineno}")
    return hits


def test_layers_below_train_never_read_the_train_section():
    """Training settings reach data/, models/, nn/ and ops/ as arguments (e.g. ``build_data(...,
    train_window_steps=TrainConfig.window_steps)``), parsed once by ``TrainConfig.from_options``."""
    hits = [hit for package in BELOW_TRAIN for path in _modules(package) for hit in _train_section_reads(path)]
    assert not hits, f"read the train section below train/: {hits}"


def test_the_train_section_check_finds_a_read(tmp_path):
    """The check above sees the reads it is meant to refuse, and not the training split."""
    probe = tmp_path / "probe.py"
    probe.write_text('t = cfg["train"]\nu = self.config.get("train", {})\nv = sets["train"]\n')
    assert _train_section_reads(probe, tmp_path) == ["probe.py:1", "probe.py:2"]


def test_data_and_task_take_the_training_settings_as_arguments(tmp_path, monkeypatch):
    """An autoregressive config with no train section at all builds its data and task: the length of the training
    windows and the task's modes come from the parsed ``TrainConfig`` (here a pushforward of up to 2 steps)."""
    from neurodyn.data.assembly import build_data
    from neurodyn.experiments import load_experiment
    from neurodyn.train.experiment import build_task, train_config

    monkeypatch.setenv("NEURODYN_DATA", str(tmp_path))
    cfg = load_experiment(
        "fno/navier_stokes_rollout",
        "tiny",
        [
            "data.n_train=2",
            "data.n_test=1",
            "data.n_val=0",
            "train.rollout.mode=pushforward",
            "train.rollout.pushforward=2",
            "train.rollout.input_noise=0.25",
            "train.rollout.eval_mode=teacher_forcing",
        ],
    )
    tcfg = train_config(cfg)
    no_train = {k: v for k, v in cfg.items() if k != "train"}
    data = build_data(no_train, progress=False, train_window_steps=tcfg.window_steps)
    assert data["sets"]["train"].t_out == 3 * int(cfg["data"].get("step", 1))
    task = build_task(no_train, data, tcfg)
    assert (task.train_mode, task.pushforward, task.input_noise, task.eval_mode) == (
        "pushforward",
        2,
        0.25,
        "teacher_forcing",
    )


# ------------------------------------------------------------------------------------------------
# the module import graph


def _module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: Path, modules: set[str], root: Path = SRC) -> set[str]:
    """The ``neurodyn`` modules ``path`` imports anywhere in it (inside functions too): ``from .a import b`` is the
    module ``a.b`` when that is a module, else ``a``. A package's implicit import of its parents is not counted."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.update(f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in modules and m != name}


def import_cycles(root: Path = SRC) -> list[list[str]]:
    """The strongly connected components (more than one module) of the import graph of the modules under ``root``
    (Tarjan's algorithm, iterative)."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = {m: sorted(_module_imports(p, set(paths), root)) for m, p in paths.items()}
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(graph[v]):
                work.append((v, i + 1))
                w = graph[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            for w in graph[v]:
                if w in on_stack:
                    low[v] = min(low[v], low[w])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_another_that_imports_it_back():
    """No import cycle between modules, counting imports deferred into functions (a lazy import that exists to
    break a cycle is still a cycle)."""
    assert import_cycles() == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    pkg = tmp_path / "neurodyn"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert import_cycles(pkg) == [["neurodyn.a", "neurodyn.sub.b"]]


# ------------------------------------------------------------------------------------------------
# the sub-layers of data/ (ARCHITECTURE.md's data row)

# from the bottom: the store, the sequence store (layout, building, dataset) and what every reader hands on, the
# features; above them the generators and the readers, siblings that never import each other, except one door
DATA_RULES = {
    "data/sequence*.py": ("formats", "generators"),
    "data/public_dataset.py": ("formats", "generators"),
    "data/features/*.py": ("formats", "generators"),
    "data/generators/*.py": ("formats",),
    "data/formats/*.py": ("generators",),
}
# a generator's real file enters through the converter: generators/base.real_file takes read_public of formats/
DOOR = ("data/generators/base.py", "neurodyn.data.formats", {"read_public"})


def data_breaches(root: Path = SRC) -> list[str]:
    """``module -> imported module`` for every import that crosses :data:`DATA_RULES` (the door aside)."""
    modules = {_module_name(p, root) for p in root.rglob("*.py")}
    bad = []
    for pattern, banned in DATA_RULES.items():
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            for target in sorted(_module_imports(path, modules, root)):
                parts = target.split(".")
                if len(parts) < 3 or parts[1] != "data" or parts[2] not in banned:
                    continue
                if (rel, target) == DOOR[:2] and _names_taken(path, target, root) <= DOOR[2]:
                    continue
                bad.append(f"{rel} -> {target}")
    return bad


def _names_taken(path: Path, target: str, root: Path) -> set[str]:
    """The names ``path`` takes from the module ``target`` with ``from ... import``."""
    base = _module_name(path, root).split(".")[:-1]
    taken = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            module = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            if module == target:
                taken.update(a.name for a in node.names)
    return taken


def test_the_data_sub_layers():
    """The sequence store, ``public_dataset`` and the features import neither the readers nor the generators; a
    generator imports no reader (its real file goes through ``generators/base.real_file``, the converter's
    ``read_public``); a reader imports no generator."""
    assert data_breaches() == []


def test_the_data_sub_layer_check_finds_a_breach(tmp_path):
    pkg = tmp_path / "neurodyn"
    for sub in ("data/formats", "data/generators", "data/features"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "__init__.py").write_text("")
    (pkg / "data" / "formats" / "mnist.py").write_text("def encode():\n    pass\n")
    (pkg / "data" / "sequence_store.py").write_text("def f():\n    from .formats.mnist import encode\n")
    (pkg / "data" / "generators" / "base.py").write_text("from ..formats import read_public, sniff\n")
    (pkg / "data" / "generators" / "digits.py").write_text("from ..formats.mnist import encode\n")
    (pkg / "data" / "features" / "events.py").write_text("from ..generators import base\n")
    assert data_breaches(pkg) == [
        "data/sequence_store.py -> neurodyn.data.formats.mnist",
        "data/features/events.py -> neurodyn.data.generators.base",
        "data/generators/base.py -> neurodyn.data.formats",
        "data/generators/digits.py -> neurodyn.data.formats.mnist",
    ]
    (pkg / "data" / "generators" / "base.py").write_text("def real_file():\n    from ..formats import read_public\n")
    assert "data/generators/base.py -> neurodyn.data.formats" not in data_breaches(pkg)


def test_no_module_imports_the_package_root():
    """The root ``neurodyn/__init__.py`` reaches the top layer lazily (``load_run``): nothing below imports it."""
    bad = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = _module_name(path)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")
                target = (
                    ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level
                    else node.module or ""
                )
                if target == "neurodyn" and any(
                    not (SRC / a.name).exists() and not (SRC / f"{a.name}.py").exists() for a in node.names
                ):
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not bad, f"import names from the package root: {bad}"


def private_imports(roots=(SRC, SRC.parents[1] / "benchmarks")) -> list[str]:
    """``from X import _name`` of a neurodyn module or a benchmark script: a private name used outside its file."""
    local = {p.stem for p in (SRC.parents[1] / "benchmarks").rglob("*.py")} | {"tools"}
    bad = []
    for root in roots:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ImportFrom):
                    continue
                top = (node.module or "").split(".")[0]
                if node.level == 0 and top != "neurodyn" and top not in local:
                    continue
                bad += [
                    f"{path.name}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return bad


def test_no_private_name_is_imported_from_another_file():
    """A helper another file needs is public (or lives where both can reach it)."""
    assert private_imports() == []


def test_the_private_import_check_finds_one(tmp_path):
    (tmp_path / "probe.py").write_text("from neurodyn.ops.knc_scan import knc_scan, _hidden\nfrom os import _exit\n")
    assert private_imports((tmp_path,)) == ["probe.py:1 _hidden"]


# ------------------------------------------------------------------------------------------------
# ARCHITECTURE.md and the command list, against the code

ROOT = SRC.parents[1]
GROUPED = {"data/generators", "data/formats", "experiments"}  # named as a whole: `generators/`


def architecture_rows() -> dict[int, str]:
    """``{layer: the text of its row(s)}`` of ARCHITECTURE.md's module table, in the table's order (checked)."""
    rows: dict[int, str] = {}
    order = []
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            layer = int(cells[0])
            order.append(layer)
            rows[layer] = rows.get(layer, "") + " " + cells[1] + " " + cells[2]
    assert order == sorted(order), f"ARCHITECTURE.md's table is not in layer order: {order}"
    return rows


def _named(text: str) -> set[str]:
    """Every name in backticks, without a trailing ``/`` or ``.py``, and each dotted / slashed part of it."""
    import re

    out = set()
    for word in re.findall(r"`([^`]+)`", text):
        word = word.strip().removesuffix("/").removesuffix(".py")
        out.add(word)
        out.update(re.split(r"[./]", word))
    return out


def test_the_architecture_table_names_every_module_in_its_layer():
    rows = architecture_rows()
    where = {}
    for layer, text in rows.items():
        for name in _named(text):
            where.setdefault(name, set()).add(layer)
    missing = []
    top = sorted(
        p
        for p in SRC.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    )
    for entry in top:
        if entry.stem not in where:
            missing.append(entry.name)
            continue
        if entry.is_dir() and entry.name not in GROUPED:
            layers = where[entry.stem]
            for f in sorted(entry.iterdir()):
                name = f.stem
                if name.startswith("__") or not (f.suffix == ".py" or (f / "__init__.py").exists()):
                    continue
                if name not in _named(" ".join(rows[k] for k in layers)):
                    missing.append(f"{entry.name}/{f.name}")
    assert not missing, f"ARCHITECTURE.md's table does not name: {missing}"


def test_the_architecture_table_names_no_module_that_does_not_exist():
    import re

    ghosts = []
    for text in architecture_rows().values():
        for word in re.findall(r"`([a-z_/]+(?:/|\.py))`", text):
            if not (SRC / word).exists() and not any((p / word).exists() for p in SRC.iterdir() if p.is_dir()):
                ghosts.append(word)
    assert not ghosts, f"ARCHITECTURE.md names modules that do not exist: {ghosts}"


def _subcommands() -> list[str]:
    import argparse

    from neurodyn.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_the_documented_subcommands_are_the_parsers():
    import re

    import neurodyn.cli

    commands = _subcommands()
    cli_doc = re.search(r"``neurodyn ([a-z\- |]+)``", neurodyn.cli.__doc__).group(1)
    assert [c.strip() for c in cli_doc.split("|")] == commands
    row = architecture_rows()[max(architecture_rows())]
    listed = re.search(r"`neurodyn ([a-z\- /]+)`", row).group(1)
    assert [c.strip() for c in listed.split("/")] == commands
