"""A user's own time series end to end through the command line: `neurodyn convert FILE` (UEA .ts,
long-format CSV, .npz), then `neurodyn train <model>/sequence data.path=STORE data.test_path=TEST`, `evaluate
--data`, `predict` and `compare` on the converted stores, and every sequence preset trained on such a store."""

import json

import numpy as np
import pytest
import torch

from neurodyn.checkpoint_io import read_checkpoint
from neurodyn.cli import main
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError
from neurodyn.experiments import available_presets, load_experiment

SEQUENCE_MODELS = ("nac", "gru", "lstm", "cfc", "ltc", "mha", "odernn", "majority", "knn", "minirocket")


def _cases(n: int, seed: int, length=(6, 10)):
    """``n`` two-channel sequences of random length: class 1 rises, class 0 falls (learnable in a few steps)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        c = i % 2
        L = int(rng.integers(*length))
        ramp = np.linspace(0, 1, L) * (1 if c else -1)
        out.append((np.stack([ramp + 0.1 * rng.normal(size=L), rng.normal(size=L)], 1), c))
    return out


def write_ts(path, cases, missing=False):
    lines = [
        "@problemName Ramps",
        "@timeStamps false",
        f"@missing {str(missing).lower()}",
        "@univariate false",
        "@dimensions 2",
        "@equalLength false",
        "@classLabel true down up",
        "@data",
    ]
    for k, (x, c) in enumerate(cases):
        dims = [[f"{v:.4f}" for v in x[:, j]] for j in range(2)]
        if missing and k % 3 == 0:
            dims[1][1] = "?"
        lines.append(":".join(",".join(d) for d in dims) + f":{'up' if c else 'down'}")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_csv(path, cases, offset=0):
    rows = ["id,time,a,b,label"]
    for k, (x, c) in enumerate(cases):
        t = np.cumsum(np.random.default_rng(k).uniform(0.5, 1.5, len(x)))  # irregular timestamps
        rows += [f"s{k + offset},{t[j]:.3f},{x[j, 0]:.4f},{x[j, 1]:.4f},{'up' if c else 'down'}" for j in range(len(x))]
    path.write_text("\n".join(rows) + "\n")
    return path


def write_npz(path, cases):
    T = max(len(x) for x, _ in cases)
    x = np.full((len(cases), T, 2), np.nan)
    for k, (xi, _) in enumerate(cases):
        x[k, : len(xi)] = xi
    np.savez(path, x=x, mask=np.isfinite(x[..., 0]), y=np.array(["up" if c else "down" for _, c in cases]))
    return path


WRITERS = {"ts": (write_ts, ".ts"), "csv": (write_csv, ".csv"), "npz": (write_npz, ".npz")}


def convert(src, out):
    assert main(["convert", str(src), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture
def stores(tmp_path, capsys):
    """A converted training store (24 sequences) and test store (10) from a .ts pair."""
    train = convert(write_ts(tmp_path / "Ramps_TRAIN.ts", _cases(24, 0)), tmp_path / "train.h5")
    test = convert(write_ts(tmp_path / "Ramps_TEST.ts", _cases(10, 1)), tmp_path / "Ramps_TEST.h5")
    capsys.readouterr()
    return train, test


def train(tmp_path, preset, *overrides, name=None):
    argv = [
        "train",
        preset,
        "--scale",
        "tiny",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--no-progress",
        *(["--run-name", name] if name else []),
        *overrides,
    ]
    assert main(argv) == 0
    return tmp_path / "runs" / (name or f"{preset.replace('/', '-')}-tiny")


def read_tests(run):
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return next(r["test"] for r in records if "test" in r and "train_loss" not in r)


@pytest.mark.parametrize("fmt", ["ts", "csv", "npz"])
@pytest.mark.parametrize("model", ["nac", "gru"])
def test_each_format_converts_and_trains_nac_and_gru(tmp_path, capsys, fmt, model):
    write, suffix = WRITERS[fmt]
    train_h5 = convert(write(tmp_path / f"own_train{suffix}", _cases(20, 0)), tmp_path / "train.h5")
    if fmt == "csv":
        test_src = write_csv(tmp_path / f"own_test{suffix}", _cases(8, 1), offset=100)
    else:
        test_src = write(tmp_path / f"own_test{suffix}", _cases(8, 1))
    test_h5 = convert(test_src, tmp_path / "own_test.h5")
    store = StoredDataset(train_h5)
    assert store.config["info"]["classes"] == ["down", "up"] and store.shapes["fields/x"][2] == 2
    run = train(tmp_path, f"{model}/sequence", f"data.path={train_h5}", f"data.test_path={test_h5}", "train.epochs=2")
    tests = read_tests(run)
    last = tests["own_test"]["last"]
    assert set(tests) == {"own_test"} and last["n"] == 8 and 0 <= last["accuracy"] <= 1
    assert "best" in tests["own_test"]  # 2 of the 20 training sequences validate
    ckpt = read_checkpoint(run / "checkpoints" / "last.pt")
    assert ckpt["model"]["config"]["in_channels"] == 2 and ckpt["model"]["config"]["out_channels"] == 2
    assert "Test file `own_test`" in (run / "summary.md").read_text()


def test_evaluate_predict_and_compare_on_converted_stores(tmp_path, stores, capsys):
    train_h5, test_h5 = stores
    run = train(tmp_path, "gru/sequence", f"data.path={train_h5}", "data.n_test=4", "train.epochs=2")
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(test_h5), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    m = metrics["Ramps_TEST"]
    assert set(metrics) == {"Ramps_TEST"} and m["n"] == 10 and 0 <= m["accuracy"] <= 1
    assert main(["evaluate", str(run)]) == 0  # its own held-out test split
    assert "accuracy" in capsys.readouterr().out

    assert main(["predict", str(run), "--data", str(test_h5), "--out", str(tmp_path / "pred.h5")]) == 0
    import h5py

    with h5py.File(tmp_path / "pred.h5") as f:
        pred = f["pred"][()]
    assert pred.shape == (10, 2) and np.isfinite(pred).all()  # class logits, one row per sequence
    assert "accuracy" in capsys.readouterr().out

    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                "nac/sequence",
                "gru/sequence",
                "--scale",
                "tiny",
                "--epochs",
                "1",
                "--out",
                str(out),
                f"data.path={train_h5}",
                f"data.test_path={test_h5}",
            ]
        )
        == 0
    )
    table = (out / "compare.md").read_text()
    assert "accuracy Ramps_TEST" in table and "nac (nac/sequence)" in table and "gru (gru/sequence)" in table
    records = json.loads((out / "results.json").read_text())
    records = records.values() if isinstance(records, dict) else records
    assert all(0 <= r["sets"]["Ramps_TEST"] <= 1 and r["metric"] == "accuracy" for r in records)


def test_missing_values_irregular_steps_and_regression_train(tmp_path, capsys):
    src = write_ts(tmp_path / "Gaps_TRAIN.ts", _cases(16, 0), missing=True)
    store = StoredDataset(convert(src, tmp_path / "gaps.h5"))
    assert "fields/observed" in store.shapes and store.config["info"]["missing_values"] == 6
    run = train(
        tmp_path,
        "cfc/sequence",
        f"data.path={store.path}",
        "data.n_test=4",
        "data.observed_channels=true",
        "data.drop_steps=0.25",
        "train.epochs=1",
    )
    assert read_checkpoint(run / "checkpoints" / "last.pt")["model"]["config"]["in_channels"] == 4
    run = train(
        tmp_path, "mha/sequence", f"data.path={store.path}", "data.n_test=4", "data.missing=drop", "train.epochs=1"
    )
    assert read_tests(run)["test"]["last"]["n"] == 4

    reg = tmp_path / "Level_TRAIN.ts"
    rng = np.random.default_rng(0)
    reg.write_text(
        "@problemName Level\n@univariate true\n@targetLabel true\n@data\n"
        + "".join(
            ",".join(f"{v:.3f}" for v in lvl + 0.1 * rng.normal(size=6)) + f":{lvl:.3f}\n"
            for lvl in rng.uniform(0, 5, 12)
        )
    )
    run = train(
        tmp_path, "nac/sequence", f"data.path={convert(reg, tmp_path / 'level.h5')}", "data.n_test=3", "train.epochs=1"
    )
    last = read_tests(run)["test"]["last"]
    assert {"rmse", "mae"} <= set(last) and np.isfinite(last["rmse"])


def test_a_store_needs_a_path_and_all_counts_its_samples(tmp_path, stores):
    train_h5, _ = stores
    with pytest.raises(ConfigError, match=r"data.path=STORE, e.g. one made by `neurodyn convert FILE`"):
        from neurodyn.data.assembly import build_data

        build_data(load_experiment("gru/sequence", "tiny"))
    from neurodyn.data.assembly import build_data, split_sizes

    cfg = load_experiment("gru/sequence", "tiny", [f"data.path={train_h5}", "data.n_test=4"])
    assert split_sizes(cfg["data"]) == (18, 2, 4)
    data = build_data(cfg, progress=False)
    ids = np.concatenate([data["sets"][k].ids for k in ("train", "val", "test")])
    assert sorted(ids.tolist()) == list(range(24)) and data["sets"]["test"].ids.tolist() != [20, 21, 22, 23]
    with pytest.raises(ConfigError, match="data.n_train=all counts the samples of a given file"):
        split_sizes({"n_train": "all", "n_test": 2})
    from neurodyn.data.assembly import named_test_files

    with pytest.raises(ConfigError, match="a test file named 'test' .* and the test split .* would share one name"):
        named_test_files({"test_path": str(tmp_path / "test.h5"), "n_test": 2})
    assert torch.isfinite(data["x_norm"].shift).all()


SEQUENCE_PRESETS = [p for p in available_presets() if p.split("/")[0] in SEQUENCE_MODELS]


@pytest.mark.slow
@pytest.mark.parametrize("preset", SEQUENCE_PRESETS)
def test_every_sequence_preset_trains_on_a_converted_store(tmp_path, stores, preset):
    """The generic ``<model>/sequence`` presets need only the paths; the others take the same store with the
    split sizes (and, for the bearing presets, no condition split and no windows) overridden."""
    train_h5, test_h5 = stores
    extra = (
        []
        if preset.endswith("/sequence")
        else ["data.n_train=all", "data.n_test=0", "data.split_param=null", "data.window=0"]
    )
    run = train(
        tmp_path,
        preset,
        f"data.path={train_h5}",
        f"data.test_path={test_h5}",
        "train.epochs=1",
        *extra,
        name=preset.replace("/", "-"),
    )
    assert read_tests(run)["Ramps_TEST"]["last"]["n"] == 10


def test_every_sequence_model_has_a_generic_preset():
    for model in SEQUENCE_MODELS:
        cfg = load_experiment(f"{model}/sequence", "cpu", ["data.path=x.h5"])
        assert cfg["task"] == "sequence" and cfg["data"]["n_train"] == "all" and cfg["model"]["name"] == model


def test_predict_fills_missing_values_as_training_did(tmp_path, capsys):
    """load_run(...).predict on raw inputs with NaN gives the model exactly the inputs the training data layer built
    (ffill, observed indicators), so its logits equal the model's on the dataset's own tensors."""
    from neurodyn import load_run
    from neurodyn.data.sequences import SequenceDataset

    src = write_ts(tmp_path / "Gaps_TRAIN.ts", _cases(12, 0), missing=True)
    store = StoredDataset(convert(src, tmp_path / "gaps.h5"))
    run = train(
        tmp_path,
        "gru/sequence",
        f"data.path={store.path}",
        "data.n_test=4",
        "data.observed_channels=true",
        "train.epochs=1",
    )
    raw = np.where(store.read("fields/observed").astype(bool), store.read("fields/x"), np.nan)
    t, mask = store.read("fields/t"), store.read("fields/mask").astype(bool)
    assert np.isnan(raw[mask]).any()  # the file has missing values inside sequences
    ds = SequenceDataset(store, np.arange(store.n_samples), observed_channels=True)
    r = load_run(run)
    batch = {"x": ds.x, "t": torch.as_tensor(t), "mask": torch.as_tensor(mask)}
    with torch.no_grad():
        want = r.task.predict(r.model, batch)
    got = r.predict(raw, t=t, mask=mask)
    torch.testing.assert_close(got, want.float(), rtol=0, atol=1e-6)
    mean_filled = r.predict(np.nan_to_num(raw, nan=0.0), t=t, mask=mask)  # zero-filling gives other logits
    assert not torch.allclose(mean_filled, want.float(), atol=1e-4)
