"""Run folders: where a run may live, what may be removed, and who may train in it.

A run folder is a folder the library made for a run: it holds :data:`neurodyn.files.RUN_MARKER`, written when the
folder is made (:func:`open_run_folder`). Every command that writes follows one rule: all checks, then side effects.

* :func:`run_folder` confines a run to ``runs_dir``: its name is one folder name (no ``/``, ``..``, ``.``, absolute
  path, NUL, or more than 255 bytes), so ``--run-name`` can neither write nor delete outside ``--runs-dir``.
* :func:`why_not_trainable` says why a training may not write into a path: a symbolic link (it could lead outside
  ``--runs-dir``), a file, or a folder that holds files but no run marker (a user's folder, or a half-made one).
  An absent or empty folder is made a run folder; a run folder is resumed (or refused, by the config check).
* :func:`remove_run_folder` (``--fresh``) removes only a run folder that holds nothing a run does not write, and
  only when every one of its files can be removed: the files are first moved aside one by one (a file the system
  will not let go of, such as an immutable checkpoint, stops it with every file back in place), then deleted.
* :func:`training_lock` is held while a process trains in a folder: a second process is refused with one
  sentence naming the holder; a lock left by a killed process does not block (see :mod:`neurodyn.locks`). The
  lock file sits beside the folder (``.<name>.lock``), so ``--fresh`` can remove the folder while holding it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..files import NAME_MAX, RUN_MARKER, holds_run_marker, side_path, write_run_marker
from ..locks import hold

# what a run writes into its folder (the trainer, the summary, the plots, the results store; estimator_data: the
# converted arrays of an estimator's run before the estimators trained in memory); patterns
RUN_ENTRIES = (
    RUN_MARKER,
    "config.yaml",
    "metrics.jsonl",
    "metrics.csv",
    "summary.md",
    "checkpoints",
    "tensorboard",
    "predictions.png",
    "learning_curve.png",
    "rollout.gif",
    "rollout_error.png",
    "result.json",
    "run_result.json",
    "estimator_data",
    ".*.tmp",
)


def run_folder(runs_dir: str | Path, name: str) -> Path:
    """``runs_dir / name`` after checking that ``name`` is one folder name."""
    text = str(name)
    if (
        not text.strip()
        or text in (".", "..")
        or "/" in text
        or (os.sep in text)
        or (os.altsep and os.altsep in text)
        or Path(text).is_absolute()
        or "\0" in text
    ):
        shown = repr(name) if len(text) <= 80 else repr(text[:60]) + "..."
        raise ConfigError(
            f"--run-name {shown} must be a single folder name (no '/', '..', '.', NUL or absolute "
            f"path): runs live inside --runs-dir ({runs_dir}); to train elsewhere, set --runs-dir"
        )
    if len(text.encode(errors="surrogateescape")) > NAME_MAX:
        raise ConfigError(
            f"--run-name {text[:40]!r}... is {len(text.encode(errors='surrogateescape'))} bytes long; a "
            f"folder name has at most {NAME_MAX} bytes: choose a shorter --run-name"
        )
    return Path(runs_dir) / text


def lock_file(run_dir: str | Path) -> Path:
    """The lock file of a run folder: ``.<name>.lock`` beside it (a long name shortened: :func:`side_path`)."""
    return side_path(run_dir, ".", ".lock")


def training_lock(run_dir: str | Path) -> contextlib.AbstractContextManager:
    """Hold the run folder's lock (re-entrant in one process; refused with one sentence in another)."""
    return hold(
        lock_file(run_dir),
        f"run folder {run_dir}",
        "wait for that training to finish, or train into another folder with --run-name NAME",
    )


def is_run_entry(name: str) -> bool:
    """Whether a run writes an entry of this name into its folder."""
    return any(fnmatch.fnmatch(name, pattern) for pattern in RUN_ENTRIES)


def foreign_entries(run_dir: Path) -> list[str]:
    """Entries of ``run_dir`` that a run does not write."""
    return sorted(p.name for p in run_dir.iterdir() if not is_run_entry(p.name))


def foreign_config(run_dir: Path) -> str | None:
    """What is wrong with ``run_dir/config.yaml`` when it is there and is not a run's config (``None`` otherwise):
    a training that would write its own over it must not."""
    config = run_dir / "config.yaml"
    if not (config.exists() or config.is_symlink()):
        return None
    if config.is_symlink() or not config.is_file():
        return "is not a regular file"
    try:
        cfg = yaml.safe_load(config.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return "is not a neurodyn run config (not readable YAML)"
    if not (isinstance(cfg, dict) and "model" in cfg and "train" in cfg):
        return "is not a neurodyn run config (no model and train sections)"
    return None


def why_not_trainable(run_dir: Path) -> str | None:
    """``None`` if a training may write into ``run_dir`` (absent, an empty folder, or a run folder), else why not."""
    if run_dir.is_symlink():
        return "it is a symbolic link, which a run folder never is (it could lead outside --runs-dir)"
    if not run_dir.exists():
        return None
    if not run_dir.is_dir():
        return "it is a file, not a folder"
    if holds_run_marker(run_dir):
        return None
    try:
        entries = sorted(p.name for p in run_dir.iterdir())
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not entries:
        return None
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    return f"it holds {shown} but no run marker ({RUN_MARKER}), so it is not a run folder neurodyn made"


def check_trainable(run_dir: Path, who: str = "training", instead: str = "--run-name NAME") -> None:
    """Raise one ConfigError unless a training may write into ``run_dir`` (:func:`why_not_trainable`); ``who``
    names the caller, ``instead`` what to give in its place."""
    why = why_not_trainable(run_dir)
    if why:
        raise ConfigError(f"{who} refuses to write into {run_dir}: {why}; train into another folder ({instead})")


def why_not_a_run_folder(run_dir: Path) -> str | None:
    """``None`` if ``run_dir`` is a run folder of this project holding only a run's files, else what makes it not
    one."""
    if run_dir.is_symlink():
        return "it is a symbolic link"
    if not run_dir.is_dir():
        return "it is not a folder"
    if not holds_run_marker(run_dir):
        return f"it holds no run marker ({RUN_MARKER}), so it is not a run folder neurodyn made"
    if (run_dir / "config.yaml").exists() and foreign_config(run_dir):
        return "it holds no neurodyn config.yaml"
    foreign = foreign_entries(run_dir)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        return f"it also holds {shown}, which a run does not write"
    return None


def remove_run_folder(run_dir: str | Path) -> bool:
    """Delete ``run_dir`` if it is a run folder (``--fresh``); returns whether anything was removed.

    Anything else at that path is refused with one sentence and left as it is. The files are moved aside into a
    hidden folder beside the run first, one by one: if the system refuses to let one go (an immutable or
    undeletable file), the moved ones go back and nothing is lost; only when all are aside are they deleted."""
    run_dir = Path(run_dir)
    if not run_dir.exists() and not run_dir.is_symlink():
        return False
    why = why_not_a_run_folder(run_dir)
    if why:
        raise ConfigError(
            f"--fresh refuses to delete {run_dir}: {why}; remove it yourself if it can go, "
            "or train into another folder with --run-name NAME"
        )
    aside = side_path(run_dir, ".", f".fresh-{os.getpid()}", reserve=0)
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    files = [p for p in sorted(run_dir.rglob("*")) if p.is_file() or p.is_symlink()]
    moved: list[tuple[Path, Path]] = []
    try:
        for k, f in enumerate(files):
            target = aside / str(k)
            os.rename(f, target)
            moved.append((f, target))
    except OSError as exc:
        for f, target in reversed(moved):
            os.rename(target, f)
        shutil.rmtree(aside, ignore_errors=True)
        raise ConfigError(
            f"--fresh cannot remove {f} ({exc.strerror or exc}); nothing was removed: make it removable "
            "(chattr -i, chmod) or train into another folder with --run-name NAME"
        ) from None
    shutil.rmtree(aside, ignore_errors=True)
    shutil.rmtree(run_dir)
    return True


def open_run_folder(run_dir: Path) -> bool:
    """Make ``run_dir`` a run folder (create it and write the run marker) once :func:`check_trainable` passed;
    returns whether the folder was created by this call."""
    created = not run_dir.exists()
    _make_folder(run_dir, run_dir)
    if not os.access(run_dir, os.W_OK):
        raise ConfigError(f"run folder {run_dir} is not writable; choose --runs-dir elsewhere")
    write_run_marker(run_dir)
    return created


@contextlib.contextmanager
def fresh_or_kept(run_dir: Path, fresh: bool, is_main: bool = True) -> Iterator[None]:
    """For the body of the ``with``: the run folder ``run_dir`` exists (emptied first when ``fresh``), holds the run
    marker and is locked by this process; a folder this call created is removed again if the body fails before any
    checkpoint. Nothing is touched before the folder is known to be trainable (or, with ``fresh``, removable).

    Under several processes only the main one (``is_main``) checks, removes and makes the folder; the others wait
    for it in the trainer."""
    if not is_main:
        yield
        return
    if fresh and (run_dir.exists() or run_dir.is_symlink()):
        why = why_not_a_run_folder(run_dir)
        if why:
            raise ConfigError(
                f"--fresh refuses to delete {run_dir}: {why}; remove it yourself if it can go, "
                "or train into another folder with --run-name NAME"
            )
    else:
        check_trainable(run_dir)
    _make_folder(run_dir.parent, run_dir)  # the lock file goes there
    with training_lock(run_dir):
        if fresh:
            remove_run_folder(run_dir)
        created = open_run_folder(run_dir)
        try:
            yield
        except BaseException:
            # a run that failed before its first checkpoint (a bad config, data it cannot take) leaves nothing
            if created and not (run_dir / "checkpoints" / "last.pt").exists():
                shutil.rmtree(run_dir, ignore_errors=True)
            raise


def _make_folder(folder: Path, run_dir: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create run folder {run_dir}: {exc.strerror}; choose --runs-dir elsewhere") from None
