"""Progress on every long step (neurodyn.progress): one idiom (a bar on a terminal, a line per stage in a log or a
pipe, nothing with False), for generation, conversion, the fitted baselines (with an estimate before DTW 1-NN and
MiniRocket passes) and evaluation. Output is captured; nothing here asserts a time."""

import io
import re
import sys

import numpy as np
import pytest
import torch

from neurodyn import progress as prog
from neurodyn.cli import main
from neurodyn.errors import ConfigError
from neurodyn.progress import Stage, progress_style


def test_the_one_idiom(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert [progress_style(p) for p in (None, "lines", True, False)] == ["lines", "lines", "bar", "off"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress_style(None) == "bar"
    with pytest.raises(ConfigError, match=r"progress must be None .* got 'bars'"):
        progress_style("bars")


def test_stage_lines_say_what_how_many_the_estimate_and_the_time(monkeypatch):
    out = io.StringIO()
    with Stage("scoring", 3, "series", "lines", stream=out) as stage:  # short: its one line
        for _ in stage.track(range(3)):
            pass
    assert out.getvalue() == "scoring: 3 series ...\n"
    monkeypatch.setattr(prog, "LONG_SECONDS", -1.0)  # every estimate counts as long
    monkeypatch.setattr(prog, "CLOSING_LINE_SECONDS", 0.0)  # every stage closes with its time
    out = io.StringIO()
    with Stage("DTW 1-NN", 4, "sample", "lines", estimate=120.0, detail="8 pairs timed", stream=out) as stage:
        stage.update(4)
    first, last = out.getvalue().splitlines()
    assert first == "DTW 1-NN: 4 samples, about 2.0 min (8 pairs timed) ..."
    assert re.fullmatch(r"DTW 1-NN: done, 4 samples in \d+\.\d s", last)
    out = io.StringIO()
    with Stage("generating", 10, "sample", "lines", stream=out) as stage:  # no estimate: the first units' pace
        stage.update(2)
        stage.update(8)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and re.fullmatch(r"generating: about .+ more \(2 samples took .+\)", lines[1])


def test_stage_bar_and_nothing(capsys):
    with Stage("converting", 5, "sample", True) as stage:
        stage.update(5)
    err = capsys.readouterr().err
    assert "converting:" in err and "/5 [" in err and "\r" in err and " ..." not in err  # a tqdm bar, no lines
    with Stage("quiet", 5, "sample", False) as stage:
        stage.update(5)
    assert capsys.readouterr() == ("", "")


def test_generate_and_convert_say_each_stage_in_a_pipe_and_nothing_with_no_progress(tmp_path, data_dir, capsys):
    assert main(["generate", "darcy", "--n", "6", "resolution=9"]) == 0
    out, err = capsys.readouterr()
    path = out.strip()
    assert path.endswith(".h5") and "\n" not in path  # stdout: the result only
    assert err == f"generating darcy into {path.rsplit('/', 1)[1]}: 6 samples ...\n"
    assert main(["generate", "darcy", "--n", "7", "resolution=9", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    samples = [{"vertices": torch.rand(5, 3), "press": torch.rand(1, 5)} for _ in range(4)]
    torch.save(samples, tmp_path / "mini_car.pt")
    assert main(["convert", str(tmp_path / "mini_car.pt"), "--out", str(tmp_path / "car.h5")]) == 0
    out, err = capsys.readouterr()
    assert err == "converting mini_car.pt (point-cloud) into car.h5: 4 samples ...\n"
    assert out.startswith(f"{tmp_path / 'car.h5'}: 4 point clouds")


def _waves(path, n, seed, length=24):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.sin(2 * np.pi * 3 * np.linspace(0, 1, length) + rng.uniform(0, 6.3, (n, 1)))
    np.savez(path, x=np.where(y[:, None] == 0, s, np.sign(s))[..., None], y=np.array(["sine", "square"])[y])
    assert main(["convert", str(path), "--out", str(path.with_suffix(".h5")), "--no-progress"]) == 0
    return path.with_suffix(".h5")


@pytest.mark.slow
def test_fitted_baselines_estimate_their_passes_before_they_start(tmp_path, data_dir, capsys, monkeypatch):
    """DTW 1-NN: one series against the training series, timed, times the pairs to come (N x N_train, counted here);
    MiniRocket: its training features as a stage; the test evaluation and `neurodyn evaluate` as stages."""
    train, test = _waves(tmp_path / "w_train.npz", 30, 0), _waves(tmp_path / "w_test.npz", 12, 1)
    monkeypatch.setattr(prog, "LONG_SECONDS", -1.0)  # show every estimate, however short here
    capsys.readouterr()
    runs = str(tmp_path / "runs")
    assert (
        main(
            [
                "train",
                "knn/sequence",
                "--scale",
                "tiny",
                "--runs-dir",
                runs,
                "--run-name",
                "dtw",
                "--no-progress",
                f"data.path={train}",
                "data.n_test=0",
                "data.n_val=6",
                f"data.test_path={test}",
                "model.distance=dtw",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    n_train = 24  # 30 - 6 validation series
    for what, n in (
        ("knn: training loss of the fitted model", n_train),
        ("knn: validation split", 6),
        ("testing the final model on 'w_test'", 12),
    ):
        line = next((ln for ln in err.splitlines() if ln.startswith(what + ":")), None)
        assert line is not None, (what, err)
        assert re.fullmatch(
            rf"{re.escape(what)}: {n} samples, about .+ \({n_train} dtw pairs timed, times "
            rf"{n * n_train:,} pairs\) \.\.\.",
            line,
        ), line
    assert (
        main(
            [
                "train",
                "minirocket/sequence",
                "--scale",
                "tiny",
                "--runs-dir",
                runs,
                "--run-name",
                "mr",
                "--no-progress",
                f"data.path={train}",
                "data.n_test=0",
                "data.n_val=6",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert re.search(
        rf"^minirocket: features of the {n_train} training series: {n_train} series, about .+ "
        r"\(8 series timed\) \.\.\.$",
        err,
        flags=re.M,
    ), err
    assert main(["evaluate", f"{runs}/dtw", "--data", str(test), "--which", "last"]) == 0
    assert "evaluating knn on 'w_test': 12 samples, about" in capsys.readouterr().err
    assert main(["evaluate", f"{runs}/dtw", "--data", str(test), "--which", "last", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    assert (
        main(
            [
                "train",
                "knn/sequence",
                "--scale",
                "tiny",
                "--runs-dir",
                runs,
                "--run-name",
                "quiet",
                "--quiet",
                f"data.path={train}",
                "data.n_test=0",
                "data.n_val=6",
                "model.distance=dtw",
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == ""  # --quiet: no stage either
