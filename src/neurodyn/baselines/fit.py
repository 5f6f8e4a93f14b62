"""The fitted baselines' own path beside the trainer: one pass over the training split, the validation split scored,
and, given a run folder, the run written as the trainer writes one.

``fit_baseline(model, task, train_set, val_set=None, run_dir=None, ...) -> BaselineFit``:

1. **fit** (:func:`fit_on`): the training split in batches of ``batch_size``, each normalised as for any sequence
   model (``task.model_inputs(batch) -> (x (B, T, C), mask (B, T))``, ``task.model_targets(batch)``: class indices
   or normalised targets), concatenated to ``x (N, T, C)``, ``t (N, T)``, ``mask (N, T)``, ``y`` and handed to
   :meth:`~neurodyn.baselines.fitted.FittedSequenceModel.fit` at once;
2. **training loss** (``training_loss=True``): the fitted model's mean loss on the training split,
   ``(1/N) sum_b n_b task.training_loss(model, batch_b)``, the record's ``train_loss`` (a stage with the model's
   own time estimate: :func:`neurodyn.progress.predict_estimate`);
3. **validation** (``val_set``): ``task.evaluate`` over it (:func:`neurodyn.progress.evaluate_stage`), the record's
   ``val``;
4. **the run** (``run_dir``): ``metrics.jsonl`` (the one epoch record ``{"epoch": 0, "train_loss", "seconds",
   "val"}``), ``checkpoints/best.pt`` (with a validation split: the same model, so ``which=best`` loads it as for
   any run) and ``checkpoints/last.pt``, in the trainer's checkpoint format (:func:`baseline_checkpoint`,
   :func:`neurodyn.checkpoint_io.versioned`): ``neurodyn.load_run``, ``neurodyn evaluate`` and ``compare`` read it as
   any run. A folder whose ``last.pt`` and epoch record exist is fitted already: its model is loaded, not fitted
   again (``resume=False`` fits anew). Without ``run_dir`` nothing is written.

The experiment (:func:`neurodyn.train.experiment.run_experiment`) takes this path for a
:class:`~neurodyn.baselines.fitted.FittedSequenceModel` and the trainer's for every other model; the summary's
baseline rows (``baseline_scores``) and ``compare``'s budget estimate fit through it too. ``task`` is a sequence
task (:class:`neurodyn.train.sequence_task.SequenceTask`: ``model_inputs``, ``model_targets``, ``training_loss``,
``evaluate``, ``normalizers``, ``spec``, ``monitor``); this layer never imports it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset, default_collate

from ..checkpoint_io import atomic_torch_save, read_checkpoint, remove_stale_temporaries, versioned
from ..errors import ConfigError
from ..models.registry import model_spec
from ..progress import Stage, evaluate_stage, predict_estimate, progress_style
from .fitted import FittedSequenceModel


@dataclass
class BaselineFit:
    """What :func:`fit_baseline` did: the fitted ``model`` (eval mode), the ``history`` (one epoch record, as the
    trainer's), the ``run_dir`` it wrote (None: nothing written) and whether the model was ``reloaded`` from a run
    fitted before."""

    model: FittedSequenceModel
    history: list[dict[str, Any]]
    run_dir: Path | None = None
    reloaded: bool = False
    extra: list[dict[str, Any]] = field(default_factory=list)

    def log_extra(self, record: dict[str, Any]) -> None:
        """Append ``record`` (the test metrics after the fit) to ``metrics.jsonl``, as the trainer's ``log_extra``;
        kept in :attr:`extra` without a run folder."""
        self.extra.append(record)
        if self.run_dir is not None:
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")


def batches(dataset: Dataset, batch_size: int, device: str | torch.device = "cpu") -> Iterator[dict[str, Any]]:
    """The items of ``dataset`` in order, collated in batches of ``batch_size``, their tensors on ``device``."""
    for lo in range(0, len(dataset), batch_size):
        batch = default_collate([dataset[i] for i in range(lo, min(lo + batch_size, len(dataset)))])
        yield {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}


@torch.no_grad()
def fit_on(
    model: FittedSequenceModel, task: Any, train_batches: Iterable[dict[str, torch.Tensor]], progress: Any = False
) -> None:
    """The one pass: ``model.fit(x, t, mask, y, progress=progress)`` on every batch of ``train_batches`` together
    (module docstring, step 1); ``progress``: the one idiom of :mod:`neurodyn.progress`."""
    xs, ts, ms, ys = [], [], [], []
    for batch in train_batches:
        x, mask = task.model_inputs(batch)
        xs.append(x)
        ms.append(mask)
        ts.append(batch.get("t"))
        ys.append(task.model_targets(batch))
    if not xs:
        raise ConfigError("a fitted baseline needs at least one training sequence; the training split is empty")
    T = max(x.shape[1] for x in xs)

    def pad(a: torch.Tensor) -> torch.Tensor:  # (B, T', ...) -> (B, T, ...), zeros after the end
        return torch.nn.functional.pad(a, (0, 0) * (a.dim() - 2) + (0, T - a.shape[1]))

    t = None if any(v is None for v in ts) else torch.cat([pad(v) for v in ts])
    model.fit(torch.cat([pad(x) for x in xs]), t, torch.cat([pad(m) for m in ms]), torch.cat(ys), progress=progress)


def baseline_checkpoint(
    model: FittedSequenceModel,
    task: Any,
    *,
    n_val: int,
    best: float,
    train_config: Mapping[str, Any] | None = None,
    experiment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A fitted model's checkpoint in the trainer's format (:mod:`neurodyn.train.checkpoint`): ``model`` (registered
    name and config), ``model_state`` (the fitted buffers), ``normalizers`` with their kinds, ``task_spec``,
    ``position`` (after its one epoch), ``best`` (the validation metric), ``n_val``, ``train_config`` and
    ``experiment``; no optimizer, scheduler or RNG state (nothing resumes inside a one-pass fit)."""
    norms = task.normalizers()
    return versioned(
        {
            "model": model_spec(model),
            "model_state": model.state_dict(),
            "normalizers": {k: m.state_dict() for k, m in norms.items()},
            "normalizer_kinds": {k: {"kind": m.kind, "reduce": m.reduce} for k, m in norms.items()},
            "task_spec": task.spec(),
            "position": {"epoch": 1, "batch": 0, "global_step": 1},
            "best": best,
            "n_val": n_val,
            "train_config": dict(train_config or {}),
            "experiment": dict(experiment or {}),
        }
    )


def fit_baseline(
    model: FittedSequenceModel,
    task: Any,
    train_set: Dataset,
    val_set: Dataset | None = None,
    run_dir: str | Path | None = None,
    *,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    train_config: Mapping[str, Any] | None = None,
    experiment: Mapping[str, Any] | None = None,
    progress: Any = False,
    resume: bool = True,
    training_loss: bool = True,
) -> BaselineFit:
    """Fit ``model`` in one pass on ``train_set``, score ``val_set`` and, given ``run_dir``, write the run (module
    docstring). ``batch_size``: samples per batch of the passes; ``train_config`` / ``experiment``: what the
    checkpoint records of the run (the train options as ``TrainConfig``'s fields, the experiment config);
    ``progress``: the one idiom (:mod:`neurodyn.progress`); ``training_loss=False`` skips step 2 (the summary's
    baseline rows need only their test scores)."""
    if not isinstance(model, FittedSequenceModel):
        raise ConfigError(
            f"fit_baseline fits the baselines of neurodyn.baselines; {type(model).__name__} is trained "
            "by gradient descent (neurodyn.train)"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a whole number >= 1 (samples per pass batch); got {batch_size!r}")
    model.to(device)
    task.to(torch.device(device))
    run_dir = Path(run_dir) if run_dir is not None else None
    name = getattr(model, "registry_name", type(model).__name__)
    if run_dir is not None and resume:
        done = _fitted_before(model, run_dir, device)
        if done is not None:
            if progress is not False:
                print(
                    f"{run_dir} holds the fitted {name}: its checkpoint is loaded, nothing is fitted again", flush=True
                )
            return BaselineFit(model.eval(), done, run_dir, reloaded=True)
    t0 = time.time()
    fit_on(model, task, batches(train_set, batch_size, device), progress)
    model.eval()
    record: dict[str, Any] = {"epoch": 0}
    if training_loss:
        record["train_loss"] = _training_loss(model, task, train_set, batch_size, device, name, progress)
    key, mode = getattr(task, "monitor", ("accuracy", "max"))
    best = float("inf") if mode == "min" else float("-inf")
    if val_set is not None and len(val_set):
        record["val"] = evaluate_stage(
            task, model, batches(val_set, batch_size, device), len(val_set), f"{name}: validation split", progress
        )
        best = record["val"][key]
    record["seconds"] = time.time() - t0
    if progress_style(progress) == "lines" and len(record) > 2:  # (epoch and seconds alone: nothing to say)
        shown = f"  val {key} {record['val'][key]:.4g}" if "val" in record else ""
        loss = f"  train loss {record['train_loss']:.4g}" if "train_loss" in record else ""
        print(f"{name}: fitted in one pass{loss}{shown}  ({record['seconds']:.1f} s)", flush=True)
    if run_dir is not None:
        n_val = len(getattr(val_set, "ids", val_set)) if val_set is not None else 0
        _write_run(
            run_dir,
            record,
            baseline_checkpoint(model, task, n_val=n_val, best=best, train_config=train_config, experiment=experiment),
            with_best="val" in record,
        )
    return BaselineFit(model, [record], run_dir)


@torch.no_grad()
def _training_loss(
    model: FittedSequenceModel, task: Any, train_set: Dataset, batch_size: int, device, name: str, progress: Any
) -> float:
    """The fitted model's mean loss per training sample (module docstring, step 2), as one stage."""
    estimate, detail = predict_estimate(model, len(train_set)) if progress is not False else (None, "")
    total, count = 0.0, 0
    with Stage(
        f"{name}: training loss of the fitted model",
        len(train_set),
        "sample",
        progress,
        estimate=estimate,
        detail=detail,
    ) as stage:
        for batch in stage.track(batches(train_set, batch_size, device), lambda b: len(b["x"])):
            n = len(batch["x"])
            total += float(task.training_loss(model, batch).double()) * n
            count += n
    return total / max(count, 1)


def _write_run(run_dir: Path, record: dict[str, Any], ckpt: dict[str, Any], with_best: bool) -> None:
    """``metrics.jsonl`` (the one epoch record), then ``best.pt`` (with a validation split) and ``last.pt``, each
    written atomically: a folder with ``last.pt`` is a finished fit."""
    ckpts = run_dir / "checkpoints"
    run_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(ckpts)
    (run_dir / "metrics.jsonl").write_text(json.dumps(record) + "\n")
    if with_best:
        atomic_torch_save(ckpt, ckpts / "best.pt")
    atomic_torch_save(ckpt, ckpts / "last.pt")


def _fitted_before(model: FittedSequenceModel, run_dir: Path, device) -> list[dict[str, Any]] | None:
    """The history of a fit ``run_dir`` holds (its ``last.pt`` loaded into ``model``; ``metrics.jsonl`` keeps only its
    epoch record, as the trainer's resume does: the test records are written again), or None when it holds none."""
    last, log = run_dir / "checkpoints" / "last.pt", run_dir / "metrics.jsonl"
    if not last.is_file() or not log.is_file():
        return None
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    epochs = [r for r in records if "train_loss" in r or "val" in r]
    if not epochs:
        return None
    model.load_state_dict(read_checkpoint(last, map_location=device)["model_state"])
    log.write_text("".join(json.dumps(r) + "\n" for r in epochs))
    return epochs


__all__ = ["BaselineFit", "baseline_checkpoint", "batches", "fit_baseline", "fit_on"]
