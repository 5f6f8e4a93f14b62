import os
import stat

import h5py
import numpy as np
import pytest

from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoreMeta, StoredDataset, write_store
from neurodyn.errors import DataError


def _darcy(tmp_path, name, **kw):
    g = get_generator("darcy")
    cfg = g.make_config(resolution=8)
    return g, cfg, tmp_path / name


def test_interrupted_generation_resumes_to_identical_bytes(tmp_path):
    g, cfg, whole = _darcy(tmp_path, "whole.h5")
    assert g.run(cfg, 23, seed=3, path=whole, chunk_size=5, progress=False) == whole

    resumed = tmp_path / "resumed.h5"
    meta = StoreMeta("darcy", g.version, __import__("dataclasses").asdict(cfg), 3, 23, 5, g.inputs, g.targets)

    class Killed(Exception):
        pass

    def die_after_two(k, n):
        if k == 2:
            raise Killed

    with pytest.raises(Killed):
        write_store(resumed, meta, lambda ids: g.generate(cfg, ids, 3, "cpu"), coords=g.coords(cfg),
                    progress=False, on_chunk=die_after_two)
    partial = tmp_path / "resumed.h5.partial"
    assert not resumed.exists() and sorted(p.name for p in partial.glob("chunk_*")) == [
        "chunk_000000.npz", "chunk_000001.npz", "chunk_000002.npz"]
    (partial / ".chunk_000003.npz.999.tmp").write_bytes(b"half a chunk")  # a kill mid-write leaves this
    made = []
    write_store(resumed, meta, lambda ids: made.append(ids[0]) or g.generate(cfg, ids, 3, "cpu"),
                coords=g.coords(cfg), progress=False)
    assert made == [15, 20]  # only the missing chunks were made
    assert resumed.read_bytes() == whole.read_bytes()
    assert not partial.exists()


def test_sharded_generation_equals_single_run(tmp_path):
    g, cfg, whole = _darcy(tmp_path, "whole.h5")
    g.run(cfg, 12, seed=1, path=whole, chunk_size=4, progress=False)
    sharded = tmp_path / "sharded.h5"
    assert g.run(cfg, 12, seed=1, path=sharded, chunk_size=4, shard=(1, 2), progress=False) is None
    assert g.run(cfg, 12, seed=1, path=sharded, chunk_size=4, shard=(0, 2), progress=False) == sharded
    assert sharded.read_bytes() == whole.read_bytes()


def test_layout_and_lazy_reads(tmp_path):
    g, cfg, path = _darcy(tmp_path, "d.h5")
    g.run(cfg, 6, seed=0, path=path, chunk_size=4, progress=False)
    ds = StoredDataset(path)
    assert ds.inputs == ("a",) and ds.targets == ("u",) and ds.n_samples == 6
    assert ds.shapes["fields/a"] == (6, 8, 8, 1) and ds.shapes["coords/x"] == (8,)
    assert ds.config["resolution"] == 8 and ds.attrs["generator"] == "darcy" and ds.attrs["seed"] == 0
    direct = g.generate(cfg, np.array([4]), 0, "cpu")
    np.testing.assert_array_equal(ds.read("fields/u", 4), direct["fields/u"][0])


def test_corrupt_file_names_the_file_and_array(tmp_path):
    g, cfg, path = _darcy(tmp_path, "d.h5")
    g.run(cfg, 4, seed=0, path=path, progress=False)
    with h5py.File(path, "r+") as f:
        f["fields/u"][1, 2, 2, 0] += 1.0
    with pytest.raises(DataError, match=r"d\.h5.*fields/u"):
        StoredDataset(path)
    StoredDataset(path, verify=False)  # still readable when the user insists


def test_missing_truncated_and_foreign_files(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        StoredDataset(tmp_path / "nope.h5")
    trunc = tmp_path / "trunc.h5"
    g, cfg, path = _darcy(tmp_path, "d.h5")
    g.run(cfg, 4, seed=0, path=path, progress=False)
    trunc.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(DataError, match="trunc.h5"):
        StoredDataset(trunc)
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["u"] = np.zeros((2, 3))
    with pytest.raises(DataError, match="not a neurodyn store"):
        StoredDataset(foreign)


def test_nan_sample_stops_with_index_and_seed(tmp_path):
    meta = StoreMeta("toy", "1", {}, 7, 6, 3, ("a",), ("a",))

    def make(ids):
        a = np.ones((len(ids), 4), np.float32)
        a[ids == 4] = np.nan
        return {"fields/a": a}

    with pytest.raises(DataError, match=r"sample 4 \(seed 7\)"):
        write_store(tmp_path / "t.h5", meta, make, progress=False)
    assert not (tmp_path / "t.h5").exists()
    assert len(list((tmp_path / "t.h5.partial").glob("chunk_*"))) == 1  # the good chunk is kept


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    meta = StoreMeta("toy", "1", {}, 0, 1, 1, ("a",), ("a",))
    with pytest.raises(DataError, match="cannot write"):
        write_store(ro / "sub" / "t.h5", meta, lambda ids: {"fields/a": np.ones((1, 2))}, progress=False)


def test_unwritable_path_is_a_file(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    meta = StoreMeta("toy", "1", {}, 0, 1, 1, ("a",), ("a",))
    with pytest.raises(DataError, match="cannot write"):
        write_store(blocker / "t.h5", meta, lambda ids: {"fields/a": np.ones((1, 2))}, progress=False)



def _write_darcy(path: str, delay: float) -> str:
    """write_store of 12 small Darcy chunks, sleeping ``delay`` s before each chunk (a slower process)."""
    import dataclasses
    import time

    g = get_generator("darcy")
    cfg = g.make_config(resolution=8)
    meta = StoreMeta("darcy", g.version, dataclasses.asdict(cfg), 3, 24, 2, g.inputs, g.targets)

    def chunk(ids):
        time.sleep(delay)
        return g.generate(cfg, ids, 3, "cpu")

    return str(write_store(path, meta, chunk, coords=g.coords(cfg), progress=False))


def test_two_processes_asking_for_the_same_file_both_get_it(tmp_path):
    """Two runs of one preset start at once, one slower: the slower waits for the faster instead of writing
    into the chunk folder the faster removes when it assembles the file (FileNotFoundError before)."""
    import multiprocessing as mp

    path = tmp_path / "same.h5"
    with mp.get_context("spawn").Pool(2) as pool:
        done = pool.starmap(_write_darcy, [(str(path), 0.0), (str(path), 0.15)])
    assert done == [str(path)] * 2
    alone = tmp_path / "alone.h5"
    _write_darcy(str(alone), 0.0)
    np.testing.assert_array_equal(StoredDataset(path).read("fields/u"), StoredDataset(alone).read("fields/u"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone.h5", "same.h5"]   # no lock or partial left
