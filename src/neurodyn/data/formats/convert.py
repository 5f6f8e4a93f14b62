"""Convert a public dataset file into a store file (``neurodyn convert FILE [--out PATH]``).

The result is an ordinary store file (atomic, resumable, checksummed; see ``data/store.py``) whose
``generator`` is ``import:<format>`` and whose config records what was read: every source file's
name, size and sha256, the format and kind, the reader options in force (defaults included) and the
reader's description (``info``: channel names, source keys, choices). The default output is
``$NEURODYN_DATA/imported/<stem>[_<options>].h5``; converting again with the same source and options
returns the existing file, and an existing file made from another source or options is refused.

A conversion that fails on bad data (NaN/Inf, a damaged array) leaves nothing behind: the store
writes chunks to ``<out>.partial/`` and only renames a finished file into place, and that folder is
removed on failure. It is kept after Ctrl-C and when the disk is full (one
:class:`~neurodyn.data.store.DiskFullError` naming the folder), so the conversion resumes when run again.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

from ...errors import DataError
from ...files import check_outside_runs
from ..store import (
    DiskFullError,
    StoreMeta,
    check_chunk_size,
    data_root,
    identity_difference,
    partial_folder,
    store_identity,
    write_store,
)
from . import read_public
from .base import READER_VERSION, PublicDataset

CHUNK_BYTES = 64 * 1024**2


def file_digest(path: Path, block: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def source_record(data: PublicDataset) -> list[dict[str, Any]]:
    """Name (relative to what was read), size and sha256 of every file read."""
    base = data.path if data.path.is_dir() else data.path.parent
    out = []
    for f in data.files:
        try:
            name = f.relative_to(base).as_posix()
        except ValueError:
            name = f.name
        out.append({"name": name, "size": f.stat().st_size, "sha256": file_digest(f)})
    return out


def default_out(src: Path, data: PublicDataset, options: dict[str, Any]) -> Path:
    """``$NEURODYN_DATA/imported/<stem>[_<kind>][_<option><value>...].h5``."""
    base = data.path if data.path.exists() else src
    parts = [base.name if base.is_dir() else base.stem]
    if base.is_dir():  # a Geo-FNO folder: name the set read from it
        parts.append(data.kind)
    for k, v in sorted(options.items()):
        v = "-".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
        parts.append(f"{k}{v}")
    name = re.sub(r"[^A-Za-z0-9._=-]+", "-", "_".join(parts))
    return data_root() / "imported" / f"{name}.h5"


def convert_to_store(
    src: str | Path,
    out: str | Path | None = None,
    kind: str | None = None,
    *,
    chunk_size: int | None = None,
    progress: Any = False,
    owner: str | Path | None = None,
    **options: Any,
) -> Path:
    """Read ``src`` with :func:`read_public` (``kind``, ``options``) and write it as a store file.

    Returns the path of the store file (``out``, or the default under ``$NEURODYN_DATA/imported``).
    ``chunk_size`` samples are converted at a time (default: about 64 MB of float32 per chunk). ``owner``: the run
    folder whose training converts into it (a path inside any other run folder is refused). ``progress``: the one
    idiom of :mod:`neurodyn.progress` (None: a bar on a terminal, lines in a log; False, the default: nothing).
    """
    src = Path(src)
    if out is not None and not Path(out).exists():
        check_outside_runs(out, "--out", owner)  # before the file is read
    data = read_public(src, kind=kind, **options)
    config = {
        "format": data.format,
        "kind": data.kind,
        "source": source_record(data),
        "reader_options": data.options,
        "info": data.info,
        "shapes": {k: list(v) for k, v in sorted(data.shapes.items())},
    }
    if chunk_size is None:
        chunk_size = max(1, min(data.n_samples, CHUNK_BYTES // max(1, data.sample_nbytes())))
    check_chunk_size(chunk_size)
    path = Path(out) if out is not None else default_out(src, data, options)
    meta = StoreMeta(
        generator=f"import:{data.format}",
        generator_version=READER_VERSION,
        config=config,
        seed=0,
        n_samples=data.n_samples,
        chunk_size=int(chunk_size),
        inputs=data.inputs,
        targets=data.targets,
    )
    if path.exists():
        _check_existing(path, meta)
        return path
    partial = partial_folder(path)
    ours = not partial.exists()
    try:
        done = write_store(
            path,
            meta,
            lambda ids: data.chunk(int(ids[0]), int(ids[-1]) + 1),
            coords=data.coords,
            progress=progress,
            owner=owner,
            what=f"converting {src.name} ({data.format}) into {path.name}",
        )
    except DiskFullError:  # the chunks made so far are kept: converting again resumes from them
        raise
    except Exception:
        if ours:
            shutil.rmtree(partial, ignore_errors=True)
        raise
    assert done is not None  # one shard: the file is assembled
    return path


def conversion_summary(path: str | Path) -> str:
    """One line describing the converted store at ``path``: samples and shapes (PDE fields), points (point clouds:
    min / max per sample, coordinate dimensions, output channels) or sequences (count, classes, lengths)."""
    from ..store import StoredDataset

    store = StoredDataset(path, verify=False)
    info = store.config.get("info", {})
    fmt = store.config.get("format", "?")
    if "n_sequences" in info:
        lo, hi = info.get("steps", ["?", "?"])
        what = (
            f"{len(info['classes'])} classes ({', '.join(map(str, info['classes'][:6]))}"
            f"{', ...' if len(info['classes']) > 6 else ''})"
            if info.get("classes")
            else "regression targets"
        )
        lengths = f"length {lo}" if lo == hi else f"lengths {lo}..{hi}"
        return (
            f"{path}: {info['n_sequences']} sequences ({fmt}), {what}, {lengths}, "
            f"{len(info.get('channels', []))} channel(s)"
        )
    if "points_min" in info:
        from .point_cloud import summary_line

        return f"{path}: {summary_line(store.n_samples, info)} ({fmt})"
    shapes = ", ".join(
        f"{k.removeprefix('fields/')} {tuple(v[1:])}"
        for k, v in sorted(store.shapes.items())
        if k.startswith("fields/")
    )
    return f"{path}: {store.n_samples} samples ({fmt}), per sample {shapes}"


def _check_existing(path: Path, meta: StoreMeta) -> None:
    """Accept an existing ``path`` only if it is the store of this conversion (same reader, version, source,
    options and sample count); a folder, a foreign file or another conversion is one DataError."""
    difference = identity_difference(store_identity(path), meta)
    if difference is not None:
        raise DataError(
            f"{path} already exists and holds another conversion ({difference[0]}, where this one "
            f"has {difference[1]}); choose another --out or delete it"
        )


__all__ = ["convert_to_store", "conversion_summary", "default_out", "file_digest"]
