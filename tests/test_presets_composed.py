"""Presets name one dataset file (``defaults: [data: <name>]``, experiments/data/<name>.yaml), one hop deep.

The oracle is tests/fixtures/presets_resolved.json: ``load_experiment(name, scale)`` of every preset at every scale
as the loader resolved them before any preset named a dataset (each preset then spelled its whole data section),
re-spelled only where a key itself was renamed (the train sections; LaMO's two models). Rewriting how presets
compose must leave every resolved config exactly as it was. The precedence rule is experiments/README.md's.
"""

import json
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


def test_presets_are_one_hop_deep():
    """Every preset names at most one dataset file, and no dataset file names another (a chain fails here)."""
    named = 0
    for name in available_presets():
        raw = _raw(name)
        chained = "defaults" in raw or "dataset" in (raw.get("data") or {})
        if name.startswith("data/"):
            assert not chained, f"dataset file {name} names another file: presets are one hop deep"
            assert set(raw) <= {"description", "data", "scales"}, (name, sorted(raw))
        elif "defaults" in raw:
            assert [list(d) for d in raw["defaults"]] == [["data"]], (name, raw["defaults"])
            assert (experiments.DATASET_DIR / f"{raw['defaults'][0]['data']}.yaml").exists(), name
            named += 1
    assert named >= 70  # every preset of a shared benchmark names its dataset file


def test_dataset_files_are_named_after_their_data_not_a_model():
    from neurodyn.models import available

    models = set(available()) | {"chonn", "s4ffno"}  # the registered names and the preset folders of families
    for name in available_datasets():
        assert not set(name.split("_")) & models, f"dataset file data/{name} is named after a model"


def test_the_readme_states_the_precedence_rule_the_loader_follows():
    readme = (experiments.PRESET_DIR / "README.md").read_text()
    assert experiments.PRECEDENCE in readme
    assert "one hop" in readme.lower() and "defaults:\n  - data: darcy" in readme


def test_no_resolved_config_holds_the_dataset_name():
    for name in available_presets():
        for scale in SCALES:
            cfg = load_experiment(name, scale)
            assert "dataset" not in cfg["data"] and "defaults" not in cfg, (name, scale)


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
    """experiments/README.md's rule: data = dataset.data <- preset.data; scale = dataset.scales[s].data <-
    preset.scales[s].data; config = base <- scale <- overrides."""
    presets(
        {
            "data/grid": GRID,
            "m/bench": """
defaults:
  - data: grid
task: steady
data: {t_final: 50.0, normalize: none}
model: {width: 4}
scales:
  tiny: {data: {n_train: 6}}
  cpu: {}
  paper: {data: {n_val: 10}}
""",
        }
    )
    data = {s: load_experiment("m/bench", s)["data"] for s in SCALES}
    # tiny: the dataset's tiny t_final (2.0) beats the preset's base t_final, the preset's tiny n_train beats both
    assert data["tiny"] == {
        "generator": "grid",
        "resolution": 8,
        "t_final": 2.0,
        "n_train": 6,
        "seed": 0,
        "normalize": "none",
    }
    assert data["cpu"] == {
        "generator": "grid",
        "resolution": 16,
        "t_final": 50.0,
        "n_train": 100,
        "seed": 0,
        "normalize": "none",
    }
    assert data["paper"] == {
        "generator": "grid",
        "resolution": 64,
        "t_final": 50.0,
        "n_train": 100,
        "seed": 0,
        "normalize": "none",
        "n_val": 10,
    }
    assert load_experiment("m/bench", "tiny", ["data.t_final=7.0"])["data"]["t_final"] == 7.0  # overrides last
    assert "defaults" not in load_experiment("m/bench", "tiny")


@pytest.mark.parametrize(
    "text",
    [
        "defaults:\n  - data: grid\ndata: {seed: 3}\n",  # a dataset file naming another in its defaults
        "data: {dataset: grid, seed: 3}\n",  # or in its data section, as presets once did
    ],
)
def test_a_dataset_file_naming_another_is_refused(presets, text):
    presets({"data/grid": GRID, "data/grid_fine": text, "m/bench": "defaults:\n  - data: grid_fine\n"})
    with pytest.raises(ConfigError, match="names another file; presets are one hop deep"):
        load_experiment("m/bench", "tiny")


def test_an_unknown_dataset_is_one_config_error_listing_the_known_ones(presets):
    presets({"data/grid": GRID, "data/pipe": GRID, "m/bench": "defaults:\n  - data: gird\n"})
    with pytest.raises(ConfigError, match=r"unknown dataset 'gird'.*Did you mean 'grid'.*Known: grid, pipe"):
        load_experiment("m/bench", "cpu")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("defaults:\n  - data: grid\n  - data: grid\n", r"defaults names one dataset file.*\['data', 'data'\]"),
        ("defaults:\n  - model: fno\n", r"defaults names one dataset file.*\['model'\]"),
        ("defaults: {data: grid}\n", "defaults is a list of one-key entries"),
        ("data: {dataset: grid}\n", r"data.dataset is not a key; a preset names its dataset file in its defaults"),
        ("defaults:\n  - data: model_in_data\n", r"holds \['model'\]; a dataset file holds only"),
        ("defaults:\n  - data: scale_model\n", r"holds \['scales.tiny.model'\]"),
    ],
)
def test_misplaced_dataset_names_and_dataset_files_with_other_sections_are_refused(presets, text, expected):
    presets(
        {
            "data/grid": GRID,
            "data/model_in_data": GRID + "model: {width: 2}\n",
            "data/scale_model": "data: {n_train: 1}\nscales: {tiny: {model: {width: 2}}}\n",
            "m/bench": text,
        }
    )
    with pytest.raises(ConfigError, match=expected):
        load_experiment("m/bench", "tiny")


def test_an_override_cannot_switch_the_dataset(presets):
    presets({"data/grid": GRID, "m/bench": "defaults:\n  - data: grid\n"})
    with pytest.raises(ConfigError, match=r"the dataset a preset names \(defaults\) is read from the preset file"):
        load_experiment("m/bench", "cpu", ["defaults=[{data: other}]"])
