"""A user's time series (UEA .ts, long-format CSV / Parquet, .npz) converted into sequence stores: the arrays the
store holds (values, timestamps, masks, labels) against the file the test writes, the dataset's handling of
missing values and irregular sampling, and one-sentence errors naming the file and the line for bad files."""

import numpy as np
import pytest
import torch

from neurodyn.cli import main
from neurodyn.data.formats import read_public, sniff
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.sequences import SequenceDataset
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError, DataError

UNEQUAL_TS = """# unequal-length, multivariate, with missing values
@problemName Tiny
@timeStamps false
@missing true
@univariate false
@dimensions 2
@equalLength false
@classLabel true a b
@data
1,2,3:4,?,6:a
?,5:7,8:b
1,?,3:2,?,4:a
9:1,2:b
"""


def _write(path, text):
    path.write_text(text)
    return path


def _convert(src, out, *options):
    assert main(["convert", str(src), "--out", str(out), "--no-progress", *options]) == 0
    return StoredDataset(out)


def test_unequal_multivariate_ts_with_missing_values_keeps_its_masks(tmp_path, capsys):
    store = _convert(_write(tmp_path / "Tiny_TRAIN.ts", UNEQUAL_TS), tmp_path / "tiny.h5")
    # case 2 (line 11) has '?' first in dimension 1; case 3's second step has no observed value, so it is not a
    # step: the kept steps keep their timestamps 0 and 2; case 4's dimensions have different lengths
    np.testing.assert_array_equal(
        store.read("fields/x"),
        np.array(
            [[[1, 4], [2, 0], [3, 6]], [[0, 7], [5, 8], [0, 0]], [[1, 2], [3, 4], [0, 0]], [[9, 1], [0, 2], [0, 0]]],
            dtype=np.float32,
        ),
    )
    np.testing.assert_array_equal(
        store.read("fields/observed"),
        np.array(
            [[[1, 1], [1, 0], [1, 1]], [[0, 1], [1, 1], [0, 0]], [[1, 1], [1, 1], [0, 0]], [[1, 1], [0, 1], [0, 0]]],
            dtype=np.uint8,
        ),
    )
    np.testing.assert_array_equal(store.read("fields/mask"), [[1, 1, 1], [1, 1, 0], [1, 1, 0], [1, 1, 0]])
    np.testing.assert_array_equal(store.read("fields/t"), [[0, 1, 2], [0, 1, 1], [0, 2, 2], [0, 1, 1]])
    assert store.read("fields/y").tolist() == [0, 1, 0, 1] and store.dtypes["fields/y"] == np.int64
    assert int(store.read("coords/n_classes", ())) == 2
    info = store.config["info"]
    assert info["classes"] == ["a", "b"] and info["missing_values"] == 3 and info["irregular"]
    assert store.config["format"] == "uea-ts" and store.inputs == ("x", "t", "mask", "observed")

    # what the models get: missing values filled (never left at zero), or the steps dropped
    ffill = SequenceDataset(store, np.arange(4))
    np.testing.assert_array_equal(ffill.x[0].numpy(), [[1, 4], [2, 4], [3, 6]])  # last observed value
    np.testing.assert_array_equal(ffill.x[1, :2].numpy(), [[5, 7], [5, 8]])  # first observed before it
    mean = SequenceDataset(store, np.arange(4), missing="mean")
    assert torch.isnan(mean.x[0, 1, 1]) and mean.x[0, 1, 0] == 2  # the task puts the mean there
    drop = SequenceDataset(store, np.arange(4), missing="drop")
    np.testing.assert_array_equal(drop.x[0, :2].numpy(), [[1, 4], [3, 6]])
    np.testing.assert_array_equal(drop.t[0].numpy(), [0, 2, 2])
    assert drop.m.int().tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]]
    ind = SequenceDataset(store, np.arange(4), observed_channels=True)
    assert ind.in_channels == 4
    np.testing.assert_array_equal(ind.x[1, :2].numpy(), [[5, 7, 0, 1], [5, 8, 1, 1]])
    steps = ind.valid_steps()
    assert steps.shape == (9, 4) and torch.isfinite(steps).all()


def test_ts_timestamps_targets_and_reader_options(tmp_path):
    stamped = _write(
        tmp_path / "stamped.ts",
        "@problemName S\n@timeStamps true\n@univariate false\n@dimensions 2\n"
        "@classLabel true x y\n@data\n"
        "(0.5,1),(1.5,2),(4,3):(0.5,10),(4,30):y\n"
        "(2007-01-01 00:00:00,1),(2007-01-01 00:01:00,?):(2007-01-01 00:00:30,5):x\n",
    )
    # dates in one file and numbers in another are both fine; here the second case has dates: one kind per file
    with pytest.raises(DataError, match=r"stamped\.ts:8: .*mix numbers and dates"):
        read_public(stamped)
    stamped.write_text(
        stamped.read_text().replace(
            "(0.5,1),(1.5,2),(4,3):(0.5,10),(4,30)", "(2007-01-01 00:00:00,1):(2007-01-01 00:02:00,4)"
        )
    )
    data = read_public(stamped)
    # dimension timestamps are merged; the second case's 00:01:00 held only '?', so it is no step
    np.testing.assert_array_equal(data["t"], [[0, 120], [0, 30]])
    np.testing.assert_array_equal(data["x"], [[[1, 0], [0, 4]], [[1, 0], [0, 5]]])
    np.testing.assert_array_equal(data["observed"], [[[1, 0], [0, 1]], [[1, 0], [0, 1]]])
    assert data.read("y").tolist() == [1, 0] and data.info["classes"] == ["x", "y"]

    numeric = _write(
        tmp_path / "num.ts",
        "@timeStamps true\n@univariate true\n@classLabel true x y\n@data\n(0.5,1),(1.5,2),(4,3):y\n(1,1):x\n",
    )
    np.testing.assert_array_equal(read_public(numeric)["t"], [[0.5, 1.5, 4], [1, 1, 1]])

    reg = _write(tmp_path / "reg.ts", "@problemname R\n@univariate true\n@targetlabel true\n@data\n1,2,3:0.5\n4,5:2\n")
    data = read_public(reg, dt=0.25)
    assert data.kind == "regression" and data.read("y").dtype == np.float32 and data.read("y").tolist() == [0.5, 2]
    np.testing.assert_array_equal(data["t"], [[0, 0.25, 0.5], [0, 0.25, 0.25]])
    assert "n_classes" not in data.coords and data.options["dt"] == 0.25

    ordered = read_public(_write(tmp_path / "Tiny.ts", UNEQUAL_TS), classes=["b", "a"], max_samples=2)
    assert ordered.read("y").tolist() == [1, 0] and ordered.n_samples == 2
    with pytest.raises(ConfigError, match="has no option"):
        read_public(reg, stride=2)
    assert sniff(reg) == ("uea-ts", None)
    assert sniff(_write(tmp_path / "noext", "# c\n@problemName A\n@data\n1,2:a\n")) == ("uea-ts", None)


def test_long_csv_columns_times_and_labels(tmp_path):
    src = _write(
        tmp_path / "log.csv",
        "sensor,when,a,b,activity,note\n"
        "u2,2024-01-01T10:00:05,5,6,run,x\n"
        "u1,2024-01-01T10:00:10,3,,walk,x\n"  # rows out of time order: sorted per sequence
        "u1,2024-01-01T10:00:00,1,2,walk,y\n"
        "u2,2024-01-01T10:00:00,7,?,run,z\n",
    )
    with pytest.raises(
        DataError,
        match=r"log\.csv:1: the table has no column 'id' \(the sequence id\); its columns "
        r"are: sensor, when, a, b, activity, note; name yours with id=COLUMN",
    ):
        read_public(src)
    data = read_public(src, id="sensor", time="when", label="activity", features=["a", "b"])
    np.testing.assert_array_equal(data["x"], [[[7, 0], [5, 6]], [[1, 2], [3, 0]]])
    np.testing.assert_array_equal(data["observed"], [[[1, 0], [1, 1]], [[1, 1], [1, 0]]])
    np.testing.assert_array_equal(data["t"], [[0, 5], [0, 10]])  # seconds from the first
    assert data.read("y").tolist() == [0, 1] and data.info["classes"] == ["run", "walk"]
    assert data.info["channels"] == ["a", "b"]
    with pytest.raises(
        DataError,
        match=r"log\.csv:1: the table has no label column 'label' and no target column "
        "'target'",
    ):
        read_public(src, id="sensor", time="when", features=["a", "b"])
    with pytest.raises(DataError, match=r"log\.csv:2: column 'note' holds the non-numeric value 'x'"):
        read_public(src, id="sensor", time="when", label="activity")

    varying = _write(tmp_path / "steps.csv", "id,time,v,label\n1,0,1,a\n1,1,2,b\n2,0,3,a\n")
    with pytest.raises(DataError, match=r"steps\.csv:3: sequence '1' has label 'b' here but 'a' at .*steps\.csv:2"):
        read_public(varying)
    per_step = read_public(varying, per_step=True)
    assert per_step.read("y").tolist() == [[0, 1], [0, 0]] and per_step.info["per_step"]

    target = read_public(_write(tmp_path / "reg.tsv", "id\ttime\tv\ttarget\nq\t0\t1\t2.5\nq\t1\t2\t2.5\n"))
    assert target.kind == "regression" and target.read("y").tolist() == [2.5]
    rows = read_public(_write(tmp_path / "semi.csv", "id;v;label\n1;1;a\n1;2;a\n"), time=None, dt=2)
    np.testing.assert_array_equal(rows["t"], [[0, 2]])


def test_npz_arrays(tmp_path):
    x = np.arange(24, dtype=np.float64).reshape(3, 4, 2)
    x[0, 1, 1] = np.nan
    mask = np.array([[1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0]])  # not a prefix: gaps dropped
    t = np.array([[0, 1, 2, 3], [0, 1, 5, 6], [0, 2, 9, 9]], dtype=np.float64)
    np.savez(tmp_path / "arr.npz", x=x, t=t, mask=mask, y=np.array(["cat", "dog", "cat"]))
    data = read_public(tmp_path / "arr.npz")
    assert data.format == "sequence-npz" and data.info["classes"] == ["cat", "dog"]
    np.testing.assert_array_equal(data["mask"], [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]])
    np.testing.assert_array_equal(data["t"][1], [0, 5, 5, 5])
    np.testing.assert_array_equal(data["x"][1, :2], x[1, [0, 2]])
    assert data["observed"][0, 1].tolist() == [1, 0] and data.read("y").tolist() == [0, 1, 0]
    np.savez(tmp_path / "idx.npz", x=x[..., 0], y=np.array([2, 0, 2]), classes=np.array(["a", "b", "c"]))
    idx = read_public(tmp_path / "idx.npz")
    assert idx.info["classes"] == ["a", "b", "c"] and idx.read("y").tolist() == [2, 0, 2]
    np.testing.assert_array_equal(idx["t"][0], [0, 1, 2, 3])
    np.savez(tmp_path / "reg.npz", x=np.ones((2, 3, 1)), y=np.array([0.5, 1.5]))
    assert read_public(tmp_path / "reg.npz").kind == "regression"
    np.savez(tmp_path / "nox.npz", y=np.zeros(2))
    with pytest.raises(DataError, match=r"nox\.npz: no array 'x'"):
        read_public(tmp_path / "nox.npz")


def test_parquet_table(tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": ["a", "a", "b"],
            "time": [0.0, 1.0, 0.0],
            "v": [1.0, None, 3.0],
            "w": [1.0, 2.0, 3.0],
            "label": ["x", "x", "y"],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    data = read_public(tmp_path / "t.parquet")
    assert data.format == "parquet" and data.read("y").tolist() == [0, 1]
    np.testing.assert_array_equal(data["observed"][:, :, 0], [[1, 0], [1, 0]])
    np.testing.assert_array_equal(data["x"][0], [[1, 1], [0, 2]])
    pq.write_table(pa.table({"id": ["a"], "v": [1.0], "label": ["x"]}), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=r"bad\.parquet: header: the table has no column 'time'"):
        read_public(tmp_path / "bad.parquet")
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ConfigError, match=r"needs pyarrow.*neurodyn\[parquet\]"):
        read_public(tmp_path / "t.parquet")


@pytest.mark.parametrize(
    "name,text,where",
    [
        ("ragged.csv", "id,time,v,label\n1,0,1,a\n1,1,2\n", r"ragged\.csv:3: this row has 3 fields where the header"),
        ("nolabel.csv", "id,time,v,label\n1,0,1,a\n1,1,2,\n", r"nolabel\.csv:3: the label column 'label' is empty"),
        ("text.csv", "id,time,v,label\n1,0,1,a\n1,1,abc,a\n", r"text\.csv:3: column 'v' holds the non-numeric value"),
        ("empty.csv", "", r"empty\.csv:1: the file is empty"),
        ("empty.ts", "\n\n", r"empty\.ts:1: the file is empty"),
        (
            "nolabel.ts",
            "@univariate true\n@classLabel true a b\n@data\n1,2:a\n3,4\n",
            r"nolabel\.ts:5: the class label is missing",
        ),
        (
            "text.ts",
            "@classLabel true a b\n@data\n1,2:3,4:a\n1,x:3,4:b\n",
            r"text\.ts:4: dimension 1 holds the non-numeric value 'x'",
        ),
        (
            "dims.ts",
            "@dimensions 2\n@classLabel true a b\n@data\n1,2:3,4:a\n1,2:b\n",
            r"dims\.ts:5: the case has 1 dimension\(s\) where @dimensions 2 says 2",
        ),
        ("undeclared.ts", "@classLabel true a b\n@data\n1,2:c\n", r"undeclared\.ts:3: class label 'c' is not one"),
    ],
)
def test_bad_files_are_one_sentence_naming_the_file_and_line(tmp_path, capsys, name, text, where):
    src = _write(tmp_path / name, text)
    out = tmp_path / "out.h5"
    assert main(["convert", str(src), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(src) in err, err
    assert __import__("re").search(where, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing half-written


def test_conversion_is_atomic_and_a_test_file_reads_by_class_name(tmp_path, monkeypatch):
    train = _write(
        tmp_path / "train.csv",
        "id,time,v,label\n" + "".join(f"{i},{k},{i + k},{'abc'[i % 3]}\n" for i in range(6) for k in range(3)),
    )
    test = _write(tmp_path / "test.csv", "id,time,v,label\n7,0,1,c\n7,1,2,c\n8,0,1,b\n")
    train_h5 = convert_to_store(train, tmp_path / "train.h5")
    test_h5 = convert_to_store(test, tmp_path / "test.h5")
    assert StoredDataset(test_h5).read("fields/y").tolist() == [1, 0]  # its own classes: b, c
    ds = SequenceDataset(StoredDataset(test_h5), np.arange(2), classes=["a", "b", "c"])
    assert ds.y.tolist() == [2, 1] and ds.n_classes == 3
    with pytest.raises(DataError, match="holds class 'c', which the training data does not have"):
        SequenceDataset(StoredDataset(test_h5), np.arange(2), classes=["a", "b"])
    assert convert_to_store(train, tmp_path / "train.h5") == train_h5  # the same conversion: reused

    import neurodyn.data.store as store_mod

    def fail(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(store_mod, "_assemble", fail)
    with pytest.raises(OSError):
        convert_to_store(train, tmp_path / "again.h5")
    assert not (tmp_path / "again.h5").exists() and not (tmp_path / "again.h5.partial").exists()


def test_dropping_steps_makes_regular_series_irregular(tmp_path):
    np.savez(tmp_path / "reg.npz", x=np.random.default_rng(0).normal(size=(5, 20, 2)), y=np.arange(5) % 2)
    store = StoredDataset(convert_to_store(tmp_path / "reg.npz", tmp_path / "reg.h5"))
    assert not store.config["info"]["irregular"]
    a = SequenceDataset(store, np.arange(5), drop_steps=0.3, drop_seed=1)
    b = SequenceDataset(store, np.array([3, 1]), drop_steps=0.3, drop_seed=1)
    c = SequenceDataset(store, np.arange(5), drop_steps=0.3, drop_seed=2)
    assert a.m.sum(1).tolist() == [14] * 5  # 6 of 20 steps dropped
    assert torch.equal(a.t[3], b.t[0]) and torch.equal(a.x[1], b.x[1])  # the same draw in any split
    assert not torch.equal(a.t, c.t)
    full = store.read("fields/x")
    for i in range(5):
        kept = a.t[i, :14].long().numpy()  # timestamps are step indices
        assert (np.diff(kept) > 0).all() and np.diff(kept).max() > 1
        np.testing.assert_array_equal(a.x[i, :14].numpy(), full[i, kept])
    with pytest.raises(ConfigError, match="drop_steps"):
        SequenceDataset(store, np.arange(5), drop_steps=1.0)
    with pytest.raises(ConfigError, match="data.missing"):
        SequenceDataset(store, np.arange(5), missing="zero")
