import h5py
import numpy as np
import pytest

from neurodyn.data.datasets import SteadyDataset, split_indices
from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoredDataset
from neurodyn.errors import DataError


@pytest.fixture
def store(tmp_path):
    g = get_generator("darcy")
    path = g.run(g.make_config(resolution=8), 10, seed=0, path=tmp_path / "d.h5", progress=False)
    return StoredDataset(path)


def test_splits_follow_the_protocol():
    s = split_indices(12, 8, 3, 1)
    assert list(s["train"]) == list(range(8)) and list(s["val"]) == [8] and list(s["test"]) == [9, 10, 11]
    with pytest.raises(DataError, match="holds 12 samples"):
        split_indices(12, 10, 3)


@pytest.mark.parametrize("in_memory", [True, False])
def test_items_are_channels_last_pairs(store, in_memory):
    ds = SteadyDataset(store, np.array([7, 2, 4]), in_memory=in_memory)
    item = ds[1]
    assert item["x"].shape == (8, 8, 1) and item["y"].shape == (8, 8, 1) and int(item["index"]) == 2
    np.testing.assert_array_equal(item["y"].numpy(), store.read("fields/u", 2))
    assert ds.in_channels == 1 and ds.out_channels == 1 and ds.spatial_shape == (8, 8)


def test_nan_in_data_is_named(tmp_path, store):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(store.path.read_bytes())
    with h5py.File(bad, "r+") as f:
        f["fields/a"][3, 0, 0, 0] = np.nan
    with pytest.raises(DataError, match=r"fields/a has NaN or Inf in sample 3"):
        SteadyDataset(StoredDataset(bad, verify=False), np.arange(5))


def test_missing_field_and_mismatched_grids(tmp_path, store):
    with pytest.raises(DataError, match="no field 'v'"):
        SteadyDataset(store, np.arange(3), targets=["v"])
    odd = tmp_path / "odd.h5"
    odd.write_bytes(store.path.read_bytes())
    with h5py.File(odd, "r+") as f:
        del f["fields/u"]
        f["fields/u"] = np.zeros((10, 4, 4, 1), np.float32)
    with pytest.raises(DataError, match="share one grid"):
        SteadyDataset(StoredDataset(odd, verify=False), np.arange(3))
    with h5py.File(odd, "r+") as f:
        del f["fields/u"]
    with pytest.raises(DataError, match="lacks field 'fields/u'"):
        StoredDataset(odd, verify=False)
