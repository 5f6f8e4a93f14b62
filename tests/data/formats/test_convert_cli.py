import numpy as np
import pytest

from neurodyn.cli import main
from neurodyn.data.store import StoredDataset


def test_convert_file_with_out_and_reader_options(make, tmp_path, capsys):
    src, a, u, t = make.fno_ns()
    out = tmp_path / "ns.h5"
    assert main(["convert", str(src), "--out", str(out), "time_stride=2", "--no-progress"]) == 0
    # one line: the file written, what it holds
    assert capsys.readouterr().out.strip() == f"{out}: 2 samples (fno-mat), per sample u (3, 8, 8, 1)"
    s = StoredDataset(out)
    assert s.shapes["fields/u"] == (2, 3, 8, 8, 1) and s.config["reader_options"]["time_stride"] == 2
    np.testing.assert_array_equal(s.read("fields/u")[1, 1, ..., 0], u[1, ..., 1].astype(np.float32))
    first = tmp_path / "first.h5"
    assert main(["convert", str(src), "--out", str(first), "--n", "1", "--no-progress"]) == 0
    assert StoredDataset(first).n_samples == 1  # --n keeps the first samples (reader option max_samples)


def test_convert_folder_default_path_under_neurodyn_data(make, data_dir, capsys):
    make.geofno_mesh("airfoil", folder="naca")
    make.geofno_mesh("pipe", folder="naca", H=11, W=5, C=2)
    assert main(["convert", str(make.root / "naca"), "kind=pipe", "stride=[2, 1]", "--no-progress"]) == 0
    path = data_dir / "imported" / "naca_pipe_stride2-1.h5"
    assert capsys.readouterr().out.strip() == f"{path}: 3 samples (geo-fno), per sample pos (6, 5, 2), u (6, 5, 1)"
    assert StoredDataset(path).shapes["fields/u"] == (3, 6, 5, 1)


def test_cli_errors_are_one_line(make, tmp_path, capsys):
    assert main(["convert", str(tmp_path / "missing.mat")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "missing.mat does not exist" in err and len(err.strip().splitlines()) == 1
    src, *_ = make.fno_darcy()
    assert main(["convert", str(src), "strides=2", "--out", str(tmp_path / "x.h5")]) == 2
    assert "has no option(s) strides" in capsys.readouterr().err


def test_generate_takes_a_preset_or_generator_and_convert_one_file(make, capsys):
    """Each command has one job, told apart by argparse: no run-time refusal of a mode."""
    with pytest.raises(SystemExit):
        main(["generate"])
    assert "required: target" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["convert"])
    assert "required: file" in capsys.readouterr().err
    src, *_ = make.fno_darcy()
    with pytest.raises(SystemExit):  # a file to read is convert's: generate has no --from
        main(["generate", "darcy", "--from", str(src)])
    assert "unrecognized arguments: --from" in capsys.readouterr().err
