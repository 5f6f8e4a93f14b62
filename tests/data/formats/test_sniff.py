import numpy as np
import pytest

from neurodyn.data.formats import read_public, sniff
from neurodyn.errors import DataError


def test_each_format_is_told_from_its_content_not_its_name(make, tmp_path):
    """Files renamed to a misleading extension are still recognised by their bytes and arrays."""
    cases = {
        "fno-mat": make.fno_darcy()[0],
        "pdebench": make.pdebench_1d()[0],
        "the-well": make.the_well()[0],
        "neuralop-pt": make.pt({"x": np.zeros(1)}),
    }
    for fmt, path in cases.items():
        renamed = path.with_name(f"renamed_{fmt}.bin")
        renamed.write_bytes(path.read_bytes())
        assert sniff(renamed)[0] == fmt, fmt


def test_missing_empty_and_unknown_files(tmp_path):
    with pytest.raises(DataError, match=r"nope.mat does not exist; give the path of a public dataset file"):
        read_public(tmp_path / "nope.mat")
    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match=r"file .*empty.h5 is empty"):
        read_public(empty)
    text = tmp_path / "notes.txt"
    text.write_text("hello, not a dataset")
    with pytest.raises(DataError, match=r"cannot tell the format of .*notes.txt \(it starts with b'hello, n'\)"):
        read_public(text)
    npy = tmp_path / "random.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(DataError, match=r"numpy file .*random.npy is not one of Geo-FNO's files"):
        read_public(npy)
    npz = tmp_path / "arrays.npz"
    np.savez(npz, x=np.zeros(2))  # an .npz is read as time series (x, y): it lacks y
    with pytest.raises(DataError, match=r"arrays.npz: no array 'y'"):
        read_public(npz)
    with open(tmp_path / "arrays.bin", "wb") as fh:  # a zip archive of arrays under another name
        np.savez(fh, a=np.zeros(2))
    with pytest.raises(
        DataError,
        match=r"zip archive .*arrays.bin is neither a torch file nor a sequence .npz "
        r"\(it holds \['a.npy'\]\)",
    ):
        read_public(tmp_path / "arrays.bin")
    fake_mat = tmp_path / "fake.mat"
    fake_mat.write_bytes(b"\x00" * 300)
    with pytest.raises(DataError, match=r"MATLAB file .*fake.mat could not be read"):
        read_public(fake_mat)


def test_forced_format_must_fit_the_file(make):
    path, *_ = make.pdebench_1d()
    with pytest.raises(DataError, match=r"could not be read|holds"):
        read_public(path, kind="neuralop-pt")
    folder, *_ = make.geofno_mesh("pipe", H=5, W=5, C=1)
    with pytest.raises(DataError, match=r"is a folder; the fno-mat reader reads one file"):
        read_public(folder, kind="fno-mat")
