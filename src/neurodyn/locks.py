"""Advisory file locks that name their holder and die with it.

:func:`hold` takes an exclusive POSIX ``flock`` on a lock file without waiting and writes the holder (process
id, host, command, start time) into it. The operating system releases a ``flock`` when its process exits, however
it exits (``kill -9`` included), so a lock left by a dead process never blocks the next one: the file may stay,
but nobody holds it. A holder that ends normally removes the file. A second process is refused with
:class:`LockHeld`, naming the holder, or with ``wait=True`` waits its turn (the dataset store: two processes asking
for one file take turns, the second finds it made).

Within one process the lock is re-entrant (the command line takes a run folder's lock before ``--fresh`` removes
the folder, and the training it then starts takes it again). Where the platform has no ``flock`` there is no lock.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from .errors import NeurodynError

_HELD: dict[str, list] = {}  # resolved lock path -> [open file, depth] for the locks this process holds


class LockHeld(NeurodynError, RuntimeError):
    """Another live process holds the lock."""


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
    key = str(lock.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    fh = _acquire(lock, fcntl, wait)
    if fh is None:
        raise LockHeld(f"{what} is in use by {holder_of(lock)}" + (f"; {advice}" if advice else "")) from None
    fh.seek(0)
    fh.truncate()
    command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv)) or "python"
    since = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    fh.write(f"process {os.getpid()} on {socket.gethostname()} ({command}) since {since}\n")
    fh.flush()
    _HELD[key] = [fh, 1]
    try:
        yield
    finally:
        _HELD.pop(key, None)
        with contextlib.suppress(OSError):
            lock.unlink()  # while still held: a process that opened this file finds it gone and takes a new one
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _acquire(lock: Path, fcntl, wait: bool = False):
    """The lock file opened and ``flock``-ed (waiting for the holder when ``wait``), or ``None`` when a live process
    holds it and ``wait`` is false.

    The holder removes the file before releasing it, so a lock taken on a file that is no longer at ``lock`` (or
    is another file now) is worthless: open again."""
    for _ in range(100):
        fh = open(lock, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return None
        try:
            same = os.stat(lock).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fh
        fh.close()
    raise LockHeld(f"could not take the lock {lock}: it is removed and re-created faster than it can be taken")
