"""Bad inputs and faults around run folders: each case -> the one sentence expected, and nothing lost.

Every case runs ``neurodyn.cli.main`` in-process on a tiny FNO Darcy run and checks the exit code, that stderr is
one line holding the expected words, and what must have survived on disk (a user's folder outside ``--runs-dir``,
other runs and their files byte for byte, a user's file, the input store ``in.h5``, the shared data folder).
``LIBRARY``: the same for library calls (``fit``, ``load_run``), which raise one NeurodynError of one line.
The tests after the tables check behaviours that are not refusals (a long legal name trains, a raised epoch count
trains on, ``compare`` does not reuse a stale run, an interrupted predict leaves nothing).
"""

import errno
import json
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
# --no-progress: stderr holds the error alone (in a pipe, a failure after the prediction pass follows its stage line)
PREDICT = ["predict", "{world}/runs/sub/done", "--data", "{world}/in.h5", "--no-progress", "--out"]


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
    shutil.copy(_store(trained), tmp_path / "in.h5")
    return tmp_path


def _intact(world: Path) -> None:
    assert (world / "victim" / "precious.txt").read_text() == "mine"
    for name in ("done", "other"):
        assert (world / "runs" / "sub" / name / "checkpoints" / "last.pt").exists(), name


def _unchanged(world: Path, trained: Path) -> None:
    """Every file of both runs and the input store hold their bytes; no temporary is left anywhere."""
    for name in ("done", "other"):
        for f in (trained / "runs" / "done").rglob("*"):
            if f.is_file():
                copy = world / "runs" / "sub" / name / f.relative_to(trained / "runs" / "done")
                assert copy.read_bytes() == f.read_bytes(), copy
    assert (world / "in.h5").read_bytes() == _store(trained).read_bytes()
    assert not [p for p in world.rglob("*.tmp")]


def _store(trained: Path) -> Path:
    return next((trained / "data").rglob("*.h5"))


def _lock_links_to_victim(world: Path, mp) -> None:
    (world / "runs" / "sub" / ".new.lock").symlink_to(world / "victim" / "precious.txt")


def _lock_hard_links_to_victim(world: Path, mp) -> None:
    os.link(world / "victim" / "precious.txt", world / "runs" / "sub" / ".new.lock")


def _folder_at_lock_path(world: Path, mp) -> None:
    (world / "runs" / "sub" / ".new.lock").mkdir()


def _read_only_runs_dir(world: Path, mp) -> None:
    """The runs folder refuses new files (a read-only or immutable folder; the tests may run as root)."""
    real = os.open

    def refuse(path, flags, *args, **kwargs):
        if str(path).endswith(".lock") and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, flags, *args, **kwargs)

    mp.setattr(os, "open", refuse)


def _malicious_checkpoint(world: Path, mp) -> None:
    """``evil.pt``: a pickle that deletes the user's file when it is loaded without weights_only."""

    class Evil:
        def __reduce__(self):
            return os.remove, (str(world / "victim" / "precious.txt"),)

    torch.save({"model_state": Evil()}, world / "evil.pt")


def _read_only_predictions_folder(world: Path, mp) -> None:
    """Creating the predictions' file fails as h5py says it in a read-only folder."""
    import h5py

    real = h5py.File.__init__

    def refuse(self, name, mode="r", *args, **kwargs):
        if mode == "r":
            return real(self, name, mode, *args, **kwargs)
        raise OSError(
            errno.EROFS,
            f"Unable to synchronously create file (unable to open file: name = '{name}', "
            "errno = 30, error message = 'Read-only file system', flags = 13, o_flags = 242)",
        )

    mp.setattr(h5py.File, "__init__", refuse)


def _users_config_in_folder(world: Path, mp) -> None:
    (world / "runs" / "sub" / "mine").mkdir()
    (world / "runs" / "sub" / "mine" / "config.yaml").write_text("learning_rate: 0.1\n")


def _disk_full_writing_predictions(world: Path, mp) -> None:
    import h5py

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    mp.setattr(h5py.Group, "create_dataset", full)


def _user_file_in_run(world: Path, mp=None) -> None:
    (world / "runs" / "sub" / "done" / "notes.txt").write_text("mine")


def _nan_weights(world: Path, mp=None) -> None:
    path = world / "runs" / "sub" / "done" / "checkpoints" / "last.pt"
    ckpt = torch.load(path, weights_only=True)
    key = next(k for k, v in ckpt["model_state"].items() if v.is_floating_point())
    ckpt["model_state"][key] = torch.full_like(ckpt["model_state"][key], float("nan"))
    torch.save(ckpt, path)


def _symlink_to_victim(world: Path, mp=None) -> None:
    """``runs/sub/link`` -> the user's folder outside ``--runs-dir``."""
    (world / "runs" / "sub" / "link").symlink_to(world / "victim")


def _undeletable_best(world: Path, mp) -> None:
    """``done/checkpoints/best.pt`` refuses to go, as an immutable file (chattr +i) does: unlink and rename fail."""

    def refuse(real):
        def call(src, *args, **kwargs):
            if str(src).endswith("best.pt"):
                raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(src))
            return real(src, *args, **kwargs)

        return call

    for name in ("unlink", "remove", "rename", "replace"):
        mp.setattr(os, name, refuse(getattr(os, name)))


def _file_size_limit_writing_predictions(world: Path, mp) -> None:
    """Writing the predictions passes this process's file-size limit (``ulimit -f``): EFBIG."""
    import h5py

    def too_big(self, *args, **kwargs):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    mp.setattr(h5py.Group, "create_dataset", too_big)


def _store_with_a_dangling_link(world: Path, mp=None) -> None:
    """``linked.h5``: the input store whose first field is an external link to a file that does not exist."""
    import h5py

    shutil.copy(world / "in.h5", world / "linked.h5")
    with h5py.File(world / "linked.h5", "a") as f:
        name = sorted(f["fields"])[0]
        del f[f"fields/{name}"]
        f[f"fields/{name}"] = h5py.ExternalLink("missing.h5", "/x")


CASES = [
    # (id, argv after TRAIN-like words, set-up, words expected in the one line of stderr)
    (
        "run-name-parent-path-fresh",
        [*TRAIN, "--run-name", "../../victim", "--fresh"],
        None,
        "must be a single folder name",
    ),
    ("run-name-dot-fresh", [*TRAIN, "--run-name", ".", "--fresh"], None, "must be a single folder name"),
    ("run-name-dotdot", [*TRAIN, "--run-name", ".."], None, "must be a single folder name"),
    ("run-name-absolute", [*TRAIN, "--run-name", "{world}/victim"], None, "must be a single folder name"),
    ("run-name-nested", [*TRAIN, "--run-name", "a/b"], None, "must be a single folder name"),
    (
        "fresh-not-a-run-folder",
        [*TRAIN, "--run-name", "mine", "--fresh"],
        "mine",
        "it holds no run marker (.neurodyn-run)",
    ),
    # a folder is a run folder only if it holds the marker the library wrote: no other folder is trained into
    (
        "train-into-a-users-folder",
        [*TRAIN, "--run-name", "mine"],
        "mine",
        "it holds data.csv but no run marker (.neurodyn-run)",
    ),
    (
        "train-at-a-symlink-leading-outside",
        [*TRAIN, "--run-name", "link"],
        _symlink_to_victim,
        "it is a symbolic link, which a run folder never is",
    ),
    (
        "run-name-over-255-bytes",
        [*TRAIN, "--run-name", "r" * 300],
        None,
        "is 300 bytes long; a folder name has at most 255 bytes",
    ),
    # every check before --fresh removes the run: memory, the data file; and a run file that cannot go
    (
        "fresh-model-too-large",
        [*TRAIN, "--run-name", "done", "--fresh", "model.width=30000"],
        None,
        "does not fit in memory",
    ),
    (
        "fresh-data-path-missing",
        [*TRAIN, "--run-name", "done", "--fresh", "data.path={world}/missing.h5"],
        None,
        "missing.h5 does not exist",
    ),
    (
        "fresh-undeletable-checkpoint",
        [*TRAIN, "--run-name", "done", "--fresh"],
        _undeletable_best,
        "--fresh cannot remove",
    ),
    (
        "fresh-run-with-user-file",
        [*TRAIN, "--run-name", "done", "--fresh"],
        _user_file_in_run,
        "it also holds notes.txt, which a run does not write",
    ),
    ("typo-on-existing-run", [*TRAIN, "--run-name", "done", "model.widht=8"], None, "did you mean 'width'"),
    (
        "typo-on-existing-run-fresh",
        [*TRAIN, "--run-name", "done", "--fresh", "model.widht=8"],
        None,
        "did you mean 'width'",
    ),
    ("diverged-lr-inf", [*TRAIN, "--run-name", "new", "train.lr=.inf"], None, "--run-name NAME"),
    ("evaluate-nan-weights", ["evaluate", "{world}/runs/sub/done"], _nan_weights, "holds non-finite weights"),
    (
        "budget-negative",
        ["compare", "fno/darcy", "--scale", "tiny", "--budget", "-5s"],
        None,
        "a budget is a positive time",
    ),
    (
        "yaml-python-tag-override",
        [*TRAIN, "--run-name", "new", "model.width=!!python/name:os.system"],
        None,
        "the value is not plain YAML",
    ),
    (
        "yaml-python-tag-generate",
        ["generate", "darcy", "resolution=!!python/object/apply:os.system [ls]"],
        None,
        "the value is not plain YAML",
    ),
    # outputs never replace an input, a run's files or an existing file
    (
        "predict-out-is-its-input",
        [*PREDICT, "{world}/in.h5"],
        None,
        "is the input --data file; predictions never replace their input",
    ),
    (
        "predict-out-a-checkpoint",
        [*PREDICT, "{world}/runs/sub/done/checkpoints/last.pt"],
        None,
        "is the checkpoint the predictions come from",
    ),
    (
        "predict-out-inside-checkpoints",
        [*PREDICT, "{world}/runs/sub/done/checkpoints/pred.h5"],
        None,
        "lies in the run folder",
    ),
    (
        "predict-out-existing-file",
        [*PREDICT, "{world}/victim/precious.txt"],
        None,
        "already exists; choose another --out, or pass --overwrite to replace it",
    ),
    ("predict-out-a-folder", [*PREDICT, "{world}/victim"], None, "is a folder; give a file name inside it"),
    ("predict-out-empty", [*PREDICT, ""], None, "--out is empty"),
    (
        "predict-out-below-a-file",
        [*PREDICT, "{world}/victim/precious.txt/pred.h5"],
        None,
        "precious.txt is a file, not a folder; choose another --out",
    ),
    (
        "predict-disk-full",
        [*PREDICT, "{world}/victim/pred.h5"],
        _disk_full_writing_predictions,
        "is full (writing the predictions to pred.h5); nothing was written",
    ),
    (
        "predict-overwrite-another-runs-checkpoint",
        [*PREDICT, "{world}/runs/sub/other/checkpoints/best.pt", "--overwrite"],
        None,
        "lies in the run folder",
    ),
    ("predict-out-into-another-run", [*PREDICT, "{world}/runs/sub/other/pred.h5"], None, "lies in the run folder"),
    (
        "predict-file-size-limit",
        [*PREDICT, "{world}/victim/pred.h5"],
        _file_size_limit_writing_predictions,
        "grew past this process's file-size limit (ulimit -f)",
    ),
    (
        "evaluate-on-a-store-with-a-dangling-link",
        ["evaluate", "{world}/runs/sub/done", "--data", "{world}/linked.h5"],
        _store_with_a_dangling_link,
        "is an external link to missing.h5:/x; a store file holds its arrays itself",
    ),
    (
        "evaluate-which-with-a-checkpoint-file",
        ["evaluate", "{world}/runs/sub/done/checkpoints/last.pt", "--which", "best"],
        None,
        "is a checkpoint file itself; drop --which",
    ),
    (
        "predict-out-read-only",
        [*PREDICT, "{world}/victim/pred.h5"],
        _read_only_predictions_folder,
        "pred.h5 (Read-only file system); nothing was written: choose another --out",
    ),
    (
        "train-over-a-users-config",
        [*TRAIN, "--run-name", "mine"],
        _users_config_in_folder,
        "it holds config.yaml but no run marker (.neurodyn-run), so it is not a run folder neurodyn made",
    ),
    # lock files: never followed, never truncated, and one sentence when they cannot be made
    (
        "lock-is-a-symlink",
        [*TRAIN, "--run-name", "new"],
        _lock_links_to_victim,
        "is a symbolic link, which a lock never follows",
    ),
    ("lock-is-a-hard-link", [*TRAIN, "--run-name", "new"], _lock_hard_links_to_victim, "is a hard link"),
    ("lock-path-is-a-folder", [*TRAIN, "--run-name", "new"], _folder_at_lock_path, ".new.lock of run folder"),
    ("runs-dir-read-only", [*TRAIN, "--run-name", "new"], _read_only_runs_dir, "(Read-only file system); make"),
    # every value is checked before --fresh removes anything or data is generated
    (
        "fresh-negative-width",
        [*TRAIN, "--run-name", "done", "--fresh", "model.width=-3"],
        None,
        "width must be >= 1; got -3",
    ),
    (
        "fresh-unknown-variant",
        [
            "train",
            "transolver/darcy",
            "--scale",
            "tiny",
            "--no-progress",
            "--run-name",
            "done",
            "--fresh",
            "model.variant=bogus",
        ],
        None,
        "got 'bogus'",
    ),
    (
        "negative-n-train",
        [*TRAIN, "--run-name", "new", "data.n_train=-5"],
        None,
        "data.n_train must be a whole number >= 0",
    ),
    # a GPU that is not there is said as such (never "truncated checkpoint" and --fresh)
    (
        "train-device-cuda-without-gpu",
        [*TRAIN, "--run-name", "done", "--device", "cuda"],
        None,
        "this machine has no usable CUDA GPU",
    ),
    (
        "evaluate-device-cuda-without-gpu",
        ["evaluate", "{world}/runs/sub/done", "--device", "cuda"],
        None,
        "this machine has no usable CUDA GPU",
    ),
    (
        "compare-seed-twice",
        ["compare", "fno/darcy", "--scale", "tiny", "--epochs", "1", "--seeds", "0", "0", "--out", "{world}/cmp"],
        None,
        "seed 0 is listed twice",
    ),
    (
        "evaluate-malicious-pickle",
        ["evaluate", "{world}/evil.pt"],
        _malicious_checkpoint,
        "not allowed to load safely (torch.load weights_only=True): the global posix.remove; nothing of it",
    ),
]


@pytest.mark.parametrize("argv,setup,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_run_input(world, trained, capsys, monkeypatch, argv, setup, expected):
    if "cuda" in argv and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    if isinstance(setup, str):
        (world / "runs" / "sub" / setup).mkdir()
        (world / "runs" / "sub" / setup / "data.csv").write_text("mine")
    elif setup is not None:
        setup(world, monkeypatch)
    data_before = sorted((trained / "data").rglob("*"))
    argv = [a.replace("{world}", str(world)) for a in argv]
    if argv[0] == "train":
        argv += ["--runs-dir", str(world / "runs" / "sub")]
    assert main(argv) == 2
    monkeypatch.undo()
    err = capsys.readouterr().err.strip()
    assert expected in err, err
    assert err.count("\n") == 0 and "Traceback" not in err, err
    _intact(world)
    if setup is not _nan_weights:
        _unchanged(world, trained)
    assert sorted((trained / "data").rglob("*")) == data_before  # no dataset was generated
    assert not (world / "cmp" / "runs").exists()  # nothing trained
    assert not (world / "runs" / "sub" / "new").exists()  # a run that could not start leaves nothing
    if isinstance(setup, str):
        assert (world / "runs" / "sub" / setup / "data.csv").read_text() == "mine"
    if setup is _user_file_in_run:
        assert (world / "runs" / "sub" / "done" / "notes.txt").read_text() == "mine"
    assert not (world / "victim" / "checkpoints").exists() and not (world / "victim" / "metrics.jsonl").exists()
    if setup is _users_config_in_folder:
        assert [p.name for p in (world / "runs" / "sub" / "mine").iterdir()] == ["config.yaml"]
        assert (world / "runs" / "sub" / "mine" / "config.yaml").read_text() == "learning_rate: 0.1\n"


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


# ------------------------------------------------------------------------------------------------
# library calls: one NeurodynError of one line, nothing written


class Flat(torch.nn.Module):
    """A model whose output does not depend on the value of its weight: its validation metric never improves."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))

    def forward(self, x):
        return x * 0 * self.w


def _pairs(n: int):
    x = torch.randn(n, 8, 1)
    return x, x + 1


def _fit_into_a_users_folder(world: Path) -> None:
    from neurodyn.train import fit

    (world / "victim" / "config.yaml").write_text("learning_rate: 0.1\n")
    fit(Flat(), _pairs(8), run_dir=world / "victim", epochs=1)


def _fit_on_nothing(world: Path) -> None:
    from neurodyn.train import fit

    fit(Flat(), (torch.zeros(0, 8, 1), torch.zeros(0, 8, 1)), run_dir=world / "fitted", epochs=1)


def _predict_negative_batch(world: Path) -> None:
    from neurodyn import load_run

    load_run(world / "runs" / "sub" / "done").predict(torch.zeros(2, 16, 16, 1), batch_size=-1)


LIBRARY = [
    # (id, call on the world, words expected in the one-line message)
    ("fit-over-a-users-config", _fit_into_a_users_folder, "no run marker (.neurodyn-run)"),
    ("fit-on-empty-data", _fit_on_nothing, "fit() got no training samples"),
    (
        "predict-negative-batch-size",
        _predict_negative_batch,
        "batch_size must be a whole number >= 1 (samples per forward pass); got -1",
    ),
]


@pytest.mark.parametrize("call,expected", [c[1:] for c in LIBRARY], ids=[c[0] for c in LIBRARY])
def test_bad_library_call(world, trained, call, expected):
    from neurodyn.errors import NeurodynError

    with pytest.raises(NeurodynError) as info:
        call(world)
    text = str(info.value)
    assert expected in text and "\n" not in text, text
    _intact(world)
    _unchanged(world, trained)
    assert sorted(p.name for p in (world / "victim").iterdir()) in (["precious.txt"], ["config.yaml", "precious.txt"])
    if (world / "victim" / "config.yaml").exists():
        assert (world / "victim" / "config.yaml").read_text() == "learning_rate: 0.1\n"
    assert not (world / "fitted" / "checkpoints").exists()


# ------------------------------------------------------------------------------------------------
# behaviours that are not refusals


def test_raising_the_epochs_of_an_early_stopped_run_trains_on(tmp_path):
    from neurodyn.train import fit

    train, val = _pairs(8), _pairs(4)
    first = fit(Flat(), train, val, run_dir=tmp_path, epochs=6, early_stop=1)
    assert len(first) == 2 and first[-1].get("stopped_early")  # epoch 2 did not improve on epoch 1: stopped
    again = fit(Flat(), train, val, run_dir=tmp_path, epochs=6, early_stop=1)
    assert len(again) == 2  # the same command: the finished run stays as it is
    more = fit(Flat(), train, val, run_dir=tmp_path, epochs=8, early_stop=1)
    assert len(more) == 3 and more[-1].get("stopped_early")  # trained on, stopped again by a fresh patience


@pytest.mark.slow
def test_a_legal_run_name_of_255_characters_trains(world, capsys):
    from neurodyn.train.run_folder import lock_file

    runs, name = world / "runs" / "sub", "r" * 255
    assert main([*TRAIN, "--runs-dir", str(runs), "--run-name", name]) == 0, capsys.readouterr().err
    assert (runs / name / "checkpoints" / "last.pt").exists()
    assert len(lock_file(runs / name).name) <= 255 and not lock_file(runs / name).exists()


@pytest.mark.slow
def test_compare_trains_anew_when_the_overrides_change(world, capsys):
    from neurodyn.compare import compare

    out = world / "cmp"
    wide = compare(["fno/darcy"], out, "tiny", epochs=1, overrides=["model.width=8"])
    narrow = compare(["fno/darcy"], out, "tiny", epochs=1, overrides=["model.width=4"])
    again = compare(["fno/darcy"], out, "tiny", epochs=1, overrides=["model.width=8"])
    assert narrow[0]["params"] < wide[0]["params"]  # not the first run's record
    assert again == wide  # the very config again: its recorded run
    assert len(list((out / "runs").iterdir())) == 2


def test_ctrl_c_while_predictions_are_written_leaves_nothing_and_says_so(world, monkeypatch, capsys):
    import signal as signals

    import h5py

    real = h5py.Group.create_dataset

    def interrupted(self, *args, **kwargs):
        os.kill(os.getpid(), signals.SIGINT)  # Ctrl-C while the file is being written
        return real(self, *args, **kwargs)

    monkeypatch.setattr(h5py.Group, "create_dataset", interrupted)
    out = world / "victim" / "pred.h5"
    assert main([w.replace("{world}", str(world)) for w in PREDICT] + [str(out)]) == 130
    err = capsys.readouterr().err.strip()
    assert err == f"neurodyn predict: interrupted; nothing was written to {out}", err
    assert sorted(p.name for p in (world / "victim").iterdir()) == ["precious.txt"]


def test_temporaries_of_killed_predicts_are_removed(world, capsys):
    out = world / "victim" / "pred.h5"
    dead = world / "victim" / ".pred.h5.999999999.tmp"  # no process has this id (above Linux's pid_max)
    live = world / "victim" / f".pred.h5.{os.getppid()}.tmp"  # a running process may still write its own
    dead.write_text("half")
    live.write_text("half")
    assert main([w.replace("{world}", str(world)) for w in PREDICT] + [str(out)]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (world / "victim").iterdir()) == sorted(["precious.txt", "pred.h5", live.name])


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
def test_a_run_stopped_by_its_time_limit_trains_on_with_a_longer_one(world, capsys):
    runs = world / "runs" / "sub"
    argv = [*TRAIN, "--runs-dir", str(runs), "--run-name", "timed", "train.epochs=3"]
    assert main([*argv, "train.time_limit=0.001"]) == 0, capsys.readouterr().err
    assert "stopped at the time limit after epoch 1" in capsys.readouterr().out
    epochs = lambda: [
        r["epoch"]
        for r in map(json.loads, (runs / "timed" / "metrics.jsonl").read_text().splitlines())
        if "train_loss" in r
    ]
    assert epochs() == [0]
    assert main([*argv, "train.time_limit=0.002"]) == 0  # a longer limit: resumed, and stopped again by it
    assert epochs() == [0]
    assert main([*argv, "train.time_limit=0"]) == 0  # no limit: the run trains on to its epochs
    assert epochs() == [0, 1, 2]
    assert main([*argv, "train.time_limit=5"]) == 2  # from no limit to one: another config, refused
    assert "train.time_limit (0 -> 5)" in capsys.readouterr().err
