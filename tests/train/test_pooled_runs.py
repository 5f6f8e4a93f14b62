"""A run trained with data.max_steps: its splits and test files pool with the training file's factor, and
``load_run(...).predict`` on raw arrays pools them alike (the same outputs as predicting the store)."""

import h5py
import numpy as np
import yaml

from neurodyn.cli import main
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.store import StoredDataset
from neurodyn.train.predict import load_run


def write_store(tmp_path, name, lengths, seed):
    rng = np.random.default_rng(seed)
    x = np.full((len(lengths), max(lengths), 2), np.nan)
    t = np.zeros(x.shape[:2])
    for i, L in enumerate(lengths):
        x[i, :L] = rng.normal(size=(L, 2)) + (i % 2)
        t[i, :L] = np.cumsum(rng.uniform(0.5, 1.5, L))
        t[i, L:] = t[i, L - 1]
    y = np.where(np.arange(len(lengths)) % 2, "up", "down")
    np.savez(tmp_path / f"{name}.npz", x=x, t=t, mask=np.isfinite(x[..., 0]), y=y)
    return convert_to_store(tmp_path / f"{name}.npz", tmp_path / f"{name}.h5")


def test_a_pooled_run_evaluates_and_predicts_raw_arrays_as_its_data(tmp_path, capsys):
    rng = np.random.default_rng(1)
    train = write_store(tmp_path, "train", [int(v) for v in rng.integers(10, 25, 24)] + [24], seed=0)
    held = write_store(tmp_path, "held", [40, 13, 7, 24], seed=2)  # longer than the training file's 24
    argv = [
        "train",
        "gru/sequence",
        "--scale",
        "tiny",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--no-progress",
        "--run-name",
        "pooled",
        f"data.path={train}",
        f"data.test_path={held}",
        "data.max_steps=6",
        "train.epochs=1",
    ]
    assert main(argv) == 0
    run = tmp_path / "runs" / "pooled"
    trained = load_run(run)
    held_set = trained.test_sets([held])["held"]
    assert held_set.pool == 4 and held_set.m.sum(1).tolist() == [10, 4, 2, 6]  # k = ceil(24 / 6), not 40 / 6
    capsys.readouterr()
    assert main(["predict", str(run), "--data", str(held), "--out", str(tmp_path / "p.h5"), "--which", "last"]) == 0
    with h5py.File(tmp_path / "p.h5") as f:
        stored = f["pred"][()]
    store = StoredDataset(held)
    x, t = store.read("fields/x"), store.read("fields/t")
    m = store.read("fields/mask").astype(bool)
    raw = np.where(m[..., None], x, np.nan)
    direct = trained.predict(raw, t=t, mask=m).numpy()
    np.testing.assert_allclose(direct, stored, rtol=1e-4, atol=1e-5)
    unpooled = load_run(run)
    unpooled.cfg["data"]["max_steps"] = 0  # without pooling they differ
    assert not np.allclose(unpooled.predict(raw, t=t, mask=m).numpy(), stored, atol=1e-5)
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["max_steps"] == 6
    train.rename(tmp_path / "moved.h5")  # the checkpoint alone still knows k
    assert load_run(run).test_sets([held])["held"].pool == 4
