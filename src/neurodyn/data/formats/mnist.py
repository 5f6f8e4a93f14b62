"""MNIST and the event-based MNIST transformation (Lechner & Hasani 2022; NAC paper §3.1, D.3.1): the one reader of
the MNIST files, into images (:func:`read_mnist`) and into an event-sequence store (:func:`read_mnist_events`,
``neurodyn convert MNIST_FOLDER kind=mnist``).

Files: the four IDX files of LeCun's distribution (``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``,
``t10k-...``), big-endian magic ``0x00000803`` (images: n, rows, cols, then uint8 pixels) / ``0x00000801`` (labels:
n, then uint8), or Keras' ``mnist.npz`` (``x_train, y_train, x_test, y_test``). Train images come first.

Events (``event_encode`` of :mod:`neurodyn.data.features.events`, shared with the ``event_digits`` generator): an
image is thresholded to binary (``threshold``, default 128), flattened row by row into ``L`` pixels and run-length
encoded: ``[1, 1, 1, 1] -> (value 1, duration 4)``; each event is one step with features ``(value, duration /
width)`` at ``t = end of the run / L``; at most ``max_len`` events (default 256) are kept per image.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import ConfigError, DataError
from ..features.events import event_encode
from ..sequence_store import Cases, build_sequences

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


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
    dims = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if len(data) != header + int(np.prod(dims)):
        raise DataError(f"IDX file {path} declares shape {dims} but holds {len(data) - header} bytes of data")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def mnist_files(folder: Path) -> dict[str, Path]:
    """The four IDX files of an MNIST folder (``.gz`` or not, ``-idx`` or ``.idx`` names)."""
    out = {}
    for key, stem in MNIST_FILES.items():
        names = (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz")
        found = next((folder / n for n in names if (folder / n).exists()), None)
        if found is None:
            raise DataError(
                f"MNIST folder {folder} has no {stem}[.gz]; expected the four IDX files of the MNIST distribution"
            )
        out[key] = found
    return out


@lru_cache(maxsize=2)
def read_mnist(path: str) -> tuple[np.ndarray, np.ndarray, int]:
    """``(images (N, 28, 28) uint8, labels (N,) int64, n_train)``: train then test images.

    ``path``: a folder with the IDX files, or Keras' ``mnist.npz``.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"MNIST path {p} does not exist; point it at the folder of IDX files or mnist.npz")
    if p.is_file():
        try:
            with np.load(p) as z:
                xs, ys = [z["x_train"], z["x_test"]], [z["y_train"], z["y_test"]]
        except (KeyError, ValueError, OSError) as exc:
            raise DataError(f"{p} is not Keras' mnist.npz (needs x_train, y_train, x_test, y_test): {exc}") from None
    else:
        f = mnist_files(p)
        xs = [read_idx(f["train_images"]), read_idx(f["test_images"])]
        ys = [read_idx(f["train_labels"]), read_idx(f["test_labels"])]
    for x, y in zip(xs, ys):
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(f"MNIST at {p}: images {x.shape} and labels {y.shape} do not match")
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64), len(xs[0])


def read_mnist_events(path: Path, threshold: float = 128.0, max_len: int = 256, max_samples: int = 0):
    """The MNIST images at ``path`` as event sequences (module doc), train then test, one label per sequence
    (``params/train``: 1 for a training image)."""
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ConfigError(f"option max_len (events kept per image) must be an int >= 1, got {max_len!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold <= 0:
        raise ConfigError(f"option threshold (a pixel >= it is 1) must be a number > 0, got {threshold!r}")
    images, labels, n_train = read_mnist(str(path))
    n = len(images) if not max_samples else min(max_samples, len(images))
    cases = Cases([], [], [], [])
    for i in range(n):
        feats, times = event_encode(images[i].reshape(-1) >= threshold, images.shape[-1])
        cases.xs.append(feats[:max_len])
        cases.ts.append(times[:max_len])
        cases.ys.append(int(labels[i]))
        cases.where.append(f"{path}: image {i}")
    files = list(mnist_files(Path(path)).values()) if Path(path).is_dir() else [Path(path)]
    return build_sequences(
        Path(path),
        "mnist",
        cases,
        task="classification",
        classes=[str(d) for d in range(10)],
        per_step=False,
        channels=["value", "duration"],
        options={"threshold": threshold, "max_len": max_len, "max_samples": max_samples},
        info={"timestamps": "end of the run / pixels"},
        files=files,
        params={"train": (np.arange(n) < n_train).astype(np.float32)},
    )


__all__ = ["read_idx", "read_mnist", "read_mnist_events", "mnist_files"]
