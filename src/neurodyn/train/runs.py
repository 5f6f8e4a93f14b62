"""Trained runs: read a run folder's records, restore a run from its checkpoint, evaluate it.

* :func:`read_history` / :func:`read_test_metrics` -- the per-epoch records and the one test evaluation of a
  run's ``metrics.jsonl``;
* :func:`evaluate_run` re-evaluates a run (restored by :func:`neurodyn.train.predict.load_run`, the one restore
  path) on its test split, :func:`evaluate_sets` on its test split and test files or on other store files.

Seeded training runs of presets recorded into a results folder (what ``neurodyn compare`` trains) are
:mod:`neurodyn.train.queue`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..errors import DataError
from .predict import TrainedRun, batches, load_run

Tensor = torch.Tensor


# ------------------------------------------------------------------------------------------------
# reading a run


def read_history(run_dir: str | Path) -> list[dict[str, Any]]:
    """The per-epoch records of a run's ``metrics.jsonl`` (``epoch``, ``train_loss``, ``lr``, ``seconds``, and
    ``val``: the validation metrics of the epochs that were evaluated)."""
    return [r for r in _records(run_dir) if "train_loss" in r]


def read_test_metrics(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The one evaluation of the test data after training: ``{set: {"last": metrics, "best": metrics}}`` for the
    test split (``"test"``) and each separate test file (``data.test_path``), of the final model and of the
    checkpoint the validation split selected; empty when the run had no test data or has not finished."""
    found: dict[str, dict[str, Any]] = {}
    for rec in _records(run_dir):
        if "test" in rec and "train_loss" not in rec:
            found = rec["test"]
    return found


def read_test_file_metrics(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """``{test file name: metrics}`` of the final model on the run's separate test files (``data.test_path``);
    empty when the run had none."""
    return {name: m["last"] for name, m in read_test_metrics(run_dir).items() if name != "test"}


def _records(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise DataError(f"run folder {run_dir} has no metrics.jsonl; was it trained by neurodyn?")
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@torch.no_grad()
def predict(task, model, dataset, batch_size: int = 32) -> tuple[Tensor, Tensor]:
    """Predictions and targets ``(N, *spatial, C)`` (physical units) of every sample of ``dataset``."""
    preds, trues = [], []
    for batch in batches(dataset, batch_size):
        preds.append(task.predict(model, batch))
        trues.append(batch["y"])
    return torch.cat(preds), torch.cat(trues)


def evaluate_run(run: str | Path, device: str | torch.device = "cpu", which: str = "last") -> dict[str, Any]:
    """Re-evaluate a run's checkpoint ``which`` (``last``, ``best`` or ``auto``:
    :func:`neurodyn.train.predict.choose_checkpoint`) on its test split with the normalizers saved in it."""
    r = load_run(run, which, device)
    return r.task.evaluate(r.model, batches(r.split("test"), r.eval_batch_size, r.device))


def evaluate_sets(
    run: str | Path,
    files: Sequence[str | Path] | dict[str, str | Path] | None = None,
    device: str | torch.device = "cpu",
    which: str = "last",
    progress: Any = False,
) -> dict[str, dict[str, Any]]:
    """``{name: metrics}`` of a run's checkpoint, with the training normalizers, on ``files`` (store files, named
    by their stems, or ``{name: path}``), or by default on its test split (``"test"``) and the separate test
    files of its config (``data.test_path``): :meth:`neurodyn.train.predict.TrainedRun.evaluate` (``progress``:
    one stage per set, :mod:`neurodyn.progress`)."""
    return load_run(run, which, device).evaluate(files, progress=progress)


__all__ = (
    "TrainedRun",
    "batches",
    "evaluate_run",
    "evaluate_sets",
    "load_run",
    "predict",
    "read_history",
    "read_test_file_metrics",
    "read_test_metrics",
)
