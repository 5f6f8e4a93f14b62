"""One reader per format: every sequence format is parsed by its own module under ``data/formats`` and nowhere
else (the generators read their real files through the converter), each reader's store holds the values the test
wrote (an independent oracle: the arrays the test drew, not the reader's code), and a generator's real-file source
gives the rows of the converted store."""

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

import neurodyn.data.formats as formats
from neurodyn.data.formats import read_public
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.formats.ts import read_ts_cases
from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError

SRC = Path(formats.__file__).resolve().parents[1]

# format -> the one module that parses it (read_public dispatches there)
READERS = {
    "uea-ts": "ts",
    "csv": "long_table",
    "parquet": "long_table",
    "sequence-npz": "sequence_npz",
    "person-activity": "person_activity",
    "mnist": "mnist",
    "pronostia": "bearings",
    "xjtu": "bearings",
}


def test_every_sequence_format_has_one_reader_module():
    assert set(READERS) == set(formats.SEQUENCE_FORMATS)
    for fmt, module in READERS.items():  # the reader table's row of the format reads with that module's function
        read = formats.table.BY_KIND[fmt].read
        assert getattr(read, "func", read).__module__ == f"neurodyn.data.formats.{module}", fmt
    gone = [m for m in ("sequences.py", "timeseries.py") if (SRC / "formats" / m).exists()]
    assert not gone, f"the old overlapping reader modules are back: {gone}"


def _file_reads(path: Path) -> list[str]:
    """Functions of ``path`` that open or load a file themselves (``open``, ``read_text``, ``read_bytes``,
    ``np.load``, ``np.loadtxt``)."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in ("open", "read_text", "read_bytes", "load", "loadtxt", "genfromtxt", "read_table"):
                    found.append(f"{path.name}:{fn.name}")
    return sorted(set(found))


def test_generators_parse_no_file_themselves():
    """A real file reaches a generator through ``real_file`` (the converter's reader); the one file a generator
    opens is scikit-learn's bundled digits table, the offline default of event_digits (not a user's file)."""
    reads = [r for p in sorted((SRC / "generators").glob("*.py")) for r in _file_reads(p)]
    assert reads == ["event_digits.py:_sklearn_digits"]
    # what generators take from formats/: the converter's entry and shared transforms, never a reader
    allowed = {"read_public", "event_encode", "morlet_cwt", "snapshot_features", "run_features", "sktime_dataset_path"}
    taken = {
        (p.name, a.name)
        for p in sorted((SRC / "generators").glob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("formats")
        for a in node.names
    }
    assert taken and {name for _, name in taken} <= allowed, taken


def test_the_ts_reader_holds_the_values_written(tmp_path):
    rng = np.random.default_rng(7)
    lengths, dims = [5, 3, 7], 2
    values = [np.round(rng.normal(size=(n, dims)), 3) for n in lengths]
    values[1][1, 0] = np.nan  # one missing value, written as ?
    labels = ["up", "down", "up"]
    lines = [
        "@problemName Oracle",
        "@univariate false",
        f"@dimensions {dims}",
        "@equalLength false",
        "@classLabel true up down",
        "@data",
    ]
    for v, lab in zip(values, labels):
        dims_text = [",".join("?" if np.isnan(a) else repr(float(a)) for a in v[:, j]) for j in range(dims)]
        lines.append(":".join(dims_text) + f":{lab}")
    src = tmp_path / "oracle.ts"
    src.write_text("\n".join(lines) + "\n")

    cases = read_ts_cases(src)
    for got, want in zip(cases.xs, values):
        np.testing.assert_array_equal(got, want)
    assert cases.labels == labels and cases.classes == ("up", "down") and cases.lines == [7, 8, 9]

    data = read_public(src, dt=0.5)
    x, t, m, y = (data.read(k) for k in ("x", "t", "mask", "y"))
    obs = data.read("observed")
    assert x.shape == (3, 7, 2) and m.sum(1).tolist() == lengths and y.tolist() == [0, 1, 0]
    for i, v in enumerate(values):
        n = lengths[i]
        np.testing.assert_array_equal(obs[i, :n], np.isfinite(v))
        np.testing.assert_allclose(x[i, :n], np.nan_to_num(v).astype(np.float32))
        np.testing.assert_allclose(t[i, :n], 0.5 * np.arange(n))
        assert not x[i, n:].any() and (t[i, n:] == t[i, n - 1]).all()
    assert data.info["classes"] == ["up", "down"]


def test_the_long_table_reader_sorts_rows_by_time_and_groups_by_id(tmp_path):
    rng = np.random.default_rng(3)
    rows, truth = ["id,time,a,b,label"], {}
    for key, lab in (("s1", "x"), ("s2", "y")):
        times = np.sort(rng.choice(50, size=4, replace=False)).astype(float)
        vals = np.round(rng.normal(size=(4, 2)), 3)
        truth[key] = (times, vals, lab)
        order = rng.permutation(4)  # rows out of time order in the file
        rows += [f"{key},{times[r]},{vals[r, 0]},{vals[r, 1]},{lab}" for r in order]
    src = tmp_path / "long.csv"
    src.write_text("\n".join(rows) + "\n")
    data = read_public(src)
    assert data.format == "csv" and data.info["classes"] == ["x", "y"]
    for i, key in enumerate(("s1", "s2")):
        times, vals, lab = truth[key]
        np.testing.assert_allclose(data.read("t")[i], times)
        np.testing.assert_allclose(data.read("x")[i], vals.astype(np.float32))
        assert data.read("y")[i] == data.info["classes"].index(lab)


PAR = (
    "\n".join(
        f"A0{rec},{['010-000-024-033', '020-000-033-111'][i % 2]},{633790226051280329 + 1_000_000 * i},d,"
        f"{i}.5,{rec}.25,{i % 3}.0,{['walking', 'lying', 'sitting'][(i // 3) % 3]}"
        for rec in range(2)
        for i in range(7)
    )
    + "\n"
)


def test_person_activity_store_holds_the_readings(tmp_path):
    src = tmp_path / "ConfLongDemo_JSI.txt"
    src.write_text(PAR)
    data = read_public(src, kind="person-activity", chunk=3)
    # 7 readings per recording in chunks of 3: 3 + 3 + 1, twice
    assert data.n_samples == 6 and data.read("mask").sum(1).tolist() == [3, 3, 1, 3, 3, 1]
    x, t, y = data.read("x"), data.read("t"), data.read("y")
    np.testing.assert_array_equal(x[1, :3, 4], [3.5, 4.5, 5.5])  # x of readings 3..5 of A00
    np.testing.assert_array_equal(x[1, :3, :4], [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]])  # one-hot tags
    np.testing.assert_allclose(t[1, :3], [0.0, 0.1, 0.2], atol=1e-6)  # 1e6 ticks of 100 ns = 0.1 s
    classes = data.info["classes"]
    assert [classes[k] for k in y[1, :3]] == ["lying", "lying", "lying"] and classes[y[2, 0]] == "sitting"
    with pytest.raises(ConfigError, match="has no option"):
        read_public(src, kind="person-activity", chunks=3)


def test_a_generator_real_file_source_is_the_converted_store_with_a_note(tmp_path, data_dir):
    src = tmp_path / "ConfLongDemo_JSI.txt"
    src.write_text(PAR)
    store = StoredDataset(convert_to_store(src, tmp_path / "par.h5", kind="person-activity", chunk=4))
    gen = get_generator("activity")
    with pytest.warns(UserWarning, match=r"neurodyn convert .*kind=person-activity chunk=4"):
        out = gen.generate(
            gen.make_config(source="par", source_path=str(src), max_len=4, min_len=1),
            np.arange(4),
            0,
            torch.device("cpu"),
        )
    for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
        np.testing.assert_array_equal(out[key], store.read(key)[:4], err_msg=key)
    assert out["params/length"].tolist() == [4, 3, 4, 3]
