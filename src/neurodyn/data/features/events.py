"""The event encoding of images (Lechner & Hasani 2022; NAC paper §3.1, D.3.1): a binary image flattened row by row
into ``L`` pixels is run-length encoded, ``[1, 1, 1, 1] -> (value 1, duration 4)``; each event is one step with
features ``(value, duration / width)`` at ``t = end of the run / L``.

The one copy of the encoding: the reader of the MNIST files (:mod:`neurodyn.data.formats.mnist`) and the
``event_digits`` generator (:mod:`neurodyn.data.generators.event_digits`) both encode here.
"""

from __future__ import annotations

import numpy as np

from ...errors import DataError


def event_encode(binary: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Run-length events of a flat 0/1 sequence: features ``(E, 2) = (value, duration / width)`` and
    timestamps ``(E,) = end of run / L``."""
    b = np.asarray(binary).astype(np.int8).ravel()
    L = len(b)
    if L == 0:
        raise DataError("cannot event-encode an empty sequence")
    ends = np.flatnonzero(np.diff(b) != 0) + 1
    ends = np.append(ends, L)
    starts = np.concatenate([[0], ends[:-1]])
    feats = np.stack([b[starts].astype(np.float32), (ends - starts).astype(np.float32) / width], axis=1)
    return feats, (ends / L).astype(np.float32)


__all__ = ["event_encode"]
