"""Exceptions and message helpers shared by every package.

Every user-facing failure is one sentence that names what was wrong (file, field, shape, value) and
what was expected. Unknown names suggest the closest known ones.
"""

from __future__ import annotations

import difflib
import errno
from collections.abc import Iterable


class NeurodynError(Exception):
    """Base class of neurodyn's user-facing errors."""


class UnknownNameError(NeurodynError, KeyError):
    """A model, dataset, preset or generator name that is not registered."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class DataError(NeurodynError, ValueError):
    """A dataset or checkpoint file that is missing, corrupt or of the wrong layout."""


class ConfigError(NeurodynError, ValueError):
    """An impossible or inconsistent configuration."""


class DiskFullError(DataError):
    """A write failed because the disk has no space left (or the user's quota is used up); the message says what
    was kept."""


DISK_FULL = tuple(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG) if e is not None)
"""The errors of a write that found no room: a full disk, a used-up quota, a file past the process's size limit."""


def no_room(code: int | None, folder: object) -> str:
    """What stopped a write into ``folder`` for the :data:`DISK_FULL` error ``code``, as a clause: ``the disk holding
    F is full``, ``the disk quota ... is used up``, or ``the file grew past this process's file-size limit``."""
    if code == errno.EFBIG:
        return f"a file in {folder} grew past this process's file-size limit (ulimit -f)"
    if code is not None and code == getattr(errno, "EDQUOT", None):
        return f"the user's disk quota on the disk holding {folder} is used up"
    return f"the disk holding {folder} is full"


def make_room(code: int | None, folder: object) -> str:
    """The remedy for :func:`no_room`'s ``code``: raise the size limit, or free space in ``folder``."""
    if code == errno.EFBIG:
        return "raise the limit (ulimit -f unlimited)"
    return f"free space in {folder}"


def disk_full_errno(exc: BaseException | None) -> int | None:
    """ENOSPC, EDQUOT or EFBIG when ``exc``, or an exception it was raised from or while handling, is that OSError
    (numpy's zip writer reports a full disk as ``RuntimeError: unexpected pos`` raised while handling it)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            return exc.errno
        exc = exc.__cause__ or exc.__context__
    return None


def _closest(name: object, known: Iterable) -> str:
    """`` Did you mean 'a', 'b'?`` for the known names nearest to ``name`` (empty when none is close)."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=3, cutoff=0.4)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def unknown_name(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    """Build the error for an unknown ``name`` of ``kind``, suggesting the nearest known names."""
    known = sorted(known)
    hint = _closest(name, known)
    listing = ", ".join(known) if known else "(none registered)"
    return UnknownNameError(f"unknown {kind} {name!r}.{hint} Known: {listing}.")


def check_choice(what: str, value: object, allowed: Iterable, error: type[Exception] = ConfigError):
    """Return ``value`` if it is one of ``allowed``, else raise ``error`` naming the closest choices.

    The message is ``"{what} must be one of 'a', 'b'; got 'x'. Did you mean 'a'?"``. Operators in
    ``neurodyn.ops`` pass ``error=ValueError`` (they are plain tensor functions); layers and models
    keep the default :class:`ConfigError` (itself a ``ValueError``).
    """
    allowed = tuple(allowed)
    if any(value == a for a in allowed):
        return value
    choices = ", ".join(repr(a) for a in allowed)
    raise error(f"{what} must be one of {choices}; got {value!r}.{_closest(value, allowed)}")


def check_min(what: str, cfg: object, names: Iterable[str], minimum: int) -> None:
    """Raise ConfigError unless every field ``names`` of ``cfg`` is an integer ``>= minimum``.

    The message is ``"{what} config field {name} must be >= {minimum}; got {value!r}."``.
    """
    for name in names:
        value = getattr(cfg, name)
        if int(value) < minimum:
            raise ConfigError(f"{what} config field {name} must be >= {minimum}; got {value!r}.")


def optional_import(module: str, needed_for: str, install: str):
    """``importlib.import_module(module)``, or one ConfigError saying what needs it and how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:  # depends on the environment
        raise ConfigError(
            f"{needed_for} needs the {module.split('.')[0]!r} package, which is not installed: {install}"
        ) from None
