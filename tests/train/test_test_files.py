"""Separate test files (data.test_path): evaluated after training and by `neurodyn evaluate --data`, with the
training normalizers, at other resolutions; data.n_test = 0 when test files are given."""

import json

import numpy as np
import pytest
import torch

from neurodyn.cli import main
from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoredDataset
from neurodyn.errors import ConfigError, DataError
from neurodyn.experiments import load_experiment
from neurodyn.train.experiment import run_experiment
from neurodyn.train.runs import evaluate_sets, load_run, read_history, read_test_file_metrics


def darcy_file(tmp_path, resolution, n, seed):
    gen = get_generator("darcy")
    path = tmp_path / f"darcy{resolution}_s{seed}.h5"
    gen.run(gen.make_config(resolution=resolution, solve_resolution=17), n, seed=seed, path=path, progress=False)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("darcy")
    return {"train": darcy_file(tmp, 9, 24, 0), "test9": darcy_file(tmp, 9, 6, 1), "test17": darcy_file(tmp, 17, 6, 1)}


def test_test_files_of_the_same_samples_at_two_resolutions(files):
    """The 17-point test file holds the same solutions as the 9-point one (one fine solve, subsampled)."""
    a9, a17 = (StoredDataset(files[k]).read("fields/u") for k in ("test9", "test17"))
    np.testing.assert_allclose(a17[:, ::2, ::2], a9, rtol=1e-6)


@pytest.mark.parametrize("model", ["fno", "lamo"])
def test_training_evaluates_every_test_file_with_the_training_normalizers(tmp_path, files, model):
    preset = {"fno": "fno/darcy", "lamo": "lamo/darcy"}[model]
    cfg = load_experiment(
        preset,
        "tiny",
        [
            f"data.path={files['train']}",
            "data.n_train=24",
            "data.n_test=0",
            f"data.test_path={{test9: {files['test9']}, test17: {files['test17']}}}",
            "train.epochs=2",
            "data.normalize_reduce=pointwise",
        ],
    )
    run = tmp_path / "run"
    final = run_experiment(cfg, run, progress=False)
    logged = read_test_file_metrics(run)
    assert set(logged) == {"test9", "test17"}
    assert final["test9/rel_l2"] == pytest.approx(logged["test9"]["rel_l2"])
    assert len(read_history(run)) == 2  # the test-file record is not an epoch
    assert "Test file `test17`" in (run / "summary.md").read_text()
    # the test-file number is the training normalizers' number: recomputed here from the checkpoint's predictions on
    # the file's raw inputs (mean over samples of ||pred - u|| / ||u||), and normalizers refit on the test file itself
    # give another number
    stored = StoredDataset(files["test9"])
    a, u = torch.from_numpy(stored.read("fields/a")), torch.from_numpy(stored.read("fields/u")).double()
    trained = load_run(run)
    rel = lambda pred: ((pred.double() - u).flatten(1).norm(dim=1) / u.flatten(1).norm(dim=1)).mean().item()  # noqa: E731
    assert rel(trained.predict(a)) == pytest.approx(logged["test9"]["rel_l2"], rel=1e-4)
    norms = trained.task.normalizers()
    norms["input"].fit(a.float()), norms["target"].fit(u.float())
    assert rel(trained.predict(a)) != pytest.approx(logged["test9"]["rel_l2"], rel=1e-2)
    # the validation split (carved from the 24 training samples) is what each epoch evaluates, not a test file
    assert read_history(run)[-1]["val"]["rel_l2"] != pytest.approx(logged["test9"]["rel_l2"])
    # re-evaluating the checkpoint gives the logged numbers; files can also be given explicitly
    again = evaluate_sets(run)
    assert set(again) == {"test9", "test17"}
    for name in again:
        assert again[name]["rel_l2"] == pytest.approx(logged[name]["rel_l2"], rel=1e-5)
    explicit = evaluate_sets(run, files=[files["test17"]])
    assert explicit[files["test17"].stem]["rel_l2"] == pytest.approx(logged["test17"]["rel_l2"], rel=1e-5)
    # resuming the finished run writes the test-file record once, not twice
    run_experiment(cfg, run, progress=False)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert sum("test" in json.loads(line) for line in lines) == 1


def test_missing_test_file_and_no_evaluation_set_are_clear_errors(tmp_path, files):
    cfg = load_experiment(
        "fno/darcy", "tiny", [f"data.path={files['train']}", "data.n_test=0", f"data.test_path={tmp_path / 'nope.h5'}"]
    )
    with pytest.raises(DataError, match="nope.h5 does not exist"):
        run_experiment(cfg, tmp_path / "run", progress=False)
    cfg = load_experiment(
        "fno/darcy", "tiny", [f"data.path={files['train']}", "data.n_train=24", "data.n_test=0", "train.epochs=1"]
    )
    assert run_experiment(cfg, tmp_path / "run2", progress=False) == {}  # n_test = 0 alone: trains, evaluates nothing
    with pytest.raises(ConfigError, match="no test split and no data.test_path"):
        evaluate_sets(tmp_path / "run2")


def test_a_test_file_the_model_cannot_take_fails_before_training(tmp_path, files):
    cfg = load_experiment(
        "lamo/darcy",
        "tiny",
        [
            f"data.path={files['train']}",
            "data.n_train=24",
            "data.n_test=0",
            f"data.test_path={files['test17']}",
            "model.grid_transfer=tokens",
            "model.pos_embed_interp=false",
        ],
    )
    with pytest.raises(ConfigError, match="cannot take test file 'darcy17_s1'"):
        run_experiment(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_cli_evaluate_data_prints_one_column_per_file(tmp_path, files, capsys):
    runs = tmp_path / "runs"
    assert (
        main(
            [
                "train",
                "fno/darcy",
                "--scale",
                "tiny",
                "--runs-dir",
                str(runs),
                "--no-progress",
                f"data.path={files['train']}",
                "data.n_train=24",
                "data.n_test=0",
                "train.epochs=1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(["evaluate", str(runs / "fno-darcy-tiny"), "--data", str(files["test9"]), "--data", str(files["test17"])])
        == 0
    )
    out = capsys.readouterr().out
    assert "darcy9_s1" in out.splitlines()[0] and "darcy17_s1" in out.splitlines()[0] and "rel_l2" in out
