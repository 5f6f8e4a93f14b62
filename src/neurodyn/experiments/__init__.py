"""Experiment presets: YAML files ``experiments/<model>/<benchmark>.yaml`` with three scales.

A preset has the sections ``task``, ``data``, ``model``, ``train`` and ``scales`` (``tiny`` / ``cpu``
/ ``paper``, each a partial config merged over the base), and ``defaults``, which names its dataset file as the_well's
experiment configs do: ``defaults: [data: darcy]`` for ``experiments/data/darcy.yaml``. ``load_experiment("fno/darcy",
"cpu", ["model.width=64"])`` returns the merged config as a plain dict. Presets are one hop deep: a dataset file
holds ``description``, ``data`` and ``scales.<scale>.data`` only, and names no other file. The precedence rule is
stated in ``experiments/README.md`` (:data:`PRECEDENCE`); the ``defaults`` section is not part of the resolved
config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..config_types import plain_value
from ..errors import ConfigError, unknown_name

PRESET_DIR = Path(__file__).parent
DATASET_DIR = PRESET_DIR / "data"
SCALES = ("tiny", "cpu", "paper")
SECTIONS = ("task", "data", "model", "train", "scales", "description", "defaults")
PRECEDENCE = """\
data   = dataset.data              <- preset.data              (base)
scale  = dataset.scales[s].data    <- preset.scales[s].data    (per scale)
config = base <- scale <- overrides"""
"""The merge order (``a <- b``: ``b`` wins), the one rule: the dataset file's sections are read as if pasted beneath
the preset's, so a dataset's per-scale value beats a preset's base value of the same key (as the preset's own scale
would), a preset's value beats the dataset's at the same level, and an override beats everything."""


def available_presets() -> list[str]:
    return sorted(str(p.relative_to(PRESET_DIR).with_suffix("")) for p in PRESET_DIR.rglob("*.yaml"))


def available_datasets() -> list[str]:
    """Names a preset's ``defaults: [data: <name>]`` may take: the files ``experiments/data/<name>.yaml``."""
    return sorted(p.stem for p in DATASET_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.exists():
        raise unknown_name("preset", name, available_presets())
    return path


def load_experiment(name: str, scale: str = "cpu", overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Merged experiment config of preset ``name`` at ``scale`` with dot-list ``overrides``."""
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    path = preset_path(name)
    base = _read(path)
    unknown = [k for k in base if k not in SECTIONS]
    if unknown:
        raise ConfigError(f"preset {path} has unknown section(s) {unknown}; expected {list(SECTIONS)}")
    scales = base.pop("scales", OmegaConf.create({}))
    at_scale = scales.get(scale) or OmegaConf.create({})
    dataset = named_dataset(base.pop("defaults", None), path)
    if dataset is not None and isinstance(at_scale, DictConfig):
        ds_data, ds_scale = read_dataset(dataset, scale, path)
        base.data = OmegaConf.merge(ds_data or {}, base.get("data") or {})
        at_scale.data = OmegaConf.merge(ds_scale or {}, at_scale.get("data") or {})
    for where, data in (
        ("data", base.get("data")),
        (f"scales.{scale}.data", at_scale.get("data") if isinstance(at_scale, DictConfig) else None),
    ):
        if isinstance(data, DictConfig) and "dataset" in data:
            raise ConfigError(
                f"{path}: {where}.dataset is not a key; a preset names its dataset file in its defaults "
                f"section (defaults: [data: {data.dataset}])"
            )
    merged = OmegaConf.merge(base, at_scale)
    merged = apply_overrides(merged, overrides)
    try:
        out = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"preset {name} at scale {scale}: {' '.join(str(exc).split())}") from None
    out.update({"preset": name, "scale": scale})
    for section in ("data", "model", "train"):
        out.setdefault(section, {})
    out.setdefault("task", "steady")
    return out


def _read(path: Path) -> DictConfig:
    try:
        cfg = OmegaConf.load(path)
    except (OmegaConfBaseException, ValueError) as exc:
        raise ConfigError(f"preset file {path} is not valid YAML: {exc}") from None
    if not isinstance(cfg, DictConfig):
        raise ConfigError(f"preset file {path} must hold a mapping of sections {list(SECTIONS)}")
    return cfg


def named_dataset(defaults, where: Path) -> str | None:
    """The dataset file a preset's ``defaults`` names (``[data: darcy]`` -> ``"darcy"``), or None without one: a list of
    one-key mappings, of which ``data`` is the one kind (a model or train section is the preset's own)."""
    if defaults is None:
        return None
    items = list(defaults) if isinstance(defaults, ListConfig) else None
    if items is None or not all(isinstance(i, DictConfig) and len(i) == 1 for i in items):
        got = OmegaConf.to_container(defaults) if isinstance(defaults, (DictConfig, ListConfig)) else defaults
        raise ConfigError(
            f"{where}: defaults is a list of one-key entries, e.g. 'defaults: [data: darcy]' (the "
            f"dataset file experiments/data/darcy.yaml); got {got!r}"
        )
    kinds = [next(iter(i)) for i in items]
    if any(k != "data" for k in kinds) or len(kinds) != 1:
        raise ConfigError(
            f"{where}: defaults names one dataset file, 'defaults: [data: <name>]'; got the entries {kinds}"
        )
    name = items[0]["data"]
    if not isinstance(name, str) or name not in available_datasets():
        known = unknown_name("dataset", str(name), available_datasets())
        raise ConfigError(f"{where}: defaults names a file experiments/data/<name>.yaml; {known}")
    return name


def read_dataset(name: str, scale: str, named_by: Path):
    """``(data, scales.<scale>.data)`` of the dataset file ``name``, which holds ``description``, ``data`` and
    ``scales.<s>.data`` only: it names no other file (presets are one hop deep)."""
    path = DATASET_DIR / f"{name}.yaml"
    ds = _read(path)
    if "defaults" in ds or isinstance(ds.get("data"), DictConfig) and "dataset" in ds.data:
        raise ConfigError(
            f"dataset {path} (named by {named_by}) names another file; presets are one hop deep: a "
            "dataset file holds its data itself (description, data and scales.<scale>.data)"
        )
    extra = [k for k in ds if k not in ("description", "data", "scales")]
    extra += [f"scales.{s}.{k}" for s, v in (ds.get("scales") or {}).items() for k in (v or {}) if k != "data"]
    if extra:
        raise ConfigError(
            f"dataset {path} (named by {named_by}) holds {extra}; a dataset file holds only "
            "description, data and scales.<scale>.data"
        )
    return ds.get("data"), ((ds.get("scales") or {}).get(scale) or {}).get("data")


def apply_overrides(cfg, overrides: Sequence[str]):
    """Merge ``key.path=value`` strings into ``cfg``; a key must name an existing section."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key.path=value (e.g. model.width=64)")
        key = item.split("=", 1)[0]
        if key.strip().split(".")[0] == "defaults":
            raise ConfigError(
                f"override {item!r}: the dataset a preset names (defaults) is read from the preset file "
                "only; override the data keys themselves (e.g. data.n_train=100)"
            )
        if key.split(".")[0] not in SECTIONS:
            raise ConfigError(f"override {item!r} must start with one of data., model., train. or task")
        plain_value(item.split("=", 1)[1], f"override {item!r}")
    try:
        return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except yaml.YAMLError as exc:  # e.g. a !!python tag: only plain YAML values are read
        bad = next((o for o in overrides if "!!" in o), list(overrides))
        raise ConfigError(
            f"override {bad!r}: the value is not plain YAML "
            f"({' '.join(str(exc).splitlines()[0].split())}); give a number, a string, a list or a "
            "mapping"
        ) from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot apply overrides {list(overrides)}: {exc}") from None
