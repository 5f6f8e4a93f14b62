"""The command line: happy path at tiny scale and one clear error per kind of bad input."""

import pytest

from neurodyn.cli import main


@pytest.mark.slow
def test_generate_train_evaluate_info(tmp_path, data_dir, capsys):
    assert main(["generate", "darcy", "--n", "6", "resolution=9", "--no-progress"]) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1]
    assert path.endswith(".h5") and str(data_dir) in path
    runs = tmp_path / "runs"
    argv = ["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "--no-progress", "train.epochs=1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rel_l2" in out and (runs / "fno-darcy-tiny" / "predictions.png").exists()
    assert main(["evaluate", str(runs / "fno-darcy-tiny")]) == 0
    assert "rel_l2" in capsys.readouterr().out
    assert main(argv + ["model.width=4"]) == 2  # same run name, other config
    assert "another config" in capsys.readouterr().err
    assert main(["info"]) == 0
    info = capsys.readouterr().out
    assert "fno" in info and "fno/darcy" in info and "darcy" in info and path in info


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["train", "fno/darcyy"], "Did you mean 'fno/darcy'"),
        (["train", "fno/darcy", "--scale", "huge"], "unknown scale"),
        (["train", "fno/darcy", "--scale", "tiny", "model.name=fnoo"], "Did you mean 'fno'"),
        (["train", "fno/darcy", "--scale", "tiny", "model.widht=3"], "did you mean 'width'"),
        (["train", "fno/darcy", "--scale", "tiny", "model.modes=[0,3]"], "FNO modes must be positive"),
        (["train", "fno/darcy", "--scale", "tiny", "data.generator=darsy"], "Did you mean 'darcy'"),
        (["train", "fno/darcy", "--scale", "tiny", "data.n_train=0"], "n_train >= 1"),
        (["train", "fno/darcy", "--scale", "tiny", "train.epochs=abc"], "train.epochs='abc' is not an integer"),
        (["train", "fno/darcy", "--scale", "tiny", "train.lr=fast"], "train.lr='fast' is not a number"),
        (["train", "fno/darcy", "--scale", "tiny", "model.width=wide"], "model.width='wide' is not an integer"),
        (["generate", "darcy", "--n", "0"], "--n is the number of samples to make and must be >= 1"),
        (["generate", "darcy", "resolution=-4"], "resolution"),
        (["generate", "darcyy"], "Did you mean"),
        (["evaluate", "/nonexistent/run"], "does not exist"),
    ],
)
def test_bad_input_gets_one_clear_sentence(tmp_path, data_dir, capsys, argv, needle):
    if argv[0] == "train":
        argv = argv + ["--runs-dir", str(tmp_path), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.count("\n") == 0 and "Traceback" not in err
    if argv[0] == "train":  # a run that could not start leaves no folder behind
        assert not any(tmp_path.glob("fno-darcy-*")), list(tmp_path.iterdir())


@pytest.mark.slow
def test_truncated_checkpoint(tmp_path, data_dir, capsys):
    runs = tmp_path / "runs"
    assert (
        main(["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "--no-progress", "train.epochs=1"]) == 0
    )
    ckpt = runs / "fno-darcy-tiny" / "checkpoints" / "last.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:500])
    assert main(["evaluate", str(ckpt)]) == 2
    assert "truncated" in capsys.readouterr().err


def test_unwritable_output_folder(tmp_path, data_dir, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["generate", "darcy", "--n", "2", "resolution=5", "--out", str(blocker / "x.h5")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(blocker), "--no-progress"]) == 2
    assert "run folder" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_is_announced_and_stale_temporaries_are_removed(tmp_path, data_dir, capsys):
    runs = tmp_path / "runs"
    argv = ["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "train.epochs=2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # not a terminal (pytest captures the output): one line per epoch instead of a progress bar
    assert "epoch 1/2  train loss" in out and "epoch 2/2  train loss" in out and "val rel_l2" in out
    ckpts = runs / "fno-darcy-tiny" / "checkpoints"
    stale = ckpts / ".last.pt.12345.tmp"  # what a run killed while writing leaves behind
    stale.write_bytes(b"partial")
    assert main(argv) == 0
    assert "from epoch 2 of 2" in capsys.readouterr().out
    assert not stale.exists()


@pytest.mark.slow
def test_resume_message_names_the_run_and_epoch(tmp_path, data_dir, capsys):
    runs = tmp_path / "runs"
    assert main(["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "train.epochs=1"]) == 0
    capsys.readouterr()
    assert main(["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "train.epochs=1"]) == 0
    out = capsys.readouterr().out
    assert f"resuming {runs / 'fno-darcy-tiny'} from epoch 1 of 1" in out


@pytest.mark.slow
def test_truncated_last_checkpoint_on_resume_says_what_to_do(tmp_path, data_dir, capsys):
    runs = tmp_path / "runs"
    argv = ["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "--no-progress", "train.epochs=1"]
    assert main(argv) == 0
    ckpt = runs / "fno-darcy-tiny" / "checkpoints" / "last.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:500])
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert str(ckpt) in err and "--fresh" in err and "--which best" in err and err.count("\n") == 0


def test_build_kernels_reports_the_cache_or_the_fallback(capsys, monkeypatch):
    from neurodyn.ops import cpu_kernel

    if cpu_kernel.available():
        assert main(["build-kernels"]) == 0
        assert str(cpu_kernel.build_dir()) in capsys.readouterr().out
    monkeypatch.setattr(cpu_kernel, "get", lambda: None)  # as without a compiler
    monkeypatch.delenv("NEURODYN_NO_CPP_EXT", raising=False)
    assert main(["build-kernels"]) == 1
    assert "pure-PyTorch path" in capsys.readouterr().err
    assert main(["build-kernels", "--allow-missing"]) == 0


def test_metric_tables_print_no_missing_band_and_one_row_per_quantity():
    """A 16 x 16 set has no frmse_high (n/a in its column, never 0); nrmse equal to rel_l2 (one channel) is one
    quantity, shown once."""
    import torch

    from neurodyn.cli import format_metric_table
    from neurodyn.train.metrics import evaluate_fields

    g = torch.Generator().manual_seed(0)
    small = evaluate_fields(torch.rand(2, 16, 16, 1, generator=g), torch.rand(2, 16, 16, 1, generator=g))
    big = evaluate_fields(torch.rand(2, 32, 32, 1, generator=g), torch.rand(2, 32, 32, 1, generator=g))
    one = format_metric_table({"test16": small})
    assert "frmse_high" not in one and "nrmse" not in one and "frmse_mid" in one
    rows = {
        line.split()[0]: line.split()[1:]
        for line in format_metric_table({"test16": small, "test32": big}).splitlines()[1:]
    }
    assert rows["frmse_high"][0] == "n/a" and float(rows["frmse_high"][1]) == pytest.approx(big["frmse_high"], rel=1e-4)
    assert "nrmse" not in rows and float(rows["rel_l2"][0]) == pytest.approx(small["rel_l2"], rel=1e-4)
