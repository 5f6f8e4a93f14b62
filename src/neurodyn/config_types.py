"""Type checks for config sections that become dataclasses (``train``, every model config).

Values come from YAML presets and ``key=value`` overrides, so a mistyped override (``train.epochs=abc``)
arrives as a string. :func:`check_field_types` turns that into one ConfigError naming the key, the value and
the expected type, before anything is built or written; ints are accepted where a float is declared.
Fields declared with other types (tuples, unions, ``object``) are left to the config's own validation.
Generator configs use the same check with a ``subject`` (``generator 'darcy' option resolution='abc' ...``).

That validation is each config dataclass's ``__post_init__`` (the one idiom: a config checks itself when it is
made, so ``make_config`` and ``neurodyn train`` refuse a bad value before anything is built, removed or
generated). It runs ``errors.check_choice`` / ``errors.check_min`` and the value checks below
(:func:`check_flag`, :func:`check_whole`, :func:`check_number`), each one ConfigError naming the field, the
value and what it must be.
"""

from __future__ import annotations

import dataclasses
import numbers
import typing
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError

_SIMPLE = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _declared(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: fall back to the defaults' types
        return {f.name: type(f.default) for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def check_field_types(
    cls: type, values: Mapping[str, Any], section: str, *, subject: str | None = None, numeric_strings: bool = False
) -> dict[str, Any]:
    """``values`` for dataclass ``cls`` with ints widened to floats where a float is declared; a value of the
    wrong simple type (int, float, bool, str) raises ConfigError naming ``section.key`` (just ``key`` when
    ``section`` is empty), the value and the expected type, after ``subject`` when given (e.g.
    ``"generator 'darcy' option"``). Integers include numpy's; ``True`` / ``False`` are not numbers here.
    ``numeric_strings``: a string that reads as the declared number (``"1e-3"``, which YAML 1.1 leaves a string;
    ``"64"`` or ``"1e3"`` for an int) is converted instead of refused."""
    hints = _declared(cls)
    out = dict(values)
    for key, value in values.items():
        want = hints.get(key)
        if want not in _SIMPLE:
            continue
        if numeric_strings and isinstance(value, str) and want in (int, float):
            value = out[key] = _parse_number(value, want)
        if want is float and _is_integer(value):
            out[key] = float(value)
        elif not _has_type(value, want):
            name = f"{section}.{key}" if section else key
            lead = f"{subject} " if subject else ""
            raise ConfigError(f"{lead}{name}={value!r} is not {_SIMPLE[want]}; e.g. {name}={_example(cls, key)!r}")
    return out


def _parse_number(text: str, want: type) -> Any:
    """``text`` as a ``want`` (int or float) when it reads as one, else ``text`` unchanged."""
    try:
        number = float(text)
    except ValueError:
        return text
    if want is float:
        return number
    return int(number) if number.is_integer() else text


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _has_type(value: Any, want: type) -> bool:
    """``value`` is a ``want`` (int: any integral number but a bool; float: any real number but a bool)."""
    if want is int:
        return _is_integer(value)
    if want is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, want)


def _example(cls: type, key: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == key and f.default is not dataclasses.MISSING:
            return f.default
    return None


# the value checks of a config's __post_init__ (module docstring); ``what`` names the field ("NAC option eps")


def check_flag(what: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False``; else ConfigError ``"{what}={value!r} is not true or false"``."""
    if not isinstance(value, bool):
        raise ConfigError(f"{what}={value!r} is not true or false")
    return value


def check_whole(what: str, value: Any, minimum: int) -> int:
    """``value`` if it is an integer (not a bool) ``>= minimum``; else ConfigError saying so."""
    if not _is_integer(value) or value < minimum:
        raise ConfigError(f"{what}={value!r} must be a whole number >= {minimum}")
    return int(value)


def check_number(
    what: str, value: Any, *, minimum: float | None = None, above: float | None = None, why: str = ""
) -> float:
    """``value`` as a float if it is a real number (not a bool) ``>= minimum`` and ``> above`` (each bound when
    given); else ConfigError naming the bound, followed by ``why`` (e.g. ``" (0: t / euler_steps)"``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{what}={value!r} is not a number")
    if (minimum is not None and value < minimum) or (above is not None and not value > above):
        bound = f">= {minimum}" if minimum is not None and value < minimum else f"> {above}"
        raise ConfigError(f"{what}={value!r} must be {bound}{why}")
    return float(value)


PLAIN_TYPES = (type(None), bool, int, float, str)


def plain_value(text: str, what: str) -> Any:
    """The YAML value ``text`` of a ``key=value`` word (``what``: the word, for the message), as plain data: a number,
    a string, true / false, null, or lists and mappings of them. Anything else is one ConfigError: YAML that does not
    parse, a ``!!python`` tag, a tag whose value is not of its type (``!!int 12abc``), or a value of another type
    (``!!binary``, ``!!timestamp``, ``!!set``)."""
    import yaml

    hint = "give a number, a string, a list [a, b] or a mapping {k: v}"
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
        raise ConfigError(f"{what}: the value is not plain YAML ({first}); {hint}") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a tag's constructor refused its text: !!int 12abc
        raise ConfigError(f"{what}: the value is not plain YAML ({' '.join(str(exc).split())}); {hint}") from None
    bad = _not_plain(value)
    if bad is not None:
        raise ConfigError(f"{what}: the value is not plain YAML (it holds a {type(bad).__name__}); {hint}")
    return value


def _not_plain(value: Any) -> Any:
    """The first part of ``value`` that is not plain data, or ``None``."""
    if isinstance(value, PLAIN_TYPES):
        return None
    if isinstance(value, list):
        return next((b for b in map(_not_plain, value) if b is not None), None)
    if isinstance(value, dict):
        keys = next((k for k in value if not isinstance(k, PLAIN_TYPES)), None)
        return keys if keys is not None else next((b for b in map(_not_plain, value.values()) if b is not None), None)
    return value
