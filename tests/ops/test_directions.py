"""The one scan-direction resolver (ops.directions) and the choice check (errors.check_choice)."""

import pytest

from neurodyn.errors import ConfigError, check_choice
from neurodyn.ops.directions import resolve_directions

NAMES = ("row", "row_rev", "col", "col_rev")
PRESETS = {"bi": ("row", "row_rev"), "cross": NAMES}


def test_presets_single_names_and_sequences():
    assert resolve_directions("cross", NAMES, PRESETS) == NAMES
    assert resolve_directions("col", NAMES, PRESETS) == ("col",)
    assert resolve_directions(["row", "row"], NAMES) == ("row", "row")
    with pytest.raises(ValueError, match=r"directions must be one of 'bi', 'cross' or a non-empty sequence"):
        resolve_directions("col", NAMES, PRESETS, single=False)
    with pytest.raises(ConfigError, match="distinct names among"):
        resolve_directions(("row", "row"), NAMES, distinct=True, error=ConfigError)
    with pytest.raises(ValueError, match=r"got \(\)"):
        resolve_directions((), NAMES)
    with pytest.raises(ValueError, match="hint here"):
        resolve_directions(("diag",), NAMES, note=" hint here")


def test_check_choice_suggests_the_closest_name():
    assert check_choice("mode", "exact", ("exact", "euler")) == "exact"
    with pytest.raises(ConfigError, match=r"mode must be one of 'exact', 'euler'; got 'exakt'. Did you mean 'exact'"):
        check_choice("mode", "exakt", ("exact", "euler"))
    with pytest.raises(ValueError) as info:
        check_choice("backend", "cuda", ("auto", "torch"), error=ValueError)
    assert type(info.value) is ValueError
