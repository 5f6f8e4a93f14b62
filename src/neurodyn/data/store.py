"""The project's HDF5 dataset store: atomic, resumable, checksummed, lazily read.

Layout of one file (``layout_version`` 1)::

    /fields/<name>   (N, *per-sample shape)   float32, channels-last, e.g. a: (N, H, W, 1)
    /params/<name>   (N, *shape)              per-sample parameters (viscosity, radius, ...)
    /coords/<name>   (n_i,) or any shape      coordinates shared by all samples (x, y, t, mesh nodes)
    root attrs       neurodyn_layout, generator, generator_version, config (JSON), seed, n_samples,
                     chunk_size, inputs / targets (JSON lists of field names), checksum (sha256),
                     neurodyn_version
    each dataset     attr sha256 of its bytes, so a mismatch names the damaged array

Writing goes through a ``<file>.partial/`` folder of chunk files (each written to a temporary name,
then renamed), so a generation killed at any point resumes at the first missing chunk. When every
chunk exists the HDF5 file is assembled under a temporary name and renamed into place: a reader
never sees a half-written file, and a resumed run yields the same bytes as an uninterrupted one
(chunks are a function of (config, seed, chunk index) only; HDF5 timestamps are disabled).

An existing file is reused only when it is a store of the same generator, version, config, seed and sample
count; anything else at that path (another store, a text file, a folder) is refused naming what differs.
A full disk (ENOSPC / EDQUOT) while chunks are written or the file is assembled is one
:class:`DiskFullError` naming the folder and the chunks kept (generation resumes from them); assembly first
checks the free space against the bytes the file needs.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import numbers
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .._version import __version__
from ..errors import DISK_FULL, ConfigError, DataError, DiskFullError, NeurodynError, disk_full_errno, no_room
from ..files import check_not_special, check_outside_runs, remove_dead_temporaries, side_path, temporary_path
from ..locks import hold
from ..progress import Stage

LAYOUT_VERSION = 1
GROUPS = ("fields", "params", "coords")
IDENTITY = ("generator", "generator_version", "config", "seed", "n_samples")
"""The root attributes that say which dataset a file holds (``chunk_size`` only says how it was written)."""
ASSEMBLY_MARGIN = (1 << 20, 0.02)
"""Free space asked for beyond the chunks' bytes when assembling: 1 MiB plus 2 % (HDF5 index and metadata)."""


def data_root() -> Path:
    """Folder of generated datasets: ``$NEURODYN_DATA`` or ``./data``."""
    return Path(os.environ.get("NEURODYN_DATA", "data"))


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: the identity of a config for hashing and comparison."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (tuple, set)):
        return list(obj)
    raise TypeError(f"cannot store {type(obj).__name__} in a dataset config")


@dataclass(frozen=True)
class StoreMeta:
    """What identifies a stored dataset: who made it, from which config and seed, how many samples."""

    generator: str
    generator_version: str
    config: Mapping[str, Any]
    seed: int
    n_samples: int
    chunk_size: int
    inputs: tuple[str, ...]
    targets: tuple[str, ...]

    def as_attrs(self) -> dict[str, Any]:
        return {
            "neurodyn_layout": LAYOUT_VERSION,
            "generator": self.generator,
            "generator_version": self.generator_version,
            "config": canonical_json(dict(self.config)),
            "seed": int(self.seed),
            "n_samples": int(self.n_samples),
            "chunk_size": int(self.chunk_size),
            "inputs": json.dumps(list(self.inputs)),
            "targets": json.dumps(list(self.targets)),
        }


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------

ChunkFn = Callable[[np.ndarray], Mapping[str, np.ndarray]]
"""Makes samples ``ids`` (1-D int array) and returns ``{"fields/a": (len(ids), ...), "params/nu": ...}``."""


def partial_folder(path: str | Path) -> Path:
    """The folder of finished chunk files while ``path`` is made: ``<name>.partial`` beside it."""
    return side_path(path, "", ".partial")


def _chunk_path(partial: Path, k: int) -> Path:
    return partial / f"chunk_{k:06d}.npz"


def write_store(
    path: str | Path,
    meta: StoreMeta,
    make_chunk: ChunkFn,
    coords: Mapping[str, np.ndarray] | None = None,
    shard: tuple[int, int] = (0, 1),
    progress: Any = None,
    on_chunk: Callable[[int, int], None] | None = None,
    owner: str | Path | None = None,
    what: str | None = None,
) -> Path | None:
    """Generate ``meta.n_samples`` samples chunk by chunk into ``path`` (resumable, atomic).

    ``shard=(i, n)`` makes only chunks ``k`` with ``k % n == i``; the shard that finds every chunk
    present assembles the file. Returns the path once the file exists, ``None`` if other shards
    still have chunks to make. An existing ``path`` is returned only when it holds the same dataset
    (:func:`check_existing_store`); ``meta.chunk_size`` below 1 is a ConfigError; a full disk is a
    :class:`DiskFullError` that keeps the finished chunks. A path inside a run folder is refused unless that folder is
    ``owner``, the run whose training writes it (:func:`neurodyn.files.check_outside_runs`).

    ``progress`` (the one idiom of :mod:`neurodyn.progress`: None a bar on a terminal and lines in a log, ``"lines"``,
    True a bar, False nothing) shows the chunks made and the file assembled from them as one stage (``what``: its
    name, default ``writing <file>``; in a log, the first chunks' pace gives the time left when it exceeds a minute).
    """
    path = Path(path)
    check_chunk_size(meta.chunk_size)
    i_shard, n_shards = shard
    if not (0 <= i_shard < n_shards):
        raise DataError(f"shard {i_shard}/{n_shards} is impossible; expected 0 <= i < n")
    if path.exists():
        check_existing_store(path, meta)
        return path
    check_outside_runs(path, "the store file", owner)
    _ensure_writable(path.parent)
    # two processes asking for the same file and shard (two runs of one preset) take turns: the second finds
    # the file made, instead of writing chunks into a folder the first one removes when it assembles
    # (the lock file goes with its holder: removed while still held, so a waiter re-takes a fresh one)
    with hold(side_path(path, ".", f".shard{i_shard}of{n_shards}.lock"), f"dataset file {path}", wait=True):
        if path.exists():
            check_existing_store(path, meta)
            return path
        return _write_chunks(path, meta, make_chunk, coords, shard, progress, on_chunk, what or f"writing {path.name}")


def check_chunk_size(chunk_size: Any) -> None:
    """Raise ConfigError unless ``chunk_size`` (samples per chunk file) is an integer >= 1."""
    if not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ConfigError(f"--chunk-size (chunk_size) must be >= 1; got {chunk_size!r}")


# --------------------------------------------------------------------------------------------------
# An existing file at the output path
# --------------------------------------------------------------------------------------------------


def check_existing_store(path: str | Path, meta: StoreMeta) -> None:
    """Accept an existing ``path`` only if it is a store of the dataset ``meta`` describes (same generator,
    version, config, seed and sample count); otherwise raise one DataError saying what is there instead."""
    path = Path(path)
    held = store_identity(path)
    difference = identity_difference(held, meta)
    if difference is not None:
        theirs, ours = difference
        raise DataError(
            f"{path} already exists and holds {theirs}, but this call asks for {ours}; choose "
            "another --out or delete it"
        )


def store_identity(path: str | Path) -> dict[str, Any]:
    """The identity attributes (:data:`IDENTITY`) of the existing store file ``path``; a folder, a file that
    is not HDF5 or an HDF5 file that is not a store is one DataError."""
    path = Path(path)
    check_not_special(path, "--out")
    if path.is_dir():
        raise DataError(
            f"{path} is a directory; expected an HDF5 store file (give a file name inside it, e.g. {path / 'data.h5'})"
        )
    if not h5py.is_hdf5(path):
        raise DataError(f"{path} exists and is not an HDF5 store file; choose another --out or delete it")
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: _attr(f.attrs[k]) for k in IDENTITY if k in f.attrs}
    except OSError as exc:
        raise DataError(
            f"{path} exists and is not a readable HDF5 store file ({_first_line(exc)}); choose "
            "another --out or delete it"
        ) from None
    if len(attrs) < len(IDENTITY):
        raise DataError(
            f"{path} exists and is an HDF5 file but not a neurodyn store (it lacks "
            f"{', '.join(k for k in IDENTITY if k not in attrs)}); choose another --out or delete it"
        )
    return attrs


def identity_difference(held: Mapping[str, Any], meta: StoreMeta) -> tuple[str, str] | None:
    """``None`` when the identity attributes ``held`` (see :func:`store_identity`) match ``meta``, else
    (what the file holds, what ``meta`` asks for), each naming only what differs (plus the file's generator,
    seed and sample count), e.g. ``("darcy seed 0 with 100 samples", "seed 1 with 50 samples")``."""
    wanted = {k: meta.as_attrs()[k] for k in IDENTITY}
    differs = {k for k in IDENTITY if str(held[k]) != str(wanted[k])}
    if not differs:
        return None
    # another generator's options are another set of names: listing them says nothing the generator does not
    config_keys = (
        _config_differences(str(held["config"]), str(wanted["config"]))
        if "config" in differs and "generator" not in differs
        else []
    )
    return (_describe(held, differs, config_keys, whole=True), _describe(wanted, differs, config_keys, whole=False))


def _config_differences(theirs: str, ours: str) -> list[tuple[str, str, str]]:
    """(dotted key, their value, our value) of every leaf where two canonical config JSONs differ."""
    a, b = _flatten(json.loads(theirs)), _flatten(json.loads(ours))
    rows = [(k, a.get(k, "(unset)"), b.get(k, "(unset)")) for k in sorted(set(a) | set(b))]
    return [r for r in rows if r[1] != r[2]] or [("config", _short(theirs), _short(ours))]


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """Nested dicts as ``{"a.b": canonical JSON of the leaf}`` (lists are leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1] or "config": _short(canonical_json(value))}


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(ident: Mapping[str, Any], differs: set[str], config_keys: list[tuple[str, str, str]], whole: bool) -> str:
    """``darcy (resolution=8) seed 0 with 100 samples``: the file's side (``whole``) names its generator,
    seed and count; the call's side only what differs."""
    side = 1 if whole else 2
    parts = []
    if whole or "generator" in differs:
        parts.append(str(ident["generator"]))
    if "generator_version" in differs:
        parts.append(f"version {ident['generator_version']}")
    if config_keys:
        shown = ", ".join(f"{row[0]}={row[side]}" for row in config_keys[:4])
        more = f" and {len(config_keys) - 4} more" if len(config_keys) > 4 else ""
        parts.append(f"({shown}{more})" if parts else f"{shown}{more}")
    if whole or "seed" in differs:
        parts.append(f"seed {ident['seed']}")
    if whole or "n_samples" in differs:
        parts.append(f"{'with ' if parts else ''}{ident['n_samples']} samples")
    return " ".join(parts)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _write_chunks(
    path: Path, meta: StoreMeta, make_chunk: ChunkFn, coords, shard: tuple[int, int], progress, on_chunk, what: str
) -> Path | None:
    """The body of :func:`write_store` under its lock."""
    i_shard, n_shards = shard
    partial = partial_folder(path)
    with _disk_full_as_data_error(path, partial, "starting the chunk folder"):
        partial.mkdir(parents=True, exist_ok=True)
        _check_or_write_partial_meta(partial, meta)

    n_chunks = -(-meta.n_samples // meta.chunk_size)
    mine = [k for k in range(n_chunks) if k % n_shards == i_shard and not _chunk_path(partial, k).exists()]
    sizes = {k: min(meta.n_samples, (k + 1) * meta.chunk_size) - k * meta.chunk_size for k in mine}
    kept = n_chunks - len(mine) if n_shards == 1 else 0
    if not mine and any(not _chunk_path(partial, k).exists() for k in range(n_chunks)):
        return None  # this shard's chunks are made, other shards' are not: nothing to do yet
    if mine:
        stage = Stage(
            what + (f" ({kept} of {n_chunks} chunks kept from an earlier run)" if kept else ""),
            sum(sizes.values()),
            "sample",
            progress,
        )
    else:  # every chunk of this shard exists: what is left is the assembly
        stage = Stage(f"assembling {path.name} from {n_chunks} chunks", n_chunks, "chunk", progress)
    with stage:  # one stage: the chunks made and the file assembled from them
        for k in mine:
            lo, hi = k * meta.chunk_size, min(meta.n_samples, (k + 1) * meta.chunk_size)
            ids = np.arange(lo, hi)
            arrays = dict(make_chunk(ids))
            _check_chunk(arrays, ids, meta, partial)
            with _disk_full_as_data_error(path, partial, f"writing chunk {k + 1} of {n_chunks}"):
                _atomic_npz(_chunk_path(partial, k), arrays)
            stage.update(hi - lo)
            if on_chunk is not None:
                on_chunk(k, n_chunks)
        if any(not _chunk_path(partial, k).exists() for k in range(n_chunks)):
            return None
        _check_free_space(path, partial, n_chunks, coords or {})
        with _disk_full_as_data_error(path, partial, f"assembling {path.name}"):
            _assemble(path, partial, meta, n_chunks, coords or {}, (lambda n: None) if mine else stage.update)
    shutil.rmtree(partial, ignore_errors=True)
    return path


# --------------------------------------------------------------------------------------------------
# A full disk
# --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _disk_full_as_data_error(path: Path, partial: Path, doing: str):
    """Turn a disk-full failure inside the block into one :class:`DiskFullError` (other errors pass through)."""
    try:
        yield
    except NeurodynError:
        raise
    except Exception as exc:
        code = disk_full_errno(exc)
        if code is None:
            raise
        if code == errno.EFBIG:
            raise DiskFullError(
                f"{no_room(code, path.parent)} while {doing}; {_kept(partial, 'raising the limit')}"
            ) from None
        reason = "no space left on device" if code == errno.ENOSPC else "the user's disk quota is used up"
        raise DiskFullError(
            f"the disk holding {path.parent} (mounted at {_mount_point(path.parent)}) is full "
            f"({reason}) while {doing}; {_kept(partial)}"
        ) from None


def _kept(partial: Path, after: str = "freeing space") -> str:
    """What survives a failure for lack of room: the finished chunks, and how to resume from them (``after``: what
    makes room)."""
    n = len(list(partial.glob("chunk_*.npz"))) if partial.is_dir() else 0
    return (
        f"the {n} finished chunk file(s) in {partial} were kept, and running the same command again after "
        f"{after} resumes from them"
    )


def _mount_point(folder: Path) -> Path:
    """The mount point of the file system holding ``folder``."""
    p = folder.resolve()
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def _check_free_space(path: Path, partial: Path, n_chunks: int, coords: Mapping[str, np.ndarray]) -> None:
    """Raise :class:`DiskFullError` when ``path``'s folder has less free space than the assembled file needs:
    the chunk files' bytes (their arrays, uncompressed) and the coordinates, plus :data:`ASSEMBLY_MARGIN`."""
    data = sum(_chunk_path(partial, k).stat().st_size for k in range(n_chunks))
    data += sum(np.asarray(v).nbytes for v in coords.values())
    fixed, fraction = ASSEMBLY_MARGIN
    needed = int(data * (1 + fraction)) + fixed
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:  # no way to ask: let the write itself find out
        return
    if free < needed:
        raise DiskFullError(
            f"not enough free space in {path.parent} to assemble {path.name}: it needs about "
            f"{_size(needed)} and {_size(free)} are free; {_kept(partial)}"
        )


def _size(n: int) -> str:
    """``123456789`` -> ``"123.5 MB (123456789 bytes)"``."""
    value, unit = float(n), "bytes"
    for next_unit in ("kB", "MB", "GB", "TB"):
        if value < 1000:
            break
        value, unit = value / 1000, next_unit
    return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit} ({n} bytes)"


class _SkipWriteWhenFull:
    """The file h5py's ``fileobj`` driver writes through: a write refused for lack of space is skipped, not
    failed, and remembered in ``error``.

    HDF5 cannot recover from a failed write (the file stays half-closed and the process segfaults at exit),
    so the file is finished with holes and the caller, seeing ``error``, throws it away."""

    def __init__(self, raw):
        self.raw = raw
        self.error: OSError | None = None

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        if self.error is None:
            try:
                while len(view):
                    view = view[self.raw.write(view) :]
                return size
            except OSError as exc:
                if exc.errno not in DISK_FULL:
                    raise
                self.error = exc
        self.raw.seek(len(view), os.SEEK_CUR)
        return size

    def raise_if_full(self) -> None:
        if self.error is not None:
            raise self.error

    def read(self, size: int = -1) -> bytes:
        return self.raw.read(size)

    def readinto(self, buffer) -> int:
        return self.raw.readinto(buffer)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.raw.seek(offset, whence)

    def tell(self) -> int:
        return self.raw.tell()

    def truncate(self, size: int | None = None) -> int:
        return self.raw.truncate(size)

    def flush(self) -> None:
        self.raw.flush()


def _ensure_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise DataError(
            f"cannot write to folder {folder}: {exc.strerror or exc}; choose a writable "
            "location (e.g. set $NEURODYN_DATA or pass --out)"
        ) from None


def _check_or_write_partial_meta(partial: Path, meta: StoreMeta) -> None:
    meta_file = partial / "meta.json"
    mine = canonical_json(meta.as_attrs())
    if meta_file.exists():
        theirs = meta_file.read_text()
        if theirs != mine:
            raise DataError(
                f"{partial} holds chunks of a different generation (config, seed or version "
                "differ); delete that folder to start again"
            )
        return
    tmp = meta_file.with_name(f".meta.{os.getpid()}.tmp")
    try:
        tmp.write_text(mine)
        os.replace(tmp, meta_file)
    finally:
        tmp.unlink(missing_ok=True)


def _check_chunk(arrays: Mapping[str, np.ndarray], ids: np.ndarray, meta: StoreMeta, partial: Path) -> None:
    for key, arr in arrays.items():
        group = key.split("/", 1)[0]
        if group not in ("fields", "params") or "/" not in key:
            raise DataError(
                f"generator {meta.generator} returned key {key!r}; expected 'fields/<name>' or 'params/<name>'"
            )
        if arr.shape[0] != len(ids):
            raise DataError(
                f"generator {meta.generator} returned {key} with {arr.shape[0]} samples for a chunk of {len(ids)}"
            )
        if np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.complexfloating):
            bad = ~np.isfinite(arr.reshape(len(ids), -1)).all(axis=1)
            if bad.any():
                idx = int(ids[np.argmax(bad)])
                raise DataError(
                    f"generator {meta.generator} produced NaN or Inf in {key} for sample {idx} "
                    f"(seed {meta.seed}); nothing was written for that chunk ({partial})"
                )


def _atomic_npz(target: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` as ``target`` (an .npz) through a temporary file that is renamed, or removed on failure."""
    remove_dead_temporaries(target)
    tmp = temporary_path(target)
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **{k.replace("/", "__"): v for k, v in arrays.items()})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _read_chunk(p: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(p) as z:
            return {k.replace("__", "/"): z[k] for k in z.files}
    except Exception as exc:  # a chunk damaged outside our atomic writes
        p.unlink(missing_ok=True)
        raise DataError(
            f"chunk file {p} is unreadable ({exc}); it was removed, run generate again to remake it"
        ) from None


def _assemble(
    path: Path,
    partial: Path,
    meta: StoreMeta,
    n_chunks: int,
    coords: Mapping[str, np.ndarray],
    chunk_done: Callable[[int], None] = lambda n: None,
) -> None:
    """Write the HDF5 file from the chunks under a temporary name in ``path``'s folder, fsync it and rename it
    into place; the temporary file is removed on any failure. A full disk raises its OSError (ENOSPC) once
    HDF5 has closed the file (see :class:`_SkipWriteWhenFull`), so nothing half-written is left at ``path``."""
    remove_dead_temporaries(path)  # of an assembly killed with kill -9
    tmp = temporary_path(path)
    try:
        with open(tmp, "w+b", buffering=0) as raw:
            sink = _SkipWriteWhenFull(raw)
            try:
                with h5py.File(sink, "w", libver=("earliest", "v110"), track_order=False) as f:
                    _write_arrays(f, partial, meta, n_chunks, coords, chunk_done)
                    f.flush()
                    sink.raise_if_full()  # before reading back blocks that were never written
                    _write_checksums(f, meta)
            except Exception:
                sink.raise_if_full()  # whatever failed after a skipped write, the cause is the full disk
                raise
            sink.raise_if_full()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_arrays(
    f: h5py.File,
    partial: Path,
    meta: StoreMeta,
    n_chunks: int,
    coords: Mapping[str, np.ndarray],
    chunk_done: Callable[[int], None] = lambda n: None,
) -> None:
    """Every chunk's arrays into ``/fields`` and ``/params`` (one HDF5 chunk per sample), and ``/coords``;
    ``chunk_done(1)`` after each chunk."""
    first = _read_chunk(_chunk_path(partial, 0))
    dsets = {}
    for key in sorted(first):
        arr = first[key]
        dsets[key] = f.create_dataset(
            key,
            shape=(meta.n_samples, *arr.shape[1:]),
            dtype=arr.dtype,
            chunks=(1, *arr.shape[1:]) if arr.ndim > 1 else None,
            track_times=False,
        )
    for k in range(n_chunks):
        chunk = first if k == 0 else _read_chunk(_chunk_path(partial, k))
        if sorted(chunk) != sorted(first):
            raise DataError(f"chunk {k} in {partial} has keys {sorted(chunk)}, expected {sorted(first)}")
        lo = k * meta.chunk_size
        for key, arr in chunk.items():
            dsets[key][lo : lo + arr.shape[0]] = arr
        chunk_done(1)
    for name, arr in sorted(coords.items()):
        f.create_dataset(f"coords/{name}", data=np.asarray(arr), track_times=False)


def _write_checksums(f: h5py.File, meta: StoreMeta) -> None:
    """Each dataset's sha256, the identity attributes of ``meta``, the file checksum and the library version."""
    for key, ds in sorted(_all_datasets(f).items()):
        ds.attrs["sha256"] = _dataset_digest(key, ds).hexdigest()
    for k, v in meta.as_attrs().items():
        f.attrs[k] = v
    f.attrs["checksum"] = file_checksum(f)
    f.attrs["neurodyn_version"] = __version__


# --------------------------------------------------------------------------------------------------
# Checksums and reading
# --------------------------------------------------------------------------------------------------


def _all_datasets(f: h5py.File) -> dict[str, h5py.Dataset]:
    """The arrays of a store's groups by ``group/name``; one DataError for an entry that is a link (external or
    soft: a store holds its arrays itself, and a link may lead nowhere) or not an array."""
    out = {}
    for g in GROUPS:
        if g in f:
            group = f[g]
            for name in group:
                link = group.get(name, getlink=True)
                if isinstance(link, h5py.ExternalLink):
                    raise DataError(
                        f"dataset file {f.filename}: {g}/{name} is an external link to "
                        f"{link.filename}:{link.path}; a store file holds its arrays itself (write the "
                        "array into the file, or convert the source again)"
                    )
                if isinstance(link, h5py.SoftLink):
                    raise DataError(
                        f"dataset file {f.filename}: {g}/{name} is a soft link to {link.path}; a store "
                        "file holds its arrays itself (write the array into the file)"
                    )
                ds = group.get(name)
                if not isinstance(ds, h5py.Dataset):
                    raise DataError(
                        f"dataset file {f.filename}: {g}/{name} is not an array; a store file holds "
                        "arrays under fields/ (convert public files with `neurodyn convert FILE`)"
                    )
                out[f"{g}/{name}"] = ds
    return out


def _dataset_digest(key: str, ds: h5py.Dataset, rows: int = 256) -> hashlib._Hash:
    h = hashlib.sha256()
    h.update(f"{key}|{ds.dtype.str}|{tuple(ds.shape)}|".encode())
    if ds.ndim == 0:
        h.update(np.ascontiguousarray(ds[()]).tobytes())
        return h
    for lo in range(0, ds.shape[0], rows):
        h.update(np.ascontiguousarray(ds[lo : lo + rows]).tobytes())
    return h


def file_checksum(f: h5py.File) -> str:
    """sha256 over the per-dataset digests (in name order) and the identity attributes."""
    h = hashlib.sha256()
    for key, ds in sorted(_all_datasets(f).items()):
        h.update(f"{key}={ds.attrs.get('sha256', '')};".encode())
    for k in ("generator", "generator_version", "config", "seed", "n_samples"):
        h.update(f"{k}={f.attrs.get(k, '')};".encode())
    return h.hexdigest()


class StoredDataset:
    """A read handle on a store file; arrays are read lazily, sample by sample.

    ``StoredDataset(path)`` checks layout and (by default) checksums; ``read(key, index)`` reads a
    sample or a slice. The h5py handle is opened per process, so instances survive DataLoader forks.
    """

    def __init__(self, path: str | Path, verify: bool = True):
        self.path = Path(path)
        if self.path.is_dir():
            raise DataError(
                f"dataset file {self.path} is a directory; expected an HDF5 store file (made by neurodyn generate)"
            )
        if not self.path.exists():
            raise DataError(
                f"dataset file {self.path} does not exist; generate it with `neurodyn generate` or check the path"
            )
        check_not_special(self.path, "dataset file")
        self._file: h5py.File | None = None
        self._pid: int | None = None
        try:
            with h5py.File(self.path, "r") as f:
                self.attrs = {k: _attr(v) for k, v in f.attrs.items()}
                self.shapes = {k: tuple(ds.shape) for k, ds in _all_datasets(f).items()}
                self.dtypes = {k: ds.dtype for k, ds in _all_datasets(f).items()}
                missing = [
                    k for k in ("neurodyn_layout", "generator", "n_samples", "inputs", "targets") if k not in self.attrs
                ]
                if missing:
                    raise DataError(
                        f"dataset file {self.path} lacks attribute(s) {', '.join(missing)}; it is "
                        "not a neurodyn store file (convert public files with "
                        "`neurodyn convert FILE`)"
                    )
                if verify:
                    self._verify(f)
        except OSError as exc:
            raise DataError(f"dataset file {self.path} is not a readable HDF5 file ({exc})") from None
        self.n_samples = int(self.attrs["n_samples"])
        self.inputs = tuple(json.loads(self.attrs["inputs"]))
        self.targets = tuple(json.loads(self.attrs["targets"]))
        self.config = json.loads(self.attrs.get("config", "{}"))
        for name in (*self.inputs, *self.targets):
            key = f"fields/{name}"
            if key not in self.shapes:
                raise DataError(
                    f"dataset file {self.path} lacks field {key!r} named in its inputs/targets; "
                    f"it has {sorted(self.shapes)}"
                )
            if self.shapes[key][0] != self.n_samples:
                raise DataError(
                    f"dataset file {self.path}: {key} has {self.shapes[key][0]} samples, the file "
                    f"says n_samples={self.n_samples}"
                )

    def _verify(self, f: h5py.File) -> None:
        for key, ds in sorted(_all_datasets(f).items()):
            want = ds.attrs.get("sha256")
            if want is None or _dataset_digest(key, ds).hexdigest() != _attr(want):
                raise DataError(
                    f"dataset file {self.path} is corrupt: checksum of {key} does not match; "
                    "delete it and generate it again"
                )
        if _attr(f.attrs.get("checksum", "")) != file_checksum(f):
            raise DataError(
                f"dataset file {self.path} is corrupt: its checksum does not match its contents; "
                "delete it and generate it again"
            )

    @property
    def file(self) -> h5py.File:
        if self._file is None or self._pid != os.getpid():
            self._file = h5py.File(self.path, "r")
            self._pid = os.getpid()
        return self._file

    def read(self, key: str, index: Any = slice(None)) -> np.ndarray:
        """``fields/<name>``, ``params/<name>`` or ``coords/<name>`` at ``index`` (int, slice or sorted ids)."""
        if key not in self.shapes:
            raise DataError(f"dataset file {self.path} has no array {key!r}; it has {sorted(self.shapes)}")
        return self.file[key][index]

    def keys(self, group: str) -> list[str]:
        return sorted(k.split("/", 1)[1] for k in self.shapes if k.startswith(group + "/"))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_file"] = None
        return state


def _attr(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.generic):
        return v.item()
    return v


def stored_files(root: Path | None = None) -> Iterable[Path]:
    """Finished store files below ``root`` (default ``data_root()``)."""
    root = root or data_root()
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*.h5") if not p.name.startswith("."))


def check_in_range(arr: Any, dtype: np.dtype, label: str, offset: int | None = 0) -> None:
    """Raise naming ``label``, the first sample (``offset`` + row; ``offset=None``: ``label`` names one sample) and
    the value when a finite value of ``arr`` lies beyond what the store's float ``dtype`` holds (1e39 in float32
    would become Inf)."""
    arr = np.asarray(arr)
    if (
        arr.size == 0
        or not np.issubdtype(dtype, np.floating)
        or not np.issubdtype(arr.dtype, np.floating)
        or np.finfo(arr.dtype).max <= np.finfo(dtype).max
    ):
        return
    too_big = np.isfinite(arr) & (np.abs(arr) > np.finfo(dtype).max)
    if too_big.any():
        where = np.unravel_index(int(np.argmax(too_big)), arr.shape)
        sample = f" in sample {offset + int(where[0]) if arr.ndim else offset}" if offset is not None else ""
        raise DataError(
            f"{label} holds {float(arr[where]):g}{sample}, beyond the range of {np.dtype(dtype).name} "
            f"(+-{float(np.finfo(dtype).max):.3g}) in which the store keeps values; rescale the data "
            "(e.g. another unit) and convert again"
        )
