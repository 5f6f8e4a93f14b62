"""data.max_steps: long sequences average-pooled in time (masked mean over windows of k steps), checked against
a NumPy reference computed here from the stored arrays; the same k for every split and test file of a run."""

import math

import numpy as np
import pytest

from neurodyn.data.assembly import build_data, build_test_sets
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.sequences import AUTO_MAX_STEPS, SequenceDataset
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError


def write_store(tmp_path, name, lengths, per_step=False, seed=0, missing=False):
    """A converted store of sequences of ``lengths`` (3 channels, irregular times, random values; a few values
    missing when ``missing``), a class per sequence or (``per_step``) a class per step."""
    rng = np.random.default_rng(seed)
    n, T = len(lengths), max(lengths)
    x = np.full((n, T, 3), np.nan)
    t = np.zeros((n, T))
    for i, L in enumerate(lengths):
        x[i, :L] = rng.normal(size=(L, 3))
        t[i, :L] = np.cumsum(rng.uniform(0.5, 1.5, L))
        t[i, L:] = t[i, L - 1]
        if missing:
            x[i, 1:L:4, 2] = np.nan  # channel 2 missing at some steps
    mask = np.arange(T)[None] < np.asarray(lengths)[:, None]
    y = rng.integers(0, 2, (n, T) if per_step else n)
    np.savez(tmp_path / f"{name}.npz", x=x, t=t, mask=mask, y=np.where(y, "up", "down"))
    return convert_to_store(tmp_path / f"{name}.npz", tmp_path / f"{name}.h5", per_step=per_step)


def reference_pool(x, t, valid, k):
    """Independent reference: pad T to a multiple of k, reshape to (N, T/k, k, ...) and take masked means.
    ``valid (N, T, C)`` says which values count; a pooled step is valid where any of its steps is."""
    n, T, C = x.shape
    Tp = math.ceil(T / k)
    pad = Tp * k - T
    xp = np.pad(np.nan_to_num(x.astype(np.float64)), ((0, 0), (0, pad), (0, 0))).reshape(n, Tp, k, C)
    vp = np.pad(valid, ((0, 0), (0, pad), (0, 0))).reshape(n, Tp, k, C)
    step = vp.any(-1)
    tp = np.pad(t.astype(np.float64), ((0, 0), (0, pad))).reshape(n, Tp, k)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_x = (xp * vp).sum(2) / vp.sum(2)
        mean_t = (tp * step).sum(2) / step.sum(2)
    return mean_x, mean_t, step.any(2)


def test_pooled_values_match_a_numpy_reference_for_unequal_lengths(tmp_path):
    lengths = [23, 9, 17, 1]
    store = StoredDataset(write_store(tmp_path, "long", lengths))
    ds = SequenceDataset(store, np.arange(4), max_steps=5)
    k = math.ceil(23 / 5)
    assert ds.pool == k == 5
    x, t = store.read("fields/x"), store.read("fields/t")
    m = store.read("fields/mask").astype(bool)
    ref_x, ref_t, ref_m = reference_pool(x, t, np.repeat(m[..., None], 3, -1), k)
    assert ds.x.shape == (4, 5, 3)
    assert np.array_equal(ds.m.numpy(), ref_m)
    assert ds.m.numpy().sum(1).tolist() == [math.ceil(L / k) for L in lengths]
    np.testing.assert_allclose(ds.x.numpy()[ref_m], ref_x[ref_m], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ds.t.numpy()[ref_m], ref_t[ref_m], rtol=1e-6)
    assert np.all(ds.x.numpy()[~ref_m] == 0)
    # the first pooled step of sequence 0 by hand: the mean of its first 5 steps
    np.testing.assert_allclose(ds.x[0, 0].numpy(), x[0, :5].mean(0), rtol=1e-5)
    # after the end, the time repeats the last pooled step's (as padding does)
    assert ds.t[1, 2].item() == ds.t[1, 1].item()
    item = ds[1]
    assert item["x"].shape == (5, 3) and item["mask"].tolist() == [True, True, False, False, False]


def test_missing_values_pool_over_the_observed_ones(tmp_path):
    store = StoredDataset(write_store(tmp_path, "gaps", [12, 8], missing=True))
    ds = SequenceDataset(store, np.arange(2), max_steps=4, missing="mean")
    x, t = store.read("fields/x"), store.read("fields/t")
    m = store.read("fields/mask").astype(bool)
    obs = store.read("fields/observed").astype(bool) & m[..., None]
    ref_x, _, ref_m = reference_pool(x, t, obs, 3)
    assert ds.pool == 3
    seen = np.repeat(ref_m[..., None], 3, -1) & ~np.isnan(ref_x)
    np.testing.assert_allclose(ds.x.numpy()[seen], ref_x[seen], rtol=1e-5, atol=1e-6)


def test_auto_pools_long_sequences_only_and_never_per_step_ones(tmp_path):
    long_store = StoredDataset(write_store(tmp_path, "long", [600, 300]))
    ds = SequenceDataset(long_store, np.arange(2), max_steps="auto")
    assert ds.pool == math.ceil(600 / AUTO_MAX_STEPS) == 3 and ds.x.shape[1] <= AUTO_MAX_STEPS
    assert ds.m.sum(1).tolist() == [200, 100]
    short = SequenceDataset(StoredDataset(write_store(tmp_path, "short", [40, 20])), np.arange(2), max_steps="auto")
    assert short.pool == 1 and short.x.shape[1] == 40
    never = SequenceDataset(long_store, np.arange(2), max_steps=0)
    assert never.pool == 1 and never.x.shape[1] == 600
    assert SequenceDataset(long_store, np.arange(2), max_steps=None).pool == 1

    steps = StoredDataset(write_store(tmp_path, "steps", [600, 300], per_step=True))
    ds = SequenceDataset(steps, np.arange(2), max_steps="auto")
    assert ds.per_step and ds.pool == 1 and ds.x.shape[1] == 600
    with pytest.raises(ConfigError, match=r"data.max_steps=100: this data has per-step targets"):
        SequenceDataset(steps, np.arange(2), max_steps=100)


@pytest.mark.parametrize("bad", [-1, "fast", 2.5, True, "12"])
def test_bad_max_steps_is_one_config_error(tmp_path, bad):
    store = StoredDataset(write_store(tmp_path, "s", [10, 6]))
    with pytest.raises(ConfigError, match=r"data.max_steps must be 'auto', 0 \(never pool\) or a whole number >= 1"):
        SequenceDataset(store, np.arange(2), max_steps=bad)


def test_drop_steps_happen_before_pooling(tmp_path):
    store = StoredDataset(write_store(tmp_path, "d", [20, 20]))
    dropped = SequenceDataset(store, np.arange(2), drop_steps=0.5, drop_seed=3)
    pooled = SequenceDataset(store, np.arange(2), drop_steps=0.5, drop_seed=3, max_steps=10)
    assert dropped.m.sum(1).tolist() == [10, 10] and pooled.pool == 2
    ref_x, ref_t, ref_m = reference_pool(
        dropped.x.numpy(), dropped.t.numpy(), np.repeat(dropped.m.numpy()[..., None], 3, -1), 2
    )
    assert pooled.m.sum(1).tolist() == [5, 5]
    np.testing.assert_allclose(pooled.x.numpy()[ref_m], ref_x[ref_m], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pooled.t.numpy()[ref_m], ref_t[ref_m], rtol=1e-6)


def test_every_split_and_a_longer_test_file_pool_with_the_training_k(tmp_path):
    train = write_store(tmp_path, "train", [40, 31, 25, 40, 12, 33, 28, 40, 36, 22])
    held = write_store(tmp_path, "held", [90, 50, 20], seed=1)  # longer than any training sequence
    cfg = {
        "task": "sequence",
        "data": {
            "path": str(train),
            "n_train": "all",
            "n_val": 2,
            "n_test": 2,
            "shuffle": False,
            "max_steps": 10,
            "test_path": str(held),
        },
    }
    sets = build_data(cfg, progress=False)["sets"]
    k = math.ceil(40 / 10)
    assert {name: ds.pool for name, ds in sets.items()} == {"train": k, "val": k, "test": k}
    tested = build_test_sets(cfg)["held"]
    assert tested.pool == k and tested.m.sum(1).tolist() == [math.ceil(L / k) for L in (90, 50, 20)]
    # on its own the test file would pool by ceil(90 / 10) = 9
    assert SequenceDataset(StoredDataset(held), np.arange(3), max_steps=10).pool == 9
    recorded = {
        **cfg["data"],
        "path": str(tmp_path / "gone.h5"),
        "file": {"shapes": {"fields/x": [10, 40, 3]}},
    }  # the run's record of a moved file
    assert build_test_sets({**cfg, "data": recorded})["held"].pool == k
