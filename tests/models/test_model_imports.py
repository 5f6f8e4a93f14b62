"""Models compose layers: a model file imports from another model file only the registered model class it extends
and that model's config (CHONN-UNet extends ``UNet`` / ``UNetConfig``); every shared helper is in
``models/inputs.py`` (input checks) or ``nn/`` (layers and networks)."""

import ast
from pathlib import Path

import neurodyn.models as ndm
from neurodyn.models.registry import entry

MODELS = Path(ndm.__file__).resolve().parent
HELPERS = {"registry", "inputs", "__init__"}


def test_model_files_import_only_the_models_they_extend():
    registered = {}
    for name in ndm.available():
        cls, config_cls = entry(name)
        registered[cls.__name__] = registered[config_cls.__name__] = cls.__module__.rsplit(".", 1)[-1]
    bad = []
    for path in sorted(MODELS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module not in HELPERS:
                bad += [
                    f"{path.name}: {a.name} from .{node.module}"
                    for a in node.names
                    if registered.get(a.name) != node.module
                ]
    assert not bad, f"model files import helpers from other model files (move them to nn/ or inputs.py): {bad}"
