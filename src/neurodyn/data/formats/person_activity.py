"""UCI *Localization Data for Person Activity* (``ConfLongDemo_JSI.txt``): the one reader of the file, into
recordings (:func:`read_person_activity`) and into a per-step classification sequence store
(:func:`read_person_activity_store`, ``neurodyn convert ConfLongDemo_JSI.txt kind=person-activity``).

Comma-separated lines ``sequence, tag id, timestamp (100-ns ticks), date, x, y, z, activity``; four tags
(010-000-024-033 left ankle, 010-000-030-096 right ankle, 020-000-033-111 chest, 020-000-032-221 belt), 11
activities, 25 recordings A01..E05. A reading is ``[one-hot tag (4), x, y, z]`` (the PAR encoding of Lechner &
Hasani). The store cuts each recording into chunks of ``chunk`` readings (option, default 64), ``t`` in seconds
from the chunk's first reading, one label per reading (the paper's per-time-step classification).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError
from ..sequence_store import Cases, build_sequences

PAR_TAGS = {"010-000-024-033": 0, "010-000-030-096": 1, "020-000-033-111": 2, "020-000-032-221": 3}
PAR_ACTIVITIES = (
    "walking",
    "falling",
    "lying down",
    "lying",
    "sitting down",
    "sitting",
    "standing up from lying",
    "on all fours",
    "sitting on the ground",
    "standing up from sitting",
    "standing up from sitting on the ground",
)


def _reading(parts: list[str], where: str) -> tuple[str, list[float], int, int]:
    """``(recording, [one-hot tag, x, y, z], ticks, activity index)`` of one line's fields."""
    if len(parts) != 8:
        raise DataError(
            f"{where}: expected 8 comma-separated fields (sequence, tag, timestamp, date, x, y, z, "
            f"activity), got {len(parts)}"
        )
    name, tag, ticks, _, xs, ys, zs, act = parts
    if tag not in PAR_TAGS:
        raise DataError(f"{where}: unknown sensor tag {tag!r}; known: {', '.join(PAR_TAGS)}")
    if act not in PAR_ACTIVITIES:
        raise DataError(f"{where}: unknown activity {act!r}")
    try:
        row, tick = [float(xs), float(ys), float(zs)], int(ticks)
    except ValueError:
        raise DataError(f"{where}: non-numeric timestamp or coordinates") from None
    onehot = [0.0] * 4
    onehot[PAR_TAGS[tag]] = 1.0
    return name, onehot + row, tick, PAR_ACTIVITIES.index(act)


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
            name, x, tick, act = _reading(line.split(","), f"{p}:{lineno}")
            r = recs.setdefault(name, {"x": [], "t": [], "y": []})
            r["x"].append(x)
            r["t"].append(tick)
            r["y"].append(act)
    if not recs:
        raise DataError(f"person-activity file {p} holds no readings")
    out = []
    for name, r in recs.items():
        ticks = np.asarray(r["t"], dtype=np.int64)
        out.append(
            {
                "name": name,
                "x": np.asarray(r["x"], dtype=np.float32),
                "t": ((ticks - ticks[0]) / 1e7).astype(np.float32),
                "y": np.asarray(r["y"], dtype=np.int64),
            }
        )
    return out


def read_person_activity_store(path: Path, chunk: int = 64, max_samples: int = 0):
    """The recordings cut into chunks of ``chunk`` readings, as a per-step classification sequence store
    (``params/recording``: the recording's index in file order)."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(f"option chunk (readings per sequence) must be an int >= 1, got {chunk!r}")
    cases, recording = Cases([], [], [], []), []
    for k, rec in enumerate(read_person_activity(str(path))):
        for lo in range(0, len(rec["x"]), chunk):
            sl = slice(lo, lo + chunk)
            cases.xs.append(rec["x"][sl])
            cases.ts.append(rec["t"][sl] - rec["t"][sl][0])
            cases.ys.append(rec["y"][sl])
            cases.where.append(f"{path}: recording {rec['name']}, readings {lo + 1}..{lo + len(rec['x'][sl])}")
            recording.append(k)
    options: dict[str, Any] = {"chunk": chunk, "max_samples": max_samples}
    return build_sequences(
        Path(path),
        "person-activity",
        cases,
        task="classification",
        classes=list(PAR_ACTIVITIES),
        per_step=True,
        channels=["tag_left_ankle", "tag_right_ankle", "tag_chest", "tag_belt", "x", "y", "z"],
        options=options,
        info={"timestamps": "seconds since the chunk's first reading"},
        params={"recording": np.asarray(recording, dtype=np.float32)},
    )


__all__ = ["PAR_TAGS", "PAR_ACTIVITIES", "read_person_activity", "read_person_activity_store"]
