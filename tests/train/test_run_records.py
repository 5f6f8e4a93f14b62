"""What a trained run folder shows: every image its summary.md links exists and holds a drawing, the plots name
what they draw, and a run on a user's file records that file (path, sha256, shapes) instead of generator options."""

import hashlib
import json
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
import torch
import yaml

import neurodyn.plots as plots
from neurodyn.cli import main
from neurodyn.data.store import StoredDataset

LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")


def linked_images(summary: Path) -> list[Path]:
    return [summary.parent / name for name in LINK.findall(summary.read_text())]


def assert_drawn(image: Path) -> None:
    """The file exists and is a picture of something: not one colour, several colours."""
    assert image.is_file(), f"{image} is linked but missing"
    pixels = matplotlib.image.imread(image)
    flat = pixels.reshape(-1, pixels.shape[-1]) if pixels.ndim == 3 else pixels.reshape(-1, 1)
    assert pixels.std() > 0 and len(np.unique(flat, axis=0)) > 10, f"{image} shows (almost) nothing"


def assert_summary_images(run: Path, expected: set[str]) -> None:
    images = linked_images(run / "summary.md")
    assert {p.name for p in images} == expected
    for image in images:
        assert_drawn(image)


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots save, kept open for inspection: ``{file name: figure}``."""
    kept = {}

    def keep(fig, path, dpi=90, rect=None):
        kept[Path(path).name] = fig
        fig.tight_layout(rect=rect)
        fig.savefig(path, dpi=dpi)
        return Path(path)

    monkeypatch.setattr(plots, "save_figure", keep)
    yield kept
    import matplotlib.pyplot as plt

    for fig in kept.values():
        plt.close(fig)


def train(tmp_path, capsys, preset, *overrides, name):
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
    return tmp_path / "runs" / name, capsys.readouterr().out


def write_darcy_pt(path: Path, n: int, seed: int, size: int = 16) -> Path:
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(n, size, size, generator=g) > 0.5).float() * 9 + 3
    u = torch.cumsum(torch.cumsum(1 / a, 1), 2) / size**2  # smooth, depends on a: something to learn
    torch.save({"x": a, "y": u}, path)
    return path


def convert(src: Path, out: Path, capsys, *options) -> tuple[Path, str]:
    assert main(["convert", str(src), "--out", str(out), "--no-progress", *options]) == 0
    return out, capsys.readouterr().out


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
def test_pde_run_on_user_files_records_them_and_plots_its_only_test_file(tmp_path, data_dir, capsys, figures):
    train_h5, line = convert(write_darcy_pt(tmp_path / "darcy_train_16.pt", 12, 0), tmp_path / "train.h5", capsys)
    assert "12 samples" in line and "(16, 16, 1)" in line
    test_h5, _ = convert(write_darcy_pt(tmp_path / "darcy_test_16.pt", 5, 1), tmp_path / "held.h5", capsys)
    run, out = train(
        tmp_path,
        capsys,
        "fno/darcy",
        f"data.path={train_h5}",
        "data.n_train=10",
        "data.n_test=0",
        f"data.test_path={test_h5}",
        name="pde",
    )
    last = out.strip().splitlines()[-1]
    assert "predictions.png" in last and "learning_curve.png" in last
    assert_summary_images(run, {"predictions.png", "learning_curve.png"})
    # trained on rel_l2, the objective is the validation metric on the training batches: one quantity, one axis
    fig = figures["learning_curve.png"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["relative L2"]
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == [
        "training relative L2 (objective, mean over each epoch's batches)",
        "validation relative L2 (after each epoch)",
    ]
    # the file the run read, and nothing of the preset's generator
    data = yaml.safe_load((run / "config.yaml").read_text())["data"]
    assert not {"generator", "resolution", "solve_resolution"} & set(data)
    record = data["file"]
    assert record["path"] == str(train_h5)
    assert record["sha256"] == hashlib.sha256(train_h5.read_bytes()).hexdigest()
    assert record["shapes"] == {k: list(v) for k, v in StoredDataset(train_h5).shapes.items()}
    assert (
        record["converted_from"][0]["sha256"]
        == hashlib.sha256((tmp_path / "darcy_train_16.pt").read_bytes()).hexdigest()
    )
    summary = (run / "summary.md").read_text()
    assert record["sha256"] in summary and "solve_resolution" not in summary and '"generator"' not in summary
    # the same command again resumes (the recorded file is not a changed setting)
    run, out = train(
        tmp_path,
        capsys,
        "fno/darcy",
        f"data.path={train_h5}",
        "data.n_train=10",
        "data.n_test=0",
        f"data.test_path={test_h5}",
        "train.epochs=2",
        name="pde",
    )
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["epochs"] == 2


def _write_sequences(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    T = 8
    c = np.arange(n) % 2
    x = np.stack(
        [
            np.linspace(0, 1, T)[None] * np.where(c, 1, -1)[:, None] + 0.1 * rng.normal(size=(n, T)),
            rng.normal(size=(n, T)),
        ],
        -1,
    )
    np.savez(path, x=x, y=np.array(["rising" if k else "falling" for k in c]))
    return path


def test_sequence_classification_draws_a_confusion_matrix_per_test_set(tmp_path, data_dir, capsys, figures):
    train_h5, line = convert(_write_sequences(tmp_path / "seq_train.npz", 24, 0), tmp_path / "seq.h5", capsys)
    assert "24 sequences" in line and "2 classes (falling, rising)" in line and "length 8" in line
    held, _ = convert(_write_sequences(tmp_path / "seq_held.npz", 10, 1), tmp_path / "held.h5", capsys)
    run, _ = train(
        tmp_path, capsys, "gru/sequence", f"data.path={train_h5}", "data.n_test=4", f"data.test_path={held}", name="cls"
    )
    assert_summary_images(run, {"predictions.png", "predictions_held.png", "learning_curve.png"})
    for name, n in (("predictions.png", 4), ("predictions_held.png", 10)):
        ax = figures[name].axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["falling", "rising"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["falling", "rising"]
        counts = sum(int(t.get_text()) for t in ax.texts)  # the cells' counts add up to the set's size
        assert counts == n and f"{n} samples" in ax.get_title()
    labels = [ax.get_ylabel() for ax in figures["learning_curve.png"].axes]
    assert labels == ["training objective (cross-entropy)", "validation accuracy"]


def test_sequence_regression_draws_prediction_against_target(tmp_path, data_dir, capsys, figures):
    run, _ = train(tmp_path, capsys, "gru/bearing", name="reg")
    assert_summary_images(run, {"predictions.png", "learning_curve.png"})
    ax = figures["predictions.png"].axes[0]
    assert ax.get_xlabel() == "true target" and ax.get_ylabel() == "predicted target"
    n = sum(len(c.get_offsets()) for c in ax.collections)
    metrics = [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"test"' in line]
    assert metrics and n == json.loads(metrics[-1])["test"]["test"]["last"]["n"]


def test_comparison_plot_names_its_metric_and_draws_the_budget(tmp_path, figures):
    records = [
        {
            "model": m,
            "preset": f"{m}/sequence",
            "metric": "accuracy",
            "budget": "30s",
            "curve_seconds": [5.0, 10.0, 20.0],
            "curve_rel_l2": [0.5, 0.7, 0.8],
        }
        for m in ("gru", "nac")
    ]
    plots.plot_error_vs_time(records, tmp_path / "error_vs_time.png")
    ax = figures["error_vs_time.png"].axes[0]
    assert "accuracy" in ax.get_ylabel() and "error" not in ax.get_ylabel() + ax.get_title()
    assert ax.get_yscale() == "linear"
    budget = [ln for ln in ax.get_lines() if list(ln.get_xdata()) == [30.0, 30.0]]
    assert len(budget) == 1 and budget[0].get_label() == "budget 30 s"
    assert_drawn(tmp_path / "error_vs_time.png")


def test_summary_written_without_plots_links_no_image(tmp_path, data_dir):
    from neurodyn.experiments import load_experiment
    from neurodyn.train.experiment import run_experiment

    run = tmp_path / "run"
    run_experiment(load_experiment("fno/darcy", "tiny", []), run, progress=False)
    assert linked_images(run / "summary.md") == []
    plots.write_run_plots(run)
    assert_summary_images(run, {"predictions.png", "learning_curve.png"})
