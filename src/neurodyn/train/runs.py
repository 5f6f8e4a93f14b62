"""Trained runs: read a run folder's records, restore a run from its checkpoint, evaluate it.

* :func:`read_history` / :func:`read_test_metrics` -- the per-epoch records and the one test evaluation of a
  run's ``metrics.jsonl``;
* :func:`restore_run` -- a trained run's config, data, task and model with the checkpoint's normalizers and
  weights (a :class:`RestoredRun`); :func:`evaluate_run` re-evaluates it on its test split,
  :func:`evaluate_sets` on its test split and test files or on other store files.

Lists of training runs recorded into a results folder (the experiment queue of the benchmarks and of
``neurodyn compare``) live in :mod:`neurodyn.bench.jobs`.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import default_collate

from ..checkpoint_io import nonfinite_tensors, read_checkpoint
from ..data.assembly import build_data
from ..errors import ConfigError, DataError
from ..models import build
from ..models.registry import module_device, upgrade_config
from .experiment import build_task
from .trainer import TrainConfig

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


@dataclasses.dataclass
class RestoredRun:
    """A trained run as it was at a checkpoint: config, data (:func:`neurodyn.data.assembly.build_data`),
    task with the checkpoint's normalizers, model with its weights (in eval mode), the training config."""

    cfg: dict[str, Any]
    data: dict[str, Any]
    task: Any
    model: torch.nn.Module
    train_config: TrainConfig
    checkpoint: Path

    @property
    def run_dir(self) -> Path:
        return self.checkpoint.parent.parent

    @property
    def eval_batch_size(self) -> int:
        return self.train_config.eval_batch_size or self.train_config.batch_size


def restore_run(run: str | Path, which: str = "last", device: str | torch.device = "cpu") -> RestoredRun:
    """Restore a run folder (its ``checkpoints/<which>.pt``) or a checkpoint file, with the model and every
    normalizer of the task on ``device`` (the data stays on the CPU: :func:`batches` moves it).

    The checkpoint is read onto the CPU and everything built from it is moved once, at the end, so no tensor of the
    restored task or model stays behind on another device."""
    run = Path(run)
    path = run if run.is_file() else run / "checkpoints" / f"{which}.pt"
    ckpt = read_checkpoint(path, map_location="cpu")
    cfg = ckpt.get("experiment")
    if not cfg:
        raise DataError(f"checkpoint {path} holds no experiment config; it was not written by the trainer")
    bad = nonfinite_tensors(ckpt.get("model_state", {}))
    if bad:
        raise DataError(f"checkpoint {path} holds non-finite weights ({', '.join(bad[:3])}"
                        f"{' ...' if len(bad) > 3 else ''}): the run diverged; train it again with a lower train.lr "
                        "(--fresh, or a new folder with --run-name NAME)")
    tcfg = TrainConfig(**ckpt["train_config"])
    data = build_data(cfg, device, progress=False, train_window_steps=tcfg.window_steps)
    task = build_task(cfg, data, tcfg)
    for key, norm in task.normalizers().items():
        norm.load_state_dict(ckpt["normalizers"][key])
    model = build(ckpt["model"]["name"], upgrade_config(ckpt["model"]["name"], ckpt["model"]["config"]))
    model.load_state_dict(ckpt["model_state"])
    device = torch.device(device)
    model.to(device).eval()
    task.to(device)
    return RestoredRun(cfg, data, task, model, tcfg, path)


def batches(dataset, batch_size: int = 32, device: str | torch.device | None = None,
            count: int | None = None) -> Iterator[dict[str, Tensor]]:
    """The first ``count`` (default all) samples of ``dataset`` in collated batches, on ``device``."""
    n = len(dataset) if count is None else min(count, len(dataset))
    for i in range(0, n, batch_size):
        batch = default_collate([dataset[j] for j in range(i, min(n, i + batch_size))])
        if device is not None:
            batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
        yield batch


@torch.no_grad()
def predict(task, model, dataset, batch_size: int = 32) -> tuple[Tensor, Tensor]:
    """Predictions and targets ``(N, *spatial, C)`` (physical units) of every sample of ``dataset``."""
    preds, trues = [], []
    for batch in batches(dataset, batch_size):
        preds.append(task.predict(model, batch))
        trues.append(batch["y"])
    return torch.cat(preds), torch.cat(trues)


def evaluate_run(run: str | Path, device: str | torch.device = "cpu", which: str = "last") -> dict[str, Any]:
    """Re-evaluate a run's checkpoint on its test split with the normalizers saved in the checkpoint."""
    r = restore_run(run, which, device)
    test = r.data["sets"].get("test")
    if test is None:
        raise ConfigError(f"the experiment of {r.checkpoint} has no test split (data.n_test = 0); evaluate it on "
                          "files with `neurodyn evaluate RUN --data FILE`")
    return r.task.evaluate(r.model, batches(test, r.eval_batch_size, torch.device(device)))


def evaluate_sets(run: str | Path, files: Sequence[str | Path] | dict[str, str | Path] | None = None,
                  device: str | torch.device = "cpu", which: str = "last") -> dict[str, dict[str, Any]]:
    """``{name: metrics}`` of a run's checkpoint, with the training normalizers, on ``files`` (store files, named
    by their stems, or ``{name: path}``), or by default on its test split (``"test"``) and the separate test
    files of its config (``data.test_path``). A file the model cannot take (another channel count, a
    resolution the model refuses) is one ConfigError naming it."""

    return evaluate_restored(restore_run(run, which, device), files)


def evaluate_restored(r: RestoredRun, files: Sequence[str | Path] | dict[str, str | Path] | None = None
                      ) -> dict[str, dict[str, Any]]:
    """:func:`evaluate_sets` of an already restored run."""
    from ..data.assembly import build_test_sets, named_test_files
    from .experiment import check_model_accepts

    dev = module_device(r.model)
    sets: dict[str, Any] = {}
    if files is None:
        if "test" in r.data["sets"]:
            sets["test"] = r.data["sets"]["test"]
        sets.update(build_test_sets(r.cfg))
        if not sets:
            raise ConfigError(f"the experiment of {r.checkpoint} has no test split and no data.test_path; give "
                              "files to evaluate on (`neurodyn evaluate RUN --data FILE`)")
    else:
        named = files if isinstance(files, dict) else named_test_files({"test_path": list(map(str, files))}, "--data")
        sets.update(build_test_sets(r.cfg, named))
    out = {}
    for name, dataset in sets.items():
        check_model_accepts(r.model, r.task, dataset, r.cfg["model"]["name"], what=f"{name!r}")
        out[name] = r.task.evaluate(r.model, batches(dataset, r.eval_batch_size, dev))
    return out
