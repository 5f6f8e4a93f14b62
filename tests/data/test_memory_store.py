"""Sequence arrays held in memory (``MemoryStore``, ``build_sequence_data``) against the store file ``neurodyn
convert`` makes of the same arrays: the same arrays read, the same datasets and normalizers, nothing written."""

import os

import numpy as np
import pytest
import torch

from neurodyn.data.assembly import build_data, build_sequence_data
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.memory_store import sequence_store
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError, DataError


def ragged(n=30, length=20, channels=2, seed=0, labels=("walk", "run", "sit")):
    """Series of unequal lengths (a mask that is not a prefix for some), a missing value, timestamps, text labels."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, length, channels))
    mask = np.ones((n, length), dtype=np.int8)
    mask[::3, -5:] = 0
    mask[1::4, 2] = 0  # a gap inside a series: the reader compacts it
    x[4, 6, 1] = np.nan  # one missing value: fields/observed
    t = np.cumsum(rng.uniform(0.5, 1.5, (n, length)), axis=1)
    y = np.asarray(labels)[rng.integers(0, len(labels), n)]
    return {"x": np.where(mask[..., None] == 1, x, np.nan), "y": y, "t": t, "mask": mask}


def converted(tmp_path, arrays):
    np.savez(tmp_path / "a.npz", **arrays)
    return convert_to_store(tmp_path / "a.npz", tmp_path / "a.h5", kind="sequence-npz")


def test_the_memory_store_holds_what_the_converted_file_holds(tmp_path):
    arrays = ragged()
    disk = StoredDataset(converted(tmp_path, arrays))
    memory = sequence_store(arrays)
    assert memory.shapes == disk.shapes and memory.n_samples == disk.n_samples == 30
    assert (memory.inputs, memory.targets) == (disk.inputs, disk.targets)
    assert "fields/observed" in memory.shapes  # the missing value is marked, as in the file
    for key in disk.shapes:
        got, want = (
            memory.read(key, () if key.startswith("coords/") else slice(None)),
            disk.read(key, () if key.startswith("coords/") else slice(None)),
        )
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), key
    assert np.array_equal(memory.read("fields/x", np.array([2, 7])), disk.read("fields/x", np.array([2, 7])))
    assert memory.config["info"]["classes"] == disk.config["info"]["classes"] == ["run", "sit", "walk"]
    assert memory.keys("params") == disk.keys("params")
    # the digest names the arrays and their class names: other labels are other data
    other = dict(arrays, y=np.where(arrays["y"] == "run", "jog", arrays["y"]))
    assert sequence_store(other).attrs["checksum"] != memory.attrs["checksum"] == sequence_store(arrays).checksum()


@pytest.mark.parametrize(
    "data",
    [
        {"n_train": "all", "n_val": "auto", "shuffle": True, "seed": 3, "missing": "ffill"},
        {"n_train": 20, "n_val": 4, "n_test": 6, "missing": "mean", "observed_channels": True, "max_steps": 8},
    ],
)
def test_build_sequence_data_splits_and_normalises_as_build_data(tmp_path, data):
    arrays = ragged(seed=1)
    path = converted(tmp_path, arrays)
    want = build_data({"task": "sequence", "data": {**data, "path": str(path)}}, progress=False)
    store = sequence_store(arrays)
    got = build_sequence_data({"task": "sequence", "data": {**data, "arrays": "in memory"}}, store, store.record())
    assert got["record"]["shapes"]["fields/x"] == [30, 20, 2] and got["path"] == store.path
    assert set(got["sets"]) == set(want["sets"])
    for name, ds in want["sets"].items():
        mine = got["sets"][name]
        assert np.array_equal(mine.ids, ds.ids) and (mine.pool, mine.n_targets) == (ds.pool, ds.n_targets)
        for key in ("x", "t", "m", "y"):  # (NaN: a value the training mean fills, data.missing=mean)
            torch.testing.assert_close(getattr(mine, key), getattr(ds, key), rtol=0, atol=0, equal_nan=True)
    for norm in ("x_norm",):
        for k, v in want[norm].state_dict().items():
            assert torch.equal(got[norm].state_dict()[k], v), k


def test_nothing_is_written_and_bad_arrays_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEURODYN_DATA", str(tmp_path))
    store = sequence_store(ragged())
    build_sequence_data({"task": "sequence", "data": {"n_train": "all", "arrays": "in memory"}}, store)
    assert os.listdir(tmp_path) == []
    with pytest.raises(DataError, match=r"^<arrays>: no array 'y'; the file holds \['x'\]"):
        sequence_store({"x": np.zeros((3, 4, 1))})
    with pytest.raises(DataError, match=r"<arrays> has no array 'fields/z'"):
        store.read("fields/z")
    with pytest.raises(ConfigError, match="data.n_trian is not a data key of a run on arrays .did you mean 'n_train'"):
        build_sequence_data({"task": "sequence", "data": {"n_trian": 5, "arrays": "in memory"}}, store)
    with pytest.raises(ConfigError, match="builds the data of a sequence task"):
        build_sequence_data({"task": "steady", "data": {"arrays": "in memory"}}, store)
