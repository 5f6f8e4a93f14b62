"""Exceptions and message helpers shared by every package.

Every user-facing failure is one sentence that names what was wrong (file, field, shape, value) and
what was expected. Unknown names suggest the closest known ones.
"""
from __future__ import annotations

import difflib
from typing import Iterable


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


def unknown_name(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    """Build the error for an unknown ``name`` of ``kind``, suggesting the nearest known names."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    listing = ", ".join(known) if known else "(none registered)"
    return UnknownNameError(f"unknown {kind} {name!r}.{hint} Known: {listing}.")
