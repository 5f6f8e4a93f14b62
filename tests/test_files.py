"""neurodyn.files: side-file names that fit a folder entry, and the temporaries of dead processes."""

import os

import pytest

from neurodyn.files import NAME_MAX, remove_dead_temporaries, side_path, temporary_path

NAMES = ["pred.h5", "a[1]*?.h5", "é" * 120 + ".h5", "x" * 255]


@pytest.mark.parametrize("name", NAMES, ids=["short", "glob-characters", "multibyte", "255-bytes"])
def test_side_files_fit_and_the_temporaries_of_dead_processes_go(tmp_path, name):
    target = tmp_path / name
    lock = side_path(target, ".", ".shard0of1.lock")
    assert len(lock.name.encode()) <= NAME_MAX and lock.parent == tmp_path
    assert lock != side_path(tmp_path / (name[:-1] + "z"), ".", ".shard0of1.lock")  # distinct names stay distinct
    mine = temporary_path(target)
    assert mine.name.startswith(".") and mine.name.endswith(f".{os.getpid()}.tmp") and len(mine.name.encode()) <= 255
    dead = mine.with_name(mine.name.replace(f".{os.getpid()}.", ".999999999."))  # a process id nobody has
    other = tmp_path / ".unrelated.999999999.tmp"
    for f in (mine, dead, other):
        f.write_text("half")
    assert remove_dead_temporaries(target) == [dead]
    assert mine.exists() and other.exists()  # a live writer's, and another file's
