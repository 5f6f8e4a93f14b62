"""Sequence data: event encoding, generators, the dataset, and readers of the real files (tiny files
written here in each format)."""

import gzip
import math

import numpy as np
import pytest
import torch

from neurodyn.data.features.events import event_encode
from neurodyn.data.features.wavelets import morlet_cwt, snapshot_features
from neurodyn.data.formats import bearings, mnist, person_activity, ts
from neurodyn.data.generators import get_generator
from neurodyn.data.sequences import SequenceDataset, pad_sequences
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError, DataError


def test_event_encoding_decodes_back_to_the_pixels():
    rng = np.random.default_rng(0)
    for _ in range(20):
        b = (rng.random(64) < rng.random()).astype(int)
        feats, t = event_encode(b, width=8)
        decoded = np.concatenate([np.full(int(round(d * 8)), v) for v, d in feats])
        assert np.array_equal(decoded, b)
        assert np.all(np.diff(t) > 0) and t[-1] == 1.0
        assert np.all(feats[1:, 0] != feats[:-1, 0])  # runs alternate
    feats, t = event_encode(np.array([1, 1, 1, 1]), width=4)
    assert feats.tolist() == [[1.0, 1.0]] and t.tolist() == [1.0]


def test_generators_are_deterministic_and_chunking_independent(data_dir):
    for name, opts in (
        ("event_digits", {}),
        ("activity", {"max_len": 32, "min_len": 8}),
        ("bearing", {"life_min": 12, "life_max": 16, "n_points": 128, "n_freqs": 4}),
    ):
        gen = get_generator(name)
        cfg = gen.make_config(**opts)
        whole = gen.generate(cfg, np.arange(6), 3, torch.device("cpu"))
        part = gen.generate(cfg, np.array([4, 5]), 3, torch.device("cpu"))
        for k in whole:
            assert np.array_equal(whole[k][4:], part[k]), (name, k)
        other = gen.generate(cfg, np.array([4, 5]), 4, torch.device("cpu"))
        assert not np.array_equal(other["fields/x"], part["fields/x"])
        m = whole["fields/mask"].astype(bool)
        assert m[:, 0].all() and np.all(np.diff(whole["fields/t"], axis=1)[m[:, 1:]] >= 0)


def test_sklearn_digits_events_match_the_images():
    import gzip as gz
    import importlib.util
    from pathlib import Path

    gen = get_generator("event_digits")
    out = gen.generate(gen.make_config(), np.arange(10), 0, torch.device("cpu"))
    root = Path(next(iter(importlib.util.find_spec("sklearn").submodule_search_locations)))
    rows = [line.split(",") for line in gz.open(root / "datasets/data/digits.csv.gz", "rt").read().split()]
    imgs = np.array([[float(v) for v in r[:-1]] for r in rows])
    labels = np.array([int(float(r[-1])) for r in rows])
    assert imgs.shape == (1797, 64)
    for i in range(10):
        src = out["params/source_index"][i]
        m = out["fields/mask"][i].astype(bool)
        x = out["fields/x"][i][m]
        pixels = np.concatenate([np.full(int(round(d * 8)), v) for v, d in x])
        assert np.array_equal(pixels, (imgs[src] >= 8).astype(int)) and out["fields/y"][i] == labels[src]


def test_bearing_runs_degrade_and_features_see_the_fault():
    gen = get_generator("bearing")
    cfg = gen.make_config(life_min=40, life_max=40, drop_prob=0.0, n_points=512, n_freqs=8, conditions=(0, 3))
    out = gen.generate(cfg, np.arange(2), 0, torch.device("cpu"))
    y = out["fields/y"][:, :, 0]
    assert np.all(np.diff(y, axis=1) >= 0) and y[:, 0].max() == 0 and np.allclose(y[:, -1], 1)
    kurt = out["fields/x"][:, :, 3]  # kurtosis of the horizontal axis: impulsive faults raise it
    assert np.all(kurt[:, -1] > kurt[:, 0] + 1)
    assert out["params/condition"].tolist() == [0, 3]


def test_morlet_cwt_peaks_at_the_signal_frequency():
    fs, n = 1000.0, 1000
    t = torch.arange(n) / fs
    freqs = torch.tensor([20.0, 50.0, 120.0, 300.0])
    for f, amp in ((50.0, 2.0), (120.0, 0.5)):
        w = morlet_cwt(amp * torch.cos(2 * math.pi * f * t), fs, freqs).abs()[:, 200:-200].mean(-1)
        assert freqs[w.argmax()] == f and abs(w.max().item() - amp) < 0.1 * amp
    feats = snapshot_features(torch.randn(3, 2, 256), 25600.0, 8)
    assert feats.shape == (3, 14) and torch.isfinite(feats).all()


def test_sequence_dataset_padding_windows_and_errors(data_dir):
    gen = get_generator("bearing")
    cfg = gen.make_config(life_min=20, life_max=24, n_points=128, n_freqs=4, conditions=(0, 1))
    store = StoredDataset(gen.run(cfg, 4, seed=0, progress=False))
    ds = SequenceDataset(store, np.arange(4), window=6, window_stride=2)
    assert ds.kind == "regression" and not ds.per_step and ds.n_targets == 1
    it = ds[0]
    assert it["x"].shape == (6, 16) and it["t"][0] == 0 and it["mask"].all() and it["y"].shape == (1,)
    j, e = ds.items[0]
    assert torch.equal(it["y"], ds.y[j, e])
    full = SequenceDataset(store, np.arange(4), max_len=40)
    assert full.per_step and full[1]["x"].shape == (40, 16) and full[1]["y"].shape == (40, 1)
    assert not full[1]["mask"][30:].any()
    with pytest.raises(DataError, match="window"):
        SequenceDataset(store, np.arange(4), window=100)
    digits = get_generator("event_digits")
    dstore = StoredDataset(digits.run(digits.make_config(), 20, seed=0, progress=False))
    dd = SequenceDataset(dstore, np.arange(20))
    assert dd.kind == "classification" and dd.n_classes == 10 and dd[0]["y"].dtype == torch.int64
    with pytest.raises(DataError, match="per-step"):
        SequenceDataset(dstore, np.arange(20), window=4)


def test_pad_sequences():
    x, m = pad_sequences([np.ones((3, 2)), np.ones((5, 2))], 4)
    assert x.shape == (2, 4, 2) and m.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]


@pytest.mark.parametrize(
    "name,opts,needle",
    [
        ("event_digits", {"source": "emnist"}, "source"),
        ("event_digits", {"source": "mnist"}, "data.source_path"),
        ("activity", {"min_len": 10, "max_len": 5}, "min_len"),
        ("bearing", {"conditions": (0, 9)}, "conditions"),
        ("bearing", {"source": "xjtu"}, "data.source_path"),
    ],
)
def test_bad_generator_options(name, opts, needle):
    with pytest.raises(ConfigError, match=needle):
        get_generator(name).make_config(**opts)


# ---------------------------------------------------------------------------------------- real formats
def _idx(path, arr, gz=False):
    arr = np.asarray(arr, dtype=np.uint8)
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    data = header + arr.tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)


def test_mnist_idx_folder_and_npz(tmp_path, data_dir):
    rng = np.random.default_rng(0)
    imgs = np.zeros((7, 28, 28), dtype=np.uint8)
    for i in range(7):  # a few random bars: fewer than 256 events
        r, c = rng.integers(0, 20, 2)
        imgs[i, r : r + 6, c : c + 5] = rng.integers(100, 256)
    labels = np.arange(7) % 10
    folder = tmp_path / "mnist"
    folder.mkdir()
    _idx(folder / "train-images-idx3-ubyte.gz", imgs[:5], gz=True)
    _idx(folder / "train-labels-idx1-ubyte.gz", labels[:5], gz=True)
    _idx(folder / "t10k-images-idx3-ubyte", imgs[5:])
    _idx(folder / "t10k-labels-idx1-ubyte", labels[5:])
    x, y, n_train = mnist.read_mnist(str(folder))
    assert np.array_equal(x, imgs) and np.array_equal(y, labels) and n_train == 5
    np.savez(tmp_path / "mnist.npz", x_train=imgs[:5], y_train=labels[:5], x_test=imgs[5:], y_test=labels[5:])
    x2, y2, _ = mnist.read_mnist(str(tmp_path / "mnist.npz"))
    assert np.array_equal(x2, imgs)
    gen = get_generator("event_digits")
    out = gen.generate(gen.make_config(source="mnist", source_path=str(folder)), np.arange(7), 0, torch.device("cpu"))
    assert out["fields/x"].shape == (7, 256, 2) and np.array_equal(out["fields/y"], labels)
    m = out["fields/mask"][6].astype(bool)
    pixels = np.concatenate([np.full(int(round(d * 28)), v) for v, d in out["fields/x"][6][m]])
    assert np.array_equal(pixels, (imgs[6].ravel() >= 128).astype(int))
    (folder / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x09abc")
    mnist.read_mnist.cache_clear()
    with pytest.raises(DataError, match="declares shape"):
        mnist.read_mnist(str(folder))


PAR_LINES = (
    "A01,010-000-024-033,633790226051280329,27.05.2009 14:03:25:127,"
    "4.062931060791016,1.8924342393875122,0.5074254274368286,walking\n"
    "A01,020-000-033-111,633790226051820913,27.05.2009 14:03:25:183,"
    "4.291954517364502,1.7810616493225098,1.3441756963729858,walking\n"
    "A01,020-000-032-221,633790226052091205,27.05.2009 14:03:25:210,"
    "4.359101295471191,1.8264819383621216,0.9683088064193726,sitting\n"
    "A02,010-000-030-096,633790230332590281,27.05.2009 14:10:33:260,"
    "3.157498836517334,2.0126211643218994,0.25044652819633484,lying down\n"
)


def test_person_activity_file(tmp_path, data_dir):
    p = tmp_path / "ConfLongDemo_JSI.txt"
    p.write_text(PAR_LINES)
    recs = person_activity.read_person_activity(str(p))
    assert [r["name"] for r in recs] == ["A01", "A02"]
    assert recs[0]["x"].shape == (3, 7) and recs[0]["x"][1, :4].tolist() == [0, 0, 1, 0]
    assert recs[0]["t"][0] == 0 and abs(recs[0]["t"][1] - 0.0540584) < 1e-6
    assert recs[0]["y"].tolist() == [0, 0, 5] and recs[1]["y"].tolist() == [2]
    gen = get_generator("activity")
    out = gen.generate(
        gen.make_config(source="par", source_path=str(p), max_len=2, min_len=1), np.arange(3), 0, torch.device("cpu")
    )
    assert out["fields/y"].shape == (3, 2) and out["fields/mask"].tolist() == [[1, 1], [1, 0], [1, 0]]
    bad = tmp_path / "bad.txt"
    bad.write_text(PAR_LINES.replace("walking", "flying", 1))
    with pytest.raises(DataError, match="unknown activity"):
        person_activity.read_person_activity(str(bad))


def test_ts_file(tmp_path):
    p = tmp_path / "Tiny_TRAIN.ts"
    p.write_text(
        "@problemName Tiny\n@timeStamps false\n@univariate false\n@classLabel true a b\n@data\n"
        "1.0,2.0,3.0:4.0,5.0,6.0:a\n0.5,0.25:1,2:b\n"
    )
    xs, labels = ts.read_ts(p)
    assert labels == ["a", "b"] and xs[0].shape == (3, 2) and xs[0][:, 1].tolist() == [4, 5, 6]
    assert xs[1].shape == (2, 2)
    (tmp_path / "bad.ts").write_text("@data\n1,x:a\n")
    with pytest.raises(DataError, match="non-numeric"):
        ts.read_ts(tmp_path / "bad.ts")


def test_pronostia_and_xjtu_folders(tmp_path, data_dir):
    rng = np.random.default_rng(0)
    b = tmp_path / "pronostia" / "Learning_set" / "Bearing1_1"
    b.mkdir(parents=True)
    for i in range(3):
        sep = ";" if i == 1 else ","
        rows = [
            sep.join(["9", "39", str(10 * i), str(65664 + j), f"{rng.normal():.3f}", f"{rng.normal():.3f}"])
            for j in range(256)
        ]
        (b / f"acc_{i + 1:05d}.csv").write_text("\n".join(rows) + "\n")
    (b / "temp_00001.csv").write_text("9,39,0,0,35.1\n9,39,1,0,35.3\n")
    run = bearings.read_pronostia_bearing(b)
    assert run.signals.shape == (3, 2, 256) and run.times.tolist() == [0, 10, 20] and run.condition == 0
    assert run.temperature is not None and len(run.temperature) == 3
    x = tmp_path / "xjtu" / "37.5Hz11kN" / "Bearing2_1"
    x.mkdir(parents=True)
    for i in (1, 2, 10):
        rows = ["Horizontal_vibration_signals,Vertical_vibration_signals"]
        rows += [f"{rng.normal():.3f},{rng.normal():.3f}" for _ in range(300)]
        (x / f"{i}.csv").write_text("\n".join(rows) + "\n")
    xr = bearings.read_xjtu_bearing(x)
    assert xr.signals.shape == (3, 2, 300) and xr.times.tolist() == [0, 60, 540] and xr.condition == 1
    gen = get_generator("bearing")
    for source, root in (("pronostia", tmp_path / "pronostia"), ("xjtu", tmp_path / "xjtu")):
        out = gen.generate(
            gen.make_config(source=source, source_path=str(root), n_freqs=4), np.arange(1), 0, torch.device("cpu")
        )
        assert out["fields/x"].shape == (1, 3, 16) and np.isclose(out["fields/y"][0, -1, 0], 1.0)
    with pytest.raises(DataError, match="no pronostia bearing folders"):
        bearings.list_bearings(tmp_path / "xjtu", "pronostia")
