"""Text cells shared by the text readers (``.ts``, long-format CSV / Parquet): reading a file as UTF-8 lines,
telling numbers and timestamps apart, and parsing timestamps.

Every problem is one :class:`~neurodyn.errors.DataError` naming the file (and the line where there is one).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np

from ...errors import DataError
from ...files import check_not_special

MISSING_CELLS = ("", "?", "nan", "na", "n/a", "null", "none")
"""Cell texts (lower case) read as a missing value."""


def read_text_lines(path: Path, what: str) -> list[str]:
    """The lines of a UTF-8 text file; a file that is not text is one DataError naming the line of the bad byte."""
    check_not_special(path, what)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x}); expected a {what}") from None
    return text.splitlines()


def is_number(v: str) -> bool:
    """Whether ``float(v)`` reads the text (a value of a .ts or CSV file)."""
    try:
        float(v)
    except ValueError:
        return False
    return True


def is_date(v: str) -> bool:
    """Whether ``v`` is an ISO date and time (``2007-01-01 00:01:00``)."""
    try:
        datetime.datetime.fromisoformat(v.strip())
    except ValueError:
        return False
    return True


def parse_times(values: list[str], where: str, what: str) -> tuple[np.ndarray, bool]:
    """Timestamps as float64: numbers as given, or ISO dates and times (``2007-01-01 00:01:00``) as POSIX seconds
    (``dated`` True); a mix, or a value that is neither, is one DataError."""
    try:
        return np.asarray(values, dtype=np.float64), False
    except ValueError:
        pass
    out = []
    for v in values:
        try:
            stamp = datetime.datetime.fromisoformat(v.strip())
        except ValueError:
            raise DataError(
                f"{where}: {what} holds the timestamp {v!r}, which is neither a number nor an ISO "
                "date and time (2007-01-01 00:01:00); every timestamp must be one or the other"
            ) from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=datetime.timezone.utc)
        out.append(stamp.timestamp())
    return np.asarray(out, dtype=np.float64), True


__all__ = ["MISSING_CELLS", "read_text_lines", "is_number", "is_date", "parse_times"]
