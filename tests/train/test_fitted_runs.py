"""The fitted baselines through the one trainer, the CLI and compare, and the baseline scores and new metrics of
every sequence run's summary."""

import json
import re

import numpy as np
import pytest

from neurodyn.cli import main
from neurodyn.compare import compare
from neurodyn.train.predict import load_run


def sine_or_square_npz(path, n, seed, length=40, regression=False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    s = np.sin(2 * np.pi * 3 * np.linspace(0, 1, length) + phase)
    x = np.where(y[:, None] == 0, s, np.sign(s)) + 0.1 * rng.normal(size=(n, length))
    target = np.cos(phase[:, 0]) if regression else np.array(["sine", "square"])[y]
    np.savez(path, x=x[..., None], y=target)
    out = path.with_suffix(".h5")
    assert main(["convert", str(path), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture
def stores(tmp_path, capsys):
    train = sine_or_square_npz(tmp_path / "waves_train.npz", 40, 0)
    test = sine_or_square_npz(tmp_path / "waves_test.npz", 30, 1)
    capsys.readouterr()
    return train, test


def train(tmp_path, preset, *overrides):
    name = preset.replace("/", "-")
    assert (
        main(
            [
                "train",
                preset,
                "--scale",
                "tiny",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--no-progress",
                "--run-name",
                name,
                *overrides,
            ]
        )
        == 0
    )
    return tmp_path / "runs" / name


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def metric_of(run, key, set_name="waves_test"):
    return next(r["test"] for r in records(run) if "test" in r)[set_name]["last"][key]


def summary_row(run, metric):
    """The cells of ``metric``'s row in the summary's test table."""
    line = next(ln for ln in (run / "summary.md").read_text().splitlines() if ln.startswith(f"| {metric} |"))
    return [float(c) for c in line.strip("|").split("|")[1:]]


def test_baselines_train_in_one_pass_and_every_summary_shows_them(tmp_path, stores, capsys):
    train_h5, test_h5 = stores
    data = [f"data.path={train_h5}", f"data.test_path={test_h5}"]
    knn = train(tmp_path, "knn/sequence", *data, "train.epochs=3")
    assert [r["epoch"] for r in records(knn) if "train_loss" in r] == [0]  # one fitting pass, whatever epochs says
    acc_knn = metric_of(knn, "accuracy")
    assert acc_knn > 0.7 and metric_of(knn, "balanced_accuracy") > 0.7
    assert np.array(metric_of(knn, "confusion")).sum() == 30
    # the checkpoint holds the fitted state: load_run predicts what the run scored
    run = load_run(knn)
    z = np.load(tmp_path / "waves_test.npz")
    pred = run.predict(z["x"]).argmax(-1).numpy()
    assert np.mean(np.array(["sine", "square"])[pred] == z["y"]) == pytest.approx(acc_knn)
    mr = train(tmp_path, "minirocket/sequence", *data)
    assert metric_of(mr, "accuracy") >= 0.95
    majority = train(tmp_path, "majority/sequence", *data)
    gru = train(tmp_path, "gru/sequence", *data, "train.epochs=1")
    # the summary of a trained model: its scores beside majority's and 1-NN's on the same test file
    text = (gru / "summary.md").read_text()
    assert "majority (baseline) | 1-NN Euclidean (baseline)" in text
    cells = summary_row(gru, "accuracy")
    assert cells[-1] == pytest.approx(acc_knn, abs=1e-4)
    assert cells[-2] == pytest.approx(metric_of(majority, "accuracy"), abs=1e-4)
    assert re.search(r"\| true / predicted \| sine \| square \|", text)
    assert "balanced_accuracy" in text
    capsys.readouterr()


def test_regression_reports_r2_beside_the_training_mean(tmp_path, capsys):
    store = sine_or_square_npz(tmp_path / "phase.npz", 60, 2, regression=True)
    run = train(tmp_path, "minirocket/sequence", f"data.path={store}", "data.n_test=15")
    last = next(r["test"] for r in records(run) if "test" in r)["test"]["last"]
    assert {"rmse", "mae", "r2"} <= set(last) and "score" not in last  # a RUL score only for RUL data
    assert last["r2"] > 0.8
    r2 = summary_row(run, "r2")  # final, best, majority (the training mean), 1-NN
    assert r2[2] < 0.05 < r2[3]
    capsys.readouterr()


def test_compare_fits_baselines_once(tmp_path, stores, capsys):
    train_h5, test_h5 = stores
    recs = compare(
        ["majority/sequence", "knn/sequence"],
        tmp_path / "cmp",
        "tiny",
        epochs=3,
        overrides=[f"data.path={train_h5}", f"data.test_path={test_h5}"],
    )
    assert [r["epochs"] for r in recs] == [1, 1]
    by = {r["preset"]: r["sets"]["waves_test"] for r in recs}
    assert by["knn/sequence"] > by["majority/sequence"]
    assert "knn/sequence" in (tmp_path / "cmp" / "compare.md").read_text()
    capsys.readouterr()


def test_compare_records_every_metric_of_a_regression_test_file(tmp_path, capsys):
    """A regression record keeps R^2 and MAE beside the RMSE it ranks by, consistent with one another: the training
    mean's R^2 on the test file is 1 - mean((y - mean_train)^2) / var(y) <= 0 (every training case trains: no
    validation split), and RMSE >= MAE always."""
    train_h5 = sine_or_square_npz(tmp_path / "phase_train.npz", 40, 3, regression=True)
    test_h5 = sine_or_square_npz(tmp_path / "phase_test.npz", 30, 4, regression=True)
    recs = compare(
        ["majority/sequence", "minirocket/sequence"],
        tmp_path / "cmp",
        "tiny",
        epochs=1,
        overrides=[f"data.path={train_h5}", f"data.test_path={test_h5}", "data.n_val=0"],
    )
    by = {r["preset"]: r["set_metrics"]["phase_test"] for r in recs}
    assert all(r["set_metrics"]["phase_test"]["rmse"] == r["sets"]["phase_test"] for r in recs)
    assert all(m["rmse"] >= m["mae"] for m in by.values())
    y_train, y_test = np.load(tmp_path / "phase_train.npz")["y"], np.load(tmp_path / "phase_test.npz")["y"]
    mean_r2 = 1 - np.mean((y_test - y_train.mean()) ** 2) / np.var(y_test)
    assert by["majority/sequence"]["r2"] == pytest.approx(mean_r2, abs=2e-3)
    assert by["minirocket/sequence"]["r2"] > 0.8 > by["majority/sequence"]["r2"]
    capsys.readouterr()
