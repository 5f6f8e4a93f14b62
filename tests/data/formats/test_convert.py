import hashlib
import json

import numpy as np
import pytest

from neurodyn.data.datasets import SteadyDataset
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.store import StoredDataset
from neurodyn.errors import DataError


def test_darcy_converts_to_a_checksummed_store_file(make, data_dir):
    src, coeff, sol = make.fno_darcy(n=5)
    out = convert_to_store(src, stride=2, chunk_size=2)
    assert out == data_dir / "imported" / "piececonst_r21_N3_smooth1_stride2.h5"
    s = StoredDataset(out)  # verifies every checksum
    assert s.attrs["generator"] == "import:fno-mat" and s.n_samples == 5
    assert (s.inputs, s.targets) == (("a",), ("u",))
    np.testing.assert_array_equal(s.read("fields/a")[..., 0], coeff[:, ::2, ::2].astype(np.float32))
    np.testing.assert_array_equal(s.read("fields/u")[..., 0], sol[:, ::2, ::2].astype(np.float32))
    np.testing.assert_allclose(s.read("coords/x"), np.linspace(0, 1, 11), atol=1e-7)
    cfg = s.config
    assert cfg["source"] == [
        {"name": src.name, "size": src.stat().st_size, "sha256": hashlib.sha256(src.read_bytes()).hexdigest()}
    ]
    assert cfg["format"] == "fno-mat" and cfg["kind"] == "darcy"
    assert cfg["reader_options"] == {"max_samples": 0, "stride": 2, "time_stride": 1, "include_initial": True}
    ds = SteadyDataset(s, np.arange(5))
    assert ds[4]["x"].shape == (11, 11, 1)

    # asking again returns the same file; other options make another file; a clash is refused
    assert convert_to_store(src, stride=2) == out
    other = convert_to_store(src, chunk_size=3)
    assert other.name == "piececonst_r21_N3_smooth1.h5" and StoredDataset(other).shapes["fields/u"] == (5, 21, 21, 1)
    with pytest.raises(DataError, match=r"already exists and holds another conversion"):
        convert_to_store(src, out=out, stride=3)


def test_chunked_conversion_equals_one_chunk(make, tmp_path):
    src, data = make.pdebench_seeds(n=5)
    a = convert_to_store(src, out=tmp_path / "a.h5", chunk_size=2)
    b = convert_to_store(src, out=tmp_path / "b.h5", chunk_size=5)
    sa, sb = StoredDataset(a), StoredDataset(b)
    np.testing.assert_array_equal(sa.read("fields/u"), sb.read("fields/u"))
    assert sa.attrs["checksum"] == sb.attrs["checksum"]
    assert json.loads(sa.attrs["config"])["info"]["n_groups"] == 5


@pytest.mark.parametrize("writer", ["the_well", "geofno", "pt"])
def test_other_formats_convert_with_params_and_coords(make, tmp_path, writer):
    """The stored values are the ones the fixture wrote, channel by channel (float32 storage: rtol 1e-6)."""
    close = lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # noqa: E731
    if writer == "the_well":
        src, arr = make.the_well()
        out = convert_to_store(src, out=tmp_path / "w.h5")
        s = StoredDataset(out)
        assert s.shapes["fields/u"] == (2, 3, 4, 5, 8) and s.shapes["params/Re"] == (2,)
        assert s.config["info"]["channels"] == [
            "density",
            "pressure_x_only",
            "velocity_x",
            "velocity_y",
            "stress_xx",
            "stress_xy",
            "stress_yx",
            "stress_yy",
        ]
        u = s.read("fields/u")
        close(u[..., 0], arr["density"])
        close(u[..., 1], np.broadcast_to(arr["pressure_x_only"][..., None], (2, 3, 4, 5)))  # constant along y
        close(u[..., 2:4], arr["velocity"])
        close(u[..., 4:8], arr["stress"].reshape(2, 3, 4, 5, 4))  # row-major: xx, xy, yx, yy
        close(s.read("fields/static")[..., 0], np.broadcast_to(arr["mask"], (2, 4, 5)))
        close(s.read("params/Re"), arr["Re"])
        for axis, name in (("t", "time"), ("x", "x"), ("y", "y")):
            close(s.read(f"coords/{axis}"), arr[name])
    elif writer == "geofno":
        folder, xy, sigma = make.geofno_elasticity()
        out = convert_to_store(folder, out=tmp_path / "e.h5")
        s = StoredDataset(out)
        assert s.shapes["fields/pos"] == (4, 13, 2) and s.inputs == ("pos",)
        assert [f["name"] for f in s.config["source"]] == [
            "Meshes/Random_UnitCell_XY_10.npy",
            "Meshes/Random_UnitCell_sigma_10.npy",
        ]
        close(s.read("fields/pos"), xy.transpose(2, 0, 1))  # written (P, 2, n): sample axis last
        close(s.read("fields/u")[..., 0], sigma.T)  # written (P, n)
    else:
        import torch

        x, y = torch.rand(3, 8), torch.rand(3, 8)
        src = make.pt({"x": x, "y": y})
        s = StoredDataset(convert_to_store(src, out=tmp_path / "p.h5"))
        assert s.shapes["fields/u"] == (3, 8, 1) and s.attrs["generator"] == "import:neuralop-pt"
        close(s.read("fields/a")[..., 0], x.numpy())
        close(s.read("fields/u")[..., 0], y.numpy())


def test_bad_data_leaves_nothing_behind(make, tmp_path):
    sol = np.ones((6, 5, 5))
    sol[4, 0, 0] = np.inf  # in the third chunk of two: two chunks were already written when it is found
    src = make.mat("nan.mat", {"coeff": np.ones((6, 5, 5)), "sol": sol})
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "keep.txt").write_text("unrelated")
    with pytest.raises(DataError, match=r"array 'sol' of nan.mat holds NaN or Inf in sample 4"):
        convert_to_store(src, out=out_dir / "nan.h5", chunk_size=2)
    assert sorted(p.name for p in out_dir.iterdir()) == ["keep.txt"]


def test_truncated_or_missing_source_writes_nothing(make, cut, tmp_path, data_dir):
    src, *_ = make.pdebench_1d(n=20, X=64)
    cut(src, 0.5)
    with pytest.raises(DataError, match=r"could not be read; it is truncated, damaged"):
        convert_to_store(src, out=tmp_path / "t.h5")
    with pytest.raises(DataError, match=r"does not exist"):
        convert_to_store(tmp_path / "missing.h5")
    assert not (tmp_path / "t.h5").exists() and not (tmp_path / "t.h5.partial").exists()
    assert not data_dir.exists()
