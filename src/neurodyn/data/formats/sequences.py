"""Readers for the public files of the NAC experiments, for users who have them (nothing downloads).

* **MNIST** (event-based MNIST is made from it): the four IDX files of LeCun's distribution
  (``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``, ``t10k-...``), big-endian magic
  ``0x00000803`` (images: n, rows, cols, then uint8 pixels) / ``0x00000801`` (labels: n, then uint8),
  or Keras' ``mnist.npz`` (``x_train, y_train, x_test, y_test``). Train images come first.
* **UCI Localization Data for Person Activity** (``ConfLongDemo_JSI.txt``): comma-separated lines
  ``sequence, tag id, timestamp (100-ns ticks), date, x, y, z, activity``; four tags
  (010-000-024-033 left ankle, 010-000-030-096 right ankle, 020-000-033-111 chest, 020-000-032-221
  belt), 11 activities, 25 recordings A01..E05.
* **UEA/UCR .ts files** (BasicMotions and friends; the format of the sktime / aeon archive files): ``@``-header
  lines then ``@data``; one case a line, dimensions separated by ``:``, values by ``,`` (``?``: missing), or
  ``(timestamp,value)`` pairs under ``@timeStamps true``; the class label (``@classLabel``) or the regression
  target (``@targetLabel``) last. :func:`read_ts_cases` reads everything; :func:`read_ts` the values and labels.
* **PRONOSTIA / FEMTO** (IEEE PHM 2012): one folder per bearing (``Bearing1_1``...) with
  ``acc_NNNNN.csv`` snapshots (hour, minute, second, microsecond, horizontal, vertical acceleration;
  2560 rows at 25.6 kHz every 10 s; some files use ``;``) and optional ``temp_NNNNN.csv`` (hour,
  minute, second, tenth, temperature in C).
* **XJTU-SY**: condition folders (``35Hz12kN``, ``37.5Hz11kN``, ``40Hz10kN``) of bearing folders
  (``Bearing1_1``...) holding ``1.csv, 2.csv, ...`` (one a minute), each with the header
  ``Horizontal_vibration_signals,Vertical_vibration_signals`` and 32768 rows at 25.6 kHz.

Every reader raises :class:`DataError` naming the file and what was expected.
"""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import DataError
from ...files import check_not_special

# --------------------------------------------------------------------------------------------------
# MNIST
# --------------------------------------------------------------------------------------------------

MNIST_FILES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
               "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def _open_maybe_gz(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (optionally gzipped) as a uint8 array of its declared shape."""
    path = Path(path)
    try:
        data = _open_maybe_gz(path)
    except OSError as exc:
        raise DataError(f"cannot read IDX file {path}: {exc.strerror or exc}") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataError(f"{path} is not an unsigned-byte IDX file (magic 0x000008nn expected)")
    ndim = data[3]
    header = 4 + 4 * ndim
    dims = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    if len(data) != header + int(np.prod(dims)):
        raise DataError(f"IDX file {path} declares shape {dims} but holds {len(data) - header} bytes of data")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def _find(folder: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (folder / name).exists():
            return folder / name
    raise DataError(f"MNIST folder {folder} has no {stem}[.gz]; expected the four IDX files of the MNIST distribution")


@lru_cache(maxsize=2)
def read_mnist(path: str) -> tuple[np.ndarray, np.ndarray, int]:
    """``(images (N, 28, 28) uint8, labels (N,) int64, n_train)``: train then test images.

    ``path``: a folder with the IDX files, or Keras' ``mnist.npz``.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"MNIST path {p} does not exist; point data.path at the folder of IDX files or mnist.npz")
    if p.is_file():
        try:
            with np.load(p) as z:
                xs, ys = [z["x_train"], z["x_test"]], [z["y_train"], z["y_test"]]
        except (KeyError, ValueError, OSError) as exc:
            raise DataError(f"{p} is not Keras' mnist.npz (needs x_train, y_train, x_test, y_test): {exc}") from None
    else:
        xs = [read_idx(_find(p, MNIST_FILES["train_images"])), read_idx(_find(p, MNIST_FILES["test_images"]))]
        ys = [read_idx(_find(p, MNIST_FILES["train_labels"])), read_idx(_find(p, MNIST_FILES["test_labels"]))]
    for x, y in zip(xs, ys):
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(f"MNIST at {p}: images {x.shape} and labels {y.shape} do not match")
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64), len(xs[0])


# --------------------------------------------------------------------------------------------------
# UCI person activity
# --------------------------------------------------------------------------------------------------

PAR_TAGS = {"010-000-024-033": 0, "010-000-030-096": 1, "020-000-033-111": 2, "020-000-032-221": 3}
PAR_ACTIVITIES = ("walking", "falling", "lying down", "lying", "sitting down", "sitting", "standing up from lying",
                  "on all fours", "sitting on the ground", "standing up from sitting",
                  "standing up from sitting on the ground")


@lru_cache(maxsize=2)
def read_person_activity(path: str) -> list[dict[str, np.ndarray]]:
    """Recordings of ``ConfLongDemo_JSI.txt``, in file order.

    Each is ``{"name": str, "x": (n, 7) [one-hot tag (4), x, y, z], "t": (n,) seconds from the
    recording's first reading, "y": (n,) activity index in PAR_ACTIVITIES}``.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"person-activity file {p} does not exist (expected UCI's ConfLongDemo_JSI.txt)")
    recs: dict[str, dict[str, list]] = {}
    with open(p) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.split(",")
            if len(parts) != 8:
                raise DataError(f"{p}:{lineno}: expected 8 comma-separated fields (sequence, tag, timestamp, date, "
                                f"x, y, z, activity), got {len(parts)}")
            name, tag, ticks, _, xs, ys, zs, act = parts
            if tag not in PAR_TAGS:
                raise DataError(f"{p}:{lineno}: unknown sensor tag {tag!r}; known: {', '.join(PAR_TAGS)}")
            if act not in PAR_ACTIVITIES:
                raise DataError(f"{p}:{lineno}: unknown activity {act!r}")
            try:
                row = [float(xs), float(ys), float(zs)]
                tick = int(ticks)
            except ValueError:
                raise DataError(f"{p}:{lineno}: non-numeric timestamp or coordinates") from None
            r = recs.setdefault(name, {"x": [], "t": [], "y": []})
            onehot = [0.0] * 4
            onehot[PAR_TAGS[tag]] = 1.0
            r["x"].append(onehot + row)
            r["t"].append(tick)
            r["y"].append(PAR_ACTIVITIES.index(act))
    if not recs:
        raise DataError(f"person-activity file {p} holds no readings")
    out = []
    for name, r in recs.items():
        ticks = np.asarray(r["t"], dtype=np.int64)
        out.append({"name": name, "x": np.asarray(r["x"], dtype=np.float32),
                    "t": ((ticks - ticks[0]) / 1e7).astype(np.float32), "y": np.asarray(r["y"], dtype=np.int64)})
    return out


# --------------------------------------------------------------------------------------------------
# UEA / sktime .ts
# --------------------------------------------------------------------------------------------------

@dataclass
class TsCases:
    """The cases of a UEA/UCR ``.ts`` file, as written (nothing dropped, nothing filled).

    ``xs[i]``: ``(n_i, dims)`` float64, NaN where a value is missing (``?``, or a dimension shorter than the
    case's longest); ``ts[i]``: ``(n_i,)`` timestamps (``@timeStamps true``: the union of the dimensions'
    timestamps, datetimes as seconds since the case's first one; otherwise ``None``); ``labels[i]``: the class
    label (a string) or the regression target (a float); ``lines[i]``: the case's line number; ``classes``: the
    ``@classLabel`` values in declared order (empty when none are declared); ``task``: ``classification`` or
    ``regression`` (``@targetLabel true``); ``header``: every ``@`` tag (lower case) and its value.
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
        raise DataError(f"{where}: {what} holds the non-numeric value {bad!r}; expected numbers, '?' for a "
                        "missing value") from None
    if np.isinf(out).any():
        raise DataError(f"{where}: {what} holds the infinite value {values[int(np.argmax(np.isinf(out)))]!r}; "
                        "expected finite numbers, '?' for a missing value")
    return out


def is_number(v: str) -> bool:
    """Whether ``float(v)`` reads the text (a value of a .ts or CSV file)."""
    try:
        float(v)
    except ValueError:
        return False
    return True


_STAMPED = re.compile(r"\(\s*([^,()]*?)\s*,\s*([^()]*?)\s*\)\s*(?:,|$)")


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
        raise DataError(f"{where}: {what} is not a list of (timestamp,value) pairs, as @timeStamps true declares "
                        f"(it starts {text[:40]!r})")
    vals = _numbers(",".join(values), where, what)
    stamps, dated = parse_times(times, where, what)
    _, first, counts = np.unique(stamps, return_index=True, return_counts=True)
    if (counts > 1).any():
        i = int(np.argmax(counts > 1))
        raise DataError(f"{where}: {what} holds {counts[i]} values at the timestamp {times[first[i]]}; expected one "
                        "value per timestamp in a dimension (merge or drop the repeated observations in the file)")
    return stamps, vals, dated


def parse_times(values: list[str], where: str, what: str) -> tuple[np.ndarray, bool]:
    """Timestamps as float64: numbers as given, or ISO dates and times (``2007-01-01 00:01:00``) as POSIX seconds
    (``dated`` True); a mix, or a value that is neither, is one DataError."""
    try:
        return np.asarray(values, dtype=np.float64), False
    except ValueError:
        pass
    import datetime as _dt

    out = []
    for v in values:
        try:
            stamp = _dt.datetime.fromisoformat(v.strip())
        except ValueError:
            raise DataError(f"{where}: {what} holds the timestamp {v!r}, which is neither a number nor an ISO "
                            "date and time (2007-01-01 00:01:00); every timestamp must be one or the other") from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=_dt.timezone.utc)
        out.append(stamp.timestamp())
    return np.asarray(out, dtype=np.float64), True


def _flag(value: str, tag: str, where: str) -> bool:
    word = value.split()[0].lower() if value.split() else ""
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise DataError(f"{where}: @{tag} must be followed by true or false, got {value!r}")


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
        line = raw[:exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x}); expected a {what}") from None
    return text.splitlines()


def read_ts_cases(path: str | Path) -> TsCases:
    """Parse a UEA/UCR ``.ts`` file (format of the sktime / aeon archive files); see :class:`TsCases`.

    Headers (case-insensitive): ``@problemName``, ``@timeStamps``, ``@missing``, ``@univariate``,
    ``@dimensions``, ``@equalLength``, ``@seriesLength``, ``@classLabel true <labels...>`` or ``@targetLabel
    true``, then ``@data`` and one case a line: dimensions separated by ``:``, values by ``,``, ``?`` for a
    missing value, the label or target last. A file that declares neither label kind is read with a class
    label last. Every problem is one DataError naming the file and the line.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f".ts file {p} does not exist")
    lines = read_text_lines(p, "UEA/UCR .ts file")
    if not any(line.strip() for line in lines):
        raise DataError(f"{p}:1: the file is empty; expected @-header lines (@problemName, @classLabel ...), then "
                        "@data and one case a line")
    header: dict[str, str] = {}
    xs, ts, labels, where_lines = [], [], [], []
    in_data, dims, dims_from = False, None, ""
    classes: tuple[str, ...] = ()
    task, has_label, stamped, any_dated, any_plain = "classification", True, False, False, False
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(("#", "%")):
            continue
        where = f"{p}:{lineno}"
        if not in_data:
            if not line.startswith("@"):
                raise DataError(f"{where}: expected an @-header line or @data before the cases, got {line[:40]!r}")
            tag, _, value = line[1:].partition(" ")
            tag, value = tag.lower(), value.strip()
            header[tag] = value
            if tag == "data":
                in_data = True
                if "classlabel" in header and "targetlabel" in header and \
                        _flag(header["classlabel"], "classLabel", where) and \
                        _flag(header["targetlabel"], "targetLabel", where):
                    raise DataError(f"{where}: the header declares both @classLabel true and @targetLabel true; "
                                    "a case has one label")
            elif tag == "classlabel":
                if _flag(value, "classLabel", where):
                    classes = tuple(value.split()[1:])
                    if not classes:
                        raise DataError(f"{where}: @classLabel true must list the class labels")
                    task, has_label = "classification", True
                elif "targetlabel" not in header:
                    has_label = False
            elif tag == "targetlabel":
                if _flag(value, "targetLabel", where):
                    task, has_label = "regression", True
                elif not classes:
                    has_label = "classlabel" not in header
            elif tag == "timestamps":
                stamped = _flag(value, "timeStamps", where)
            elif tag == "univariate" and _flag(value, "univariate", where):
                dims, dims_from = 1, "@univariate true"
            elif tag == "dimensions":
                try:
                    dims, dims_from = int(value), f"@dimensions {value}"
                except ValueError:
                    raise DataError(f"{where}: @dimensions must be a whole number, got {value!r}") from None
            continue
        parts = [q.strip() for q in _split_outside_parens(line, ":")]
        n_dims = len(parts) - (1 if has_label else 0)
        if has_label and (len(parts) < 2 or parts[-1] == ""):
            raise DataError(f"{where}: the {'target' if task == 'regression' else 'class label'} is missing; a case "
                            "is its dimensions separated by ':' then the label after the last ':'")
        if dims is None:
            dims, dims_from = n_dims, f"the first case (line {lineno})"
        if n_dims != dims:
            hint = (" (the label may be missing)" if has_label and n_dims == dims - 1 else "")
            raise DataError(f"{where}: the case has {n_dims} dimension(s) where {dims_from} says {dims}{hint}; "
                            "dimensions are separated by ':' and the label comes last")
        label = parts[-1] if has_label else None
        if has_label and task == "regression":
            try:
                label = float(label)
            except ValueError:
                raise DataError(f"{where}: the target {parts[-1]!r} is not a number (@targetLabel true)") from None
        elif has_label and classes and label not in classes:
            hint = " (the label looks like values: it may be missing)" if "," in label else ""
            raise DataError(f"{where}: class label {label!r} is not one of the @classLabel values "
                            f"({', '.join(classes)}){hint}")
        dim_texts = parts[:n_dims]
        for j, d in enumerate(dim_texts):
            if not d:
                raise DataError(f"{where}: dimension {j + 1} is empty; expected comma-separated values")
        if stamped:
            per_dim = [_stamped(d, where, f"dimension {j + 1}") for j, d in enumerate(dim_texts)]
            any_dated |= any(dated for _, _, dated in per_dim)
            any_plain |= any(not dated for _, _, dated in per_dim)
            if any_dated and any_plain:
                raise DataError(f"{where}: timestamps mix numbers and dates; use one kind in a file")
            stamps = np.unique(np.concatenate([s for s, _, _ in per_dim]))
            arr = np.full((len(stamps), dims), np.nan)
            for j, (s, v, _) in enumerate(per_dim):
                arr[np.searchsorted(stamps, s), j] = v
            if any_dated:
                stamps = stamps - stamps[0]
            ts.append(stamps)
        else:
            cols = [_numbers(d, where, f"dimension {j + 1}") for j, d in enumerate(dim_texts)]
            arr = np.full((max(len(c) for c in cols), dims), np.nan)
            for j, c in enumerate(cols):
                arr[:len(c), j] = c
        xs.append(arr)
        labels.append(label)
        where_lines.append(lineno)
    last = len(lines)
    if not in_data:
        raise DataError(f"{p}:{last}: the file ends without an @data line; expected @-header lines, then @data and "
                        "one case a line")
    if not xs:
        raise DataError(f"{p}:{last}: the @data section holds no cases")
    if not has_label:
        task = "none"
    return TsCases(p, xs, ts if stamped else None, labels, where_lines, classes, task, header, any_dated)


def read_ts(path: str | Path) -> tuple[list[np.ndarray], list[str]]:
    """Cases of a .ts file: a list of ``(length, dims)`` float32 arrays (NaN where a value is missing or a dimension
    is shorter) and their labels as written (see :func:`read_ts_cases` for timestamps, targets and classes)."""
    cases = read_ts_cases(path)
    return [x.astype(np.float32) for x in cases.xs], [str(v) if v is not None else "" for v in cases.labels]


def sktime_dataset_path(name: str, split: str) -> Path:
    """Path of a .ts file shipped inside the installed ``sktime`` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("sktime")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the {name} data ships with the 'sktime' package, which is not installed; "
                        "`pip install sktime`, or use source=synthetic")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "datasets" / "data" / name / f"{name}_{split.upper()}.ts"
    if not path.exists():
        raise DataError(f"sktime at {root} does not ship {path.name}")
    return path


# --------------------------------------------------------------------------------------------------
# Bearings: PRONOSTIA (FEMTO) and XJTU-SY
# --------------------------------------------------------------------------------------------------

@dataclass
class BearingRun:
    """One run-to-failure: vibration snapshots ``(n, 2, points)`` (horizontal, vertical) and their times."""

    name: str
    condition: int
    fs: float
    times: np.ndarray                 # (n,) seconds since the first snapshot
    signals: np.ndarray               # (n, 2, points) float32
    temperature: np.ndarray | None = field(default=None)  # (n,) C, or None


def _read_csv_rows(path: Path, min_cols: int) -> np.ndarray:
    text = path.read_text()
    sep = ";" if ";" in text.split("\n", 1)[0] else ","
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        parts = line.split(sep)
        try:
            rows.append([float(v) for v in parts])
        except ValueError:
            if lineno == 1:  # header
                continue
            raise DataError(f"{path}:{lineno}: non-numeric value") from None
        if len(parts) < min_cols:
            raise DataError(f"{path}:{lineno}: expected at least {min_cols} columns, got {len(parts)}")
    if not rows:
        raise DataError(f"{path} holds no rows")
    return np.asarray(rows, dtype=np.float64)


def _natural(p: Path):
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", p.name)]


def read_pronostia_bearing(folder: str | Path, max_snapshots: int = 0) -> BearingRun:
    """A PRONOSTIA bearing folder (``Bearing1_1``): acc_*.csv snapshots, temp_*.csv if present."""
    folder = Path(folder)
    files = sorted(folder.glob("acc_*.csv"), key=_natural)
    if not files:
        raise DataError(f"PRONOSTIA folder {folder} has no acc_*.csv snapshot files")
    if max_snapshots:
        files = files[:max_snapshots]
    sigs, times = [], []
    for f in files:
        a = _read_csv_rows(f, 6)
        sigs.append(a[:, 4:6].T.astype(np.float32))
        h, m, s, us = a[0, :4]
        times.append(h * 3600 + m * 60 + s + us * 1e-6)
    npts = {s.shape[1] for s in sigs}
    if len(npts) != 1:
        raise DataError(f"PRONOSTIA folder {folder}: snapshots have different lengths {sorted(npts)}")
    times = np.asarray(times)
    times = np.where(np.diff(times, prepend=times[0]) < 0, times + 86400, times)  # runs past midnight
    times = np.maximum.accumulate(times) - times[0]
    temps = None
    tfiles = sorted(folder.glob("temp_*.csv"), key=_natural)
    if tfiles:
        tv = np.concatenate([_read_csv_rows(f, 5)[:, 4] for f in tfiles])
        temps = np.interp(np.linspace(0, 1, len(files)), np.linspace(0, 1, len(tv)), tv).astype(np.float32)
    m = re.match(r"Bearing(\d+)_(\d+)", folder.name)
    cond = int(m.group(1)) - 1 if m else 0
    return BearingRun(folder.name, cond, 25600.0, times, np.stack(sigs), temps)


XJTU_CONDITIONS = {"35Hz12kN": 0, "37.5Hz11kN": 1, "40Hz10kN": 2}


def read_xjtu_bearing(folder: str | Path, max_snapshots: int = 0) -> BearingRun:
    """An XJTU-SY bearing folder (``35Hz12kN/Bearing1_1``) of ``1.csv, 2.csv, ...`` (one a minute)."""
    folder = Path(folder)
    files = sorted((f for f in folder.glob("*.csv") if f.stem.isdigit()), key=lambda f: int(f.stem))
    if not files:
        raise DataError(f"XJTU-SY folder {folder} has no 1.csv, 2.csv, ... snapshot files")
    if max_snapshots:
        files = files[:max_snapshots]
    sigs = [_read_csv_rows(f, 2)[:, :2].T.astype(np.float32) for f in files]
    if len({s.shape[1] for s in sigs}) != 1:
        raise DataError(f"XJTU-SY folder {folder}: snapshots have different lengths")
    times = 60.0 * (np.asarray([int(f.stem) for f in files], dtype=np.float64) - int(files[0].stem))
    cond = XJTU_CONDITIONS.get(folder.parent.name, 0)
    return BearingRun(f"{folder.parent.name}/{folder.name}", cond, 25600.0, times, np.stack(sigs), None)


def list_bearings(root: str | Path, fmt: str) -> list[Path]:
    """Bearing folders under ``root`` (searched recursively), in natural order."""
    root = Path(root)
    if not root.exists():
        raise DataError(f"bearing data folder {root} does not exist")
    pattern = "acc_*.csv" if fmt == "pronostia" else "1.csv"
    folders = sorted({f.parent for f in root.rglob(pattern)}, key=lambda p: (_natural(p.parent), _natural(p)))
    if not folders:
        raise DataError(f"no {fmt} bearing folders under {root} (looked for folders holding {pattern})")
    return folders
