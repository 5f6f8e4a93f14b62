"""Model registry: every model is built from its registered name and a config dataclass.

``build("fno", in_channels=1, out_channels=1, modes=(12, 12))`` returns the module with
``module.config`` (the dataclass) and ``module.registry_name`` attached; checkpoints store both, so
``load(path)`` rebuilds a model without the script that made it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from ..config_types import check_field_types
from ..errors import DataError, ConfigError, unknown_name

_MODELS: dict[str, tuple[type[nn.Module], type]] = {}


def register(name: str, config_cls: type) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator registering ``cls(config)`` under ``name`` with its config dataclass."""
    if not dataclasses.is_dataclass(config_cls):
        raise TypeError(f"config of model {name!r} must be a dataclass, got {config_cls!r}")

    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if name in _MODELS and _MODELS[name][0] is not cls:
            raise ValueError(f"model name {name!r} is already registered to {_MODELS[name][0].__name__}")
        _MODELS[name] = (cls, config_cls)
        cls.registry_name = name
        return cls

    return deco


def available() -> list[str]:
    """Sorted names of all registered models."""
    _import_all()
    return sorted(_MODELS)


def entry(name: str) -> tuple[type[nn.Module], type]:
    """The (model class, config dataclass) registered under ``name``."""
    _import_all()
    if name not in _MODELS:
        raise unknown_name("model", name, _MODELS)
    return _MODELS[name]


def make_config(name: str, config: Any = None, **overrides: Any):
    """Config dataclass of model ``name`` from a dataclass, a mapping and/or keyword overrides."""
    _, config_cls = entry(name)
    values: dict[str, Any] = {}
    if config is not None:
        values.update(dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config))
    values.update(overrides)
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        import difflib

        hints = {k: difflib.get_close_matches(k, fields, n=1) for k in unknown}
        said = "; ".join(f"{k!r}" + (f" (did you mean {h[0]!r}?)" if h else "") for k, h in hints.items())
        raise ConfigError(f"model {name!r} has no config field {said}; its fields are: {', '.join(fields)}.")
    for key, value in list(values.items()):
        if isinstance(value, list):  # YAML and JSON give lists where dataclasses declare tuples
            values[key] = tuple(value)
    return config_cls(**check_field_types(config_cls, values, "model"))


def build(name: str, config: Any = None, **overrides: Any) -> nn.Module:
    """Build the model registered as ``name`` from its config (dataclass or mapping) plus overrides."""
    cls, _ = entry(name)
    cfg = make_config(name, config, **overrides)
    model = cls(cfg)
    model.config = cfg
    return model


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) scalar parameters; complex parameters count as two reals."""
    total = 0
    for p in model.parameters():
        if trainable_only and not p.requires_grad:
            continue
        total += p.numel() * (2 if p.is_complex() else 1)
    return total


def model_spec(model: nn.Module) -> dict[str, Any]:
    """The part of a checkpoint that rebuilds ``model``: its registered name and config as plain data."""
    name = getattr(model, "registry_name", None)
    cfg = getattr(model, "config", None)
    if name is None or cfg is None:
        raise ConfigError(f"{type(model).__name__} was not built by neurodyn.models.build; cannot save its config")
    return {"name": name, "config": _plain(dataclasses.asdict(cfg))}


def _plain(value: Any) -> Any:
    """Tuples become lists so the checkpoint loads with weights_only=True."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def save(model: nn.Module, path: str | Path) -> None:
    """Save weights plus name and config (atomically) so that ``load(path)`` can rebuild the model."""
    from ..checkpoint_io import atomic_torch_save

    atomic_torch_save({"model": model_spec(model), "model_state": model.state_dict()}, path)


def load(path: str | Path, map_location: str | torch.device = "cpu") -> nn.Module:
    """Rebuild a model from a checkpoint written by ``save`` or by the trainer."""
    from ..checkpoint_io import read_checkpoint

    ckpt = read_checkpoint(path, map_location=map_location)
    if "model" not in ckpt or "model_state" not in ckpt:
        raise DataError(f"checkpoint {path} has no model spec ('model' and 'model_state' keys); "
                        "was it written by neurodyn?")
    spec = ckpt["model"]
    model = build(spec["name"], spec["config"])
    model.load_state_dict(ckpt["model_state"])
    return model


_IMPORTED = False


def _import_all() -> None:
    """Import every model module once so that their ``@register`` decorators run."""
    global _IMPORTED
    if _IMPORTED:
        return
    _IMPORTED = True
    import importlib
    import pkgutil

    from .. import models as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name != "registry" and not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
