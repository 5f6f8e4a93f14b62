"""The reader table: every reader, the name ``kind=`` gives it, and how it tells a file of its own; walked once per
conversion.

A row is a :class:`Reader`: its ``kind`` (a format, or one of Geo-FNO's sets), the ``format`` it records, its
``read(path, **options)``, whether it reads a folder, what it looks for (said when no reader claims a file), and its
``claims(peek) -> bool | str``, written in the reader's own module: ``True``, the file is its own; ``False``, it is
not; a sentence, the file is its own by its bytes but cannot be read as it is (the refusal, e.g. a folder holding
several Geo-FNO sets). A claim is cheap: the file's suffix and first bytes (:class:`Peek`); the few that must look
inside a container (a zip archive's names, an HDF5 file's keys, a MATLAB file's variables) ask ``peek``, which reads
each once for all of them and closes what it opened after the walk. A row without ``claims`` is read only when
named with ``kind=`` (the papers' raw files and folders, and ``geo-fno``, which finds the set itself).

:func:`pick` walks :data:`READERS` in order, once: the first reader whose claim is not ``False`` reads the file (or
refuses it with its sentence), so an earlier row wins (suffix-named tables before content; Geo-FNO's plasticity
before FNO's MATLAB files; torch archives and point-cloud ``.npz`` before sequence ``.npz``; The Well before
PDEBench). When no row claims the file, one sentence says what the file is and what was looked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import DataError
from . import (
    bearings,
    fno_mat,
    geofno,
    long_table,
    mnist,
    neuralop_pt,
    pdebench,
    person_activity,
    point_cloud,
    sequence_npz,
    the_well,
    ts,
)
from .base import PublicDataset, read_failed

RAW_SEQUENCE_FORMATS = ("person-activity", "mnist", "pronostia", "xjtu")
"""Raw files of the sequence papers, read only when named with ``kind=`` (their generators name them)."""
FORMATS = (
    "fno-mat",
    "pdebench",
    "neuralop-pt",
    "geo-fno",
    "the-well",
    "uea-ts",
    "csv",
    "parquet",
    "sequence-npz",
    "point-cloud",
) + RAW_SEQUENCE_FORMATS
SEQUENCE_FORMATS = ("uea-ts", "csv", "parquet", "sequence-npz") + RAW_SEQUENCE_FORMATS
GEO_FNO_SETS = geofno.SETS
KINDS = FORMATS + GEO_FNO_SETS

HEAD_BYTES = 128
_MAGIC = (
    (b"MATLAB", "matlab"),
    (b"\x93NUMPY", "npy"),
    (b"PK\x03\x04", "zip"),
    (b"\x80", "pickle"),
    (b"\x89HDF\r\n\x1a\n", "hdf5"),
)


def read_head(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of ``path``; one DataError when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None


class Peek:
    """What the claims look at, read once per conversion: ``path``, ``suffix`` (lower case; ``""`` for a folder),
    ``head`` (the first :data:`HEAD_BYTES` bytes) and ``container`` (``folder``, ``empty``, ``matlab`` (v5),
    ``npy``, ``zip``, ``pickle``, ``hdf5`` (by its magic bytes, or after MATLAB v7.3's 512-byte user block) or
    ``other``). Deeper looks are made on first use and kept: :meth:`text` (the first 4 KiB), :meth:`zip_names`,
    :meth:`hdf5` (the open file, closed with the peek), and :meth:`look` for a reader's own (MATLAB variables,
    Geo-FNO's sets). Use it as a context manager."""

    def __init__(self, path: Path):
        self.path = Path(path)
        folder = self.path.is_dir()
        self.suffix = "" if folder else self.path.suffix.lower()
        self.head = b"" if folder else read_head(self.path, HEAD_BYTES)
        self.container = "folder" if folder else "empty" if not self.head else self._container()
        self._looks: dict[str, Any] = {}
        self._h5 = None

    def _container(self) -> str:
        found = next((name for magic, name in _MAGIC if self.head.startswith(magic)), None)
        if found is not None:
            return found
        import h5py

        try:  # MATLAB v7.3 files put the HDF5 superblock after a 512-byte user block
            return "hdf5" if h5py.is_hdf5(self.path) else "other"
        except OSError:
            return "other"

    def look(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, made once per peek (a deeper look two claims share)."""
        if name not in self._looks:
            self._looks[name] = compute()
        return self._looks[name]

    def text(self) -> bytes:
        """The first 4 KiB (a text header longer than :attr:`head`)."""
        return self.head if len(self.head) < HEAD_BYTES else self.look("text", lambda: read_head(self.path, 4096))

    def zip_names(self) -> list[str]:
        """The names in a zip archive; a damaged archive is one DataError."""

        def names() -> list[str]:
            import zipfile

            try:
                with zipfile.ZipFile(self.path) as z:
                    return z.namelist()
            except (zipfile.BadZipFile, OSError) as exc:
                raise read_failed(self.path, exc, "zip archive (torch file)") from None

        return self.look("zip names", names)

    def hdf5(self):
        """The HDF5 file, open for reading until the peek closes."""
        if self._h5 is None:
            from .base import open_h5

            self._h5 = open_h5(self.path)
        return self._h5

    def close(self) -> None:
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None

    def __enter__(self) -> Peek:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Claim = Callable[[Peek], "bool | str"]


@dataclass(frozen=True)
class Reader:
    """One row of the table (module doc)."""

    kind: str
    format: str
    read: Callable[..., PublicDataset]
    claims: Claim | None = None
    looks_for: str = ""
    folder: bool = False

    @property
    def geo_set(self) -> str | None:
        """The Geo-FNO set this row reads (``None`` for the other formats, and for ``geo-fno``, which finds it)."""
        return self.kind if self.kind != self.format else None


def _geo(kind: str, looks_for: str) -> Reader:
    return Reader(
        kind, "geo-fno", partial(geofno.read, kind=kind), partial(geofno.claims, kind=kind), looks_for, folder=True
    )


READERS = (
    Reader("csv", "csv", long_table.read_long_csv, long_table.claims_csv, "a long-format .csv / .tsv table"),
    Reader("parquet", "parquet", long_table.read_long_parquet, long_table.claims_parquet, "a Parquet table"),
    Reader("uea-ts", "uea-ts", ts.read_uea_ts, ts.claims, "a UEA .ts file"),
    _geo("plasticity", "a Geo-FNO plasticity .mat holding input and output"),
    Reader("fno-mat", "fno-mat", fno_mat.read, fno_mat.claims, "an FNO MATLAB .mat file, v5 or v7.3"),
    _geo("airfoil", "Geo-FNO's NACA_Cylinder_*.npy or their folder"),
    _geo("pipe", "Geo-FNO's Pipe_*.npy or their folder"),
    _geo("elasticity", "Geo-FNO's Random_UnitCell_*_10.npy or their folder"),
    Reader("neuralop-pt", "neuralop-pt", neuralop_pt.read, neuralop_pt.claims, "a torch .pt file"),
    Reader("point-cloud", "point-cloud", point_cloud.read, point_cloud.claims, "a point-cloud .npz"),
    Reader("sequence-npz", "sequence-npz", sequence_npz.read_sequence_npz, sequence_npz.claims, "a sequence .npz"),
    Reader("the-well", "the-well", the_well.read, the_well.claims, "an HDF5 file of The Well"),
    Reader("pdebench", "pdebench", pdebench.read, pdebench.claims, "an HDF5 file of PDEBench"),
    Reader("geo-fno", "geo-fno", geofno.read, folder=True),
    Reader("person-activity", "person-activity", person_activity.read_person_activity_store),
    Reader("mnist", "mnist", mnist.read_mnist_events, folder=True),
    Reader("pronostia", "pronostia", partial(bearings.read_bearing_store, layout="pronostia"), folder=True),
    Reader("xjtu", "xjtu", partial(bearings.read_bearing_store, layout="xjtu"), folder=True),
)
"""The table, in the order :func:`pick` walks it."""
BY_KIND = {r.kind: r for r in READERS}


def pick(peek: Peek) -> Reader:
    """The reader of the file ``peek`` looks at: the first row of :data:`READERS` that claims it (module doc); a row's
    refusal, or one sentence when none claims it, is a DataError."""
    for reader in READERS:
        if reader.claims is None:
            continue
        claim = reader.claims(peek)
        if isinstance(claim, str):
            raise DataError(claim)
        if claim:
            return reader
    raise DataError(unclaimed(peek))


def unclaimed(peek: Peek) -> str:
    """The sentence for a file no reader claims: what the file is, and what was looked for in it."""
    path, kind_only = peek.path, [r.kind for r in READERS if r.claims is None]
    if peek.container == "folder":
        folders = "|".join(r.kind for r in READERS if r.claims is None and r.folder and r.kind != "geo-fno")
        return (
            f"folder {path} holds no known public data set; a folder is read as a Geo-FNO set "
            "(NACA_Cylinder_*.npy, Pipe_*.npy, Meshes/Random_UnitCell_*_10.npy or plas_*.mat), or as MNIST or "
            f"bearing folders with kind={folders}; give a file path for the other formats"
        )
    if peek.container == "empty":
        return f"file {path} is empty; expected a public dataset file (.mat, .h5/.hdf5, .pt, .npy)"
    if peek.container == "npy":
        return (
            f"numpy file {path} is not one of Geo-FNO's files (NACA_Cylinder_*.npy, Pipe_*.npy, "
            "Random_UnitCell_*_10.npy); pass kind=airfoil|pipe|elasticity with its folder"
        )
    if peek.container == "zip":
        return (
            f"zip archive {path} is neither a torch file nor a sequence .npz (it holds {peek.zip_names()[:5]}); "
            "expected a neuraloperator .pt file saved with torch.save, or np.savez(FILE, x=..., y=...)"
        )
    if peek.container == "hdf5":
        f = peek.hdf5()
        return (
            f"HDF5 file {path} holds {sorted(f.keys())} and root attributes {sorted(f.attrs)}, which match no "
            "known layout; expected PDEBench ('tensor', 'density', seed groups), The Well (t0_fields, dimensions) "
            "or a MATLAB v7.3 file"
        )
    looked = ", ".join(f"{r.looks_for} ({r.kind})" for r in READERS if r.claims is not None)
    return (
        f"cannot tell the format of {path} (it starts with {peek.head[:8]!r}); looked for {looked}; name the "
        f"format with kind= (one of {', '.join(r.kind for r in READERS if r.claims is not None)}, or for the "
        f"papers' raw files {', '.join(k for k in kind_only if k != 'geo-fno')})"
    )


def find_reader(path: Path) -> Reader:
    """The reader of ``path`` (a file or folder), found by one walk of the table."""
    with Peek(path) as peek:
        return pick(peek)


__all__ = [
    "BY_KIND",
    "FORMATS",
    "GEO_FNO_SETS",
    "KINDS",
    "Peek",
    "READERS",
    "RAW_SEQUENCE_FORMATS",
    "Reader",
    "SEQUENCE_FORMATS",
    "find_reader",
    "pick",
    "read_head",
    "unclaimed",
]
