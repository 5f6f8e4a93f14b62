"""Bearing run-to-failure files, PRONOSTIA (FEMTO, IEEE PHM 2012) and XJTU-SY: the one reader of both layouts
(vibration snapshots as CSV files), into runs (:class:`BearingRun`) and into a per-step regression sequence store
of the paper's features (:func:`read_bearing_store`, ``neurodyn convert FOLDER kind=pronostia`` or ``kind=xjtu``).

* **PRONOSTIA / FEMTO**: one folder per bearing (``Bearing1_1``...) with ``acc_NNNNN.csv`` snapshots (hour,
  minute, second, microsecond, horizontal, vertical acceleration; 2560 rows at 25.6 kHz every 10 s; some files use
  ``;``) and optional ``temp_NNNNN.csv`` (hour, minute, second, tenth, temperature in C).
* **XJTU-SY**: condition folders (``35Hz12kN``, ``37.5Hz11kN``, ``40Hz10kN``) of bearing folders
  (``Bearing1_1``...) holding ``1.csv, 2.csv, ...`` (one a minute), each with the header
  ``Horizontal_vibration_signals,Vertical_vibration_signals`` and 32768 rows at 25.6 kHz.

Features of a snapshot (the paper's preprocessing, Razzaq & Zhao's CARLE; ``run_features`` of
:mod:`neurodyn.data.features.wavelets`, which the synthetic ``bearing`` generator applies to its runs too), per axis:
log10 Morlet-CWT energy, dominant CWT frequency (kHz), CWT spectral entropy, kurtosis, skewness, mean, std; then
operating hours and temperature (C; XJTU-SY: 0).
The store: one sequence per bearing folder (natural order), ``t`` in hours, the target the life fraction per
snapshot ``(N, T, 1)`` (``linear``: the physics-based labels of the paper's ref. 2025b are not public),
``params/condition``. Options: ``max_snapshots`` (0: all), ``n_freqs`` (CWT frequencies, default 24),
``max_samples``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import ConfigError, DataError
from ..sequence_store import Cases, build_sequences


@dataclass
class BearingRun:
    """One run-to-failure: vibration snapshots ``(n, 2, points)`` (horizontal, vertical) and their times."""

    name: str
    condition: int
    fs: float
    times: np.ndarray  # (n,) seconds since the first snapshot
    signals: np.ndarray  # (n, 2, points) float32
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


def read_bearing_store(path: Path, layout: str, max_snapshots: int = 0, n_freqs: int = 24, max_samples: int = 0):
    """Every bearing folder under ``path`` (``layout``: ``pronostia`` or ``xjtu``) as one feature sequence (module
    doc)."""
    for name, value, least in (
        ("max_snapshots", max_snapshots, 0),
        ("n_freqs", n_freqs, 2),
        ("max_samples", max_samples, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"option {name} must be an int >= {least}, got {value!r}")
    from ..features.wavelets import run_features  # (torch: imported when a bearing folder is read)

    runs = read_bearing_runs(str(path), layout, max_snapshots)[: max_samples or None]
    cases = Cases([], [], [], [])
    for r in runs:
        cases.xs.append(run_features(r.signals, r.times, r.temperature, r.fs, n_freqs))
        cases.ts.append((r.times / 3600.0).astype(np.float32))
        cases.ys.append((r.times / max(r.times[-1], 1e-9)).astype(np.float32)[:, None])
        cases.where.append(f"{path}: bearing {r.name}")
    files = [f for folder in list_bearings(path, layout)[: len(runs)] for f in sorted(Path(folder).glob("*.csv"))]
    axes = [
        f"{a}_{k}"
        for a in ("h", "v")
        for k in ("energy", "dominant_khz", "entropy", "kurtosis", "skewness", "mean", "std")
    ]
    return build_sequences(
        Path(path),
        layout,
        cases,
        task="regression",
        classes=None,
        per_step=True,
        channels=axes + ["hours", "temperature"],
        options={"max_snapshots": max_snapshots, "n_freqs": n_freqs, "max_samples": max_samples},
        info={"timestamps": "hours since the first snapshot", "target": "life fraction"},
        params={"condition": np.asarray([r.condition for r in runs], dtype=np.float32)},
        files=files,
    )


@lru_cache(maxsize=2)
def read_bearing_runs(path: str, layout: str, max_snapshots: int = 0) -> list[BearingRun]:
    """Every bearing folder under ``path`` (natural order) read as ``layout`` (``pronostia`` or ``xjtu``)."""
    read = read_pronostia_bearing if layout == "pronostia" else read_xjtu_bearing
    return [read(f, max_snapshots) for f in list_bearings(path, layout)]


__all__ = [
    "BearingRun",
    "read_pronostia_bearing",
    "read_xjtu_bearing",
    "list_bearings",
    "read_bearing_runs",
    "read_bearing_store",
    "XJTU_CONDITIONS",
]
