"""Run folders: where a run may live, what may be removed, and who may train in it.

* :func:`run_folder` confines a run to ``runs_dir``: its name is one folder name (no ``/``, ``..``, ``.`` or
  absolute path), so ``--run-name`` can neither write nor delete outside ``--runs-dir``.
* :func:`remove_run_folder` (``--fresh``) removes only a folder that is a run folder of this project: it holds
  our ``config.yaml`` and checkpoints or metrics, and nothing a run does not write (so never a parent of other
  runs, nor a folder the user keeps other files in).
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
from ..files import side_path
from ..locks import hold

# what a run writes into its folder (the trainer, the summary, the plots, the results store); patterns
RUN_ENTRIES = ("config.yaml", "metrics.jsonl", "metrics.csv", "summary.md", "checkpoints", "tensorboard",
               "predictions.png", "learning_curve.png", "rollout.gif", "rollout_error.png", "result.json",
               "run_result.json", "estimator_data", ".*.tmp")


def run_folder(runs_dir: str | Path, name: str) -> Path:
    """``runs_dir / name`` after checking that ``name`` is one folder name."""
    text = str(name)
    if (not text.strip() or text in (".", "..") or "/" in text or (os.sep in text) or
            (os.altsep and os.altsep in text) or Path(text).is_absolute() or "\0" in text):
        raise ConfigError(f"--run-name {name!r} must be a single folder name (no '/', '..', '.' or absolute path): "
                          f"runs live inside --runs-dir ({runs_dir}); to train elsewhere, set --runs-dir")
    return Path(runs_dir) / text


def lock_file(run_dir: str | Path) -> Path:
    """The lock file of a run folder: ``.<name>.lock`` beside it (a long name shortened: :func:`side_path`)."""
    return side_path(run_dir, ".", ".lock")


def training_lock(run_dir: str | Path) -> contextlib.AbstractContextManager:
    """Hold the run folder's lock (re-entrant in one process; refused with one sentence in another)."""
    return hold(lock_file(run_dir), f"run folder {run_dir}",
                "wait for that training to finish, or train into another folder with --run-name NAME")


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


def why_not_a_run_folder(run_dir: Path) -> str | None:
    """``None`` if ``run_dir`` is a run folder of this project, else what makes it not one."""
    if run_dir.is_symlink():
        return "it is a symbolic link"
    if not run_dir.is_dir():
        return "it is not a folder"
    if not (run_dir / "config.yaml").is_file() or foreign_config(run_dir):
        return "it holds no neurodyn config.yaml"
    if not ((run_dir / "checkpoints").is_dir() or (run_dir / "metrics.jsonl").is_file()):
        return "it holds no checkpoints/ or metrics.jsonl"
    foreign = foreign_entries(run_dir)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        return f"it also holds {shown}, which a run does not write"
    return None


def remove_run_folder(run_dir: str | Path) -> bool:
    """Delete ``run_dir`` if it is a run folder (``--fresh``); returns whether anything was removed.

    Anything else at that path is refused with one sentence and left as it is."""
    run_dir = Path(run_dir)
    if not run_dir.exists() and not run_dir.is_symlink():
        return False
    why = why_not_a_run_folder(run_dir)
    if why:
        raise ConfigError(f"--fresh refuses to delete {run_dir}: {why}; remove it yourself if it can go, "
                          "or train into another folder with --run-name NAME")
    shutil.rmtree(run_dir)
    return True


@contextlib.contextmanager
def fresh_or_kept(run_dir: Path, fresh: bool, is_main: bool = True) -> Iterator[None]:
    """For the body of the ``with``: the run folder ``run_dir`` exists (emptied first when ``fresh``) and is locked
    by this process; a folder this call created is removed again if the body fails before any checkpoint."""
    with contextlib.ExitStack() as stack:
        _make_folder(run_dir.parent, run_dir)  # the lock file goes there
        if is_main:
            stack.enter_context(training_lock(run_dir))
            if fresh:
                remove_run_folder(run_dir)
        created = not run_dir.exists()
        _make_folder(run_dir, run_dir)
        if not os.access(run_dir, os.W_OK):
            raise ConfigError(f"run folder {run_dir} is not writable; choose --runs-dir elsewhere")
        try:
            yield
        except BaseException:
            # a run that failed before its first checkpoint (a bad config, data it cannot take) leaves nothing
            if created and is_main and not (run_dir / "checkpoints" / "last.pt").exists():
                shutil.rmtree(run_dir, ignore_errors=True)
            raise


def _make_folder(folder: Path, run_dir: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create run folder {run_dir}: {exc.strerror}; choose --runs-dir elsewhere") from None
