"""Bad inputs and faults on the data side: each case -> the one sentence expected, and nothing lost.

A case is a call (``neurodyn.cli.main`` in-process, or a library call) made in a fresh folder that holds one tiny
Darcy store (``darcy.h5``: seed 0, 2 samples, resolution 5). A CLI case must return 2 and print one line
``neurodyn generate: error: ...``; a library case must raise one NeurodynError of one line. Either way the text
holds the expected words, ``darcy.h5`` keeps its bytes and no temporary file is left anywhere.
"""

import errno
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from neurodyn.cli import main
from neurodyn.errors import NeurodynError

GEN = ["generate", "darcy", "--n", "2", "resolution=5", "--no-progress"]
"""The call that made ``darcy.h5`` (with ``--out``); cases change one thing."""


@pytest.fixture(scope="module")
def darcy_store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("store") / "darcy.h5"
    assert main([*GEN, "--out", str(path)]) == 0
    return path


@pytest.fixture
def place(darcy_store, tmp_path, monkeypatch) -> Path:
    """A fresh folder holding a copy of ``darcy.h5``, with ``$NEURODYN_DATA`` at ``<place>/data``."""
    shutil.copy(darcy_store, tmp_path / "darcy.h5")
    monkeypatch.setenv("NEURODYN_DATA", str(tmp_path / "data"))
    return tmp_path


# ------------------------------------------------------------------------------------------------
# set-ups and library calls (each takes the folder and pytest's monkeypatch)


def _text_file(place, mp):
    (place / "notes.txt").write_text("mine")


def _folder(place, mp):
    (place / "folder").mkdir()
    (place / "folder" / "keep.txt").write_text("mine")


def _foreign_file_at_default_path(place, mp):
    """``darcy.h5`` copied where ``generate darcy --n 3 resolution=5`` (seed 0) writes by default."""
    from neurodyn.data.generators import get_generator

    g = get_generator("darcy")
    target = g.default_path(g.make_config(resolution=5), 3, 0)
    target.parent.mkdir(parents=True)
    shutil.copy(place / "darcy.h5", target)


def _other_version(place, mp):
    """The darcy generator now says version 2 (its output bytes changed)."""
    from neurodyn.data.generators import get_generator

    mp.setattr(type(get_generator("darcy")), "version", "2")


def _little_free_space(place, mp):
    """``shutil.disk_usage`` reports 1000 bytes free everywhere."""
    mp.setattr(shutil, "disk_usage", lambda p: SimpleNamespace(total=10**9, used=10**9 - 1000, free=1000))


def _disk_fills_in_savez(place, mp):
    """Every chunk write fails as numpy's zip writer does on a full disk: the OSError, then a RuntimeError."""

    def savez(f, **arrays):
        f.write(b"PK\x03\x04 half a chunk")
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError:
            raise RuntimeError("unexpected pos 37760 vs 37680") from None

    mp.setattr(np, "savez", savez)


def _quota_when_assembling(place, mp):
    """Opening the HDF5 file being assembled fails for the user's quota (EDQUOT)."""
    import h5py

    def refuse(*args, **kwargs):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    mp.setattr(h5py, "File", refuse)


def _fno_mat(place: Path) -> Path:
    import scipy.io

    src = place / "darcy_src.mat"
    scipy.io.savemat(src, {"coeff": np.ones((3, 5, 5)), "sol": np.ones((3, 5, 5))})
    return src


def _convert_disk_full(place, mp):
    from neurodyn.data.formats.convert import convert_to_store

    src = _fno_mat(place)
    _disk_fills_in_savez(place, mp)
    try:
        convert_to_store(src, out=place / "conv.h5", chunk_size=1)
    finally:
        mp.undo()
        assert (place / "conv.h5.partial" / "meta.json").exists()  # kept: converting again resumes


def _convert_chunk_size_zero(place, mp):
    from neurodyn.data.formats.convert import convert_to_store

    convert_to_store(_fno_mat(place), out=place / "conv.h5", chunk_size=0)


def _library_run_chunk_size_zero(place, mp):
    from neurodyn.data.generators import get_generator

    g = get_generator("darcy")
    g.run(g.make_config(resolution=5), 2, path=place / "new.h5", chunk_size=0, progress=False)


def _make_config_string_for_float(place, mp):
    from neurodyn.data.generators import get_generator

    get_generator("burgers").make_config(nu="low")


def _test_set_is_a_folder(place, mp):
    from neurodyn.data.assembly import build_test_sets

    _folder(place, mp)
    build_test_sets({"task": "steady", "data": {"test_path": [str(place / "folder")]}})  # as `evaluate --data`


def _fifo(place, mp, name="f.csv") -> Path:
    """A named pipe nobody writes to (reading it would block forever), and an alarm that ends a blocked read."""
    import signal

    def blocked(*args):
        raise TimeoutError(f"reading the named pipe {name} blocked")

    signal.signal(signal.SIGALRM, blocked)  # restored by _no_alarm_left
    signal.alarm(120)  # long enough for a loaded machine; only a blocked read reaches it
    os.mkfifo(place / name)
    return place / name


def _stored_dataset_of_a_fifo(place, mp):
    from neurodyn.data.store import StoredDataset

    StoredDataset(_fifo(place, mp, "pipe.h5"))


def _convert(place, name, text, **options):
    from neurodyn.data.formats.convert import convert_to_store

    (place / name).write_text(text)
    convert_to_store(place / name, out=place / "conv.h5", **options)


def _ts_shared_timestamp(place, mp):
    _convert(
        place,
        "stamped.ts",
        "@problemName S\n@timeStamps true\n@univariate true\n@classLabel true a b\n"
        "@data\n(1,10),(1,20),(2,30):a\n(1,5),(2,6):b\n",
    )


def _ts_infinite_value(place, mp):
    _convert(place, "inf.ts", "@problemName S\n@univariate true\n@classLabel true a b\n@data\n1,2,3:a\n4,inf,6:b\n")


def _csv_infinite_value(place, mp):
    _convert(place, "long.csv", "id,time,v,label\n1,0,1.5,a\n1,1,-inf,a\n2,0,3,b\n")


def _stored_dataset_of_a_folder(place, mp):
    from neurodyn.data.store import StoredDataset

    _folder(place, mp)
    StoredDataset(place / "folder")


def _ts_value_beyond_float32(place, mp):
    _convert(place, "big.ts", "@problemName S\n@univariate true\n@classLabel true a b\n@data\n1,2,3:a\n4,1e39,6:b\n")


def _file_size_limit_writing_chunks(place, mp):
    """Every chunk write passes the process's file-size limit (``ulimit -f``): numpy's zip writer gets EFBIG."""

    def savez(f, **arrays):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    mp.setattr(np, "savez", savez)


def _external_link_store(place, mp=None) -> Path:
    """``linked.h5``: ``darcy.h5`` whose ``fields/a`` is an external link to a file that does not exist."""
    import h5py

    shutil.copy(place / "darcy.h5", place / "linked.h5")
    with h5py.File(place / "linked.h5", "a") as f:
        del f["fields/a"]
        f["fields/a"] = h5py.ExternalLink("missing.h5", "/a")
    return place / "linked.h5"


def _stored_dataset_with_an_external_link(place, mp):
    from neurodyn.data.store import StoredDataset

    StoredDataset(_external_link_store(place))


def _out_inside_a_run_folder(place, mp):
    """``runs/r``: a run folder (it holds the run marker)."""
    from neurodyn.files import write_run_marker

    (place / "runs" / "r").mkdir(parents=True)
    write_run_marker(place / "runs" / "r")


CASES = [
    # (id, CLI words or a library call, set-up before a CLI call, words expected in the one-line message)
    (
        "out-other-seed-and-count",
        [*GEN[:2], "--n", "3", "resolution=5", "--seed", "1", "--out", "{p}/darcy.h5"],
        None,
        "holds darcy seed 0 with 2 samples, but this call asks for seed 1 with 3 samples; choose another --out",
    ),
    (
        "out-other-config",
        [*GEN[:4], "resolution=6", "--out", "{p}/darcy.h5"],
        None,
        "holds darcy (resolution=5) seed 0 with 2 samples, but this call asks for resolution=6",
    ),
    (
        "out-other-generator",
        ["generate", "poisson", "--n", "2", "--out", "{p}/darcy.h5"],
        None,
        "holds darcy seed 0 with 2 samples, but this call asks for poisson",
    ),
    (
        "out-other-generator-version",
        [*GEN, "--out", "{p}/darcy.h5"],
        _other_version,
        "holds darcy version 1 seed 0 with 2 samples, but this call asks for version 2",
    ),
    ("out-text-file", [*GEN, "--out", "{p}/notes.txt"], _text_file, "notes.txt exists and is not an HDF5 store file"),
    ("out-directory", [*GEN, "--out", "{p}/folder"], _folder, "folder is a directory; expected an HDF5 store file"),
    (
        "default-path-holds-other-count",
        [*GEN[:2], "--n", "3", "resolution=5"],
        _foreign_file_at_default_path,
        "holds darcy seed 0 with 2 samples, but this call asks for 3 samples",
    ),
    (
        "assembly-free-space",
        [*GEN, "--out", "{p}/new.h5"],
        _little_free_space,
        "(1000 bytes) are free; the 1 finished chunk file(s) in {p}/new.h5.partial were kept",
    ),
    (
        "chunk-write-disk-full",
        [*GEN, "--out", "{p}/new.h5"],
        _disk_fills_in_savez,
        "is full (no space left on device) while writing chunk 1 of 1; the 0 finished chunk file(s)",
    ),
    (
        "assembly-quota",
        [*GEN, "--out", "{p}/new.h5"],
        _quota_when_assembling,
        "is full (the user's disk quota is used up) while assembling new.h5; the 1 finished chunk file(s)",
    ),
    ("convert-disk-full", _convert_disk_full, None, "is full (no space left on device) while writing chunk 1 of 3"),
    (
        "chunk-size-zero",
        [*GEN, "--out", "{p}/new.h5", "--chunk-size", "0"],
        None,
        "--chunk-size (chunk_size) must be >= 1; got 0",
    ),
    ("chunk-size-negative", [*GEN, "--out", "{p}/new.h5", "--chunk-size", "-1"], None, "must be >= 1; got -1"),
    ("library-chunk-size-zero", _library_run_chunk_size_zero, None, "must be >= 1; got 0"),
    ("convert-chunk-size-zero", _convert_chunk_size_zero, None, "must be >= 1; got 0"),
    (
        "generator-option-string-for-int",
        ["generate", "darcy", "resolution=abc"],
        None,
        "generator 'darcy' option resolution='abc' is not an integer",
    ),
    (
        "preset-option-string-for-float",
        ["generate", "fno/darcy", "--scale", "tiny", "data.alpha=rough"],
        None,
        "generator 'darcy' option alpha='rough' is not a number",
    ),
    (
        "library-string-for-float",
        _make_config_string_for_float,
        None,
        "generator 'burgers' option nu='low' is not a number",
    ),
    (
        "test-set-is-a-folder",
        _test_set_is_a_folder,
        None,
        "folder is a directory; expected an HDF5 store file (made by neurodyn generate)",
    ),
    (
        "stored-dataset-of-a-folder",
        _stored_dataset_of_a_folder,
        None,
        "folder is a directory; expected an HDF5 store file (made by neurodyn generate)",
    ),
    # special files are refused, never opened (a named pipe blocks its reader forever)
    (
        "from-a-fifo",
        ["convert", "{p}/f.csv", "--out", "{p}/new.h5"],
        _fifo,
        "input {p}/f.csv is a named pipe (FIFO), not a regular file",
    ),
    (
        "train-data-path-fifo",
        ["train", "fno/darcy", "--scale", "tiny", "--no-progress", "--runs-dir", "{p}/runs", "data.path={p}/f.csv"],
        _fifo,
        "{p}/f.csv is a named pipe (FIFO), not a regular file",
    ),
    ("stored-dataset-of-a-fifo", _stored_dataset_of_a_fifo, None, "pipe.h5 is a named pipe (FIFO)"),
    # generation's shard lock never follows a link
    (
        "shard-lock-is-a-symlink",
        [*GEN, "--out", "{p}/new.h5"],
        lambda place, mp: (_text_file(place, mp), (place / ".new.h5.shard0of1.lock").symlink_to(place / "notes.txt")),
        "is a symbolic link, which a lock never follows",
    ),
    # converted files keep every observation and value, or are refused naming the file and line
    (
        "ts-two-values-at-one-timestamp",
        _ts_shared_timestamp,
        None,
        "stamped.ts:6: dimension 1 holds 2 values at the timestamp 1; expected one value per timestamp",
    ),
    ("ts-infinite-value", _ts_infinite_value, None, "inf.ts:6: dimension 1 holds the infinite value 'inf'"),
    ("csv-infinite-value", _csv_infinite_value, None, "long.csv:3: column 'v' holds the infinite value '-inf'"),
    (
        "ts-value-beyond-float32",
        _ts_value_beyond_float32,
        None,
        "holds 1e+39, beyond the range of float32 (+-3.4e+38) in which the store keeps values",
    ),
    # a write that passes the file-size limit (ulimit -f) is said as such, and keeps what a full disk keeps
    (
        "chunk-write-file-size-limit",
        [*GEN, "--out", "{p}/new.h5"],
        _file_size_limit_writing_chunks,
        "grew past this process's file-size limit (ulimit -f) while writing chunk 1 of 1; the 0 finished chunk file(s)",
    ),
    # a store holds its arrays itself: a link (leading nowhere, or anywhere) is refused when the file is opened
    (
        "store-with-an-external-link",
        _stored_dataset_with_an_external_link,
        None,
        "fields/a is an external link to missing.h5:/a; a store file holds its arrays itself",
    ),
    # no writer puts a file into a run folder
    (
        "generate-out-inside-a-run-folder",
        [*GEN, "--out", "{p}/runs/r/new.h5"],
        _out_inside_a_run_folder,
        "lies in the run folder",
    ),
    (
        "convert-out-inside-a-run-folder",
        ["convert", "{p}/darcy_src.mat", "--out", "{p}/runs/r/conv.h5"],
        lambda place, mp: (_fno_mat(place), _out_inside_a_run_folder(place, mp)),
        "lies in the run folder",
    ),
]


def _run_case(call, setup, place, monkeypatch, capsys) -> str:
    """The one-line message the case produced (stderr of the CLI, or the library error)."""
    if callable(call):
        with pytest.raises(NeurodynError) as info:
            call(place, monkeypatch)
        return str(info.value)
    if setup is not None:
        setup(place, monkeypatch)
    code = main([w.replace("{p}", str(place)) for w in call])
    monkeypatch.undo()
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith(f"neurodyn {call[0]}: error: "), err
    return err


@pytest.fixture(autouse=True)
def _no_alarm_left():
    import signal

    previous = signal.getsignal(signal.SIGALRM)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("call,setup,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_data_input(place, darcy_store, monkeypatch, capsys, call, setup, expected):
    message = _run_case(call, setup, place, monkeypatch, capsys)
    assert expected.replace("{p}", str(place)) in message, message
    assert "\n" not in message and "Traceback" not in message, message
    assert (place / "darcy.h5").read_bytes() == darcy_store.read_bytes()
    if (place / "notes.txt").exists():
        assert (place / "notes.txt").read_text() == "mine"
    if (place / "folder").exists():
        assert [p.name for p in (place / "folder").iterdir()] == ["keep.txt"]
    left = [p for p in place.rglob("*") if p.name.endswith((".tmp", ".lock")) and not p.is_symlink()]
    assert not left, left
    assert not (place / "new.h5").exists() and not (place / "conv.h5").exists()
    made = [p.name for p in (place / "runs").rglob("*")] if (place / "runs").exists() else []
    assert made in ([], ["r", ".neurodyn-run"]), made  # nothing but a case's own run folder


# ------------------------------------------------------------------------------------------------
# behaviours that are not refusals


def test_info_data_names_a_fifo_among_the_stores_and_goes_on(place, monkeypatch, capsys):
    (place / "data").mkdir()
    shutil.copy(place / "darcy.h5", place / "data" / "darcy.h5")
    _fifo(place / "data", monkeypatch, "pipe.h5")
    assert main(["info", "data"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("darcy.h5  [darcy" in line for line in lines), lines
    assert any("pipe.h5  (unreadable: dataset file" in line and "is a named pipe (FIFO)" in line for line in lines)


def test_info_data_names_a_store_with_a_dangling_link_and_goes_on(place, monkeypatch, capsys):
    (place / "data").mkdir()
    shutil.copy(place / "darcy.h5", place / "data" / "darcy.h5")
    shutil.move(_external_link_store(place), place / "data" / "linked.h5")
    assert main(["info", "data"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("darcy.h5  [darcy" in line for line in lines), lines
    assert any("linked.h5  (unreadable: dataset file" in line and "external link" in line for line in lines), lines


def test_an_assembly_removes_the_temporaries_of_killed_assemblies(place, capsys):
    dead = place / ".new.h5.999999999.tmp"  # left by an assembly killed with kill -9 (no process has this id)
    live = place / f".new.h5.{os.getppid()}.tmp"  # a running process's own
    dead.write_text("half")
    live.write_text("half")
    assert main([*GEN, "--out", str(place / "new.h5")]) == 0, capsys.readouterr().err
    assert not dead.exists() and live.exists()


def test_a_long_legal_out_name_generates(place, capsys):
    out = place / ("d" * 252 + ".h5")  # 255 characters: its lock, chunk folder and temporaries need shorter names
    assert main([*GEN, "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    assert sorted(p.name for p in place.iterdir()) == sorted(["darcy.h5", out.name])
