import h5py
import numpy as np
import pytest

from neurodyn.data.formats import read_public, sniff
from neurodyn.errors import DataError


def test_single_array_1d_file(make):
    path, tensor, x, t = make.pdebench_1d()
    assert sniff(path) == ("pdebench", None)
    d = read_public(path)
    assert (d.kind, d.inputs, d.targets) == ("single", ("u",), ("u",))
    u = d["u"]
    assert u.shape == (3, 6, 16, 1)  # (N, T, X, C): already time first in PDEBench
    assert u[2, 4, 9, 0] == tensor[2, 4, 9]
    np.testing.assert_allclose(d.coords["x"], x, rtol=1e-6)
    np.testing.assert_allclose(d.coords["t"], t[:6], rtol=1e-6)  # T + 1 stored values: the first T kept
    assert "first 6 of its 7" in d.info["t_coordinate"]

    s = read_public(path, stride=4, time_stride=2, max_samples=2)
    assert s["u"].shape == (2, 3, 4, 1)
    assert s["u"][1, 2, 3, 0] == tensor[1, 4, 12]
    np.testing.assert_allclose(s.coords["t"], t[[0, 2, 4]], rtol=1e-6)


def test_darcy_single_array_file_is_a_steady_pair(make):
    path, nu, tensor = make.pdebench_darcy()
    d = read_public(path)
    assert (d.kind, d.inputs, d.targets) == ("darcy", ("a",), ("u",))
    assert d["a"].shape == d["u"].shape == (3, 8, 8, 1)
    assert d["a"][1, 2, 5, 0] == nu[1, 2, 5] and d["u"][2, 7, 0, 0] == tensor[2, 0, 7, 0]


def test_cfd_file_stacks_variables_in_pdebench_order(make):
    path, arrays = make.pdebench_cfd()
    d = read_public(path)
    assert d.kind == "cfd" and d.info["channels"] == ["density", "pressure", "Vx", "Vy"]
    u = d["u"]
    assert u.shape == (2, 4, 6, 5, 4)
    for c, name in enumerate(["density", "pressure", "Vx", "Vy"]):
        assert u[1, 3, 2, 4, c] == arrays[name][1, 3, 2, 4]
    assert d.coords["t"].shape == (4,) and d.coords["y"].shape == (5,)


def test_per_seed_groups_become_samples_in_name_order(make):
    path, data = make.pdebench_seeds(C=2)
    d = read_public(path)
    assert d.kind == "seeds" and d.n_samples == 3
    u = d["u"]
    assert u.shape == (3, 5, 6, 4, 2)
    for i, g in enumerate(sorted(data)):
        np.testing.assert_array_equal(u[i], data[g])
    np.testing.assert_allclose(d.coords["x"], np.linspace(-2.5, 2.5, 6), rtol=1e-6)
    s = read_public(path, stride=[2, 3], time_stride=2, max_samples=2)
    assert s["u"].shape == (2, 3, 3, 2, 2)
    np.testing.assert_array_equal(s["u"][1, 1], data["0001"][2, ::2, ::3])


def test_seed_group_of_another_shape_is_named(make):
    path, _ = make.pdebench_seeds(bad_group="0002")
    with pytest.raises(
        DataError,
        match=r"array '0002/data' of 2D_rdb_NA_NA.h5 has shape \(5, 5, 4, 1\), "
        r"expected \(5, 6, 4, 1\) like group '0000'",
    ):
        read_public(path)


def test_nan_in_a_seed_group_names_group_and_sample(make):
    path, data = make.pdebench_seeds()
    with h5py.File(path, "r+") as f:
        f["0001/data"][2, 1, 1, 0] = np.inf
    d = read_public(path)
    with pytest.raises(DataError, match=r"array '0001/data' of 2D_rdb_NA_NA.h5 \(sample 1\) holds NaN or Inf"):
        d["u"]


def test_nan_in_tensor_names_array_and_sample(make):
    path, *_ = make.pdebench_1d()
    with h5py.File(path, "r+") as f:
        f["tensor"][2, 0, 0] = np.nan
    with pytest.raises(DataError, match=r"array 'tensor' of 1D_Burgers_Sols_Nu0.01.hdf5 holds NaN or Inf in sample 2"):
        read_public(path)["u"]


def test_missing_cfd_variable_and_bad_coordinates(make, tmp_path):
    path, _ = make.pdebench_cfd(drop="Vy")
    with pytest.raises(DataError, match=r"has no 'Vy', which a 2-D PDEBench CFD file needs"):
        read_public(path)
    short = tmp_path / "short_t.hdf5"
    with h5py.File(short, "w") as f:
        f["tensor"] = np.zeros((2, 5, 8), np.float32)
        f["x-coordinate"] = np.zeros(8, np.float32)
        f["t-coordinate"] = np.zeros(3, np.float32)
    with pytest.raises(DataError, match=r"'t-coordinate' of short_t.hdf5 has shape \(3,\), expected at least \(5,\)"):
        read_public(short)
    badx = tmp_path / "bad_x.hdf5"
    with h5py.File(badx, "w") as f:
        f["tensor"] = np.zeros((2, 5, 8), np.float32)
        f["x-coordinate"] = np.zeros(7, np.float32)
    with pytest.raises(DataError, match=r"coordinate 'x-coordinate' of bad_x.hdf5 has shape \(7,\), expected \(8,\)"):
        read_public(badx)


def test_unknown_hdf5_layout_and_truncation(make, cut, tmp_path):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["something"] = np.zeros(3)
    with pytest.raises(DataError, match=r"HDF5 file .*other.h5 holds \['something'\].*match no known layout"):
        read_public(other)
    with pytest.raises(DataError, match=r"holds \['something'\]; expected PDEBench's 'tensor'"):
        read_public(other, kind="pdebench")
    path, *_ = make.pdebench_1d(n=20, X=64)
    cut(path, 0.5)
    with pytest.raises(DataError, match=r"HDF5 file .* could not be read; it is truncated, damaged"):
        read_public(path)
