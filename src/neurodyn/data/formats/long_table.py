"""Long-format tables, one row per observation: CSV (``.csv``, ``.tsv``) and Parquet (``.parquet``, needs
``pyarrow``: ``pip install 'neurodyn[parquet]'``). The one reader of the format; both files become the same rows of
text cells, read into a sequence store (:func:`neurodyn.data.sequence_store.build_sequences`).

A header, then ``id, time, <features...>, label`` (or ``target``) in any column order. Options (``neurodyn convert
FILE key=value``): those of every sequence reader (``max_samples``, ``classes``, ``dt``), the column names ``id``
(default ``id``), ``time`` (``time``; ``time=null``: row order x ``dt``), ``label`` (``label``) or ``target``
(``target``), ``features`` (default: every other column), ``per_step`` (a label per row, default false: one label
per sequence), and CSV ``delimiter`` (default: found from the header: ``,``, ``;`` or tab). A missing value is an
empty cell, ``?``, ``NaN``, ``NA``, ``null`` or ``none``; times are numbers or ISO dates (dates become seconds
since each sequence's first row). Every problem is one DataError naming the file and the line (or row).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from ..sequence_store import COMMON_OPTIONS, Cases, build_sequences, class_list, label_index, sequence_options
from .text import MISSING_CELLS, is_date, is_number, parse_times, read_text_lines

TABLE_OPTIONS = {
    **COMMON_OPTIONS,
    "id": "id",
    "time": "time",
    "label": "label",
    "target": "target",
    "features": None,
    "per_step": False,
}
CSV_OPTIONS = {**TABLE_OPTIONS, "delimiter": None}

Rows = list[tuple[str, list[str]]]
"""``(where, cells)`` per data row: ``where`` names the file and line (or row) for messages."""


def claims_csv(peek) -> bool:
    """A long-format CSV table is named so: ``.csv`` or ``.tsv`` (the reader says what is wrong inside)."""
    return peek.suffix in (".csv", ".tsv")


def claims_parquet(peek) -> bool:
    """A Parquet table: named ``.parquet`` / ``.pq``, or starting with Parquet's magic bytes ``PAR1``."""
    return peek.suffix in (".parquet", ".pq") or peek.head.startswith(b"PAR1")


def read_long_csv(path: Path, **given: Any):
    """A long-format CSV file (one row per observation) as a sequence store; see the module doc for the columns."""
    opts = sequence_options("csv", CSV_OPTIONS, given)
    lines = read_text_lines(path, "CSV file")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise DataError(
            f"{path}:1: the file is empty; expected a header line naming the columns (id, time, the "
            "features, label or target), then one row per observation"
        )
    delimiter = opts["delimiter"]
    if delimiter is None:
        head = lines[first]
        delimiter = "\t" if "\t" in head else (";" if ";" in head and "," not in head else ",")
    elif not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"option delimiter must be one character, got {delimiter!r}")
    header, rows = _csv_rows(path, lines, delimiter)
    return _from_table(path, "csv", header, rows, opts, f"{path}:{len(lines) + 1}")


def _csv_rows(path: Path, lines: list[str], delimiter: str) -> tuple[list[str], Rows]:
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
    header: list[str] | None = None
    rows: Rows = []
    try:
        for cells in reader:
            if not cells or all(not c.strip() for c in cells):
                continue
            if header is None:
                header, header_line = [c.strip() for c in cells], reader.line_num
                continue
            where = f"{path}:{reader.line_num}"
            if len(cells) != len(header):
                raise DataError(
                    f"{where}: this row has {len(cells)} fields where the header (line {header_line}) has {len(header)}"
                )
            rows.append((where, [c.strip() for c in cells]))
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: not readable as CSV ({exc})") from None
    assert header is not None
    return header, rows


def read_long_parquet(path: Path, **given: Any):
    """A long-format Parquet table (one row per observation) as a sequence store; needs ``pyarrow``."""
    opts = sequence_options("parquet", TABLE_OPTIONS, given)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            f"reading the Parquet file {path} needs pyarrow, which is not installed: "
            "`pip install 'neurodyn[parquet]'` (or pyarrow), or save the table as CSV"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own error types for damaged files
        from .base import read_failed

        raise read_failed(path, exc, "Parquet file") from None
    header = [str(n) for n in table.column_names]
    columns = table.to_pydict()
    n = table.num_rows
    if n == 0:
        raise DataError(f"{path}: row 1: the table has no rows; expected one row per observation")
    cells = [[_cell(columns[name][r]) for name in table.column_names] for r in range(n)]
    rows = [(f"{path}: row {r + 1}", row) for r, row in enumerate(cells)]
    return _from_table(path, "parquet", header, rows, opts, f"{path}: row {n}")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


@dataclass
class _Columns:
    """The table's columns by role (indices into the header)."""

    id: int
    time: int | None
    y: int
    y_name: str
    task: str
    features: list[int]


def _column(header: list[str], name: Any, option: str, what: str, where: str) -> int:
    if name in header:
        return header.index(name)
    raise DataError(
        f"{where}: the table has no column {name!r} ({what}); its columns are: {', '.join(header)}; "
        f"name yours with {option}=COLUMN"
    )


def _columns(header: list[str], opts: dict[str, Any], where: str) -> _Columns:
    """Which column is the id, the time, the label or target and the features (options), checked."""
    id_col = _column(header, opts["id"], "id", "the sequence id", where)
    time_col = None if opts["time"] in (None, "") else _column(header, opts["time"], "time", "the timestamp", where)
    label, target = opts["label"], opts["target"]
    has_label, has_target = label in header, target in header
    if has_label and has_target:
        raise DataError(
            f"{where}: the table has both a label column {label!r} and a target column {target!r}; "
            "choose one with label=null or target=null"
        )
    if not has_label and not has_target:
        raise DataError(
            f"{where}: the table has no label column {label!r} and no target column {target!r}; its "
            f"columns are: {', '.join(header)}; name yours with label=COLUMN (classes) or target=COLUMN "
            "(regression)"
        )
    y_name = label if has_label else target
    y_col = header.index(y_name)
    used = {id_col, y_col} | ({time_col} if time_col is not None else set())
    if opts["features"] is None:
        feats = [j for j in range(len(header)) if j not in used]
    else:
        names = [opts["features"]] if isinstance(opts["features"], str) else list(opts["features"])
        feats = [_column(header, str(f), "features", "a feature", where) for f in names]
    if not feats:
        raise DataError(
            f"{where}: no feature columns (the columns are {', '.join(header)}: id, time and "
            f"{'label' if has_label else 'target'} only)"
        )
    return _Columns(id_col, time_col, y_col, y_name, "classification" if has_label else "regression", feats)


def _values(header: list[str], rows: Rows, cols: list[int]) -> np.ndarray:
    """The feature cells as ``(rows, features)`` float64, NaN for a missing cell."""
    values = np.empty((len(rows), len(cols)))
    for r, (where, cells) in enumerate(rows):
        for k, j in enumerate(cols):
            v = cells[j]
            if v.lower() in MISSING_CELLS:
                values[r, k] = np.nan
                continue
            try:
                values[r, k] = float(v)
            except ValueError:
                raise DataError(
                    f"{where}: column {header[j]!r} holds the non-numeric value {v!r}; expected a "
                    "number, or an empty cell / ? / NaN for a missing value"
                ) from None
            if np.isinf(values[r, k]):
                raise DataError(
                    f"{where}: column {header[j]!r} holds the infinite value {v!r}; expected a finite "
                    "number, or an empty cell / ? / NaN for a missing value"
                )
    return values


def _times(path: Path, header: list[str], rows: Rows, col: int) -> tuple[np.ndarray, bool]:
    """The time column as float64 (dates as POSIX seconds, ``dated`` True); the row that breaks it is named."""
    name = header[col]
    times = []
    for where, cells in rows:
        if cells[col].lower() in MISSING_CELLS:
            raise DataError(f"{where}: the time column {name!r} is empty")
        times.append(cells[col])
    try:
        return parse_times(times, str(path), f"the time column {name!r}")
    except DataError:  # find the row that breaks it
        kinds = [is_number(v) for v in times]
        r = next((i for i, k in enumerate(kinds) if k != kinds[0]), None)
        if r is None:
            r = next(i for i, v in enumerate(times) if not is_date(v))
        raise DataError(
            f"{rows[r][0]}: the time column {name!r} holds {times[r]!r}, which is not a timestamp like "
            f"the first row's ({times[0]!r}); give numbers or ISO dates"
        ) from None


def _sequence_target(key: str, idx: np.ndarray, labels: list[str], rows: Rows, c: _Columns, classes, per_step: bool):
    """The target of sequence ``key`` (rows ``idx``): one per sequence (checked equal on every row) or per row."""
    lab = [labels[r] for r in idx]
    if not per_step:
        other = next((r for r in idx if labels[r] != labels[idx[0]]), None)
        if other is not None:
            raise DataError(
                f"{rows[other][0]}: sequence {key!r} has {c.y_name} {labels[other]!r} here but "
                f"{labels[idx[0]]!r} at {rows[idx[0]][0]}; a sequence has one {c.y_name} (per_step=true: "
                "one per row)"
            )
    if classes is not None:
        codes = [label_index(lab_r, classes, rows[r][0], "label") for lab_r, r in zip(lab, idx)]
        return np.asarray(codes) if per_step else codes[0]
    try:
        vals = [float(v) for v in lab]
    except ValueError:
        r = next(r for r, v in zip(idx, lab) if not is_number(v))
        raise DataError(
            f"{rows[r][0]}: the target column {c.y_name!r} holds the non-numeric value {labels[r]!r}"
        ) from None
    return np.asarray(vals) if per_step else vals[0]


def _from_table(path: Path, fmt: str, header: list[str], rows: Rows, opts: dict[str, Any], end: str):
    """Rows of text cells grouped by id into sequences (sorted by time), then the sequence store."""
    head_where = f"{path}:1" if fmt == "csv" else f"{path}: header"
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise DataError(f"{head_where}: the column name {dup!r} appears twice in the header")
    if not rows:
        raise DataError(f"{end}: no rows after the header; expected one row per observation")
    c = _columns(header, opts, head_where)
    groups: dict[str, list[int]] = {}
    for r, (where, cells) in enumerate(rows):
        if cells[c.id] == "":
            raise DataError(f"{where}: the id column {header[c.id]!r} is empty")
        groups.setdefault(cells[c.id], []).append(r)
    values = _values(header, rows, c.features)
    stamps, dated = _times(path, header, rows, c.time) if c.time is not None else (None, False)
    labels = []
    for where, cells in rows:
        if cells[c.y].lower() in MISSING_CELLS:
            raise DataError(
                f"{where}: the {'label' if c.task == 'classification' else 'target'} column {c.y_name!r} is empty"
            )
        labels.append(cells[c.y])
    classes = class_list(labels, None, opts["classes"]) if c.task == "classification" else None
    cases = Cases([], [], [], [])
    for key, idx in groups.items():
        idx = np.asarray(idx)
        if stamps is not None:
            idx = idx[np.argsort(stamps[idx], kind="stable")]
            t = stamps[idx] - (stamps[idx][0] if dated else 0.0)
        else:
            t = np.arange(len(idx)) * opts["dt"]
        cases.xs.append(values[idx])
        cases.ts.append(t)
        cases.ys.append(_sequence_target(key, idx, labels, rows, c, classes, opts["per_step"]))
        cases.where.append(f"{rows[idx[0]][0]}: sequence {key!r}")
    info = {
        "columns": {
            "id": header[c.id],
            "time": None if c.time is None else header[c.time],
            ("label" if c.task == "classification" else "target"): c.y_name,
        },
        "timestamps": ("the time column" + (", dates as seconds since each sequence's first" if dated else ""))
        if c.time is not None
        else f"row order x dt = {opts['dt']:g}",
    }
    return build_sequences(
        path,
        fmt,
        cases,
        task=c.task,
        classes=classes,
        per_step=opts["per_step"],
        channels=[header[j] for j in c.features],
        options=opts,
        info=info,
    )


__all__ = ["read_long_csv", "read_long_parquet", "claims_csv", "claims_parquet", "TABLE_OPTIONS", "CSV_OPTIONS"]
