import numpy as np
import pytest

from neurodyn.data.formats import read_public, sniff
from neurodyn.errors import ConfigError, DataError


@pytest.mark.parametrize("version", ["5", "7.3", "7.3-header"])
def test_darcy_both_matlab_versions_read_to_the_published_axes(make, version):
    path, coeff, sol = make.fno_darcy(version=version)
    assert sniff(path) == ("fno-mat", None)
    d = read_public(path)
    assert (d.format, d.kind, d.inputs, d.targets) == ("fno-mat", "darcy", ("a",), ("u",))
    a, u = d["fields/a"], d["fields/u"]
    assert a.shape == u.shape == (3, 21, 21, 1) and a.dtype == np.float32
    for n, i, j in [(0, 0, 0), (1, 3, 17), (2, 20, 5), (2, 7, 20)]:  # index by index: no axis swapped
        assert a[n, i, j, 0] == np.float32(coeff[n, i, j])
        assert u[n, i, j, 0] == np.float32(sol[n, i, j])
    np.testing.assert_allclose(d.coords["x"], np.arange(21) / 20, atol=1e-7)
    assert d.info["matlab_version"] == version[:3]
    assert d.info["ignored"] == ["Kcoeff"]


def test_darcy_stride_is_fnos_subsampling(make):
    path, coeff, sol = make.fno_darcy()
    d = read_public(path, stride=5)  # FNO: 421 -> 85 with r = 5; here 21 -> 5
    a = d["a"]
    assert a.shape == (3, 5, 5, 1)
    assert a[1, 2, 3, 0] == np.float32(coeff[1, 10, 15])
    np.testing.assert_allclose(d.coords["y"], [0, 0.25, 0.5, 0.75, 1.0])
    assert read_public(path, stride=[5, 10])["u"].shape == (3, 5, 3, 1)
    assert read_public(path, max_samples=2)["u"].shape == (2, 21, 21, 1)


@pytest.mark.parametrize("version", ["5", "7.3-header"])
def test_navier_stokes_time_moves_first_and_a_becomes_frame_zero(make, version):
    path, a, u, t = make.fno_ns(version=version)
    d = read_public(path)
    assert d.kind == "navier-stokes" and d.inputs == d.targets == ("u",)
    w = d["u"]
    assert w.shape == (2, 6, 8, 8, 1)
    for n in range(2):
        np.testing.assert_array_equal(w[n, 0, :, :, 0], a[n].astype(np.float32))
        for k in range(1, 6):
            np.testing.assert_array_equal(w[n, k, :, :, 0], u[n, :, :, k - 1].astype(np.float32))
    np.testing.assert_array_equal(d.coords["t"], [0, 1, 2, 3, 4, 5])
    np.testing.assert_allclose(d.coords["x"], np.arange(8) / 8)  # periodic grid

    only_u = read_public(path, include_initial=False)["u"]
    assert only_u.shape == (2, 5, 8, 8, 1)
    np.testing.assert_array_equal(only_u[1, 2, ..., 0], u[1, ..., 2].astype(np.float32))

    strided = read_public(path, time_stride=2, stride=2)
    np.testing.assert_array_equal(strided.coords["t"], [0, 2, 4])
    np.testing.assert_array_equal(strided["u"][0, 2, ..., 0], u[0, ::2, ::2, 3].astype(np.float32))


def test_navier_stokes_without_t_assumes_unit_spacing(make):
    path, a, u, _ = make.fno_ns(with_t=False, T=3)
    d = read_public(path)
    np.testing.assert_array_equal(d.coords["t"], [0, 1, 2, 3])
    assert "assumed" in d.info["t_source"]


@pytest.mark.parametrize("version", ["5", "7.3"])
def test_burgers_is_a_steady_1d_pair(make, version):
    path, a, u = make.fno_burgers(version=version)
    d = read_public(path, stride=4)
    assert d.kind == "burgers" and d["a"].shape == (4, 8, 1)
    np.testing.assert_array_equal(d["u"][3, :, 0], u[3, ::4].astype(np.float32))
    np.testing.assert_allclose(d.coords["x"], np.arange(0, 32, 4) / 32)


def test_missing_key_is_named(make):
    path = make.mat("only_coeff.mat", {"coeff": np.zeros((2, 5, 5))})
    with pytest.raises(DataError, match=r"has coeff but no sol"):
        read_public(path)
    path = make.mat("other.mat", {"foo": np.zeros((2, 5))})
    with pytest.raises(DataError, match=r"holds foo\(2, 5\); expected FNO's 'coeff' and 'sol'"):
        read_public(path)


@pytest.mark.parametrize("version", ["5", "7.3"])
def test_wrong_shapes_name_array_found_and_expected(make, version):
    path = make.mat("bad.mat", {"coeff": np.zeros((2, 5, 5)), "sol": np.zeros((2, 5, 4))}, version)
    with pytest.raises(DataError, match=r"array 'sol' of bad.mat has shape \(2, 5, 4\), expected \(2, 5, 5\)"):
        read_public(path)
    path = make.mat("badns.mat", {"a": np.zeros((2, 4, 4)), "u": np.zeros((2, 4, 5, 3))}, version)
    with pytest.raises(DataError, match=r"array 'u' of badns.mat has shape \(2, 4, 5, 3\), expected"):
        read_public(path)
    path = make.mat("badt.mat", {"a": np.zeros((2, 4, 4)), "u": np.zeros((2, 4, 4, 3)), "t": np.zeros((1, 2))}, version)
    with pytest.raises(DataError, match=r"array 't' of badt.mat has shape \(2,\), expected \(3,\)"):
        read_public(path)


@pytest.mark.parametrize("version", ["5", "7.3"])
def test_nan_names_array_and_sample(make, version):
    sol = np.ones((4, 5, 5))
    sol[2, 1, 3] = np.nan
    path = make.mat("nan.mat", {"coeff": np.ones((4, 5, 5)), "sol": sol}, version)
    d = read_public(path)
    with pytest.raises(DataError, match=r"array 'sol' of nan.mat holds NaN or Inf in sample 2"):
        d["u"]
    np.testing.assert_array_equal(d.read("u", 0, 2), np.ones((2, 5, 5, 1)))  # the clean part still reads


@pytest.mark.parametrize("version", ["5", "7.3"])
def test_truncated_file_is_one_clear_error(make, cut, version):
    path, _, _ = make.fno_darcy(version=version, s=41)
    cut(path, 0.6)
    with pytest.raises(DataError, match=r"could not be read; it is truncated, damaged"):
        read_public(path)["u"]


def test_bad_options_are_config_errors(make):
    path, _, _ = make.fno_darcy()
    with pytest.raises(ConfigError, match=r"no option\(s\) strid; its options are"):
        read_public(path, strid=2)
    with pytest.raises(ConfigError, match=r"stride must be an int >= 1"):
        read_public(path, stride=0)
    with pytest.raises(ConfigError, match=r"2 values for 1 spatial axes|1 values for 2 spatial axes"):
        read_public(path, stride=[2])
