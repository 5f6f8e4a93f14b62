"""Experiment presets: YAML files ``experiments/<model>/<benchmark>.yaml`` with three scales.

A preset has the sections ``task``, ``data``, ``model``, ``train`` and ``scales`` (``tiny`` / ``cpu``
/ ``paper``, each a partial config merged over the base). ``load_experiment("fno/darcy", "cpu",
["model.width=64"])`` merges base <- scale <- dot-list overrides with OmegaConf and returns a plain dict.

A preset's ``data`` may name a dataset file, ``data: {dataset: darcy, <own keys>}`` for
``experiments/data/darcy.yaml`` (itself a preset of ``data`` and ``scales.<s>.data`` only, which may name
another dataset in turn). The file's sections are read as if pasted beneath the preset's::

    data    = dataset.data <- preset.data                                   (base)
    scale   = dataset.scales[s].data <- preset.scales[s].data               (per scale)
    config  = base <- scale <- overrides

so a dataset's per-scale value beats a preset's base value of the same key (as the preset's own scale would),
and a preset's per-scale value beats both. The ``dataset`` key itself is not part of the resolved config.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..config_types import plain_value
from ..errors import ConfigError, unknown_name

PRESET_DIR = Path(__file__).parent
DATASET_DIR = PRESET_DIR / "data"
SCALES = ("tiny", "cpu", "paper")
SECTIONS = ("task", "data", "model", "train", "scales", "description")


def available_presets() -> list[str]:
    return sorted(str(p.relative_to(PRESET_DIR).with_suffix("")) for p in PRESET_DIR.rglob("*.yaml"))


def available_datasets() -> list[str]:
    """Names a preset's ``data.dataset`` may take: the files ``experiments/data/<name>.yaml``."""
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
    if isinstance(at_scale, DictConfig):
        data, scale_data = compose_data(base.get("data"), at_scale.get("data"), scale, path)
        if data is not None:
            base.data = data
        if scale_data is not None:
            at_scale.data = scale_data
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


def compose_data(data, scale_data, scale: str, where: Path, chain: tuple[str, ...] = ()):
    """``(base data, scale data)`` of a file whose ``data`` is ``data`` and whose ``scales.<scale>.data`` is
    ``scale_data``, with the dataset ``data.dataset`` names (and the ones it names) merged beneath each.

    ``chain`` holds the datasets already being read (a dataset naming one of them is a cycle).
    """
    if isinstance(scale_data, DictConfig) and "dataset" in scale_data:
        raise ConfigError(f"{where}: scales.{scale}.data names a dataset; name it once, in the base data section "
                          "(data.dataset), and give the scale only the keys it changes")
    if not isinstance(data, DictConfig) or "dataset" not in data:
        return data, scale_data
    data = data.copy()
    ref = data.pop("dataset")
    if not isinstance(ref, str) or ref not in available_datasets():
        known = unknown_name("dataset", str(ref), available_datasets())
        raise ConfigError(f"{where}: data.dataset names a file experiments/data/<name>.yaml; {known}")
    if ref in chain:
        raise ConfigError(f"datasets name each other in a cycle: {' -> '.join((*chain, ref))}")
    path = DATASET_DIR / f"{ref}.yaml"
    ds = _read(path)
    extra = [k for k in ds if k not in ("description", "data", "scales")]
    extra += [f"scales.{s}.{k}" for s, v in (ds.get("scales") or {}).items() for k in (v or {}) if k != "data"]
    if extra:
        raise ConfigError(f"dataset {path} (named by {where}) holds {extra}; a dataset file holds only description, "
                          "data and scales.<scale>.data")
    ds_scale = ((ds.get("scales") or {}).get(scale) or {}).get("data")
    ds_data, ds_scale = compose_data(ds.get("data"), ds_scale, scale, path, (*chain, ref))
    return (OmegaConf.merge(ds_data or {}, data),
            OmegaConf.merge(ds_scale or {}, scale_data or {}))


def apply_overrides(cfg, overrides: Sequence[str]):
    """Merge ``key.path=value`` strings into ``cfg``; a key must name an existing section."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key.path=value (e.g. model.width=64)")
        key = item.split("=", 1)[0]
        if key.split(".")[0] not in SECTIONS:
            raise ConfigError(f"override {item!r} must start with one of data., model., train. or task")
        if key.strip() == "data.dataset":
            raise ConfigError(f"override {item!r}: data.dataset is read from the preset file only; override the "
                              "data keys themselves (e.g. data.n_train=100)")
        plain_value(item.split("=", 1)[1], f"override {item!r}")
    try:
        return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except yaml.YAMLError as exc:  # e.g. a !!python tag: only plain YAML values are read
        bad = next((o for o in overrides if "!!" in o), list(overrides))
        raise ConfigError(f"override {bad!r}: the value is not plain YAML "
                          f"({' '.join(str(exc).splitlines()[0].split())}); give a number, a string, a list or a "
                          "mapping") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot apply overrides {list(overrides)}: {exc}") from None
