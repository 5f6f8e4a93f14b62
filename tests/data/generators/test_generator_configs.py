"""Every registered generator's config refuses a value of the wrong type with one ConfigError naming the generator,
the option, the value and the expected type (a mistyped ``key=value`` arrives as a string)."""

import dataclasses
import typing

import pytest

from neurodyn.data.generators import available_generators, get_generator
from neurodyn.errors import ConfigError


def _numeric_field(name: str) -> tuple[str, type]:
    """The first int or float option of generator ``name``."""
    cls = get_generator(name).config_cls
    hints = typing.get_type_hints(cls)
    return next((f.name, hints[f.name]) for f in dataclasses.fields(cls) if hints.get(f.name) in (int, float))


@pytest.mark.parametrize("name", available_generators())
def test_a_string_for_a_number_names_generator_option_value_and_type(name):
    field, kind = _numeric_field(name)
    with pytest.raises(ConfigError) as info:
        get_generator(name).make_config(**{field: "abc"})
    expected = "an integer" if kind is int else "a number"
    assert f"generator {name!r} option {field}='abc' is not {expected}" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", available_generators())
def test_defaults_and_numeric_strings_pass_the_type_check(name):
    g = get_generator(name)
    defaults = dataclasses.asdict(g.make_config())
    assert dataclasses.asdict(g.make_config(**defaults)) == defaults
    field, _ = _numeric_field(name)  # a number given as a string (YAML 1.1 reads 1e-3 as one) is that number
    assert dataclasses.asdict(g.make_config(**{field: str(defaults[field])})) == defaults


def test_a_bool_is_not_a_number_and_ints_stay_ints_in_float_options():
    g = get_generator("darcy")
    with pytest.raises(ConfigError, match=r"option resolution=True is not an integer; e\.g\. resolution=\d+"):
        g.make_config(resolution=True)
    cfg = g.make_config(alpha=2)  # the config is stored as given: its identity (and default file name) is unchanged
    assert cfg.alpha == 2 and isinstance(cfg.alpha, int)
    assert g.make_config(alpha="1e-3").alpha == 1e-3 and g.make_config(resolution="1e1").resolution == 10
    with pytest.raises(ConfigError, match=r"option resolution='32.5' is not an integer"):
        g.make_config(resolution="32.5")
