"""UEA/UCR ``.ts`` files (BasicMotions and friends; the format of the sktime / aeon archive files): the one
reader of the format, into cases (:func:`read_ts_cases`) and into a sequence store (:func:`read_uea_ts`).

``@``-header lines then ``@data``; one case a line, dimensions separated by ``:``, values by ``,`` (``?``:
missing), or ``(timestamp,value)`` pairs under ``@timeStamps true`` (numbers or ISO dates); the class label
(``@classLabel true <labels...>``) or the regression target (``@targetLabel true``) last. Headers are
case-insensitive: ``@problemName``, ``@timeStamps``, ``@missing``, ``@univariate``, ``@dimensions``,
``@equalLength``, ``@seriesLength``, ``@classLabel``, ``@targetLabel``. A file that declares neither label kind is
read with a class label last.

Store options (``neurodyn convert FILE.ts key=value``): those of every sequence reader, ``max_samples``,
``classes``, ``dt`` (:data:`neurodyn.data.sequence_store.COMMON_OPTIONS`). Without timestamps, ``t = step index * dt``.
Every problem is one :class:`~neurodyn.errors.DataError` naming the file and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from ..sequence_store import COMMON_OPTIONS, Cases, build_sequences, class_list, label_index, sequence_options
from .text import is_number, parse_times, read_text_lines


@dataclass
class TsCases:
    """The cases of a UEA/UCR ``.ts`` file, as written (nothing dropped, nothing filled).

    ``xs[i]``: ``(n_i, dims)`` float64, NaN where a value is missing (``?``, or a dimension shorter than the
    case's longest); ``ts[i]``: ``(n_i,)`` timestamps (``@timeStamps true``: the union of the dimensions'
    timestamps, datetimes as seconds since the case's first one; otherwise ``None``); ``labels[i]``: the class
    label (a string) or the regression target (a float); ``lines[i]``: the case's line number; ``classes``: the
    ``@classLabel`` values in declared order (empty when none are declared); ``task``: ``classification``,
    ``regression`` (``@targetLabel true``) or ``none`` (``@classLabel false``); ``header``: every ``@`` tag (lower
    case) and its value.
    """

    path: Path
    xs: list[np.ndarray]
    ts: list[np.ndarray] | None
    labels: list
    lines: list[int]
    classes: tuple[str, ...]
    task: str
    header: dict[str, str]
    datetime_stamps: bool = False


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")
_MISSING = ("?", "nan", "NaN", "NAN", "")
_STAMPED = re.compile(r"\(\s*([^,()]*?)\s*,\s*([^()]*?)\s*\)\s*(?:,|$)")


def _split_outside_parens(line: str, sep: str) -> list[str]:
    """``line`` split at ``sep`` where it is not inside parentheses (timestamps such as ``(2007-01-01 00:00:00,1)``
    hold the separator)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(line[start:i])
            start = i + 1
    parts.append(line[start:])
    return parts


def _numbers(text: str, where: str, what: str) -> np.ndarray:
    """Comma-separated numbers, ``?`` (or NaN) for a missing one; one DataError naming the first bad value."""
    values = [v.strip() for v in text.split(",")]
    try:
        out = np.asarray([np.nan if v in _MISSING else v for v in values], dtype=np.float64)
    except ValueError:
        bad = next(v for v in values if v not in _MISSING and not is_number(v))
        raise DataError(
            f"{where}: {what} holds the non-numeric value {bad!r}; expected numbers, '?' for a missing value"
        ) from None
    if np.isinf(out).any():
        raise DataError(
            f"{where}: {what} holds the infinite value {values[int(np.argmax(np.isinf(out)))]!r}; "
            "expected finite numbers, '?' for a missing value"
        )
    return out


def _stamped(text: str, where: str, what: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(t1,v1),(t2,v2),...`` -> (times, values, whether the times were datetimes)."""
    text = text.strip()
    times, values, pos = [], [], 0
    for m in _STAMPED.finditer(text):
        if m.start() != pos:
            break
        times.append(m.group(1))
        values.append(m.group(2))
        pos = m.end()
    if pos != len(text) or not times:
        raise DataError(
            f"{where}: {what} is not a list of (timestamp,value) pairs, as @timeStamps true declares "
            f"(it starts {text[:40]!r})"
        )
    vals = _numbers(",".join(values), where, what)
    stamps, dated = parse_times(times, where, what)
    _, first, counts = np.unique(stamps, return_index=True, return_counts=True)
    if (counts > 1).any():
        i = int(np.argmax(counts > 1))
        raise DataError(
            f"{where}: {what} holds {counts[i]} values at the timestamp {times[first[i]]}; expected one "
            "value per timestamp in a dimension (merge or drop the repeated observations in the file)"
        )
    return stamps, vals, dated


def _flag(value: str, tag: str, where: str) -> bool:
    word = value.split()[0].lower() if value.split() else ""
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise DataError(f"{where}: @{tag} must be followed by true or false, got {value!r}")


@dataclass
class _Header:
    """What the ``@`` lines declared so far (``dims_from``: which line fixed the dimension count)."""

    tags: dict[str, str] = field(default_factory=dict)
    classes: tuple[str, ...] = ()
    task: str = "classification"
    has_label: bool = True
    stamped: bool = False
    dims: int | None = None
    dims_from: str = ""
    in_data: bool = False

    def read(self, line: str, where: str) -> None:
        """Take one ``@`` line (``line`` stripped) into the header."""
        if not line.startswith("@"):
            raise DataError(f"{where}: expected an @-header line or @data before the cases, got {line[:40]!r}")
        tag, _, value = line[1:].partition(" ")
        tag, value = tag.lower(), value.strip()
        self.tags[tag] = value
        if tag == "data":
            self.in_data = True
            if (
                "classlabel" in self.tags
                and "targetlabel" in self.tags
                and _flag(self.tags["classlabel"], "classLabel", where)
                and _flag(self.tags["targetlabel"], "targetLabel", where)
            ):
                raise DataError(
                    f"{where}: the header declares both @classLabel true and @targetLabel true; a case has one label"
                )
        elif tag == "classlabel":
            self._class_label(value, where)
        elif tag == "targetlabel":
            if _flag(value, "targetLabel", where):
                self.task, self.has_label = "regression", True
            elif not self.classes:
                self.has_label = "classlabel" not in self.tags
        elif tag == "timestamps":
            self.stamped = _flag(value, "timeStamps", where)
        elif tag == "univariate" and _flag(value, "univariate", where):
            self.dims, self.dims_from = 1, "@univariate true"
        elif tag == "dimensions":
            try:
                self.dims, self.dims_from = int(value), f"@dimensions {value}"
            except ValueError:
                raise DataError(f"{where}: @dimensions must be a whole number, got {value!r}") from None

    def _class_label(self, value: str, where: str) -> None:
        if _flag(value, "classLabel", where):
            self.classes = tuple(value.split()[1:])
            if not self.classes:
                raise DataError(f"{where}: @classLabel true must list the class labels")
            self.task, self.has_label = "classification", True
        elif "targetlabel" not in self.tags:
            self.has_label = False


def _case_label(h: _Header, parts: list[str], where: str, lineno: int):
    """The case's label (``None`` without one), after checking its dimension count against the header."""
    n_dims = len(parts) - (1 if h.has_label else 0)
    if h.has_label and (len(parts) < 2 or parts[-1] == ""):
        raise DataError(
            f"{where}: the {'target' if h.task == 'regression' else 'class label'} is missing; a case "
            "is its dimensions separated by ':' then the label after the last ':'"
        )
    if h.dims is None:
        h.dims, h.dims_from = n_dims, f"the first case (line {lineno})"
    if n_dims != h.dims:
        hint = " (the label may be missing)" if h.has_label and n_dims == h.dims - 1 else ""
        raise DataError(
            f"{where}: the case has {n_dims} dimension(s) where {h.dims_from} says {h.dims}{hint}; "
            "dimensions are separated by ':' and the label comes last"
        )
    if not h.has_label:
        return None
    label = parts[-1]
    if h.task == "regression":
        try:
            return float(label)
        except ValueError:
            raise DataError(f"{where}: the target {label!r} is not a number (@targetLabel true)") from None
    if h.classes and label not in h.classes:
        hint = " (the label looks like values: it may be missing)" if "," in label else ""
        raise DataError(
            f"{where}: class label {label!r} is not one of the @classLabel values ({', '.join(h.classes)}){hint}"
        )
    return label


def _case_values(dim_texts: list[str], dims: int, stamped: bool, where: str):
    """``(values (n, dims) with NaN, timestamps (n,) or None, dated)`` of one case's dimension texts."""
    for j, d in enumerate(dim_texts):
        if not d:
            raise DataError(f"{where}: dimension {j + 1} is empty; expected comma-separated values")
    if not stamped:
        cols = [_numbers(d, where, f"dimension {j + 1}") for j, d in enumerate(dim_texts)]
        arr = np.full((max(len(c) for c in cols), dims), np.nan)
        for j, c in enumerate(cols):
            arr[: len(c), j] = c
        return arr, None, None
    per_dim = [_stamped(d, where, f"dimension {j + 1}") for j, d in enumerate(dim_texts)]
    kinds = {dated for _, _, dated in per_dim}
    if len(kinds) > 1:
        raise DataError(f"{where}: timestamps mix numbers and dates; use one kind in a file")
    stamps = np.unique(np.concatenate([s for s, _, _ in per_dim]))
    arr = np.full((len(stamps), dims), np.nan)
    for j, (s, v, _) in enumerate(per_dim):
        arr[np.searchsorted(stamps, s), j] = v
    return arr, stamps, kinds.pop()


def read_ts_cases(path: str | Path) -> TsCases:
    """Parse a UEA/UCR ``.ts`` file (module doc) into :class:`TsCases`; every problem is one DataError naming the
    file and the line."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f".ts file {p} does not exist")
    lines = read_text_lines(p, "UEA/UCR .ts file")
    if not any(line.strip() for line in lines):
        raise DataError(
            f"{p}:1: the file is empty; expected @-header lines (@problemName, @classLabel ...), then "
            "@data and one case a line"
        )
    h = _Header()
    xs, ts, labels, where_lines, dated_seen = [], [], [], [], set()
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(("#", "%")):
            continue
        where = f"{p}:{lineno}"
        if not h.in_data:
            h.read(line, where)
            continue
        parts = [q.strip() for q in _split_outside_parens(line, ":")]
        labels.append(_case_label(h, parts, where, lineno))
        arr, stamps, dated = _case_values(parts[: h.dims], h.dims, h.stamped, where)
        if dated is not None:
            dated_seen.add(dated)
            if len(dated_seen) > 1:
                raise DataError(f"{where}: timestamps mix numbers and dates; use one kind in a file")
            ts.append(stamps - stamps[0] if dated else stamps)
        xs.append(arr)
        where_lines.append(lineno)
    if not h.in_data:
        raise DataError(
            f"{p}:{len(lines)}: the file ends without an @data line; expected @-header lines, then @data "
            "and one case a line"
        )
    if not xs:
        raise DataError(f"{p}:{len(lines)}: the @data section holds no cases")
    task = h.task if h.has_label else "none"
    return TsCases(p, xs, ts if h.stamped else None, labels, where_lines, h.classes, task, h.tags, True in dated_seen)


def read_ts(path: str | Path) -> tuple[list[np.ndarray], list[str]]:
    """Cases of a .ts file: a list of ``(length, dims)`` float32 arrays (NaN where a value is missing or a dimension
    is shorter) and their labels as written (see :func:`read_ts_cases` for timestamps, targets and classes)."""
    cases = read_ts_cases(path)
    return [x.astype(np.float32) for x in cases.xs], [str(v) if v is not None else "" for v in cases.labels]


def read_uea_ts(path: Path, **given: Any):
    """A UEA/UCR ``.ts`` file as a sequence store (:func:`neurodyn.data.sequence_store.build_sequences`)."""
    opts = sequence_options("uea-ts", COMMON_OPTIONS, given)
    cases = read_ts_cases(path)
    if cases.task == "none":
        raise DataError(
            f"{path}: the header declares no labels (@classLabel false, no @targetLabel true); a "
            "store for training needs a class label or a target per case"
        )
    classes = None
    if cases.task == "classification":
        classes = class_list(cases.labels, cases.classes, opts["classes"])
        ys = [
            label_index(lab, classes, f"{path}:{line}", "class label") for lab, line in zip(cases.labels, cases.lines)
        ]
    else:
        ys = list(cases.labels)
    if cases.ts is not None:
        ts = cases.ts
        stamps = "the file's (t, v) pairs" + (
            ", dates as seconds since each case's first" if cases.datetime_stamps else ""
        )
    else:
        ts = [np.arange(len(x)) * opts["dt"] for x in cases.xs]
        stamps = f"step index x dt = {opts['dt']:g}"
    info = {"problem": cases.header.get("problemname", ""), "timestamps": stamps}
    where = [f"{path}:{line}: the case" for line in cases.lines]
    return build_sequences(
        path,
        "uea-ts",
        Cases(cases.xs, ts, ys, where),
        task=cases.task,
        classes=classes,
        per_step=False,
        channels=[f"dim_{j}" for j in range(cases.xs[0].shape[1])],
        options=opts,
        info=info,
    )


def claims(peek) -> bool:
    """A ``.ts`` file, or a file of another name whose first lines read as a ``.ts`` header."""
    return peek.suffix == ".ts" or (peek.head[:1] in (b"@", b"#", b"%") and looks_like_ts(peek.text()))


def looks_like_ts(head: bytes) -> bool:
    """Whether the start of a file reads as a ``.ts`` header (``#``/``%`` comments, then ``@`` tags)."""
    for line in head.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "%")):
            continue
        return bool(
            re.match(
                r"@(problemname|timestamps|missing|univariate|dimensions|equallength|serieslength|"
                r"classlabel|targetlabel|data)\b",
                line,
                re.IGNORECASE,
            )
        )
    return False


__all__ = ["TsCases", "read_ts_cases", "read_ts", "read_uea_ts", "looks_like_ts", "claims"]
