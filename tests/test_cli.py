"""The command line: happy path at tiny scale and one clear error per kind of bad input."""
import pytest

from neurodyn.cli import main


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


@pytest.mark.parametrize("argv,needle", [
    (["train", "fno/darcyy"], "Did you mean 'fno/darcy'"),
    (["train", "fno/darcy", "--scale", "huge"], "unknown scale"),
    (["train", "fno/darcy", "--scale", "tiny", "model.name=fnoo"], "Did you mean 'fno'"),
    (["train", "fno/darcy", "--scale", "tiny", "model.widht=3"], "did you mean 'width'"),
    (["train", "fno/darcy", "--scale", "tiny", "model.modes=[40,40]"], "modes"),
    (["train", "fno/darcy", "--scale", "tiny", "data.generator=darsy"], "Did you mean 'darcy'"),
    (["train", "fno/darcy", "--scale", "tiny", "data.n_train=0"], "n_train >= 1"),
    (["generate", "darcy", "resolution=-4"], "resolution"),
    (["generate", "darcyy"], "Did you mean"),
    (["evaluate", "/nonexistent/run"], "does not exist"),
])
def test_bad_input_gets_one_clear_sentence(tmp_path, data_dir, capsys, argv, needle):
    if argv[0] == "train":
        argv = argv + ["--runs-dir", str(tmp_path), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.count("\n") == 0 and "Traceback" not in err


def test_truncated_checkpoint(tmp_path, data_dir, capsys):
    runs = tmp_path / "runs"
    assert main(["train", "fno/darcy", "--scale", "tiny", "--runs-dir", str(runs), "--no-progress",
                 "train.epochs=1"]) == 0
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
