"""The sequence task in the one trainer: presets at tiny scale, monitor metric, score, CLI bench."""

import json
import math

import pytest
import torch

from neurodyn.checkpoint_io import read_checkpoint
from neurodyn.cli import main
from neurodyn.experiments import load_experiment
from neurodyn.plots import write_run_plots
from neurodyn.train.experiment import run_experiment
from neurodyn.train.runs import evaluate_run, read_history
from neurodyn.train.sequence_task import rul_score


def test_rul_score_is_eq_58():
    pred = torch.tensor([1.0, 3.0, 5.0, 10.0])
    true = torch.tensor([3.0, 3.0, 2.0, 20.0])
    want = (math.exp(2 / 13) - 1) + 0.0 + (math.exp(3 / 10) - 1) + (math.exp(10 / 13) - 1)
    assert rul_score(pred, true).item() == pytest.approx(want)
    assert rul_score(pred, true, "mean").item() == pytest.approx(want / 4)
    # late predictions cost more than early ones by the same amount
    assert rul_score(torch.tensor([5.0]), torch.tensor([0.0])) > rul_score(torch.tensor([-5.0]), torch.tensor([0.0]))


def test_classification_run_selects_best_by_accuracy(tmp_path, data_dir):
    cfg = load_experiment("nac/event_digits", "tiny", ["train.epochs=2"])
    run = tmp_path / "run"
    final = run_experiment(cfg, run, progress=False)
    write_run_plots(run)
    assert set(final) >= {"accuracy", "nll"} and 0 <= final["accuracy"] <= 1
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    history = [h for h in records if "train_loss" in h]
    best = read_checkpoint(run / "checkpoints" / "best.pt")
    accs = [h["val"]["accuracy"] for h in history]  # selection by validation accuracy
    assert best["best"] == pytest.approx(max(accs))
    assert best["position"]["epoch"] == 1 + accs.index(max(accs))
    tested = [r["test"] for r in records if "test" in r]
    assert len(tested) == 1 and tested[0]["test"]["last"]["accuracy"] == pytest.approx(final["accuracy"])
    for name in ("summary.md", "predictions.png", "learning_curve.png"):
        assert (run / name).stat().st_size > 0
    assert "validation accuracy: best" in (run / "summary.md").read_text()
    again = evaluate_run(run)
    assert again["accuracy"] == pytest.approx(final["accuracy"])


def test_regression_run_with_condition_split_and_windows(tmp_path, data_dir):
    cfg = load_experiment("gru/bearing", "tiny", [])
    final = run_experiment(cfg, tmp_path / "run", progress=False)
    assert set(final) >= {"rmse", "mae", "score", "score_mean"} and math.isfinite(final["score"])
    assert final["rmse"] == pytest.approx(math.sqrt(final["mse"]))
    best = read_checkpoint(tmp_path / "run" / "checkpoints" / "best.pt")
    val = [h["val"]["rmse"] for h in read_history(tmp_path / "run")]
    assert len(val) == 1 and best["best"] == pytest.approx(val[0])  # one epoch: the best is the last
    assert best["best"] != pytest.approx(final["rmse"])  # validated on the training conditions, tested on others


def test_per_step_classification(tmp_path, data_dir):
    from neurodyn.data.formats.person_activity import read_person_activity

    p = tmp_path / "par.txt"
    rows = []
    for rec in range(3):
        for i in range(40):
            tag = ["010-000-024-033", "020-000-033-111"][i % 2]
            act = ["walking", "lying"][(i // 10) % 2]
            rows.append(f"A0{rec},{tag},{633790226051280329 + 2_110_000 * i},x,{i % 5}.0,{rec}.0,{i % 3}.0,{act}")
    p.write_text("\n".join(rows) + "\n")
    read_person_activity.cache_clear()
    cfg = load_experiment(
        "odernn/activity",
        "tiny",
        ["data.source=par", f"data.source_path={p}", "data.max_len=20", "data.n_train=4", "data.n_test=2"],
    )
    final = run_experiment(cfg, tmp_path / "run", progress=False)
    assert final["n"] == 2 * 20  # every valid step of the 2 test chunks is scored


def test_bench_command_lists_and_rejects(capsys):
    assert main(["bench", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == sorted(listed) and {"scan", "step-speed", "gpu", "kernels"} <= set(listed)
    assert main(["bench", "step-sped"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'step-speed'" in err and err.count("\n") == 1


def test_sequence_config_errors(tmp_path, data_dir, capsys):
    argv = ["train", "nac/event_digits", "--scale", "tiny", "--runs-dir", str(tmp_path), "--no-progress"]
    assert main(argv + ["model.mode=rk4"]) == 2
    assert "mode" in capsys.readouterr().err
    assert main(argv + ["model.out_channels=3"]) == 2
    assert "out_channels" in capsys.readouterr().err
