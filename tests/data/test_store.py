import os
import stat

import h5py
import numpy as np
import pytest

from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoredDataset, StoreMeta, write_store
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
        write_store(
            resumed,
            meta,
            lambda ids: g.generate(cfg, ids, 3, "cpu"),
            coords=g.coords(cfg),
            progress=False,
            on_chunk=die_after_two,
        )
    partial = tmp_path / "resumed.h5.partial"
    assert not resumed.exists() and sorted(p.name for p in partial.glob("chunk_*")) == [
        "chunk_000000.npz",
        "chunk_000001.npz",
        "chunk_000002.npz",
    ]
    (partial / ".chunk_000003.npz.999.tmp").write_bytes(b"half a chunk")  # a kill mid-write leaves this
    made = []
    write_store(
        resumed,
        meta,
        lambda ids: made.append(ids[0]) or g.generate(cfg, ids, 3, "cpu"),
        coords=g.coords(cfg),
        progress=False,
    )
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


@pytest.mark.slow
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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone.h5", "same.h5"]  # no lock or partial left


# ------------------------------------------------------------------------------------------------
# an existing file at the output path, and a full disk


def test_an_existing_store_is_reused_only_when_it_holds_the_same_dataset(tmp_path):
    g, cfg, path = _darcy(tmp_path, "d.h5")
    assert g.run(cfg, 4, seed=0, path=path, chunk_size=2, progress=False) == path
    before = path.read_bytes()
    meta = StoreMeta("darcy", g.version, __import__("dataclasses").asdict(cfg), 0, 4, 3, g.inputs, g.targets)
    made = []
    # the same dataset (another chunk size is only another way of writing it): reused, nothing made
    assert write_store(path, meta, lambda ids: made.append(ids) or {}, progress=False) == path and made == []
    with pytest.raises(
        DataError,
        match=r"holds darcy seed 0 with 4 samples, but this call asks for seed 2 with 5 "
        r"samples; choose another --out or delete it",
    ):
        g.run(cfg, 5, seed=2, path=path, progress=False)
    with pytest.raises(
        DataError,
        match=r"holds darcy \(resolution=8\) seed 0 with 4 samples, but this call asks "
        r"for resolution=9;",
    ):
        g.run(g.make_config(resolution=9), 4, path=path, progress=False)
    assert path.read_bytes() == before


def test_the_default_path_is_checked_too(data_dir):
    g = get_generator("darcy")
    cfg = g.make_config(resolution=8)
    path = g.run(cfg, 3, seed=0, progress=False)
    assert path.parent == data_dir / "darcy" and g.run(cfg, 3, seed=0, progress=False) == path
    g.default_path(cfg, 2, 0).write_bytes(path.read_bytes())  # a file that does not hold what its name says
    with pytest.raises(DataError, match=r"holds darcy seed 0 with 3 samples, but this call asks for 2 samples"):
        g.run(cfg, 2, seed=0, progress=False)


def test_a_shard_finds_the_file_another_shard_assembled(tmp_path):
    g, cfg, path = _darcy(tmp_path, "s.h5")
    assert g.run(cfg, 6, seed=1, path=path, chunk_size=2, shard=(1, 2), progress=False) is None
    assert g.run(cfg, 6, seed=1, path=path, chunk_size=2, shard=(0, 2), progress=False) == path
    assert g.run(cfg, 6, seed=1, path=path, chunk_size=2, shard=(1, 2), progress=False) == path  # late, finds it


@pytest.mark.parametrize("chunk_size", [0, -1, 2.5])
def test_a_chunk_size_below_one_is_refused(tmp_path, chunk_size):
    from neurodyn.errors import ConfigError

    g, cfg, path = _darcy(tmp_path, "c.h5")
    with pytest.raises(ConfigError, match=rf"--chunk-size \(chunk_size\) must be >= 1; got {chunk_size}$"):
        g.run(cfg, 3, path=path, chunk_size=chunk_size, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_disk_full_while_writing_a_chunk_keeps_the_finished_ones_and_resumes(tmp_path, monkeypatch):
    import errno

    from neurodyn.data.store import DiskFullError

    g, cfg, path = _darcy(tmp_path, "d.h5")
    real_savez, calls = np.savez, []

    def savez(f, **arrays):  # the second chunk finds the disk full, as numpy's zip writer reports it
        calls.append(1)
        if len(calls) == 2:
            f.write(b"PK\x03\x04 half a chunk")
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError:
                raise RuntimeError("unexpected pos 37760 vs 37680")  # noqa: B904 - chained implicitly, as numpy's is
        real_savez(f, **arrays)

    monkeypatch.setattr(np, "savez", savez)
    with pytest.raises(
        DiskFullError,
        match=rf"the disk holding {tmp_path} \(mounted at .*\) is full \(no space left "
        rf"on device\) while writing chunk 2 of 3; the 1 finished chunk file\(s\) "
        rf"in {path}.partial were kept",
    ):
        g.run(cfg, 6, seed=0, path=path, chunk_size=2, progress=False)
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "d.h5.partial").iterdir()) == ["chunk_000000.npz", "meta.json"]
    assert g.run(cfg, 6, seed=0, path=path, chunk_size=2, progress=False) == path  # space freed: resumes
    whole = tmp_path / "whole.h5"
    g.run(cfg, 6, seed=0, path=whole, chunk_size=2, progress=False)
    assert path.read_bytes() == whole.read_bytes()


def _disk_filling_after(limit: int):
    """An ``open`` for the store module whose ``.s.h5.<pid>.tmp`` files refuse writes past ``limit`` bytes (ENOSPC)."""
    import errno
    import io

    class Filling(io.FileIO):
        written = 0

        def write(self, data):
            n = memoryview(data).nbytes
            if self.written + n > limit:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += n
            return super().write(data)

    def fake_open(file, mode="r", *args, **kwargs):
        if os.path.basename(file).startswith(".s.h5.") and "w" in mode:
            return Filling(file, "w+")
        return open(file, mode, *args, **kwargs)

    return fake_open


def test_disk_full_while_assembling_leaves_no_file_keeps_the_chunks_and_resumes(tmp_path, monkeypatch):
    """HDF5 cannot recover from a failed write (the process crashed at exit, rc 139): the store skips the write,
    lets HDF5 close the file, then removes it and says the disk is full."""
    from neurodyn.data import store
    from neurodyn.data.store import DiskFullError

    g, cfg, whole = _darcy(tmp_path, "whole.h5")
    g.run(cfg, 6, seed=0, path=whole, chunk_size=2, progress=False)
    path = tmp_path / "s.h5"
    monkeypatch.setattr(store, "open", _disk_filling_after(whole.stat().st_size // 2), raising=False)
    with pytest.raises(
        DiskFullError,
        match=r"is full \(no space left on device\) while assembling s.h5; the 3 "
        r"finished chunk file\(s\) in .*s.h5.partial were kept",
    ):
        g.run(cfg, 6, seed=0, path=path, chunk_size=2, progress=False)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.h5.partial", "whole.h5"]  # no temporary, no s.h5
    assert g.run(cfg, 6, seed=0, path=path, chunk_size=2, progress=False) == path
    assert path.read_bytes() == whole.read_bytes()


def test_too_little_free_space_is_refused_before_assembling(tmp_path, monkeypatch):
    import shutil
    from types import SimpleNamespace

    from neurodyn.data.store import DiskFullError

    g, cfg, path = _darcy(tmp_path, "d.h5")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: SimpleNamespace(total=10**6, used=10**6 - 1000, free=1000))
    with pytest.raises(
        DiskFullError,
        match=rf"not enough free space in {tmp_path} to assemble d.h5: it needs about "
        r"1\.\d MB \(\d+ bytes\) and 1\.0 kB \(1000 bytes\) are free; "
        r"the 2 finished chunk",
    ):
        g.run(cfg, 4, seed=0, path=path, chunk_size=2, progress=False)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.h5.partial"]
    assert g.run(cfg, 4, seed=0, path=path, chunk_size=2, progress=False) == path


def test_a_directory_is_not_a_store_file(tmp_path):
    with pytest.raises(DataError, match=r"is a directory; expected an HDF5 store file \(made by neurodyn generate\)"):
        StoredDataset(tmp_path)
