"""Advisory file locks that name their holder and die with it.

:func:`hold` takes an exclusive POSIX ``flock`` on a lock file without waiting and writes the holder (process
id, host, command, start time) into it. The operating system releases a ``flock`` when its process exits, however
it exits (``kill -9`` included), so a lock left by a dead process never blocks the next one: the file may stay,
but nobody holds it. A holder that ends normally removes the file. A second process is refused with
:class:`LockHeld`, naming the holder, or with ``wait=True`` waits its turn (the dataset store: two processes asking
for one file take turns, the second finds it made).

The lock file is opened without following a symbolic link, and only a file that is empty or holds a holder line
is taken and rewritten: a link, a hard link, a folder or a user's file at the lock's path is refused with one
sentence and left as it is, and so is a folder where no lock file can be made (read-only, full, a name too long).

Within one process the lock is re-entrant (the command line takes a run folder's lock before ``--fresh`` removes
the folder, and the training it then starts takes it again). Where the platform has no ``flock`` there is no lock.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from .errors import NeurodynError

_HELD: dict[str, list] = {}  # resolved lock path -> [open file, depth] for the locks this process holds


class LockHeld(NeurodynError, RuntimeError):
    """Another live process holds the lock."""


class LockUnusable(NeurodynError, RuntimeError):
    """The lock file cannot be made or is not one (a link, a folder, a user's file at its path)."""


_HOLDER_LINE = "process "  # how every holder line starts


def holder_of(lock: str | Path) -> str:
    """What the lock file says of its holder (``"process 123 on host: neurodyn train ... since 12:00:01"``)."""
    try:
        text = Path(lock).read_text().strip()
    except OSError:
        return "another process"
    return text or "another process"


@contextlib.contextmanager
def hold(lock: str | Path, what: str, advice: str = "", wait: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` for the body of the ``with``.

    ``what`` names the locked thing in the refusal (``"run folder runs/x"``), ``advice`` says what to do
    instead; the refusal reads ``"{what} is in use by {holder}; {advice}"``. ``wait``: block until the holder
    releases the lock instead of refusing.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    lock = Path(lock)
    key = str(lock.parent.resolve() / lock.name)  # the link itself, never where it points
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LockUnusable(
            f"cannot create the folder {lock.parent} for the lock of {what} ({exc.strerror or exc}); use another folder"
        ) from None
    fh = _acquire(lock, fcntl, wait, what)
    if fh is None:
        raise LockHeld(f"{what} is in use by {holder_of(lock)}" + (f"; {advice}" if advice else "")) from None
    command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv)) or "python"
    since = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{_HOLDER_LINE}{os.getpid()} on {socket.gethostname()} ({command}) since {since}\n")
        fh.flush()
    except OSError as exc:
        fh.close()
        raise LockUnusable(
            f"cannot write the lock file {lock} of {what} ({exc.strerror or exc}); free space "
            f"there, or use another folder"
        ) from None
    _HELD[key] = [fh, 1]
    try:
        yield
    finally:
        _HELD.pop(key, None)
        with contextlib.suppress(OSError):
            lock.unlink()  # while still held: a process that opened this file finds it gone and takes a new one
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _acquire(lock: Path, fcntl, wait: bool, what: str):
    """The lock file opened and ``flock``-ed (waiting for the holder when ``wait``), or ``None`` when a live process
    holds it and ``wait`` is false.

    The holder removes the file before releasing it, so a lock taken on a file that is no longer at ``lock`` (or
    is another file now) is worthless: open again."""
    for _ in range(100):
        fh = _open(lock, what)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return None
        try:
            same = os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            _check_content(fh, lock, what)
            return fh
        fh.close()
    raise LockHeld(f"could not take the lock {lock}: it is removed and re-created faster than it can be taken")


def _open(lock: Path, what: str):
    """``lock`` opened for reading and writing, created if missing, never through a link; one LockUnusable naming
    what is at the path instead (a link, a folder, a hard link, a special file) or why no file can be made there."""
    fix = f"move it away (nothing was changed), or use another folder for {what}"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(lock):
            raise LockUnusable(
                f"the lock file {lock} of {what} is a symbolic link, which a lock never follows; {fix}"
            ) from None
        if exc.errno == errno.EISDIR or os.path.isdir(lock):
            raise LockUnusable(f"the lock file {lock} of {what} is a folder; {fix}") from None
        raise LockUnusable(
            f"cannot create the lock file {lock} of {what} ({exc.strerror or exc}); make "
            f"{lock.parent} writable, or use another folder"
        ) from None
    info = os.fstat(fd)
    problem = (
        "is not a regular file"
        if not stat.S_ISREG(info.st_mode)
        else "is a hard link to another file"
        if info.st_nlink > 1
        else None
    )
    if problem:
        os.close(fd)
        raise LockUnusable(f"the lock file {lock} of {what} {problem}; {fix}")
    return os.fdopen(fd, "r+")


def _check_content(fh, lock: Path, what: str) -> None:
    """Refuse to rewrite a file at the lock's path that is neither empty nor a holder line (a user's file)."""
    fh.seek(0)
    head = fh.read(len(_HOLDER_LINE))
    if head and head != _HOLDER_LINE:
        fh.close()
        raise LockUnusable(
            f"{lock} (the lock file of {what}) holds something other than a neurodyn lock; move it "
            f"away (nothing was changed), or use another folder for {what}"
        )
