"""Experiment presets: YAML files ``experiments/<model>/<benchmark>.yaml`` with three scales.

A preset has the sections ``task``, ``data``, ``model``, ``train`` and ``scales`` (``tiny`` / ``cpu``
/ ``paper``, each a partial config merged over the base). ``load_experiment("fno/darcy", "cpu",
["model.width=64"])`` merges base <- scale <- dot-list overrides with OmegaConf and returns a plain dict.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..errors import ConfigError, unknown_name

PRESET_DIR = Path(__file__).parent
SCALES = ("tiny", "cpu", "paper")
SECTIONS = ("task", "data", "model", "train", "scales", "description")


def available_presets() -> list[str]:
    return sorted(str(p.relative_to(PRESET_DIR).with_suffix("")) for p in PRESET_DIR.rglob("*.yaml"))


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
    try:
        base = OmegaConf.load(path)
    except (OmegaConfBaseException, ValueError) as exc:
        raise ConfigError(f"preset file {path} is not valid YAML: {exc}") from None
    unknown = [k for k in base if k not in SECTIONS]
    if unknown:
        raise ConfigError(f"preset {path} has unknown section(s) {unknown}; expected {list(SECTIONS)}")
    scales = base.pop("scales", OmegaConf.create({}))
    merged = OmegaConf.merge(base, scales.get(scale) or {})
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


def apply_overrides(cfg, overrides: Sequence[str]):
    """Merge ``key.path=value`` strings into ``cfg``; a key must name an existing section."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key.path=value (e.g. model.width=64)")
        key = item.split("=", 1)[0]
        if key.split(".")[0] not in SECTIONS:
            raise ConfigError(f"override {item!r} must start with one of data., model., train. or task")
    try:
        return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except yaml.YAMLError as exc:  # e.g. a !!python tag: only plain YAML values are read
        bad = next((o for o in overrides if "!!" in o), list(overrides))
        raise ConfigError(f"override {bad!r}: the value is not plain YAML "
                          f"({' '.join(str(exc).splitlines()[0].split())}); give a number, a string, a list or a "
                          "mapping") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot apply overrides {list(overrides)}: {exc}") from None
