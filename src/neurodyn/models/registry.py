"""Model registry: every model is built from its registered name and a config dataclass.

``build("fno", in_channels=1, out_channels=1, modes=(12, 12))`` returns the module with
``module.config`` (the dataclass) and ``module.registry_name`` attached; checkpoints store both, so
``load(path)`` rebuilds a model without the script that made it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config_types import check_field_types
from ..errors import ConfigError, DataError, unknown_name

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


def _sections(config_cls: type) -> dict[str, dataclasses.Field]:
    """Fields of ``config_cls`` that are nested config dataclasses (e.g. ``ssm``), by name."""
    out = {}
    for f in dataclasses.fields(config_cls):
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory()):
            out[f.name] = f
    return out


# names other libraries use for our fields (docs/coming-from.md): name -> (our field, what differs)
FOREIGN_NAMES = {
    "n_modes": (
        "modes",
        "neuraloperator's n_modes counts differently: modes=(m1, m2) keeps what n_modes=(2 m1, "
        "2 m2 - 1) keeps; docs/coming-from.md",
    ),
    "hidden_channels": ("width", "neuraloperator's hidden_channels"),
    "lifting_channel_ratio": ("lifting_channels", "neuraloperator's ratio; ours is the hidden width itself"),
    "d_model": ("width", "mamba-ssm's d_model"),
    "d_state": ("ssm", "mamba-ssm's d_state: model.ssm.d_state"),
    "d_conv": ("ssm", "mamba-ssm's d_conv: model.ssm.d_conv"),
    "expand": ("ssm", "mamba-ssm's expand: model.ssm.expand"),
    "units": ("hidden", "ncps' units"),
}


def _unknown_fields(what: str, unknown: list[str], fields: Iterable[str]) -> ConfigError:
    import difflib

    fields = list(fields)

    def hint(key: str) -> str:
        ours, why = FOREIGN_NAMES.get(key, (None, ""))
        if ours in fields:
            return f" (did you mean {ours!r}? {why})"
        close = difflib.get_close_matches(key, fields, n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""

    said = "; ".join(f"{k!r}{hint(k)}" for k in unknown)
    return ConfigError(f"{what} has no config field {said}; its fields are: {', '.join(fields)}.")


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    """YAML and JSON give lists where dataclasses declare tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _section(name: str, config_cls: type, field: dataclasses.Field, value: Any):
    """The nested dataclass of ``field`` from a mapping (over the model's defaults) or an instance."""
    default = field.default_factory()
    if isinstance(value, type(default)):
        return value
    if dataclasses.is_dataclass(value):  # e.g. the shared sizes (SSMConfig) given for a model's richer section
        value = dataclasses.asdict(value)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"model {name!r} config field {field.name!r} is a section with the fields "
            f"{', '.join(f.name for f in dataclasses.fields(default))} (e.g. model.{field.name}."
            f"{dataclasses.fields(default)[0].name}=...); got {value!r}."
        )
    return dataclasses.replace(default, **check_field_types(type(default), _tuples(dict(value)), f"model.{field.name}"))


def _moved_keys(config_cls: type, keys: Iterable[str]) -> dict[str, str]:
    """``{key: section.key}`` for the keys of ``keys`` that are no field of ``config_cls`` but a field of one of its
    sections (``d_state`` given at the top level belongs in ``ssm.d_state``)."""
    fields = {f.name for f in dataclasses.fields(config_cls)}
    out = {}
    for k in keys:
        if k in fields:
            continue
        for s, f in _sections(config_cls).items():
            if k in {g.name for g in dataclasses.fields(f.default_factory())}:
                out[k] = f"{s}.{k}"
                break
    return out


def config_fields(name: str) -> list[str]:
    """The config field names of model ``name``."""
    return [f.name for f in dataclasses.fields(entry(name)[1])]


def check_config_keys(name: str, values: Mapping[str, Any]) -> None:
    """Raise one ConfigError for a key of ``values`` that model ``name``'s config does not have (with the
    closest field, or the section a key moved into); nested sections' keys are checked too."""
    _, config_cls = entry(name)
    sections = _sections(config_cls)
    fields = [f.name for f in dataclasses.fields(config_cls)]
    unknown = [k for k in values if k not in fields]
    moved = _moved_keys(config_cls, unknown)
    if moved:
        said = ", ".join(f"model.{k} -> model.{to}" for k, to in moved.items())
        section, _, sub = next(iter(moved.values())).partition(".")
        raise ConfigError(
            f"model {name!r}: config field(s) of a section given at the top level: {said} (in a "
            f"preset: '{section}: {{{sub}: ...}}')."
        )
    if unknown:
        raise _unknown_fields(f"model {name!r}", unknown, fields)
    for key, field in sections.items():
        if isinstance(values.get(key), Mapping):
            sub = [f.name for f in dataclasses.fields(field.default_factory())]
            wrong = [k for k in values[key] if k not in sub]
            if wrong:
                raise _unknown_fields(f"model {name!r} section {key!r}", wrong, sub)


def make_config(name: str, config: Any = None, **overrides: Any):
    """Config dataclass of model ``name`` from a dataclass, a mapping and/or keyword overrides.

    Nested sections (fields holding a config dataclass, such as ``ssm``) are given as mappings, which
    update the model's own defaults for that section (``{"ssm": {"d_state": 8}}``). A key of a section
    given at the top level (the layout before the section existed) is refused with the key it moved to.
    """
    _, config_cls = entry(name)
    sections = _sections(config_cls)
    values: dict[str, Any] = {}
    if config is not None:
        values.update(dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config))
    for key, value in overrides.items():
        if key in sections and isinstance(value, Mapping) and isinstance(values.get(key), Mapping):
            value = {**values[key], **value}
        values[key] = value
    check_config_keys(name, values)
    values = _tuples(values)
    for key in sections:
        if key in values:
            values[key] = _section(name, config_cls, sections[key], values[key])
    return config_cls(**check_field_types(config_cls, values, "model"))


def build(name: str, config: Any = None, **overrides: Any) -> nn.Module:
    """Build the model registered as ``name`` from its config (dataclass or mapping) plus overrides.

    A config too large for memory (``model.width=100000000``) is one ConfigError naming the model and the
    allocation that failed, not the allocator's traceback."""
    cls, _ = entry(name)
    cfg = make_config(name, config, **overrides)
    try:
        model = cls(cfg)
    except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError is a RuntimeError
        if not _out_of_memory(exc):
            raise
        found = re.search(r"allocate (\d+) bytes|allocate ([\d.]+ \w?i?B)", str(exc))  # CPU: bytes; CUDA: 2.00 GiB
        size = found and (f"{int(found.group(1)) / 1e9:,.1f} GB" if found.group(1) else found.group(2))
        need = f" (one allocation of {size} was refused)" if size else ""
        raise ConfigError(
            f"model {name!r} with this config does not fit in memory: its parameters need more than "
            f"this machine has{need}; reduce its sizes (width, layers, modes, ...)."
        ) from None
    model.config = cfg
    return model


def check_model_config(name: str, config: Any = None) -> int | None:
    """Every check model ``name`` makes of ``config`` when it is built, without allocating it: the config is made
    (its keys, types and values, which the config dataclass checks itself: a negative width, an unknown variant),
    then the model is built on the meta device for the few checks only its constructor can make (modes against
    ``grid_size``, mha's heads against the width its config shares with the other baselines). Raises the
    ConfigError its build would; a construction step that meta tensors cannot run (data-dependent, such as NAC's
    wiring, after every value check) ends the check quietly, the real build runs it. Returns the model's parameter
    count (:func:`count_parameters`), or ``None`` when the meta build could not finish."""
    cls, _ = entry(name)
    cfg = make_config(name, config)
    try:
        with torch.device("meta"):
            return count_parameters(cls(cfg))
    except ConfigError:
        raise
    except (NotImplementedError, RuntimeError):
        return None


TRAINING_COPIES = 4
"""Float32 copies of the parameters training holds at least: the weights, their gradients and Adam's two moments."""


def device_memory(device: str | torch.device) -> int | None:
    """Bytes of memory of ``device`` (the machine's physical memory for the CPU, the GPU's for CUDA), or ``None``
    where it cannot be read."""
    device = torch.device(device)
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        if device.type == "cpu":
            return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError, RuntimeError, AssertionError):
        return None
    return None


def check_fits_in_memory(name: str, n_params: int | None, device: str | torch.device = "cpu") -> None:
    """Raise one ConfigError when training a model of ``n_params`` parameters cannot fit in ``device``'s memory
    (:data:`TRAINING_COPIES` float32 copies of them already exceed it): said before anything is built or removed."""
    total = device_memory(device)
    need = (n_params or 0) * 4 * TRAINING_COPIES
    if total is None or need <= total:
        return
    where = "this machine's memory" if torch.device(device).type == "cpu" else f"the memory of {device}"
    raise ConfigError(
        f"model {name!r} with this config does not fit in memory: its {n_params / 1e9:,.2f} G "
        f"parameters need {need / 1e9:,.1f} GB to train (float32 weights, gradients and two Adam "
        f"moments) and {where} is {total / 1e9:,.1f} GB; reduce its sizes (width, layers, modes, ...)."
    )


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocator's refusal (torch.OutOfMemoryError, CPU "can't allocate memory", MemoryError)."""
    if isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)):  # = torch.OutOfMemoryError (torch >= 2.5)
        return True
    text = str(exc).lower()
    return any(s in text for s in ("can't allocate memory", "not enough memory", "out of memory"))


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) scalar parameters; complex parameters count as two reals."""
    total = 0
    for p in model.parameters():
        if trainable_only and not p.requires_grad:
            continue
        total += p.numel() * (2 if p.is_complex() else 1)
    return total


def module_device(model: nn.Module) -> torch.device:
    """The device of a module's first parameter (or buffer); the CPU for a module that holds no tensor."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return first.device if first is not None else torch.device("cpu")


def model_spec(model: nn.Module) -> dict[str, Any]:
    """The part of a checkpoint that rebuilds ``model``: its registered name and config as plain data; for a module
    that was not built by :func:`build` (a user's own ``nn.Module``), its class (``"package.module:Class"``) and
    the constructor arguments given to ``neurodyn.train.fit(init=...)`` (``model.neurodyn_init``; ``None``: none)."""
    name = getattr(model, "registry_name", None)
    cfg = getattr(model, "config", None)
    if name is not None and dataclasses.is_dataclass(cfg):
        return {"name": name, "config": _plain(dataclasses.asdict(cfg))}
    cls = type(model)
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "init": _plain(getattr(model, "neurodyn_init", None))}


def rebuild(spec: dict[str, Any], model: nn.Module | None = None) -> nn.Module:
    """The module a checkpoint's ``spec`` (:func:`model_spec`) describes, with fresh weights.

    A registered model is built from its config. A user's class is only looked up in modules the process has
    already imported (a checkpoint never makes neurodyn import code), must be an ``nn.Module`` and is called with
    the saved ``init`` arguments; or pass the module itself as ``model`` (its class must match)."""
    if "name" in spec:
        return build(spec["name"], spec["config"])
    module_name, _, qualname = str(spec.get("class", "")).partition(":")
    if model is not None:
        have = f"{type(model).__module__}:{type(model).__qualname__}"
        if have != spec.get("class"):
            raise ConfigError(f"the checkpoint holds a {spec.get('class')}, not the given {have}")
        return model
    import sys

    cls = sys.modules.get(module_name)
    for part in qualname.split(".") if cls is not None else ():
        cls = getattr(cls, part, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(
            f"the checkpoint holds a {spec.get('class')}, which is not imported here: import "
            f"{module_name} first, or pass the module (model=...) to rebuild it"
        )
    try:
        return cls(**(spec.get("init") or {}))
    except TypeError as exc:
        raise ConfigError(
            f"cannot rebuild {spec['class']} from the checkpoint's init arguments {spec.get('init')} "
            f"({exc}); train with neurodyn.train.fit(..., init={{...}}) or pass model=..."
        ) from None


def _plain(value: Any) -> Any:
    """Tuples become lists so the checkpoint loads with weights_only=True."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def save(model: nn.Module, path: str | Path) -> None:
    """Save weights plus name and config (atomically) so that ``load(path)`` can rebuild the model."""
    from ..checkpoint_io import atomic_torch_save, versioned

    atomic_torch_save(versioned({"model": model_spec(model), "model_state": model.state_dict()}), path)


def load(path: str | Path, map_location: str | torch.device = "cpu") -> nn.Module:
    """Rebuild a model from a checkpoint written by ``save`` or by the trainer."""
    from ..checkpoint_io import read_checkpoint

    ckpt = read_checkpoint(path, map_location=map_location)
    if "model" not in ckpt or "model_state" not in ckpt:
        raise DataError(
            f"checkpoint {path} has no model spec ('model' and 'model_state' keys); was it written by neurodyn?"
        )
    model = rebuild(ckpt["model"])
    model.load_state_dict(ckpt["model_state"])
    return model


_IMPORTED = False
MODEL_PACKAGES = (__package__, "neurodyn.baselines")
"""The packages whose modules register models (``@register``), imported at the first lookup by name: the model files
beside this registry, and the fitted baselines (:mod:`neurodyn.baselines`, the layer above, which imports this
registry to register its models: found here by name only, as a plugin is, never imported by a statement)."""


def _import_all() -> None:
    """Import every module of :data:`MODEL_PACKAGES` once so that their ``@register`` decorators run."""
    global _IMPORTED
    if _IMPORTED:
        return
    _IMPORTED = True
    import importlib
    import pkgutil

    for package in MODEL_PACKAGES:
        folder = Path(importlib.import_module(package).__file__).parent
        for info in pkgutil.iter_modules([str(folder)]):
            name = f"{package}.{info.name}"
            if name != __name__ and not info.name.startswith("_"):
                importlib.import_module(name)
