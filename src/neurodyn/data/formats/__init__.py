"""Readers of files into the project's store: public PDE datasets, a user's own time series and point clouds, and
the raw files of the sequence papers. One module reads each format; nothing else parses these files.

``read_public(path, kind=None, **options)`` finds the format of ``path`` from its content (magic bytes,
then the arrays inside) and returns a :class:`PublicDataset` in the project's layout (fields
channels-last, time first). ``neurodyn convert FILE`` (:mod:`~neurodyn.data.formats.convert`) writes it as a store
file; it is the one way a real file enters (the ``activity``, ``bearing`` and ``event_digits`` generators read
their real files through it too). Formats (one module each):

================== ========================================================================= ================
format             files                                                                      module
================== ========================================================================= ================
``fno-mat``        FNO's MATLAB v5 / v7.3 files: Darcy (coeff, sol), Burgers and              fno_mat
                   Navier-Stokes (a, u)
``pdebench``       PDEBench HDF5: 'tensor' files, CFD files, per-seed group files             pdebench
``neuralop-pt``    neuraloperator's ``torch.save(dict(x=..., y=...))`` files                  neuralop_pt
``geo-fno``        Geo-FNO folders: airfoil, pipe, elasticity (.npy), plasticity (.mat)       geofno
``the-well``       The Well HDF5 files                                                        the_well
``uea-ts``         UEA/UCR archive ``.ts`` time series (into a sequence store)                ts
``csv``            long-format CSV time series: one row per observation (``.csv``, ``.tsv``)  long_table
``parquet``        the same table as Parquet (needs pyarrow)                                  long_table
``sequence-npz``   ``.npz`` with ``x (N, T, C)``, ``y`` [, ``t``, ``mask``, ``classes``]      sequence_npz
``point-cloud``    point clouds of any sizes: a torch list of per-sample dicts (neuraloperator's  point_cloud
                   car files: ``vertices``, ``press``), or ``.npz`` with ``x (N, P, d)``,
                   ``y (N, P, c)`` [, ``mask``]
``person-activity`` UCI's ``ConfLongDemo_JSI.txt`` (only with ``kind=``): per-step activities   person_activity
``mnist``          MNIST IDX folder or ``mnist.npz`` (only with ``kind=``): event sequences    mnist
``pronostia``      PRONOSTIA folder of bearing folders (only with ``kind=``): CWT features     bearings
``xjtu``           XJTU-SY folder of condition / bearing folders (only with ``kind=``)         bearings
================== ========================================================================= ================

The sequence formats (``uea-ts`` to ``sequence-npz`` and the last four) only parse; the store they make (padding,
mask, missing values, classes) is built in one place, :func:`neurodyn.data.sequences.build_sequences`.
``kind`` forces a format (one of the names above) or, for Geo-FNO folders, names the set
(``airfoil``, ``pipe``, ``elasticity``, ``plasticity``). ``options`` go to the reader
(``max_samples`` for all; see each module for the others).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ConfigError, DataError, unknown_name
from ...files import check_not_special
from .base import PublicDataset

RAW_SEQUENCE_FORMATS = ("person-activity", "mnist", "pronostia", "xjtu")
"""Raw files of the sequence papers, read only when named with ``kind=`` (their generators name them)."""
FORMATS = ("fno-mat", "pdebench", "neuralop-pt", "geo-fno", "the-well", "uea-ts", "csv", "parquet", "sequence-npz",
           "point-cloud") + RAW_SEQUENCE_FORMATS
SEQUENCE_FORMATS = ("uea-ts", "csv", "parquet", "sequence-npz") + RAW_SEQUENCE_FORMATS
FOLDER_FORMATS = ("geo-fno", "mnist", "pronostia", "xjtu")
GEO_FNO_SETS = ("airfoil", "pipe", "elasticity", "plasticity")
KINDS = FORMATS + GEO_FNO_SETS

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"

__all__ = ["read_public", "sniff", "PublicDataset", "FORMATS", "KINDS"]


def _head(path: Path, n: int = 128) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None


def _is_hdf5(path: Path, head: bytes) -> bool:
    if head.startswith(_HDF5_MAGIC):
        return True
    import h5py

    try:  # MATLAB v7.3 files put the HDF5 superblock after a 512-byte user block
        return bool(h5py.is_hdf5(path))
    except OSError:
        return False


def sniff(path: str | Path) -> tuple[str, str | None]:
    """``(format, geo_fno_set or None)`` of the file or folder at ``path``, from its content."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist; give the path of a public dataset file (or Geo-FNO folder)")
    if path.is_dir():
        return _sniff_folder(path)
    head = _head(path)
    sequence_format = _sequence_format(path, head)
    if sequence_format is not None:
        return sequence_format, None
    if not head:
        raise DataError(f"file {path} is empty; expected a public dataset file (.mat, .h5/.hdf5, .pt, .npy)")
    if head.startswith(b"MATLAB"):
        return _mat_kind(path)
    if head.startswith(_NPY_MAGIC):
        from .geofno import detect

        found = detect(path)
        if found:
            return "geo-fno", found[0]
        raise DataError(f"numpy file {path} is not one of Geo-FNO's files (NACA_Cylinder_*.npy, Pipe_*.npy, "
                        "Random_UnitCell_*_10.npy); pass kind=airfoil|pipe|elasticity with its folder")
    if head.startswith(_ZIP_MAGIC):  # torch's archives hold <name>/data.pkl; .npz and others do not
        return _sniff_zip(path)
    if head[:1] == b"\x80":  # a pickle: torch's legacy (non-zip) format
        return "neuralop-pt", None
    if _is_hdf5(path, head):
        return _sniff_hdf5(path)
    if path.suffix.lower() == ".mat":
        return _mat_kind(path)
    raise DataError(f"cannot tell the format of {path} (it starts with {head[:8]!r}); expected a MATLAB .mat, an "
                    "HDF5 (PDEBench, The Well), a torch .pt or a Geo-FNO .npy file, or time series: a UEA .ts, a "
                    "long-format .csv / .parquet or a .npz (or name the format with kind=csv|uea-ts|parquet|"
                    "sequence-npz)")


def _sniff_folder(path: Path) -> tuple[str, str | None]:
    """A folder is a Geo-FNO set (the papers' raw folders, MNIST and bearings, are read only with ``kind=``)."""
    from .geofno import detect

    found = detect(path)
    if len(found) == 1:
        return "geo-fno", found[0]
    if found:
        raise DataError(f"folder {path} holds several Geo-FNO sets ({', '.join(found)}); choose one with "
                        "kind=<name>")
    raise DataError(f"folder {path} holds no known public data set; a folder is read as a Geo-FNO set "
                    "(NACA_Cylinder_*.npy, Pipe_*.npy, Meshes/Random_UnitCell_*_10.npy or plas_*.mat), or as MNIST or "
                    "bearing folders with kind=mnist|pronostia|xjtu; give a file path for the other formats")


def _sniff_zip(path: Path) -> tuple[str, str | None]:
    """A zip archive: a torch file (``<name>/data.pkl``), a point-cloud or a sequence ``.npz``."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        from .base import read_failed

        raise read_failed(path, exc, "zip archive (torch file)") from None
    if any(n.endswith("data.pkl") for n in names):
        return "neuralop-pt", None
    if "x.npy" in names or path.suffix.lower() == ".npz":
        from .point_cloud import looks_like_npz

        return ("point-cloud" if looks_like_npz(path) else "sequence-npz"), None
    raise DataError(f"zip archive {path} is neither a torch file nor a sequence .npz (it holds {names[:5]}); "
                    "expected a neuraloperator .pt file saved with torch.save, or np.savez(FILE, x=..., y=...)")


def _sniff_hdf5(path: Path) -> tuple[str, str | None]:
    """An HDF5 file: The Well, PDEBench, or a MATLAB v7.3 file (FNO's, or Geo-FNO's plasticity)."""
    from .base import open_h5

    with open_h5(path) as f:
        from . import pdebench, the_well

        if path.suffix.lower() == ".mat" or any("MATLAB_class" in ds.attrs for ds in f.values()):
            keys = set(f.keys())
        elif the_well.looks_like(f):
            return "the-well", None
        elif pdebench.looks_like(f):
            return "pdebench", None
        else:
            raise DataError(f"HDF5 file {path} holds {sorted(f.keys())} and root attributes {sorted(f.attrs)}, "
                            "which match no known layout; expected PDEBench ('tensor', 'density', seed groups), "
                            "The Well (t0_fields, dimensions) or a MATLAB v7.3 file")
    return ("geo-fno", "plasticity") if {"input", "output"} <= keys else ("fno-mat", None)


def _sequence_format(path: Path, head: bytes) -> str | None:
    """The time-series format of ``path`` from its suffix or first bytes (``None``: not a time-series file)."""
    suffix = path.suffix.lower()
    if suffix == ".ts":
        return "uea-ts"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".parquet", ".pq") or head.startswith(b"PAR1"):
        return "parquet"
    if suffix == ".npz" and not head:
        return "sequence-npz"  # the reader says the file is empty
    if head[:1] in (b"@", b"#", b"%"):
        from .ts import looks_like_ts

        if looks_like_ts(head if len(head) >= 128 else _head(path, 4096)):
            return "uea-ts"
    return None


def _mat_kind(path: Path) -> tuple[str, str | None]:
    from .fno_mat import MatFile

    names = set(MatFile(path).names())
    return ("geo-fno", "plasticity") if {"input", "output"} <= names else ("fno-mat", None)


def read_public(path: str | Path, kind: str | None = None, **options: Any) -> PublicDataset:
    """Read a public dataset file (or Geo-FNO folder) into the project's layout; see the module doc."""
    path = Path(path)
    if kind is not None and kind not in KINDS:
        raise unknown_name("public data kind", kind, KINDS)
    if not path.exists():
        raise DataError(f"{path} does not exist; give the path of a public dataset file (or Geo-FNO folder)")
    check_not_special(path, "input")
    if kind in GEO_FNO_SETS:
        fmt, geo = "geo-fno", kind
    elif kind is not None:
        fmt, geo = kind, None
    else:
        fmt, geo = sniff(path)
    if fmt not in FOLDER_FORMATS and path.is_dir():
        raise DataError(f"{path} is a folder; the {fmt} reader reads one file")
    if fmt in SEQUENCE_FORMATS:
        return read_sequence_file(path, fmt, **options)
    if fmt == "point-cloud":
        return _read_point_cloud(path, options)
    if fmt == "fno-mat":
        from .fno_mat import read
    elif fmt == "pdebench":
        from .pdebench import read
    elif fmt == "neuralop-pt":
        from .neuralop_pt import read
    elif fmt == "the-well":
        from .the_well import read
    else:
        from .geofno import read as read_geo

        return read_geo(path, kind=geo, **options)
    return read(path, **options)


def read_sequence_file(path: Path, fmt: str, **options: Any) -> PublicDataset:
    """``path`` read by the one reader of ``fmt`` (one of :data:`SEQUENCE_FORMATS`) into a sequence store."""
    if fmt == "uea-ts":
        from .ts import read_uea_ts as read
    elif fmt == "csv":
        from .long_table import read_long_csv as read
    elif fmt == "parquet":
        from .long_table import read_long_parquet as read
    elif fmt == "sequence-npz":
        from .sequence_npz import read_sequence_npz as read
    elif fmt == "person-activity":
        from .person_activity import read_person_activity_store as read
    elif fmt == "mnist":
        from .mnist import read_mnist_events as read
    elif fmt in ("pronostia", "xjtu"):
        from functools import partial

        from .bearings import read_bearing_store

        read = partial(read_bearing_store, layout=fmt)
    else:
        raise unknown_name("sequence format", fmt, SEQUENCE_FORMATS)
    if fmt in RAW_SEQUENCE_FORMATS:
        _check_keywords(fmt, read, options)
    return read(path, **options)


def _check_keywords(fmt: str, read, options: dict[str, Any]) -> None:
    """One ConfigError for an option the reader ``read`` of ``fmt`` does not take (its keyword arguments)."""
    import inspect

    known = [n for n, p in inspect.signature(read).parameters.items() if p.default is not inspect.Parameter.empty
             and n != "layout"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"reader {fmt!r} has no option(s) {', '.join(unknown)}; its options are: "
                          f"{', '.join(sorted(known))}")


def _read_point_cloud(path: Path, options: dict[str, Any]) -> PublicDataset:
    """A point-cloud ``.npz``, or a torch file holding a list of per-sample dicts."""
    from . import point_cloud

    if _head(path, 4) == _ZIP_MAGIC and not point_cloud.torch_archive(path):
        return point_cloud.read_npz(path, **options)
    from .neuralop_pt import load_torch_file

    obj = load_torch_file(path)
    if not isinstance(obj, list):
        raise DataError(f"file {path} holds a {type(obj).__name__}; a point-cloud torch file holds a list of "
                        "per-sample dicts (points and target)")
    return point_cloud.from_samples(path, obj, **options)
