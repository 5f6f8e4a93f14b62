"""Bad inputs and faults around run folders: each case -> the one sentence expected, and nothing lost.

Every case runs ``neurodyn.cli.main`` in-process on a tiny FNO Darcy run and checks the exit code, that stderr is
one line holding the expected words, and what must have survived on disk (a user's folder outside ``--runs-dir``,
other runs, a user's file, the previous checkpoint).
"""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from neurodyn.cli import main

TRAIN = ["train", "fno/darcy", "--scale", "tiny", "--no-progress", "train.epochs=1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny run (``runs/done``) and the data it was made from, copied fresh into each case."""
    root = tmp_path_factory.mktemp("trained")
    old = os.environ.get("NEURODYN_DATA")
    os.environ["NEURODYN_DATA"] = str(root / "data")
    try:
        assert main([*TRAIN, "--runs-dir", str(root / "runs"), "--run-name", "done"]) == 0
    finally:
        os.environ.pop("NEURODYN_DATA") if old is None else os.environ.__setitem__("NEURODYN_DATA", old)
    return root


@pytest.fixture
def world(trained, tmp_path, monkeypatch):
    """``tmp/runs/sub/{done, other}`` (two finished runs) and ``tmp/victim/precious.txt`` (a user's folder)."""
    monkeypatch.setenv("NEURODYN_DATA", str(trained / "data"))
    runs = tmp_path / "runs" / "sub"
    runs.mkdir(parents=True)
    for name in ("done", "other"):
        shutil.copytree(trained / "runs" / "done", runs / name)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine")
    return tmp_path


def _intact(world: Path) -> None:
    assert (world / "victim" / "precious.txt").read_text() == "mine"
    for name in ("done", "other"):
        assert (world / "runs" / "sub" / name / "checkpoints" / "last.pt").exists(), name


def _user_file_in_run(world: Path) -> None:
    (world / "runs" / "sub" / "done" / "notes.txt").write_text("mine")


def _nan_weights(world: Path) -> None:
    path = world / "runs" / "sub" / "done" / "checkpoints" / "last.pt"
    ckpt = torch.load(path, weights_only=True)
    key = next(k for k, v in ckpt["model_state"].items() if v.is_floating_point())
    ckpt["model_state"][key] = torch.full_like(ckpt["model_state"][key], float("nan"))
    torch.save(ckpt, path)


CASES = [
    # (id, argv after TRAIN-like words, set-up, words expected in the one line of stderr)
    ("run-name-parent-path-fresh", [*TRAIN, "--run-name", "../../victim", "--fresh"], None,
     "must be a single folder name"),
    ("run-name-dot-fresh", [*TRAIN, "--run-name", ".", "--fresh"], None, "must be a single folder name"),
    ("run-name-dotdot", [*TRAIN, "--run-name", ".."], None, "must be a single folder name"),
    ("run-name-absolute", [*TRAIN, "--run-name", "{world}/victim"], None, "must be a single folder name"),
    ("run-name-nested", [*TRAIN, "--run-name", "a/b"], None, "must be a single folder name"),
    ("fresh-not-a-run-folder", [*TRAIN, "--run-name", "mine", "--fresh"], "mine", "it holds no neurodyn config.yaml"),
    ("fresh-run-with-user-file", [*TRAIN, "--run-name", "done", "--fresh"], _user_file_in_run,
     "it also holds notes.txt, which a run does not write"),
    ("typo-on-existing-run", [*TRAIN, "--run-name", "done", "model.widht=8"], None, "did you mean 'width'"),
    ("typo-on-existing-run-fresh", [*TRAIN, "--run-name", "done", "--fresh", "model.widht=8"], None,
     "did you mean 'width'"),
    ("diverged-lr-inf", [*TRAIN, "--run-name", "new", "train.lr=.inf"], None, "--run-name NAME"),
    ("evaluate-nan-weights", ["evaluate", "{world}/runs/sub/done"], _nan_weights, "holds non-finite weights"),
    ("budget-negative", ["compare", "fno/darcy", "--scale", "tiny", "--budget", "-5s"], None,
     "a budget is a positive time"),
    ("yaml-python-tag-override", [*TRAIN, "--run-name", "new", "model.width=!!python/name:os.system"], None,
     "the value is not plain YAML"),
    ("yaml-python-tag-generate", ["generate", "darcy", "resolution=!!python/object/apply:os.system [ls]"], None,
     "the value is not plain YAML"),
]


@pytest.mark.parametrize("argv,setup,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_run_input(world, capsys, argv, setup, expected):
    if isinstance(setup, str):
        (world / "runs" / "sub" / setup).mkdir()
        (world / "runs" / "sub" / setup / "data.csv").write_text("mine")
    elif setup is not None:
        setup(world)
    argv = [a.replace("{world}", str(world)) for a in argv]
    if argv[0] == "train":
        argv += ["--runs-dir", str(world / "runs" / "sub")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err, err
    assert err.count("\n") == 0 and "Traceback" not in err, err
    _intact(world)
    assert not (world / "runs" / "sub" / "new").exists()  # a run that could not start leaves nothing
    if isinstance(setup, str):
        assert (world / "runs" / "sub" / setup / "data.csv").read_text() == "mine"
    if setup is _user_file_in_run:
        assert (world / "runs" / "sub" / "done" / "notes.txt").read_text() == "mine"


_HOLDER = textwrap.dedent("""
    import sys, time
    from neurodyn.train.run_folder import training_lock
    with training_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(120)
""")


@pytest.mark.slow
def test_second_training_is_refused_naming_the_holder_and_a_killed_holder_does_not_block(world, capsys):
    from neurodyn.train.run_folder import lock_file

    runs = world / "runs" / "sub"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(runs / "done")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for extra in ([], ["--fresh"]):
            assert main([*TRAIN, "--runs-dir", str(runs), "--run-name", "done", *extra]) == 2
            err = capsys.readouterr().err.strip()
            assert f"is in use by process {holder.pid}" in err and "--run-name NAME" in err, err
        _intact(world)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert lock_file(runs / "done").exists()  # left behind by the killed holder, held by nobody
    t0 = time.time()
    assert main([*TRAIN, "--runs-dir", str(runs), "--run-name", "done", "train.lr=0.5"]) == 2  # changed config
    assert "another config" in capsys.readouterr().err
    assert main([*TRAIN, "--runs-dir", str(runs), "--run-name", "done"]) == 0  # resumes the finished run
    assert time.time() - t0 < 60
    assert not lock_file(runs / "done").exists()  # a training that ends releases and removes its lock


@pytest.mark.slow
def test_fresh_restarts_a_run_folder_and_keeps_its_siblings(world, capsys):
    runs = world / "runs" / "sub"
    before = (runs / "done" / "checkpoints" / "last.pt").stat().st_mtime_ns
    assert main([*TRAIN, "--runs-dir", str(runs), "--run-name", "done", "--fresh"]) == 0
    assert (runs / "done" / "checkpoints" / "last.pt").stat().st_mtime_ns != before
    _intact(world)


def test_a_divergence_after_the_first_epoch_keeps_the_last_finite_checkpoint(world, monkeypatch, capsys):
    from neurodyn.train import trainer as trainer_module

    runs = world / "runs" / "sub"
    real_step = trainer_module.Trainer._step

    def poisoned(self, ids):  # the weights turn NaN in the second epoch
        out = real_step(self, ids)
        if self.epoch == 1:
            with torch.no_grad():
                next(self.model.parameters()).fill_(float("nan"))
        return out

    monkeypatch.setattr(trainer_module.Trainer, "_step", poisoned)
    assert main([*TRAIN, "--runs-dir", str(runs), "--run-name", "div", "train.epochs=3"]) == 2
    err = capsys.readouterr().err
    assert "still holds the last finite weights" in err and "--fresh" in err, err
    ckpt = torch.load(runs / "div" / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["position"]["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in ckpt["model_state"].values() if v.is_floating_point())


def test_disk_full_while_writing_a_checkpoint_is_one_sentence_and_keeps_the_previous_one(tmp_path, monkeypatch):
    from neurodyn import checkpoint_io

    target = tmp_path / "last.pt"
    checkpoint_io.atomic_torch_save({"w": torch.ones(3)}, target)

    def full(obj, f):
        f.write(b"x" * 10)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr(checkpoint_io.torch, "save", full)
    with pytest.raises(checkpoint_io.DiskFullError, match=r"disk holding .* is full .*previous last.pt is kept"):
        checkpoint_io.atomic_torch_save({"w": torch.zeros(3)}, target)
    monkeypatch.undo()
    assert torch.equal(torch.load(target, weights_only=True)["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary left
