import numpy as np
import pytest

from neurodyn.data.formats import read_public, sniff
from neurodyn.errors import ConfigError, DataError, UnknownNameError


def test_airfoil_folder_mesh_and_mach_number(make):
    folder, X, Y, Q = make.geofno_mesh("airfoil", folder="naca")
    assert sniff(folder) == ("geo-fno", "airfoil")
    d = read_public(folder)
    assert (d.kind, d.inputs, d.targets) == ("airfoil", ("pos",), ("u",))
    pos, u = d["pos"], d["u"]
    assert pos.shape == (3, 11, 5, 2) and u.shape == (3, 11, 5, 1)
    for n, i, j in [(0, 0, 0), (2, 10, 4), (1, 6, 2)]:
        assert pos[n, i, j, 0] == np.float32(X[n, i, j]) and pos[n, i, j, 1] == np.float32(Y[n, i, j])
        assert u[n, i, j, 0] == np.float32(Q[n, 4, i, j])  # channel 4: the Mach number
    assert d.info["channels"] == ["mach"]
    every = read_public(folder / "NACA_Cylinder_Q.npy", channels="all")  # a file of the set names it too
    assert every["u"].shape == (3, 11, 5, 5) and every["u"][1, 3, 2, 3] == np.float32(Q[1, 3, 3, 2])
    assert every.info["channels"] == ["density", "velocity_x", "velocity_y", "pressure", "mach"]


def test_pipe_channel_zero_and_stride(make):
    folder, X, Y, Q = make.geofno_mesh("pipe", H=9, W=9, C=3)
    d = read_public(folder, kind="pipe", stride=2)
    assert d["pos"].shape == (3, 5, 5, 2) and d["u"].shape == (3, 5, 5, 1)
    assert d["u"][2, 4, 1, 0] == np.float32(Q[2, 0, 8, 2])
    assert d["pos"][0, 1, 3, 1] == np.float32(Y[0, 2, 6])
    with pytest.raises(
        DataError,
        match=r"array NACA_Cylinder_Q.npy has shape \(3, 3, 9, 9\) with 3 channels, "
        r"expected channel 4 \(the Mach number",
    ):
        make.geofno_mesh("airfoil", H=9, W=9, C=3, folder="short")
        read_public(make.root / "short")


def test_elasticity_point_cloud_axes(make):
    folder, xy, sigma = make.geofno_elasticity()
    for where in (folder, folder / "Meshes", make.root):  # set folder, Meshes, or a parent of elasticity/
        assert sniff(where) == ("geo-fno", "elasticity")
    d = read_public(folder)
    pos, u = d["pos"], d["u"]
    assert pos.shape == (4, 13, 2) and u.shape == (4, 13, 1)
    for n in range(4):
        for p in (0, 7, 12):
            assert pos[n, p, 0] == np.float32(xy[p, 0, n]) and pos[n, p, 1] == np.float32(xy[p, 1, n])
            assert u[n, p, 0] == np.float32(sigma[p, n])
    with pytest.raises(ConfigError, match=r"stride does not apply to elasticity"):
        read_public(folder, stride=2)


@pytest.mark.parametrize("version", ["5", "7.3"])
def test_plasticity_time_axis_moves_first(make, version):
    folder, path, inp, out = make.geofno_plasticity(version=version)
    assert sniff(path) == ("geo-fno", "plasticity") and sniff(folder) == ("geo-fno", "plasticity")
    d = read_public(folder)
    a, u = d["a"], d["u"]
    assert a.shape == (3, 11, 4, 1) and u.shape == (3, 3, 11, 4, 4)
    for n, t, i, j, c in [(0, 0, 0, 0, 0), (2, 2, 10, 3, 3), (1, 1, 5, 2, 1)]:
        assert u[n, t, i, j, c] == np.float32(out[n, i, j, t, c])
        assert a[n, i, j, 0] == np.float32(inp[n, i])  # the die profile, repeated along y
    np.testing.assert_allclose(d.coords["t"], [0, 0.5, 1])
    s = read_public(path, stride=[5, 1], time_stride=2)
    assert s["u"].shape == (3, 2, 3, 4, 4) and s["u"][1, 1, 2, 0, 2] == np.float32(out[1, 10, 0, 2, 2])


def test_folder_errors(make, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"folder .*empty holds no known public data set"):
        read_public(empty)
    with pytest.raises(DataError, match=r"holds none of Geo-FNO's sets"):
        read_public(empty, kind="geo-fno")
    with pytest.raises(UnknownNameError, match=r"unknown public data kind 'airfoi'. Did you mean 'airfoil'"):
        read_public(empty, kind="airfoi")
    both = tmp_path / "both"
    make.geofno_mesh("airfoil", folder="both")
    make.geofno_mesh("pipe", folder="both")
    with pytest.raises(DataError, match=r"holds several Geo-FNO sets \(airfoil, pipe\); choose one with kind"):
        read_public(both)
    assert read_public(both, kind="pipe").kind == "pipe"
    (both / "Pipe_Q.npy").unlink()
    with pytest.raises(DataError, match=r"folder .*both has no Pipe_Q.npy, which the Geo-FNO pipe set needs"):
        read_public(both, kind="pipe")


def test_shape_mismatch_nan_and_truncation(make, cut):
    folder, xy, sigma = make.geofno_elasticity(folder="el")
    np.save(folder / "Meshes" / "Random_UnitCell_sigma_10.npy", sigma[:, :3])
    with pytest.raises(
        DataError,
        match=r"array Random_UnitCell_sigma_10.npy has shape \(13, 3\), expected "
        r"\(13, 4\) = \(P, N\)",
    ):
        read_public(folder)
    bad = sigma.copy()
    bad[5, 2] = np.nan  # point 5 of sample 2
    np.save(folder / "Meshes" / "Random_UnitCell_sigma_10.npy", bad)
    with pytest.raises(DataError, match=r"array Random_UnitCell_sigma_10.npy holds NaN or Inf in sample 2"):
        read_public(folder)["u"]
    cut(folder / "Meshes" / "Random_UnitCell_XY_10.npy", 0.5)
    with pytest.raises(DataError, match=r"numpy file .*Random_UnitCell_XY_10.npy could not be read; it is truncated"):
        read_public(folder)
