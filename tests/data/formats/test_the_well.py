import h5py
import numpy as np
import pytest

from neurodyn.data.formats import read_public, sniff
from neurodyn.errors import DataError


def test_fields_become_channels_with_the_wells_names(make):
    path, arr = make.the_well()
    assert sniff(path) == ("the-well", None)
    d = read_public(path)
    assert (d.kind, d.inputs, d.targets) == ("shear_flow", ("u",), ("u",))
    names = d.info["channels"]
    assert names == [
        "density",
        "pressure_x_only",
        "velocity_x",
        "velocity_y",
        "stress_xx",
        "stress_xy",
        "stress_yx",
        "stress_yy",
    ]
    u = d["u"]
    assert u.shape == (2, 3, 4, 5, 8)
    ch = {name: i for i, name in enumerate(names)}
    for b, t, i, j in [(0, 0, 0, 0), (1, 2, 3, 4), (1, 1, 2, 0)]:
        assert u[b, t, i, j, ch["density"]] == arr["density"][b, t, i, j]
        assert u[b, t, i, j, ch["pressure_x_only"]] == arr["pressure_x_only"][b, t, i]  # broadcast along y
        assert u[b, t, i, j, ch["velocity_y"]] == arr["velocity"][b, t, i, j, 1]
        assert u[b, t, i, j, ch["stress_yx"]] == arr["stress"][b, t, i, j, 1, 0]
    static = d["static"]  # the time-invariant, sample-invariant mask, repeated for every trajectory
    assert static.shape == (2, 4, 5, 1) and d.info["static_channels"] == ["mask"]
    np.testing.assert_array_equal(static[1, ..., 0], arr["mask"])
    np.testing.assert_array_equal(d.params["Re"], [1e4, 5e4])
    np.testing.assert_allclose(d.coords["y"], arr["y"])
    np.testing.assert_allclose(d.coords["t"], arr["time"])
    assert d.info["shared_scalars"] == {"gamma": pytest.approx(1.4)}
    assert d.info["simulation_parameters"] == {"Schmidt": 0.5}
    assert d.info["boundary_conditions"]["x_periodic"]["bc_type"] == "PERIODIC"

    s = read_public(path, stride=2, time_stride=2, max_samples=1)
    assert s["u"].shape == (1, 2, 2, 3, 8) and s["static"].shape == (1, 2, 3, 1)
    assert s["u"][0, 1, 1, 2, ch["stress_xy"]] == arr["stress"][0, 2, 2, 4, 0, 1]
    assert s.params["Re"].shape == (1,)


def test_shape_disagreeing_with_attributes_is_named(make):
    path, _ = make.the_well(bad="density")
    with pytest.raises(
        DataError,
        match=r"field 't0_fields/density' of .* has shape \(2, 3, 3, 5\), expected "
        r"\(2, 3, 4, 5\) = \(B, T, varying spatial axes\)",
    ):
        read_public(path)


def test_missing_parts_are_named(make, tmp_path):
    path, _ = make.the_well(no_dynamic=True, name="static_only.hdf5")
    with pytest.raises(DataError, match=r"has no time-varying field"):
        read_public(path)
    path, _ = make.the_well(name="no_attr.hdf5")
    with h5py.File(path, "r+") as f:
        del f.attrs["n_trajectories"]
    with pytest.raises(DataError, match=r"lacks root attribute 'n_trajectories'"):
        read_public(path, kind="the-well")


def test_nan_names_fields_and_sample(make):
    path, _ = make.the_well()
    with h5py.File(path, "r+") as f:
        f["t1_fields/velocity"][1, 0, 0, 0, 0] = np.nan
    with pytest.raises(
        DataError,
        match=r"time-varying fields \(density, pressure_x_only, velocity, stress\) of "
        r"shear_flow_Reynolds_1e4.hdf5 holds NaN or Inf in sample 1",
    ):
        read_public(path)["u"]
