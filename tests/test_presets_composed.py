"""Presets compose a shared dataset file (``data: {dataset: <name>, ...}``, experiments/data/<name>.yaml).

The oracle is tests/fixtures/presets_resolved.json: ``load_experiment(name, scale)`` of every preset at every scale
as the loader resolved them before any preset named a dataset (each preset then spelled its whole data section).
Rewriting a preset to name a dataset must leave its resolved config exactly as it was.
"""
import json
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

import neurodyn.experiments as experiments
from neurodyn.errors import ConfigError
from neurodyn.experiments import SCALES, available_datasets, available_presets, load_experiment

FIXTURE = Path(__file__).parent / "fixtures" / "presets_resolved.json"
RESOLVED = json.loads(FIXTURE.read_text())


def first_difference(got, want, where: str = "") -> str | None:
    """The first key path at which ``got`` and ``want`` differ (values and their types), or None."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(got) | set(want)):
            if key not in want:
                return f"{where}{key} (not in the fixture)"
            if key not in got:
                return f"{where}{key} (missing)"
            found = first_difference(got[key], want[key], f"{where}{key}.")
            if found:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        for i, (g, w) in enumerate(zip(got, want)):
            found = first_difference(g, w, f"{where}{i}.")
            if found:
                return found
        return None
    if type(got) is not type(want) or got != want:
        return f"{where.rstrip('.')}: {got!r}, the fixture {want!r}"
    return None


@pytest.mark.parametrize("name", sorted(RESOLVED))
def test_every_preset_resolves_as_before(name):
    for scale in SCALES:
        got = json.loads(json.dumps(load_experiment(name, scale)))  # tuples -> lists, as the fixture holds them
        diff = first_difference(got, RESOLVED[name][scale])
        assert diff is None, f"preset {name} at scale {scale} differs at {diff}"


def test_the_fixture_covers_every_preset_but_new_dataset_files():
    now = set(available_presets())
    assert set(RESOLVED) <= now, f"presets gone: {sorted(set(RESOLVED) - now)}"
    assert all(n.startswith("data/") for n in now - set(RESOLVED)), sorted(now - set(RESOLVED))


def _raw(name: str) -> dict:
    return yaml.safe_load((experiments.PRESET_DIR / f"{name}.yaml").read_text()) or {}


def _generator(name: str) -> str:
    """The data a preset describes: its generator, or 'a file' (a store the user gives: path, no generator)."""
    return str(load_experiment(name, "paper")["data"].get("generator", "a file"))


def test_no_two_preset_files_carry_the_same_data_section():
    """No data mapping (the base one, or one scale's) is written out in two files: a shared one lives in a
    dataset file that both name. A mapping that only names a dataset ({dataset: x}) is the reference itself.

    The one exception: files of different generators (different data) may hold the same mapping, e.g. the paper
    scale's ``{n_val: 100}`` (10 % more samples validate) of data/darcy, data/pipe and data/navier_stokes. A
    dataset file builds on one dataset, so a darcy set cannot take that rule from a pipe set; it is a shared
    convention, not a copied dataset."""
    copies = defaultdict(list)
    for name in available_presets():
        raw = _raw(name)
        sections = {"data": raw.get("data")}
        sections.update({f"scales.{s}.data": (v or {}).get("data") for s, v in (raw.get("scales") or {}).items()})
        for where, mapping in sections.items():
            if mapping and set(mapping) != {"dataset"}:
                copies[json.dumps(mapping, sort_keys=True)].append(f"{name}: {where}")
    found = []
    for text, places in copies.items():
        files = sorted({p.split(":")[0] for p in places})  # one file's scales may repeat a mapping of its own
        generators = [_generator(f) for f in files]
        if len(set(generators)) < len(generators):
            found.append(f"{', '.join(places)} all hold {text}")
    assert not found, "data sections copied instead of composed (move them to a dataset file):\n" + "\n".join(found)


def test_no_resolved_config_holds_the_dataset_key():
    for name in available_presets():
        for scale in SCALES:
            assert "dataset" not in load_experiment(name, scale)["data"], (name, scale)


def test_every_dataset_file_with_a_generator_makes_its_generator_config():
    """What `neurodyn generate data/<x>` does first: the resolved data section builds the generator's config (at
    every scale but a paper scale that reads a file the user gives, data.source_path)."""
    from neurodyn.data.assembly import data_options
    from neurodyn.data.generators import get_generator

    made = 0
    for name in available_datasets():
        for scale in SCALES:
            data = load_experiment(f"data/{name}", scale)["data"]
            if "generator" in data and data.get("source_path", "-") != "":
                get_generator(data["generator"]).make_config(**data_options(data))
                made += 1
    assert made >= 3 * 14  # the 14 dataset files of generated data that came before composition, at least


# --- the loader, on presets of a temporary experiments folder (the expected configs written out by hand) --------


@pytest.fixture()
def presets(tmp_path, monkeypatch):
    """Write ``{name: yaml text}`` as experiments/<name>.yaml under tmp_path and point the loader there."""
    monkeypatch.setattr(experiments, "PRESET_DIR", tmp_path)
    monkeypatch.setattr(experiments, "DATASET_DIR", tmp_path / "data")

    def write(files: dict[str, str]) -> None:
        for name, text in files.items():
            path = tmp_path / f"{name}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return write


GRID = """
data: {generator: grid, resolution: 64, t_final: 20.0, n_train: 100, seed: 0}
scales:
  tiny: {data: {resolution: 8, t_final: 2.0, n_train: 4}}
  cpu: {data: {resolution: 16}}
  paper: {}
"""


def test_the_merge_order_is_dataset_then_preset_for_the_base_and_for_each_scale(presets):
    presets({
        "data/grid": GRID,
        "m/bench": """
task: steady
data: {dataset: grid, t_final: 50.0, normalize: none}
model: {width: 4}
scales:
  tiny: {data: {n_train: 6}}
  cpu: {}
  paper: {data: {n_val: 10}}
""",
    })
    data = {s: load_experiment("m/bench", s)["data"] for s in SCALES}
    # tiny: the dataset's tiny t_final (2.0) beats the preset's base t_final, the preset's tiny n_train beats both
    assert data["tiny"] == {"generator": "grid", "resolution": 8, "t_final": 2.0, "n_train": 6, "seed": 0,
                            "normalize": "none"}
    assert data["cpu"] == {"generator": "grid", "resolution": 16, "t_final": 50.0, "n_train": 100, "seed": 0,
                           "normalize": "none"}
    assert data["paper"] == {"generator": "grid", "resolution": 64, "t_final": 50.0, "n_train": 100, "seed": 0,
                             "normalize": "none", "n_val": 10}
    assert load_experiment("m/bench", "tiny", ["data.t_final=7.0"])["data"]["t_final"] == 7.0  # overrides last


def test_a_dataset_may_build_on_another(presets):
    presets({
        "data/grid": GRID,
        "data/grid_fine": "data: {dataset: grid, resolution: 128}\nscales: {tiny: {data: {n_train: 5}}}\n",
        "m/bench": "data: {dataset: grid_fine, seed: 3}\n",
    })
    assert load_experiment("m/bench", "tiny")["data"] == {"generator": "grid", "resolution": 8, "t_final": 2.0,
                                                          "n_train": 5, "seed": 3}
    assert load_experiment("m/bench", "paper")["data"] == {"generator": "grid", "resolution": 128, "t_final": 20.0,
                                                           "n_train": 100, "seed": 3}
    assert load_experiment("data/grid_fine", "cpu")["data"]["resolution"] == 16


def test_an_unknown_dataset_is_one_config_error_listing_the_known_ones(presets):
    presets({"data/grid": GRID, "data/pipe": GRID, "m/bench": "data: {dataset: gird}\n"})
    with pytest.raises(ConfigError, match=r"unknown dataset 'gird'.*Did you mean 'grid'.*Known: grid, pipe"):
        load_experiment("m/bench", "cpu")


def test_datasets_naming_each_other_in_a_cycle_are_refused(presets):
    presets({"data/a": "data: {dataset: b}\n", "data/b": "data: {dataset: a, n_train: 1}\n",
             "m/bench": "data: {dataset: a}\n"})
    with pytest.raises(ConfigError, match="cycle: a -> b -> a"):
        load_experiment("m/bench", "cpu")


@pytest.mark.parametrize("text, expected", [
    ("data: {dataset: grid}\nscales: {tiny: {data: {dataset: grid}}}\n", "scales.tiny.data names a dataset"),
    ("data: {dataset: model_in_data}\n", r"holds \['model'\]; a dataset file holds only"),
    ("data: {dataset: scale_model}\n", r"holds \['scales.tiny.model'\]"),
])
def test_misplaced_dataset_names_and_dataset_files_with_other_sections_are_refused(presets, text, expected):
    presets({"data/grid": GRID, "data/model_in_data": GRID + "model: {width: 2}\n",
             "data/scale_model": "data: {n_train: 1}\nscales: {tiny: {model: {width: 2}}}\n", "m/bench": text})
    with pytest.raises(ConfigError, match=expected):
        load_experiment("m/bench", "tiny")


def test_an_override_cannot_switch_the_dataset(presets):
    presets({"data/grid": GRID, "m/bench": "data: {dataset: grid}\n"})
    with pytest.raises(ConfigError, match="data.dataset is read from the preset file only"):
        load_experiment("m/bench", "cpu", ["data.dataset=other"])
