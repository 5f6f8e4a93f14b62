"""`neurodyn evaluate / predict --which auto` (the default): best.pt only when the validation split that selected it
held at least MIN_VAL_FOR_BEST cases, else last.pt, told on stderr; the run's summary states the split's size."""

import json

import numpy as np
import pytest

from neurodyn.checkpoint_io import atomic_torch_save, read_checkpoint
from neurodyn.cli import main
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.errors import ConfigError
from neurodyn.train.predict import choose_checkpoint, load_run, validation_cases
from neurodyn.train.trainer import MIN_VAL_FOR_BEST


def write_store(tmp_path, n, name="ramps"):
    """``n`` two-channel sequences of 5 to 8 steps: class 1 rises, class 0 falls."""
    rng = np.random.default_rng(0)
    x = np.full((n, 8, 2), np.nan)
    for i in range(n):
        L = int(rng.integers(5, 9))
        x[i, :L, 0] = np.linspace(0, 1, L) * (1 if i % 2 else -1) + 0.1 * rng.normal(size=L)
        x[i, :L, 1] = rng.normal(size=L)
    np.savez(tmp_path / f"{name}.npz", x=x, y=np.where(np.arange(n) % 2, "up", "down"))
    return convert_to_store(tmp_path / f"{name}.npz", tmp_path / f"{name}.h5")


def train(tmp_path, store, n_val, name):
    argv = [
        "train",
        "gru/sequence",
        "--scale",
        "tiny",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--no-progress",
        "--run-name",
        name,
        f"data.path={store}",
        "data.n_test=6",
        f"data.n_val={n_val}",
        "train.epochs=2",
    ]
    assert main(argv) == 0
    return tmp_path / "runs" / name


def evaluate(run, capsys, *extra):
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json", "--no-progress", *extra]) == 0  # stderr: the choice alone
    out = capsys.readouterr()
    return json.loads(out.out), out.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("which")
    store = write_store(tmp, 6 + MIN_VAL_FOR_BEST + 10)
    return {
        "few": train(tmp, store, 7, "few"),
        "enough": train(tmp, store, MIN_VAL_FOR_BEST, "enough"),
        "none": train(tmp, store, 0, "none"),
        "store": store,
    }


def test_a_small_validation_split_evaluates_last_and_says_why(runs, capsys):
    run = runs["few"]
    assert (run / "checkpoints" / "best.pt").is_file()
    auto, err = evaluate(run, capsys)
    assert err.strip() == (
        "evaluate: last.pt (the validation split has 7 cases, under 50: too few to select a "
        "checkpoint; --which best to override)"
    )
    last, err_last = evaluate(run, capsys, "--which", "last")
    assert auto == last and err_last == ""  # an explicit choice is not commented on
    assert load_run(run, "auto").checkpoint.name == "last.pt"
    summary = (run / "summary.md").read_text()
    assert "(selects `best.pt`; 7 validation cases)" in summary
    assert "`best.pt` is chosen on 7 validation cases (under 50)" in summary


def test_a_large_validation_split_evaluates_best(runs, capsys):
    run = runs["enough"]
    auto, err = evaluate(run, capsys)
    assert err.startswith("evaluate: best.pt (the validation split has 50 cases, at least 50")
    best, _ = evaluate(run, capsys, "--which", "best")
    assert auto == best
    assert load_run(run, "auto").checkpoint.name == "best.pt"
    assert read_checkpoint(run / "checkpoints" / "last.pt")["n_val"] == MIN_VAL_FOR_BEST
    summary = (run / "summary.md").read_text()
    assert "(selects `best.pt`; 50 validation cases)" in summary and "chosen on" not in summary


def test_no_validation_split_evaluates_last(runs, capsys):
    run = runs["none"]
    assert not (run / "checkpoints" / "best.pt").exists()
    _, err = evaluate(run, capsys)
    assert err.strip() == "evaluate: last.pt (the run has no best.pt: it had no validation split to select one)"


def test_predict_defaults_to_auto_too(runs, tmp_path, capsys):
    capsys.readouterr()
    assert main(["predict", str(runs["enough"]), "--data", str(runs["store"]), "--out", str(tmp_path / "p.h5")]) == 0
    progress, choice = capsys.readouterr().err.splitlines()  # the prediction's stage (a pipe), then the choice
    assert progress.startswith(f"predicting {runs['store'].name}: ")
    assert choice.startswith("predict: best.pt (the validation split has 50 cases")


def test_older_checkpoints_without_the_count_fall_back_on_the_config(runs, tmp_path):
    run = runs["few"]
    ckpt = read_checkpoint(run / "checkpoints" / "last.pt")
    ckpt.pop("n_val")
    atomic_torch_save(ckpt, run / "checkpoints" / "last.pt")
    assert choose_checkpoint(run)[0] == "last" and "7 cases" in choose_checkpoint(run)[1]
    data = {"n_train": 600, "n_val": "auto", "n_test": 0}  # auto: 10 % of the 600 validate
    assert validation_cases({"experiment": {"data": data}}) == 60
    assert validation_cases({"experiment": {"data": {"n_train": "all", "n_val": "auto"}}}) is None


def test_which_must_be_known(runs):
    with pytest.raises(ConfigError, match=r"which must be one of auto, last, best, got 'first'"):
        load_run(runs["few"], "first")
    assert choose_checkpoint(runs["few"], "best") == ("best", "--which best")
