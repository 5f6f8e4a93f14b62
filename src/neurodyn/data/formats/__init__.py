"""Readers of files into the project's store: public PDE datasets, a user's own time series and point clouds, and
the raw files of the sequence papers. One module reads each format; nothing else parses these files.

``read_public(path, kind=None, **options)`` finds the reader of ``path`` in the reader table
(:mod:`~neurodyn.data.formats.table`: each reader claims its own files from their suffix and first bytes, looking
inside a container only where it must; one walk per conversion) and returns a :class:`PublicDataset` in the project's
layout (fields channels-last, time first). ``neurodyn convert FILE`` (:mod:`~neurodyn.data.formats.convert`)
writes it as a store file; it is the one way a real file enters (the ``activity``, ``bearing`` and ``event_digits``
generators read their real files through it too, by ``generators.base.real_file``). Formats (one module each):

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
mask, missing values, classes) is built in one place, :func:`neurodyn.data.sequence_store.build_sequences`.
``kind`` forces a reader (a row of the table: one of the names above or, for Geo-FNO folders, the set:
``airfoil``, ``pipe``, ``elasticity``, ``plasticity``); without it :func:`sniff` walks the table. ``options`` go to
the reader (``max_samples`` for all; see each module for the others). A new reader is one module and one row.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ...errors import ConfigError, DataError, unknown_name
from ...files import check_not_special
from .base import PublicDataset
from .table import (
    BY_KIND,
    FORMATS,
    GEO_FNO_SETS,
    KINDS,
    RAW_SEQUENCE_FORMATS,
    READERS,
    SEQUENCE_FORMATS,
    Reader,
    find_reader,
)

__all__ = [
    "read_public",
    "sniff",
    "PublicDataset",
    "FORMATS",
    "KINDS",
    "GEO_FNO_SETS",
    "RAW_SEQUENCE_FORMATS",
    "READERS",
    "SEQUENCE_FORMATS",
]


def _missing(path: Path) -> DataError:
    return DataError(f"{path} does not exist; give the path of a public dataset file (or Geo-FNO folder)")


def sniff(path: str | Path) -> tuple[str, str | None]:
    """``(format, geo_fno_set or None)`` of the file or folder at ``path``, from its content (one walk of the reader
    table)."""
    path = Path(path)
    if not path.exists():
        raise _missing(path)
    reader = find_reader(path)
    return reader.format, reader.geo_set


def read_public(path: str | Path, kind: str | None = None, **options: Any) -> PublicDataset:
    """Read a public dataset file (or Geo-FNO folder) into the project's layout; see the module doc."""
    path = Path(path)
    if kind is not None and kind not in KINDS:
        raise unknown_name("public data kind", kind, KINDS)
    if not path.exists():
        raise _missing(path)
    check_not_special(path, "input")
    reader = BY_KIND[kind] if kind is not None else find_reader(path)
    if path.is_dir() and not reader.folder:
        raise DataError(f"{path} is a folder; the {reader.format} reader reads one file")
    _check_keywords(reader, options)
    return reader.read(path, **options)


def _check_keywords(reader: Reader, options: dict[str, Any]) -> None:
    """One ConfigError for an option that a reader taking keyword arguments (not ``**options``, which it checks
    itself) does not take."""
    params = inspect.signature(reader.read).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    bound = getattr(reader.read, "keywords", {})  # a row's fixed arguments (the bearings' layout)
    known = [n for n, p in params.items() if p.default is not inspect.Parameter.empty and n not in bound]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(
            f"reader {reader.kind!r} has no option(s) {', '.join(unknown)}; its options are: {', '.join(sorted(known))}"
        )
