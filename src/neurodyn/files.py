"""Paths read and written safely: special files refused, side files whose names fit, atomic outputs.

* :func:`check_not_special` refuses a named pipe, socket or device where a file is read or written: opening one
  blocks until another process writes to it (forever, usually), so every reader checks first.
* :func:`side_path` names a file kept beside another (``.<name>.lock``, ``.<name>.<pid>.tmp``): a legal name of 250
  characters plus a prefix and a suffix exceeds the 255 bytes a folder entry may have, so a long name is shortened
  and keyed by a hash of the whole.
* :func:`atomic_output` writes a file through a temporary beside it that is renamed into place, and removed on any
  other exit (an exception, Ctrl-C); :func:`remove_dead_temporaries` removes the temporaries a killed process
  (``kill -9``) could not.
* :data:`RUN_MARKER` is the file the library writes into every run folder it makes: a folder is a run folder only if
  it holds one (:func:`holds_run_marker`). :func:`enclosing_run` finds the run folder a path lies in, and
  :func:`check_outside_runs` refuses to write a file there: a run's files are written by its training alone.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from .errors import DataError

RUN_MARKER = ".neurodyn-run"
"""The file that makes a folder a run folder: written by the library into every run folder it creates (JSON: the
library and its version), never by hand. Training, resuming and ``--fresh`` take only a folder that holds it."""

NAME_MAX = 255  # bytes of one folder entry on Linux and macOS file systems
_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def special_kind(path: str | Path) -> str | None:
    """``"a named pipe (FIFO)"`` (or socket, device) when ``path`` is one, ``None`` for a file, folder or nothing."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return _KINDS.get(stat.S_IFMT(mode))


def check_not_special(path: str | Path, what: str = "file") -> None:
    """Raise one DataError when ``path`` is a named pipe, socket or device (reading one would block)."""
    kind = special_kind(path)
    if kind is not None:
        raise DataError(
            f"{what} {path} is {kind}, not a regular file; give the path of a file (copy the data into one first)"
        )


def side_path(path: str | Path, prefix: str = ".", suffix: str = "", reserve: int = 0) -> Path:
    """``<folder>/<prefix><name><suffix>`` beside ``path``; when that is longer than :data:`NAME_MAX` bytes (less
    ``reserve``, kept for what a caller appends) the name is cut and a hash of the whole name keeps it unique."""
    path = Path(path)
    name = f"{prefix}{path.name}{suffix}"
    if len(name.encode()) <= NAME_MAX - reserve:
        return path.with_name(name)
    digest = hashlib.sha1(path.name.encode()).hexdigest()[:12]
    room = NAME_MAX - reserve - len(f"{prefix}~{digest}{suffix}".encode())
    head = path.name.encode()[:room].decode(errors="ignore")
    return path.with_name(f"{prefix}{head}~{digest}{suffix}")


_PID_ROOM = len(".4294967295.tmp")  # the widest ".<pid>.tmp"


def _temporary_stem(path: str | Path) -> Path:
    """``.<name>`` beside ``path``, the part of its temporaries' names before ``.<pid>.tmp``."""
    return side_path(path, ".", "", reserve=_PID_ROOM)


def temporary_path(path: str | Path) -> Path:
    """The temporary file this process writes ``path`` through: ``.<name>.<pid>.tmp`` beside it."""
    stem = _temporary_stem(path)
    return stem.with_name(f"{stem.name}.{os.getpid()}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's live process; a number no process can have
        return True
    return True


def remove_dead_temporaries(path: str | Path) -> list[Path]:
    """Delete the temporaries of ``path`` (:func:`temporary_path`) left by processes of this machine that no longer
    run (killed while writing); returns what was removed. A live writer's temporary is left alone."""
    stem = _temporary_stem(path).name
    removed = []
    for tmp in Path(path).parent.glob(f"{glob.escape(stem)}.*.tmp") if Path(path).parent.is_dir() else []:
        pid = tmp.name[len(stem) + 1 : -len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)) and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield the temporary path to write ``path`` through; when the body returns it is renamed over ``path``, on any
    other exit removed.

    Ctrl-C (SIGINT) in the main thread is held back until the body returns, then raised (the temporary removed):
    a library writing in C (h5py) can otherwise swallow it and finish the file as if nothing had been asked."""
    path = Path(path)
    remove_dead_temporaries(path)
    tmp = temporary_path(path)
    interrupted = []
    held = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True)) if held else None
    try:
        try:
            yield tmp
        finally:
            if held:  # (None: a handler installed from C; the default one is restored then)
                signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
        if interrupted:
            raise KeyboardInterrupt
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def holds_run_marker(folder: str | Path) -> bool:
    """Whether ``folder`` holds the library's :data:`RUN_MARKER`: a regular file (never a link) naming neurodyn."""
    import json

    marker = Path(folder) / RUN_MARKER
    if marker.is_symlink() or not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("library") == "neurodyn"
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False


def write_run_marker(folder: str | Path) -> None:
    """Write :data:`RUN_MARKER` into ``folder`` (an existing folder) unless it is there."""
    import json

    from ._version import __version__

    if holds_run_marker(folder):
        return
    with atomic_output(Path(folder) / RUN_MARKER) as tmp:
        tmp.write_text(json.dumps({"library": "neurodyn", "version": __version__}) + "\n")


def _looks_like_a_run(folder: Path) -> bool:
    """A folder laid out as a run (the marker, or ``config.yaml`` beside ``checkpoints/``: a run of a release before
    the marker), which no writer but its training may put files into."""
    try:
        return holds_run_marker(folder) or ((folder / "config.yaml").is_file() and (folder / "checkpoints").is_dir())
    except OSError:
        return False


def enclosing_run(path: str | Path) -> Path | None:
    """The run folder that ``path`` lies in (or is), the nearest one up its folders, or ``None``."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return next((p for p in (resolved, *resolved.parents) if _looks_like_a_run(p)), None)


def check_outside_runs(path: str | Path, what: str, owner: str | Path | None = None) -> None:
    """Raise one DataError when writing ``path`` (``what``: the option that named it, e.g. ``--out``) would put a
    file into a run folder: only a run's training writes there (its checkpoints, metrics and plots; ``owner``: the
    run folder of the training that writes ``path``, which may)."""
    run = enclosing_run(path)
    if run is not None and (owner is None or run != Path(owner).resolve()):
        raise DataError(
            f"{what} {path} lies in the run folder {run}, whose files only its training writes; choose a "
            "path outside every run folder"
        )
