"""Type checks for config sections that become dataclasses (``train``, every model config).

Values come from YAML presets and ``key=value`` overrides, so a mistyped override (``train.epochs=abc``)
arrives as a string. :func:`check_field_types` turns that into one ConfigError naming the key, the value and
the expected type, before anything is built or written; ints are accepted where a float is declared.
Fields declared with other types (tuples, unions, ``object``) are left to the config's own validation.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping

from .errors import ConfigError

_SIMPLE = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _declared(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: fall back to the defaults' types
        return {f.name: type(f.default) for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def check_field_types(cls: type, values: Mapping[str, Any], section: str) -> dict[str, Any]:
    """``values`` for dataclass ``cls`` with ints widened to floats where a float is declared; a value of the
    wrong simple type (int, float, bool, str) raises ConfigError naming ``section.key``."""
    hints = _declared(cls)
    out = dict(values)
    for key, value in values.items():
        want = hints.get(key)
        if want not in _SIMPLE:
            continue
        ok = isinstance(value, want) and not (want in (int, float) and isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            out[key], ok = float(value), True
        if not ok:
            raise ConfigError(f"{section}.{key}={value!r} is not {_SIMPLE[want]}; "
                              f"e.g. {section}.{key}={_example(cls, key)!r}")
    return out


def _example(cls: type, key: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == key and f.default is not dataclasses.MISSING:
            return f.default
    return None
