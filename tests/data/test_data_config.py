"""The ``data`` section as a typed config (:class:`neurodyn.data.config.DataConfig`): the flat spelling of the presets
read into sections, every value checked when the config is made, and one open of the store per ``build_data``."""

import pytest

from neurodyn.data.assembly import build_data, without_generator
from neurodyn.data.config import FLAT_KEYS, DataConfig
from neurodyn.errors import ConfigError
from neurodyn.experiments import SCALES, available_presets, load_experiment


def test_every_preset_reads_into_sections_with_its_flat_values():
    read = 0
    for name in available_presets():
        for scale in SCALES:
            flat = without_generator(load_experiment(name, scale)["data"])
            dc = DataConfig.parse(flat)
            for key, (section, field) in FLAT_KEYS.items():
                if key in flat:
                    assert getattr(getattr(dc, section), field) == flat[key], (name, scale, key)
            assert all(k not in FLAT_KEYS for k in dc.options)
            read += 1
    assert read >= 3 * 60


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("n_train", -1, "data.n_train must be a whole number >= 0"),
        ("n_val", "half", "data.n_val must be a whole number >= 0 or 'auto'"),
        ("normalize_input", "zscore", "data.normalize_input must be one of"),
        ("normalize_reduce", "global", "data.normalize_reduce must be one of"),
        ("t_in", 0, "data.t_in=0 must be a whole number >= 1"),
        ("window_stride", 0, "data.window_stride=0 must be a whole number >= 1"),
        ("missing", "zero", "data.missing must be one of 'ffill', 'mean', 'drop'"),
        ("drop_steps", 1.5, "data.drop_steps is the fraction of each sequence's steps dropped, in [0, 1); got 1.5"),
        ("max_steps", -4, "data.max_steps=-4 must be a whole number >= 0"),
        ("shuffle", "maybe", "data.shuffle='maybe' is not true or false"),
        ("normalize_target", 3, "data.normalize_target=3 is not a string"),
        ("resolution", "fine", "generator 'darcy' option resolution='fine' is not an integer"),
    ],
)
def test_a_bad_value_is_one_sentence_naming_the_key(key, value, words):
    with pytest.raises(ConfigError) as info:  # (the generator's options: checked with the source, before use)
        DataConfig.parse({"generator": "darcy", "n_train": 10, key: value}).check_source()
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_typo_on_a_file_run_names_the_closest_key():
    with pytest.raises(
        ConfigError,
        match=r"data.n_trian is not a data key of a run on a file \(did you mean "
        r"'n_train'\?\)",
    ):
        DataConfig.parse({"path": "train.h5", "n_trian": 10})


def test_build_data_opens_the_training_store_once(data_dir, monkeypatch):
    from neurodyn.data import store as store_module

    cfg = load_experiment("fno/darcy", "tiny")
    build_data(cfg, progress=False)  # generate the file first (its writer reads it back)
    opened = []
    real = store_module.StoredDataset.__init__

    def counting(self, path, *args, **kwargs):
        opened.append(str(path))
        real(self, path, *args, **kwargs)

    monkeypatch.setattr(store_module.StoredDataset, "__init__", counting)
    data = build_data(cfg, progress=False)
    assert opened == [str(data["path"])]
    assert all(ds.store is data["store"] for ds in data["sets"].values())
    # a run on a given file: the record of the file is read through the same handle
    opened.clear()
    on_file = build_data(load_experiment("fno/darcy", "tiny", [f"data.path={data['path']}"]), progress=False)
    assert opened == [str(data["path"])] and on_file["record"]["shapes"]["fields/a"][0] == data["store"].n_samples
