"""The reader table (:mod:`neurodyn.data.formats.table`): every ``kind=`` is one row, one conversion walks the table
once (one peek at the file, each claim asked at most once, a container opened at most once), ``kind=`` forces a row
without a walk, a new reader is one row, and a file no reader claims is refused in one sentence naming what was
looked for."""

import dataclasses
from collections import Counter

import numpy as np
import pytest

from neurodyn.data.formats import KINDS, RAW_SEQUENCE_FORMATS, read_public, sniff, table
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.public_dataset import ArraySource, PublicDataset
from neurodyn.data.store import StoredDataset
from neurodyn.errors import DataError


def test_every_kind_is_one_row():
    kinds = [r.kind for r in table.READERS]
    assert sorted(kinds) == sorted(KINDS) and len(set(kinds)) == len(kinds)
    assert {r.kind for r in table.READERS if r.claims is None} == set(RAW_SEQUENCE_FORMATS) | {"geo-fno"}
    assert all(r.looks_for for r in table.READERS if r.claims is not None)


class _Counting:
    """The table's walk with each peek and each claim counted (``monkeypatch``ed into the table module)."""

    def __init__(self, monkeypatch):
        self.peeks, self.asked, self.opened = [], Counter(), 0
        outer = self

        class Peek(table.Peek):
            def __init__(self, path):
                super().__init__(path)
                outer.peeks.append(self)

            def hdf5(self):
                outer.opened += self._h5 is None
                return super().hdf5()

        def counted(reader):
            def claims(peek):
                self.asked[reader.kind] += 1
                return reader.claims(peek)

            return dataclasses.replace(reader, claims=claims if reader.claims else None)

        monkeypatch.setattr(table, "Peek", Peek)
        monkeypatch.setattr(table, "READERS", tuple(counted(r) for r in table.READERS))


def test_one_conversion_walks_the_table_once(make, tmp_path, monkeypatch, data_dir):
    walk = _Counting(monkeypatch)
    src, *_ = make.pdebench_1d()  # PDEBench's is the last row walked: every claim before it is asked
    out = convert_to_store(src, tmp_path / "p.h5")
    assert StoredDataset(out).config["format"] == "pdebench"
    assert len(walk.peeks) == 1 and walk.opened == 1 and walk.peeks[0]._h5 is None  # closed after the walk
    assert set(walk.asked) == {r.kind for r in table.READERS if r.claims} and max(walk.asked.values()) == 1

    csv = tmp_path / "log.csv"  # a claim by the file's name: no deeper look at it
    csv.write_text("id,time,v,label\n1,0,1.5,a\n1,1,2.5,a\n2,0,0.5,b\n")
    assert read_public(csv).format == "csv"
    assert len(walk.peeks) == 2 and walk.peeks[1]._looks == {} and walk.opened == 1


def test_kind_forces_a_row_without_a_walk(make, monkeypatch):
    src, *_ = make.pdebench_1d()
    folder, *_ = make.geofno_mesh("pipe", H=5, W=5, C=1)

    def no_peek(path):
        raise AssertionError("kind= walks no table")

    monkeypatch.setattr(table, "Peek", no_peek)
    assert read_public(src, kind="pdebench").format == "pdebench"
    assert read_public(folder, kind="pipe").kind == "pipe"


def test_a_new_reader_is_one_row(tmp_path, monkeypatch):
    def read(path, **options):
        return PublicDataset(
            format="probe",
            kind="probe",
            path=path,
            files=[path],
            fields={"u": ArraySource((2, 3), "probe", lambda lo, hi: np.ones((hi - lo, 3)))},
            inputs=("u",),
            targets=("u",),
        )

    row = table.Reader("probe", "probe", read, lambda peek: peek.head.startswith(b"PROBE"), "a probe file")
    monkeypatch.setattr(table, "READERS", (row, *table.READERS))
    path = tmp_path / "data.bin"
    path.write_bytes(b"PROBE 1")
    assert sniff(path) == ("probe", None)
    assert read_public(path).read("u").shape == (2, 3)


def test_a_file_no_reader_claims_is_refused_with_what_was_looked_for(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello, not a dataset")
    with pytest.raises(DataError) as err:
        read_public(text)
    message = str(err.value)
    assert message.startswith(f"cannot tell the format of {text} (it starts with b'hello, n'); looked for ")
    for row in table.READERS:
        assert (f"({row.kind})" in message) == (row.claims is not None), row.kind
    assert "kind=" in message and message.count(". ") == 0  # one sentence
