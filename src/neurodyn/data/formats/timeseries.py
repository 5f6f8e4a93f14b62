"""A user's own time series as a sequence store: UEA/UCR ``.ts``, long-format CSV / Parquet, ``.npz`` arrays.

``neurodyn generate --from FILE [--out STORE] [option=value ...]`` reads one of these files into the layout the
sequence generators write (:mod:`neurodyn.data.sequences`), so every sequence preset trains on it with
``data.path=STORE``:

=================== ====================================================================================
``uea-ts``          a UEA/UCR archive ``.ts`` file: equal or unequal length, uni- or multivariate, ``?`` for a
                    missing value, ``@classLabel`` classes or ``@targetLabel`` regression targets,
                    ``@timeStamps true`` (``(t,v)`` pairs, numbers or ISO dates)
``csv``             long format, one row per observation (``.csv``, ``.tsv``): a header, then
                    ``id, time, <features...>, label`` (or ``target``) in any column order
``parquet``         the same table as Parquet (needs ``pyarrow``: ``pip install 'neurodyn[parquet]'``)
``sequence-npz``    ``np.savez(FILE, x=(N, T, C), y=(N,) [, t=(N, T)] [, mask=(N, T)] [, classes=(K,)])``
=================== ====================================================================================

What the store holds (``fields/*`` per sequence, padded to the longest):

* ``x (N, T, C)`` float32 the observations, 0 after a sequence's end and where a value is missing;
* ``t (N, T)`` float32 the timestamps as the file gives them (``.ts`` without timestamps and CSV without a time
  column: ``step index * dt``); dates become seconds since the sequence's first observation;
* ``mask (N, T)`` uint8, 1 on a sequence's steps (a prefix: a step at which no channel is observed is not a step,
  its timestamp leaves with it, so the kept steps are irregular in time);
* ``observed (N, T, C)`` uint8, only when some value is missing inside a sequence: 1 where the value was observed
  (the dataset fills the others; see ``data.missing`` in :class:`~neurodyn.data.sequences.SequenceDataset`);
* ``y``: ``(N,)`` int64 class indices (``coords/n_classes``; the class names, in index order, are in the store's
  config, ``info.classes``), ``(N,)`` float32 regression targets, or ``(N, T)`` per-step labels;
* ``params/length (N,)``: the steps of each sequence.

Options (``key=value`` after ``--from FILE``; every reader): ``max_samples`` (0: all), ``classes`` (the class
names in index order: fixes the indices of a test file converted on its own; labels outside the list are an
error), ``dt`` (time between steps where the file gives no timestamps, default 1). CSV / Parquet also take the
column names ``id`` (default ``id``), ``time`` (``time``; ``time=null``: row order), ``label`` (``label``) or
``target`` (``target``), ``features`` (default: every other column), ``per_step`` (a label per row, default
false: one label per sequence), and CSV ``delimiter`` (default: found from the header: ``,``, ``;`` or tab).
``.npz`` takes ``per_step`` (a float ``y (N, T)`` is per-step targets rather than ``T`` targets per sequence).

A file that cannot be read is one :class:`~neurodyn.errors.DataError` naming the file and the line (row, or
sample for ``.npz``); the conversion writes through the store's atomic writer, so nothing half-written is left.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from .base import ArraySource, PublicDataset
from .sequences import is_number

SEQUENCE_FORMATS = ("uea-ts", "csv", "parquet", "sequence-npz")
COMMON_OPTIONS = {"max_samples": 0, "classes": None, "dt": 1.0}
TABLE_OPTIONS = {**COMMON_OPTIONS, "id": "id", "time": "time", "label": "label", "target": "target",
                 "features": None, "per_step": False}
CSV_OPTIONS = {**TABLE_OPTIONS, "delimiter": None}
NPZ_OPTIONS = {**COMMON_OPTIONS, "per_step": False}
MISSING_CELLS = ("", "?", "nan", "na", "n/a", "null", "none")
TIME_PRECISION = 2.0 ** 23  # float32 keeps steps of 1 only below this: larger timestamps are shifted per sequence


def read_sequence_file(path: str | Path, fmt: str, **options: Any) -> PublicDataset:
    """Read ``path`` in format ``fmt`` (one of :data:`SEQUENCE_FORMATS`) into a sequence :class:`PublicDataset`."""
    path = Path(path)
    if fmt == "uea-ts":
        return read_uea_ts(path, **options)
    if fmt == "csv":
        return read_long_csv(path, **options)
    if fmt == "parquet":
        return read_long_parquet(path, **options)
    if fmt == "sequence-npz":
        return read_sequence_npz(path, **options)
    raise ConfigError(f"unknown sequence format {fmt!r}; known: {', '.join(SEQUENCE_FORMATS)}")


# --------------------------------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------------------------------

def _options(reader: str, defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(f"reader {reader!r} has no option(s) {', '.join(unknown)}; its options are: "
                          f"{', '.join(sorted(defaults))}")
    opts = {**defaults, **given}
    m = opts["max_samples"]
    if isinstance(m, bool) or not isinstance(m, int) or m < 0:
        raise ConfigError(f"option max_samples must be an int >= 0 (0: all samples), got {m!r}")
    dt = opts["dt"]
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
        raise ConfigError(f"option dt (time between steps where the file has no timestamps) must be > 0, got {dt!r}")
    opts["dt"] = float(dt)
    if opts["classes"] is not None:
        if isinstance(opts["classes"], str) or not isinstance(opts["classes"], (list, tuple)) or not opts["classes"]:
            raise ConfigError(f"option classes must be a list of class names, e.g. classes=[walk, run], got "
                              f"{opts['classes']!r}")
        opts["classes"] = [str(c) for c in opts["classes"]]
        if len(set(opts["classes"])) != len(opts["classes"]):
            raise ConfigError(f"option classes lists a name twice: {opts['classes']}")
    for key in ("per_step",):
        if key in opts and not isinstance(opts[key], bool):
            raise ConfigError(f"option {key} must be true or false, got {opts[key]!r}")
    return opts


def _natural_key(name: str):
    try:
        return (0, float(name), "")
    except ValueError:
        return (1, 0.0, name)


def _class_list(found: Sequence[str], declared: Sequence[str] | None, given: Sequence[str] | None) -> list[str]:
    """The class names in index order: the ``classes`` option, else those the file declares, else the labels found
    sorted (numbers numerically)."""
    if given:
        return list(given)
    if declared:
        return list(declared)
    return sorted(set(found), key=_natural_key)


# --------------------------------------------------------------------------------------------------
# the one builder: ragged cases -> padded store arrays
# --------------------------------------------------------------------------------------------------

def build_sequences(path: Path, fmt: str, xs: list[np.ndarray], ts: list[np.ndarray], ys: list[Any], where: list[str],
                    *, task: str, classes: list[str] | None, per_step: bool, channels: list[str],
                    options: dict[str, Any], info: dict[str, Any]) -> PublicDataset:
    """Sequences ``xs[i] (n_i, C)`` (NaN: missing) at times ``ts[i] (n_i,)`` with targets ``ys[i]`` (a class index,
    a float or a float vector, or per step an ``(n_i,)`` array) as a :class:`PublicDataset` in the sequence store
    layout (module doc). ``where[i]`` starts the message of a problem with sequence ``i`` (file and line)."""
    if options["max_samples"]:
        n = options["max_samples"]
        xs, ts, ys, where = xs[:n], ts[:n], ys[:n], where[:n]
    kept_x, kept_t, kept_y = [], [], []
    shifted = False
    for i, (x, t, y) in enumerate(zip(xs, ts, ys)):
        x = np.asarray(x, dtype=np.float64)
        t = np.asarray(t, dtype=np.float64)
        rows = np.isfinite(x).any(axis=1)
        if not rows.any():
            raise DataError(f"{where[i]} holds no observed value (every value is missing); remove it")
        bad_t = rows & ~np.isfinite(t)
        if bad_t.any():
            raise DataError(f"{where[i]} has no finite timestamp at step {int(np.argmax(bad_t)) + 1}")
        x, t = x[rows], t[rows]
        if np.any(np.diff(t) < 0):
            j = int(np.argmax(np.diff(t) < 0)) + 1
            raise DataError(f"{where[i]} has timestamps that decrease at step {j + 1} ({t[j - 1]:g} then "
                            f"{t[j]:g}); expected them in time order")
        if np.abs(t).max() >= TIME_PRECISION:
            t, shifted = t - t[0], True
        if per_step:
            y = np.asarray(y)[rows]
        kept_x.append(x)
        kept_t.append(t)
        kept_y.append(y)
    n, c = len(kept_x), kept_x[0].shape[1]
    lengths = np.asarray([len(x) for x in kept_x], dtype=np.int64)
    T = int(lengths.max())
    x = np.zeros((n, T, c), dtype=np.float32)
    observed = np.zeros((n, T, c), dtype=np.uint8)
    t = np.zeros((n, T), dtype=np.float32)
    mask = np.zeros((n, T), dtype=np.uint8)
    for i, (xi, ti) in enumerate(zip(kept_x, kept_t)):
        L = len(xi)
        ok = np.isfinite(xi)
        x[i, :L] = np.where(ok, xi, 0.0)
        observed[i, :L] = ok
        t[i, :L] = ti
        t[i, L:] = ti[-1]
        mask[i, :L] = 1
    y_dtype = np.int64 if task == "classification" else np.float32
    if per_step:
        y = np.zeros((n, T), dtype=y_dtype)
        for i, yi in enumerate(kept_y):
            y[i, :len(yi)] = yi
    else:
        y = np.asarray(kept_y, dtype=y_dtype)
    missing = int(((observed == 0) & (mask[..., None] == 1)).sum())
    fields = {"x": _memory(x, f"{path}: x"), "t": _memory(t, f"{path}: t"), "mask": _memory(mask, f"{path}: mask"),
              "y": _memory(y, f"{path}: y")}
    inputs = ("x", "t", "mask")
    if missing:
        fields["observed"] = _memory(observed, f"{path}: observed")
        inputs += ("observed",)
    spacing = [np.diff(ti) for ti in kept_t if len(ti) > 1]
    irregular = bool(spacing) and not all(np.allclose(d, spacing[0][0]) for d in spacing)
    info = {**info, "task": task, "per_step": per_step, "channels": channels, "n_sequences": n,
            "steps": [int(lengths.min()), T], "missing_values": missing, "irregular": irregular}
    if classes is not None:
        info["classes"] = list(classes)
    if shifted:
        info["time_shifted"] = "timestamps beyond 2^23 are stored from each sequence's first one (float32)"
    coords = {"n_classes": np.asarray(len(classes))} if classes is not None else {}
    return PublicDataset(format=fmt, kind=task, path=path, files=[path], fields=fields,
                         params={"length": lengths.astype(np.float32)}, coords=coords, inputs=inputs,
                         targets=("y",), info=info, options=_json_options(options))


def _memory(arr: np.ndarray, label: str) -> ArraySource:
    return ArraySource(tuple(arr.shape), label, lambda lo, hi, a=arr: a[lo:hi], dtype=arr.dtype)


def _json_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}


def _label_index(label: str, classes: list[str], where: str, what: str) -> int:
    try:
        return classes.index(label)
    except ValueError:
        raise DataError(f"{where}: {what} {label!r} is not one of the classes ({', '.join(classes)}); name every "
                        "class with the option classes=[...]") from None


# --------------------------------------------------------------------------------------------------
# UEA / UCR .ts
# --------------------------------------------------------------------------------------------------

def read_uea_ts(path: Path, **given: Any) -> PublicDataset:
    """A UEA/UCR ``.ts`` file (see :func:`neurodyn.data.formats.sequences.read_ts_cases`) as a sequence store."""
    from .sequences import read_ts_cases

    opts = _options("uea-ts", COMMON_OPTIONS, given)
    cases = read_ts_cases(path)
    where = [f"{path}:{line}: the case" for line in cases.lines]
    if cases.task == "none":
        raise DataError(f"{path}: the header declares no labels (@classLabel false, no @targetLabel true); a "
                        "store for training needs a class label or a target per case")
    classes = None
    if cases.task == "classification":
        classes = _class_list(cases.labels, cases.classes, opts["classes"])
        ys = [_label_index(lab, classes, f"{path}:{line}", "class label") for lab, line in zip(cases.labels,
                                                                                             cases.lines)]
    else:
        ys = list(cases.labels)
    dims = cases.xs[0].shape[1]
    if cases.ts is not None:
        ts = cases.ts
        stamps = "the file's (t, v) pairs" + (", dates as seconds since each case's first" if cases.datetime_stamps
                                               else "")
    else:
        ts = [np.arange(len(x)) * opts["dt"] for x in cases.xs]
        stamps = f"step index x dt = {opts['dt']:g}"
    info = {"problem": cases.header.get("problemname", ""), "timestamps": stamps}
    return build_sequences(path, "uea-ts", cases.xs, ts, ys, where, task=cases.task, classes=classes, per_step=False,
                           channels=[f"dim_{j}" for j in range(dims)], options=opts, info=info)


# --------------------------------------------------------------------------------------------------
# long-format tables: CSV and Parquet
# --------------------------------------------------------------------------------------------------

def read_long_csv(path: Path, **given: Any) -> PublicDataset:
    """A long-format CSV file (one row per observation) as a sequence store; see the module doc for the columns."""
    opts = _options("csv", CSV_OPTIONS, given)
    from .sequences import read_text_lines

    lines = read_text_lines(path, "CSV file")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise DataError(f"{path}:1: the file is empty; expected a header line naming the columns (id, time, the "
                        "features, label or target), then one row per observation")
    delimiter = opts["delimiter"]
    if delimiter is None:
        head = lines[first]
        delimiter = "\t" if "\t" in head else (";" if ";" in head and "," not in head else ",")
    elif not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"option delimiter must be one character, got {delimiter!r}")
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
    header: list[str] | None = None
    rows: list[tuple[str, list[str]]] = []
    try:
        for cells in reader:
            if not cells or all(not c.strip() for c in cells):
                continue
            if header is None:
                header = [c.strip() for c in cells]
                header_line = reader.line_num
                continue
            where = f"{path}:{reader.line_num}"
            if len(cells) != len(header):
                raise DataError(f"{where}: this row has {len(cells)} fields where the header (line {header_line}) "
                                f"has {len(header)}")
            rows.append((where, [c.strip() for c in cells]))
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: not readable as CSV ({exc})") from None
    assert header is not None
    return _from_table(path, "csv", header, rows, opts, f"{path}:{len(lines) + 1}")


def read_long_parquet(path: Path, **given: Any) -> PublicDataset:
    """A long-format Parquet table (one row per observation) as a sequence store; needs ``pyarrow``."""
    opts = _options("parquet", TABLE_OPTIONS, given)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"reading the Parquet file {path} needs pyarrow, which is not installed: "
                          "`pip install 'neurodyn[parquet]'` (or pyarrow), or save the table as CSV") from None
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


def _column(header: list[str], name: Any, option: str, what: str, path: Path, where: str) -> int:
    if name in header:
        return header.index(name)
    raise DataError(f"{where}: the table has no column {name!r} ({what}); its columns are: {', '.join(header)}; "
                    f"name yours with {option}=COLUMN")


def _from_table(path: Path, fmt: str, header: list[str], rows: list[tuple[str, list[str]]], opts: dict[str, Any],
                end: str) -> PublicDataset:
    head_where = f"{path}:1" if fmt == "csv" else f"{path}: header"
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise DataError(f"{head_where}: the column name {dup!r} appears twice in the header")
    if not rows:
        raise DataError(f"{end}: no rows after the header; expected one row per observation")
    id_col = _column(header, opts["id"], "id", "the sequence id", path, head_where)
    time_col = None if opts["time"] in (None, "") else _column(header, opts["time"], "time", "the timestamp", path,
                                                                 head_where)
    label, target = opts["label"], opts["target"]
    has_label, has_target = label in header, target in header
    if has_label and has_target:
        raise DataError(f"{head_where}: the table has both a label column {label!r} and a target column {target!r}; "
                        "choose one with label=null or target=null")
    if not has_label and not has_target:
        raise DataError(f"{head_where}: the table has no label column {label!r} and no target column {target!r}; its "
                        f"columns are: {', '.join(header)}; name yours with label=COLUMN (classes) or target=COLUMN "
                        "(regression)")
    task = "classification" if has_label else "regression"
    y_name = label if has_label else target
    y_col = header.index(y_name)
    used = {id_col, y_col} | ({time_col} if time_col is not None else set())
    if opts["features"] is None:
        feat_cols = [j for j in range(len(header)) if j not in used]
    else:
        names = [opts["features"]] if isinstance(opts["features"], str) else list(opts["features"])
        feat_cols = [_column(header, str(f), "features", "a feature", path, head_where) for f in names]
    if not feat_cols:
        raise DataError(f"{head_where}: no feature columns (the columns are {', '.join(header)}: id, time and "
                        f"{'label' if has_label else 'target'} only)")
    feature_names = [header[j] for j in feat_cols]
    groups: dict[str, list[int]] = {}
    for r, (_, cells) in enumerate(rows):
        key = cells[id_col]
        if key == "":
            raise DataError(f"{rows[r][0]}: the id column {header[id_col]!r} is empty")
        groups.setdefault(key, []).append(r)
    values = np.empty((len(rows), len(feat_cols)))
    for r, (where, cells) in enumerate(rows):
        for k, j in enumerate(feat_cols):
            v = cells[j]
            if v.lower() in MISSING_CELLS:
                values[r, k] = np.nan
                continue
            try:
                values[r, k] = float(v)
            except ValueError:
                raise DataError(f"{where}: column {header[j]!r} holds the non-numeric value {v!r}; expected a "
                                "number, or an empty cell / ? / NaN for a missing value") from None
            if np.isinf(values[r, k]):
                raise DataError(f"{where}: column {header[j]!r} holds the infinite value {v!r}; expected a finite "
                                "number, or an empty cell / ? / NaN for a missing value")
    if time_col is not None:
        times = []
        for where, cells in rows:
            if cells[time_col].lower() in MISSING_CELLS:
                raise DataError(f"{where}: the time column {header[time_col]!r} is empty")
            times.append(cells[time_col])
        from .sequences import parse_times

        try:
            stamps, dated = parse_times(times, str(path), f"the time column {header[time_col]!r}")
        except DataError:  # find the row that breaks it
            kinds = [is_number(v) for v in times]
            r = next((i for i, k in enumerate(kinds) if k != kinds[0]), None)
            if r is None:
                r = next(i for i, v in enumerate(times) if not _is_date(v))
            raise DataError(f"{rows[r][0]}: the time column {header[time_col]!r} holds {times[r]!r}, which is not "
                            f"a timestamp like the first row's ({times[0]!r}); give numbers or ISO dates") from None
    else:
        stamps, dated = None, False
    labels = []
    for where, cells in rows:
        v = cells[y_col]
        if v.lower() in MISSING_CELLS:
            raise DataError(f"{where}: the {'label' if has_label else 'target'} column {y_name!r} is empty")
        labels.append(v)
    per_step = opts["per_step"]
    xs, ts, ys, where_seq = [], [], [], []
    classes = None
    if has_label:
        classes = _class_list(labels, None, opts["classes"])
    for key, idx in groups.items():
        idx = np.asarray(idx)
        if stamps is not None:
            idx = idx[np.argsort(stamps[idx], kind="stable")]
            t = stamps[idx] - (stamps[idx][0] if dated else 0.0)
        else:
            t = np.arange(len(idx)) * opts["dt"]
        lab = [labels[r] for r in idx]
        if not per_step:
            other = next((r for r in idx if labels[r] != labels[idx[0]]), None)
            if other is not None:
                raise DataError(f"{rows[other][0]}: sequence {key!r} has {y_name} {labels[other]!r} here but "
                                f"{labels[idx[0]]!r} at {rows[idx[0]][0]}; a sequence has one {y_name} (per_step=true: "
                                "one per row)")
        if has_label:
            codes = [_label_index(lab_r, classes, rows[r][0], "label") for lab_r, r in zip(lab, idx)]
            y = np.asarray(codes) if per_step else codes[0]
        else:
            try:
                vals = [float(v) for v in lab]
            except ValueError:
                r = next(r for r, v in zip(idx, lab) if not is_number(v))
                raise DataError(f"{rows[r][0]}: the target column {y_name!r} holds the non-numeric value "
                                f"{labels[r]!r}") from None
            y = np.asarray(vals) if per_step else vals[0]
        xs.append(values[idx])
        ts.append(t)
        ys.append(y)
        where_seq.append(f"{rows[idx[0]][0]}: sequence {key!r}")
    info = {"columns": {"id": header[id_col], "time": None if time_col is None else header[time_col],
                        ("label" if has_label else "target"): y_name},
            "timestamps": ("the time column" + (", dates as seconds since each sequence's first" if dated else ""))
            if time_col is not None else f"row order x dt = {opts['dt']:g}"}
    return build_sequences(path, fmt, xs, ts, ys, where_seq, task=task, classes=classes, per_step=per_step,
                           channels=feature_names, options=opts, info=info)


def _is_date(v: str) -> bool:
    import datetime

    try:
        datetime.datetime.fromisoformat(v)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# .npz arrays
# --------------------------------------------------------------------------------------------------

def read_sequence_npz(path: Path, **given: Any) -> PublicDataset:
    """``np.savez`` arrays ``x (N, T, C)`` (or ``(N, T)``; NaN: missing), ``y``, optional ``t (N, T)`` or ``(T,)``,
    ``mask (N, T)`` (0: no step; need not be a prefix) and ``classes (K,)`` (names of the class indices in ``y``)."""
    opts = _options("sequence-npz", NPZ_OPTIONS, given)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise DataError(f"{path}: sample 0: an array holds Python objects; save plain numeric (or string) "
                            "arrays with np.savez") from None
        from .base import read_failed

        raise read_failed(path, exc, ".npz file") from None
    except Exception as exc:  # a damaged zip or member
        from .base import read_failed

        raise read_failed(path, exc, ".npz file") from None
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(f"{path}: no array {key!r}; the file holds {sorted(arrays) or 'nothing'} and needs x "
                            "(N, T, C) and y (N,) (optional t (N, T), mask (N, T), classes (K,))")
    x = arrays["x"]
    if x.ndim == 2:
        x = x[..., None]
    if x.ndim != 3 or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise DataError(f"{path}: x has shape {x.shape} and dtype {x.dtype}; expected numbers of shape (N, T, C)")
    n, T, _ = x.shape
    if n == 0 or T == 0:
        raise DataError(f"{path}: x has shape {x.shape}; expected at least one sequence of one step")
    x = x.astype(np.float64)
    if np.isinf(x).any():
        i = int(np.argmax(np.isinf(x).reshape(n, -1).any(1)))
        raise DataError(f"{path}: sample {i}: x holds Inf; expected finite values, NaN for a missing one")
    if "t" in arrays:
        t = np.asarray(arrays["t"], dtype=np.float64)
        if t.shape == (T,):
            t = np.broadcast_to(t, (n, T))
        if t.shape != (n, T):
            raise DataError(f"{path}: t has shape {t.shape}; expected (N, T) = {(n, T)} or (T,) = {(T,)}")
        stamps = "the file's t"
    else:
        t = np.broadcast_to(np.arange(T) * opts["dt"], (n, T))
        stamps = f"step index x dt = {opts['dt']:g}"
    if "mask" in arrays:
        m = np.asarray(arrays["mask"])
        if m.shape != (n, T):
            raise DataError(f"{path}: mask has shape {m.shape}; expected (N, T) = {(n, T)}")
        if not np.isin(m, (0, 1)).all():
            i = int(np.argmax((~np.isin(m, (0, 1))).any(1)))
            raise DataError(f"{path}: sample {i}: mask holds values other than 0 and 1")
        m = m.astype(bool)
    else:
        m = np.ones((n, T), dtype=bool)
    y = arrays["y"]
    per_step = opts["per_step"] or (y.ndim == 2 and y.shape == (n, T) and
                                    (np.issubdtype(y.dtype, np.integer) or y.dtype.kind in "USb"))
    if y.shape[0] != n:
        raise DataError(f"{path}: y has {y.shape[0]} entries for {n} sequences in x")
    if per_step and y.shape[:2] != (n, T):
        raise DataError(f"{path}: per_step=true needs y of shape (N, T) = {(n, T)}, got {y.shape}")
    names = [str(c) for c in arrays["classes"]] if "classes" in arrays else None
    if y.dtype.kind in "USb" or np.issubdtype(y.dtype, np.integer):
        task = "classification"
        raw = y.astype(str) if y.dtype.kind in "US" else y
        if names is not None and np.issubdtype(raw.dtype, np.integer):
            if raw.min() < 0 or raw.max() >= len(names):
                i = int(np.argmax(((raw < 0) | (raw >= len(names))).reshape(n, -1).any(1)))
                raise DataError(f"{path}: sample {i}: y holds a class index outside 0..{len(names) - 1} (classes "
                                f"has {len(names)} names)")
            labels = np.asarray(names)[raw]
        else:
            labels = raw.astype(str)
        classes = _class_list(list(np.unique(labels[m] if per_step else labels)), names, opts["classes"])
        lookup = {c: k for k, c in enumerate(classes)}
        codes = np.zeros(labels.shape, dtype=np.int64)
        for idx, lab in np.ndenumerate(labels):
            if per_step and not m[idx]:
                continue
            if lab not in lookup:
                raise DataError(f"{path}: sample {idx[0]}: label {lab!r} is not one of the classes "
                                f"({', '.join(classes)}); name every class with the option classes=[...]")
            codes[idx] = lookup[lab]
        y = codes
    elif np.issubdtype(y.dtype, np.floating):
        task, classes = "regression", None
        bad = ~np.isfinite(y.reshape(n, -1)).all(1) if not per_step else ~(np.isfinite(y) | ~m).all(1)
        if bad.any():
            raise DataError(f"{path}: sample {int(np.argmax(bad))}: y holds NaN or Inf; every sequence needs a target")
    else:
        raise DataError(f"{path}: y has dtype {y.dtype}; expected integer or string class labels, or float targets")
    xs, ts, ys, where = [], [], [], []
    for i in range(n):
        keep = m[i]
        xs.append(np.where(keep[:, None], x[i], np.nan))
        ts.append(t[i])
        ys.append(y[i])
        where.append(f"{path}: sample {i}")
    info = {"timestamps": stamps}
    return build_sequences(path, "sequence-npz", xs, ts, ys, where, task=task, classes=classes, per_step=per_step,
                           channels=[f"x_{j}" for j in range(x.shape[2])], options=opts, info=info)


def looks_like_ts(head: bytes) -> bool:
    """Whether the start of a file reads as a ``.ts`` header (``#``/``%`` comments, then ``@`` tags)."""
    for line in head.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "%")):
            continue
        return bool(re.match(r"@(problemname|timestamps|missing|univariate|dimensions|equallength|serieslength|"
                             r"classlabel|targetlabel|data)\b", line, re.IGNORECASE))
    return False


__all__ = ["SEQUENCE_FORMATS", "read_sequence_file", "read_uea_ts", "read_long_csv", "read_long_parquet",
           "read_sequence_npz", "build_sequences"]
