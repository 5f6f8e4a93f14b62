"""The one training loop: steady, autoregressive and sequence tasks share it.

* AdamW (or Adam) with OneCycleLR stepped per batch (the neural-operator protocol), StepLR or cosine
  as options; gradient clipping; a tqdm bar with loss and rate.
* ``runs/<name>/``: ``metrics.jsonl`` (one line per epoch with the validation metrics, then the test metrics once),
  ``checkpoints/last.pt`` and ``best.pt`` (the best validation epoch) holding config, weights, optimizer, scheduler,
  normalizers, position and every RNG state.
* Exact resume: the batch order is a function of (seed, epoch) (``sampling.py``) and every RNG state
  is restored, so a run stopped after any batch and resumed ends with the same weights.
  Ctrl-C saves ``last.pt`` at the current batch before exiting.
* ``torchrun --nproc_per_node W``: DistributedDataParallel (gloo on CPU, NCCL on GPU); every rank
  takes its part of each global batch and the loss is scaled so that the averaged gradient is that of
  the global-batch mean, i.e. W processes follow the 1-process loss curve.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, default_collate

from ..checkpoint_io import atomic_torch_save, nonfinite_tensors, read_checkpoint, remove_stale_temporaries, versioned
from ..config_types import check_field_types
from ..errors import ConfigError, NeurodynError, check_choice
from ..models.registry import model_spec
from ..progress import progress_style
from .checkpoint import rng_state, set_rng_state
from .distributed import DistInfo, all_reduce_max, all_reduce_sum, barrier
from .logs import RunLogs, parse_loggers
from .losses import available_losses
from .precision import grad_scaler, parse_precision, with_precision
from .sampling import global_batches, rank_slice
from .schedule import Schedule
from .tasks import AutoregressiveTask


class TrainingDiverged(NeurodynError, RuntimeError):
    """The loss became NaN or Inf."""


SCHEDULES = ("onecycle", "step", "cosine", "none")


@dataclass
class ScheduleConfig:
    """``train.schedule``: the learning-rate schedule (:mod:`neurodyn.train.schedule`).

    Attributes:
        name (str, "onecycle"): onecycle (OneCycleLR stepped per batch) | step (StepLR) | cosine | none (constant).
        pct_start (float, 0.3): onecycle: the warm-up fraction, in [0, 1].
        step_size (int, 100): step: epochs between decays.
        gamma (float, 0.5): step: the decay factor.
    """

    name: str = "onecycle"
    pct_start: float = 0.3
    step_size: int = 100
    gamma: float = 0.5

    def __post_init__(self) -> None:
        check_choice("train.schedule.name", self.name, SCHEDULES)
        if not 0 <= self.pct_start <= 1:
            raise ConfigError(
                f"train.schedule.pct_start is the warm-up fraction of OneCycleLR, in [0, 1]; got {self.pct_start}"
            )
        if self.step_size < 1:
            raise ConfigError(f"train.schedule.step_size must be >= 1 (epochs between decays), got {self.step_size}")
        if not self.gamma > 0:
            raise ConfigError(f"train.schedule.gamma must be > 0 (the StepLR decay factor), got {self.gamma}")


@dataclass
class RolloutConfig:
    """``train.rollout``: how an autoregressive task trains and evaluates (:class:`neurodyn.train.tasks.
    AutoregressiveTask`; other tasks ignore it).

    Attributes:
        mode (str, "teacher_forcing"): training: teacher_forcing (one step from true frames) | rollout (steps
            unrolled with gradients) | pushforward (Brandstetter et al. 2022).
        steps (int, 1): rollout: model calls unrolled per training window.
        eval_mode (str, "rollout"): evaluation: rollout (the horizon from the given frames) | teacher_forcing (one
            step from true frames).
        pushforward (int, 0): pushforward: the most steps unrolled without gradient (>= 1 for mode=pushforward).
        input_noise (float, 0.0): std of the noise added to the normalised input frames in training.
    """

    mode: str = "teacher_forcing"
    steps: int = 1
    eval_mode: str = "rollout"
    pushforward: int = 0
    input_noise: float = 0.0

    def __post_init__(self) -> None:
        check_choice("train.rollout.mode", self.mode, AutoregressiveTask.MODES)
        check_choice("train.rollout.eval_mode", self.eval_mode, AutoregressiveTask.EVAL_MODES)
        for name, least in (("steps", 1), ("pushforward", 0)):
            if getattr(self, name) < least:
                raise ConfigError(f"train.rollout.{name} must be >= {least}, got {getattr(self, name)}")
        if not self.input_noise >= 0:
            raise ConfigError(f"train.rollout.input_noise must be >= 0, got {self.input_noise}")
        if self.mode == "pushforward" and self.pushforward < 1:
            raise ConfigError(
                "train.rollout.mode=pushforward needs train.rollout.pushforward >= 1 (the most unrolled steps)"
            )

    @property
    def window_steps(self) -> int:
        """Model steps one training window unrolls: 1 (teacher forcing), ``steps`` (rollout) or ``pushforward + 1``
        (pushforward)."""
        return {"rollout": self.steps, "pushforward": self.pushforward + 1}.get(self.mode, 1)


@dataclass
class LoggingConfig:
    """``train.logging``: what a run writes beside ``metrics.jsonl`` (which is always written).

    Attributes:
        to (str | list, "none"): none | csv | tensorboard, or a list of them (:mod:`neurodyn.train.logs`).
        n_plot (int, 4): test samples drawn in the prediction plot (``neurodyn train --plot``).
    """

    to: str | list = "none"
    n_plot: int = 4

    def __post_init__(self) -> None:
        parse_loggers(self.to)
        if self.n_plot < 0:
            raise ConfigError(f"train.logging.n_plot must be >= 0, got {self.n_plot}")


@dataclass
class TrainConfig:
    """The ``train`` section: options that belong together are sections (``schedule``, ``rollout``, ``logging``),
    each validated when it is made; the rest are top-level (the optimizer step, the loop, the precision: single
    options read on their own). Parse a mapping with :meth:`from_options`.

    Attributes:
        epochs (int, 100): epochs to train (raising it continues a run).
        batch_size (int, 20): samples per micro-batch.
        eval_batch_size (int, 0): samples per evaluation batch (0: batch_size).
        lr (float, 0.001): the (peak) learning rate.
        weight_decay (float, 0.0001): the optimizer's weight decay.
        optimizer (str, "adamw"): adamw | adam.
        grad_clip (float, 0.0): max gradient norm (0: no clipping).
        loss (str, "rel_l2"): the training loss (``neurodyn.train.losses``).
        grad_loss_weight (float, 0.1): weight of the gradient term of loss "rel_l2+grad".
        seed (int, 0): the run's seed (initialisation, batch order).
        eval_every (int, 1): epochs between evaluations (the last epoch is always evaluated).
        shuffle (bool, True): a new batch order every epoch (a function of seed and epoch).
        accumulate (int, 1): micro-batches of batch_size per optimizer step.
        early_stop (int, 0): stop after this many evaluations without a better validation metric (0: never).
        precision (str | int, "32"): 32 | bf16 (autocast, CPU and CUDA) | 16 (float16 + GradScaler, CUDA).
        compile (bool, False): torch.compile the model for training.
        time_limit (float, 0.0): seconds of training (epochs with their evaluations); 0: none.
        schedule (ScheduleConfig, onecycle): the learning-rate schedule: name, pct_start, step_size, gamma.
        rollout (RolloutConfig, teacher_forcing): autoregressive training and evaluation: mode, steps, eval_mode,
            pushforward, input_noise.
        logging (LoggingConfig, none): logs and plots: to, n_plot.
    """

    epochs: int = 100
    batch_size: int = 20
    eval_batch_size: int = 0
    lr: float = 1e-3
    weight_decay: float = 1e-4
    optimizer: str = "adamw"
    grad_clip: float = 0.0
    loss: str = "rel_l2"
    grad_loss_weight: float = 0.1
    seed: int = 0
    eval_every: int = 1
    shuffle: bool = True
    accumulate: int = 1
    early_stop: int = 0
    precision: str | int = "32"
    compile: bool = False
    time_limit: float = 0.0
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def __post_init__(self) -> None:
        """The one validation: every TrainConfig, parsed or built by hand, is checked when it is made (its sections
        when they were made)."""
        for name, cls in _sections().items():
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(
                    f"train.{name} must be a {cls.__name__} (TrainConfig.from_options reads a mapping "
                    f"{{{', '.join(f.name for f in fields(cls))}}}); got {getattr(self, name)!r}"
                )
        if self.epochs < 1:
            raise ConfigError(f"train.epochs must be >= 1, got {self.epochs}")
        if self.batch_size < 1:
            raise ConfigError(f"train.batch_size must be >= 1, got {self.batch_size}")
        if self.accumulate < 1:
            raise ConfigError(
                f"train.accumulate must be >= 1 (micro-batches per optimizer step), got {self.accumulate}"
            )
        for name, least, meaning in (("eval_batch_size", 0, " (0: batch_size)"), ("eval_every", 1, "")):
            if getattr(self, name) < least:
                raise ConfigError(f"train.{name} must be >= {least}{meaning}, got {getattr(self, name)}")
        if not self.time_limit >= 0:
            raise ConfigError(
                f"train.time_limit is seconds of training (0: no limit) and must be >= 0, got {self.time_limit}"
            )
        if self.early_stop < 0:
            raise ConfigError(
                f"train.early_stop must be >= 0 (evaluations without improvement; 0: never), got {self.early_stop}"
            )
        parse_precision(self.precision)
        if not self.lr > 0:
            raise ConfigError(f"train.lr must be > 0, got {self.lr}")
        for name in ("weight_decay", "grad_clip", "grad_loss_weight"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"train.{name} must be >= 0, got {getattr(self, name)}")
        if self.optimizer not in ("adamw", "adam"):
            raise ConfigError(f"train.optimizer must be 'adamw' or 'adam', got {self.optimizer!r}")
        check_choice("train.loss", self.loss, available_losses())

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], unknown: str = "train section has unknown key(s)", prefix: str = "train."
    ) -> TrainConfig:
        """The one parse of a ``train`` section (or of :func:`neurodyn.train.fitting.fit`'s keyword options, with
        ``prefix=""``): sections as nested mappings (``{"schedule": {"name": "cosine"}}``). An unknown key
        (``unknown`` leads the message, with the closest spelling: a key of a section given at the top level, as
        ``scheduler`` or ``train_mode`` were, is named with its section), a value of the wrong type or out of range
        is one ConfigError."""
        sections = _sections()
        known = [f.name for f in fields(cls)]
        extra = [k for k in options if k not in known]
        if extra:
            raise ConfigError(_unknown_train_keys(unknown, extra, prefix))
        values = dict(options)
        for name, section in sections.items():
            if name not in values or isinstance(values[name], section):
                continue
            given = values[name]
            keys = [f.name for f in fields(section)]
            if not isinstance(given, Mapping):
                raise ConfigError(
                    f"{prefix}{name} is a section with the keys {', '.join(keys)}; got {given!r} (e.g. "
                    f"{prefix}{name}.{keys[0]}={given!r})"
                )
            wrong = [k for k in given if k not in keys]
            if wrong:
                close = [difflib.get_close_matches(str(k), keys, n=1) for k in wrong]
                said = "; ".join(
                    f"{prefix}{name}.{k}" + (f" (did you mean {prefix}{name}.{c[0]}?)" if c else "")
                    for k, c in zip(wrong, close)
                )
                raise ConfigError(f"{unknown} {said}; {prefix}{name} holds {', '.join(keys)}")
            values[name] = section(**check_field_types(section, given, f"{prefix}{name}".rstrip(".")))
        return cls(**check_field_types(cls, values, prefix.rstrip(".")))

    def loss_fn(self) -> nn.Module:
        """The training loss ``loss`` names (``grad_loss_weight`` weighs the gradient term of ``rel_l2+grad``)."""
        from .losses import build_loss

        return build_loss(self.loss, **({"weight": self.grad_loss_weight} if self.loss == "rel_l2+grad" else {}))

    @property
    def window_steps(self) -> int:
        """Model steps one autoregressive training window unrolls (``rollout.window_steps``); the data layer cuts
        training windows that long."""
        return self.rollout.window_steps


def _sections() -> dict[str, type]:
    """The sections of :class:`TrainConfig`: ``{field name: section dataclass}``."""
    return {f.name: f.default_factory for f in fields(TrainConfig) if f.default_factory is not MISSING}


def _unknown_train_keys(lead: str, keys: Sequence[str], prefix: str) -> str:
    """The message for top-level ``keys`` that are no ``train`` option, each with its closest spelling: a section's
    key (``pct_start`` -> ``schedule.pct_start``), a key ending in one (``rollout_steps``, ``train_mode``), a section's
    name or the start of one (``scheduler``, ``log``: its first key), else the closest option."""
    sections = _sections()
    top = [f.name for f in fields(TrainConfig) if f.name not in sections]
    leaves = {k: f"{s}.{k}" for s, cls in sections.items() for k in (f.name for f in fields(cls))}

    def spelling(key: str) -> str | None:
        if key in leaves:
            return leaves[key]
        ends = [leaf for leaf in leaves if key.endswith(f"_{leaf}")]
        if ends:
            return leaves[max(ends, key=len)]
        for s, cls in sections.items():
            if key.startswith(s) or s.startswith(key):
                return f"{s}.{fields(cls)[0].name}"
        close = difflib.get_close_matches(key, top + list(leaves.values()), n=1)
        return close[0] if close else None

    said = []
    for key in keys:
        new = spelling(str(key))
        if new is None:
            said.append(f"{prefix}{key}")
        elif "." in new:
            section, leaf = new.split(".")
            spelled = f"{prefix}{new}" if prefix else f"{section}={{{leaf!r}: ...}}"  # fit()'s keywords: a mapping
            said.append(f"{prefix}{key} (the train options that belong together are sections now: spell it {spelled})")
        else:
            said.append(f"{prefix}{key} (did you mean {prefix}{new}?)")
    listed = top + [f"{s}.{{{', '.join(f.name for f in fields(cls))}}}" for s, cls in sections.items()]
    return f"{lead} {'; '.join(said)}; known: {', '.join(listed)}"


def make_optimizer(name: str, params, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW or Adam, with PyTorch's fused kernel where the parameters' device supports it (on CPU one fused
    step was 5-7x faster than the default per-parameter loop: NAC's 38 tensors 1.06 -> 0.15 ms, the FNO's
    6.9 -> 1.5 ms, one thread), else the default implementation."""
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    params = list(params)
    try:
        return cls(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError, ValueError):  # device or dtype without a fused kernel, or an old torch
        return cls(params, lr=lr, weight_decay=weight_decay)


MIN_VAL_FOR_BEST = 50  # validation cases under which `evaluate --which auto` keeps last.pt (best.pt: chosen on few)


def split_cases(dataset: Dataset | None) -> int:
    """The cases (samples, sequences) of a split: its ``ids`` where it has them (a split of windows counts its
    samples, not its windows), else its length; 0 for ``None``."""
    if dataset is None:
        return 0
    ids = getattr(dataset, "ids", None)
    return len(ids) if ids is not None else len(dataset)


class Trainer:
    """Trains ``model`` on ``train_set`` for a task; logs into ``run_dir`` (``None``: writes nothing, no checkpoint,
    ``metrics.jsonl`` or ``train.logging`` log, and keeps the best validation epoch's weights in memory:
    :meth:`best_state`).

        ``eval_set`` is the validation data: evaluated every ``eval_every`` epochs (``"val"`` in each epoch's record of
        ``metrics.jsonl``), it alone selects ``best.pt``. The trainer never sees test data: the experiment evaluates the
        test split once, after :meth:`fit` (:func:`neurodyn.train.experiment.run_experiment`)."""

    def __init__(
        self,
        model: nn.Module,
        task: Any,
        train_set: Dataset,
        eval_set: Dataset | None,
        config: TrainConfig,
        run_dir: str | Path | None,
        experiment: dict[str, Any] | None = None,
        device: str | torch.device = "cpu",
        dist_info: DistInfo | None = None,
        progress: bool | None = None,
        interrupt_at: Callable[[int, int], bool] | None = None,
    ):
        self.cfg = config  # validated when it was made (TrainConfig.__post_init__)
        self.device = torch.device(device)
        self.dist = dist_info or DistInfo()
        if self.cfg.batch_size < self.dist.world_size:
            raise ConfigError(
                f"train.batch_size {self.cfg.batch_size} is smaller than the {self.dist.world_size} "
                "processes; every process needs at least one sample per batch"
            )
        self.model = model.to(self.device)
        self.task = task.to(self.device)
        self.train_set, self.eval_set = train_set, eval_set
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._best_in_memory: dict[str, torch.Tensor] | None = None  # best.pt's weights without a run folder
        self.experiment = experiment or {}
        self.progress = progress
        self._print_lines = False
        self.interrupt_at = interrupt_at  # test hook: pretend Ctrl-C after (epoch, batch)
        self.ddp = nn.parallel.DistributedDataParallel(self.model) if self.dist.enabled else self.model
        if self.cfg.compile:
            if self.dist.is_main and progress is not False:
                print("compiling the model with torch.compile; the first step takes minutes on a CPU", flush=True)
            self.ddp = torch.compile(self.ddp)
        self.train_model = with_precision(self.ddp, self.cfg.precision, self.device)
        self.eval_model = with_precision(self.model, self.cfg.precision, self.device)
        self.scaler = grad_scaler(self.cfg.precision, self.device)
        self.optimizer = self._make_optimizer()
        self.n_batches = math.ceil(len(train_set) / self.step_batch)
        sched = self.cfg.schedule
        self.schedule = Schedule(
            self.optimizer,
            sched.name,
            self.cfg.lr,
            self.n_batches,
            self.cfg.epochs,
            pct_start=sched.pct_start,
            step_size=sched.step_size,
            gamma=sched.gamma,
        )
        self.epoch, self.batch, self.global_step = 0, 0, 0
        self.stale_evals, self.stopped_early = 0, False  # early stopping: evaluations since the best one
        self.logs = None
        self._epoch_sums = torch.zeros(2, dtype=torch.float64)  # (sum of per-sample losses, samples) this epoch
        self._epoch_t0 = time.time()
        # the evaluation metric that selects best.pt: a task attribute ``monitor = (key, "min" | "max")``
        self.monitor_key, self.monitor_mode = getattr(task, "monitor", ("rel_l2", "min"))
        if self.monitor_mode not in ("min", "max"):
            raise ConfigError(f"task monitor mode must be 'min' or 'max', got {self.monitor_mode!r}")
        self.best = math.inf if self.monitor_mode == "min" else -math.inf
        self.history: list[dict[str, Any]] = []

    # ---------------------------------------------------------------------------------------- set-up
    def _make_optimizer(self) -> torch.optim.Optimizer:
        params = list(self.model.parameters())
        if not params:
            raise ConfigError(f"model {self._model_name()!r} has no parameters to train by gradient descent")
        return make_optimizer(self.cfg.optimizer, params, self.cfg.lr, self.cfg.weight_decay)

    @property
    def step_batch(self) -> int:
        """Samples per optimizer step: ``batch_size`` x ``accumulate``."""
        return self.cfg.batch_size * self.cfg.accumulate

    @property
    def scheduler(self):
        """The learning-rate scheduler of the current segment (:mod:`neurodyn.train.schedule`)."""
        return self.schedule.scheduler

    @property
    def ckpt_dir(self) -> Path | None:
        return self.run_dir / "checkpoints" if self.run_dir is not None else None

    def best_state(self) -> dict[str, torch.Tensor] | None:
        """The model state of the best validation epoch (``checkpoints/best.pt``, or kept in memory without a run
        folder); None when no epoch was selected (no validation split)."""
        if self.run_dir is None:
            return self._best_in_memory
        best = self.ckpt_dir / "best.pt"
        return read_checkpoint(best, map_location=self.device)["model_state"] if best.exists() else None

    # ---------------------------------------------------------------------------------------- batches
    def _collate(self, dataset: Dataset, ids: Sequence[int]) -> dict[str, torch.Tensor]:
        batch = default_collate([dataset[int(i)] for i in ids])
        return {k: v.to(self.device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}

    def eval_batches(self, dataset: Dataset):
        """This rank's contiguous share of ``dataset``, in batches."""
        n = len(dataset)
        mine = rank_slice(torch.arange(n), self.dist.rank, self.dist.world_size)
        bs = self.cfg.eval_batch_size or self.cfg.batch_size
        for i in range(0, len(mine), bs):
            yield self._collate(dataset, mine[i : i + bs].tolist())

    # ---------------------------------------------------------------------------------------- checkpoints
    def state(self) -> dict[str, Any]:
        return versioned(
            {
                "model": model_spec(self.model),
                "model_state": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.schedule.state_dict(),
                "early_stop": {"stale_evals": self.stale_evals, "stopped": self.stopped_early},
                "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                "normalizers": {k: m.state_dict() for k, m in self.task.normalizers().items()},
                "normalizer_kinds": {
                    k: {"kind": m.kind, "reduce": m.reduce} for k, m in self.task.normalizers().items()
                },
                "task_spec": self.task.spec() if hasattr(self.task, "spec") else None,
                "position": {
                    "epoch": self.epoch,
                    "batch": self.batch,
                    "global_step": self.global_step,
                    "epoch_sums": self._epoch_sums.clone(),
                },
                "rng": rng_state(),
                "best": self.best,
                "n_val": split_cases(self.eval_set),  # the cases best.pt was selected on (evaluate --which auto)
                "train_config": asdict(self.cfg),
                "experiment": self.experiment,
            }
        )

    def save(self, name: str) -> None:
        """Write ``checkpoints/<name>`` (main process); weights holding NaN or Inf are never written: the run has
        diverged, and the previous checkpoint (the last finite one) is kept."""
        if not self.dist.is_main:
            return
        bad = nonfinite_tensors(self.model.state_dict())
        if bad:
            raise TrainingDiverged(
                f"the weights became non-finite ({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}) at epoch "
                f"{self.epoch} batch {self.batch}; {self._kept(name)}. {self._retry_hint()}"
            )
        if self.run_dir is None:  # in memory: the best epoch's weights (the last are the model's own)
            if name == "best.pt":
                self._best_in_memory = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            return
        atomic_torch_save(self.state(), self.ckpt_dir / name)

    def _kept(self, name: str) -> str:
        path = self.ckpt_dir / name if self.ckpt_dir is not None else None
        return (
            f"{path} still holds the last finite weights"
            if path is not None and path.exists()
            else "no checkpoint was written"
        )

    def _retry_hint(self) -> str:
        """What to do after a divergence, in words the user can act on (the folder refuses changed settings)."""
        lower = f"{self.cfg.lr / 10:g}" if math.isfinite(self.cfg.lr) else "1e-3"
        return (
            f"Lower the learning rate (e.g. train.lr={lower}) or enable gradient clipping "
            "(train.grad_clip=1.0), and start this run over with --fresh or train into a new folder with "
            "--run-name NAME"
        )

    def load(self, path: str | Path) -> None:
        ckpt = read_checkpoint(path, map_location=self.device)
        self.model.load_state_dict(ckpt["model_state"])
        pos = ckpt["position"]
        self.schedule.load_state_dict(ckpt["scheduler"], pos["epoch"], self.cfg.epochs)
        self.optimizer.load_state_dict(ckpt["optimizer"])  # after the schedule: it holds the learning rates reached
        stop = ckpt.get("early_stop", {})
        self.stale_evals, self.stopped_early = int(stop.get("stale_evals", 0)), bool(stop.get("stopped", False))
        trained_for = ((ckpt.get("experiment") or {}).get("train") or {}).get("epochs")
        if self.stopped_early and isinstance(trained_for, int) and self.cfg.epochs > trained_for:
            # the run stopped early and was given more epochs: the one reason to do that is to train on
            self.stale_evals, self.stopped_early = 0, False
            if self.dist.is_main and self.progress is not False:
                print(
                    f"{self.run_dir} stopped early after epoch {pos['epoch']}; train.epochs is raised from "
                    f"{trained_for} to {self.cfg.epochs}, so it trains on with a fresh early-stopping patience "
                    f"({self.cfg.early_stop} evaluations)",
                    flush=True,
                )
        if self.scaler is not None and ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        for k, m in self.task.normalizers().items():
            m.load_state_dict(ckpt["normalizers"][k])
        self.epoch, self.batch, self.global_step = pos["epoch"], pos["batch"], pos["global_step"]
        self._epoch_sums = pos["epoch_sums"].cpu().double()
        self.best = ckpt["best"]
        set_rng_state(ckpt["rng"])

    # ---------------------------------------------------------------------------------------- logging
    def _log(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        self.log_extra(record)
        if self.logs is not None:
            self.logs.epoch(record, self.history)

    def log_extra(self, record: dict[str, Any]) -> None:
        """Append ``record`` to ``metrics.jsonl`` (main process). Epochs go through ``_log``, which also keeps
        them in ``history``; other records (the separate test files' metrics after training) come here
        directly, and a resumed run drops them and writes them anew."""
        if self.dist.is_main and self.run_dir is not None:
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")

    def _trim_log(self) -> None:
        """After a resume, forget logged epochs that the checkpoint had not finished (and records that are
        not epochs: they are written again when the run ends)."""
        path = self.run_dir / "metrics.jsonl" if self.run_dir is not None else None
        if not (self.dist.is_main and path is not None and path.exists()):
            return
        keep = [
            line
            for line in path.read_text().splitlines()
            if line and "train_loss" in (rec := json.loads(line)) and rec["epoch"] < self.epoch
        ]
        path.write_text("".join(line + "\n" for line in keep))
        self.history = [json.loads(line) for line in keep]

    # ---------------------------------------------------------------------------------------- loop
    def fit(self, resume: bool = True) -> list[dict[str, Any]]:
        """Train to ``cfg.epochs``; resumes from ``checkpoints/last.pt`` when present and ``resume``.

        Progress: ``progress=None`` shows a bar on a terminal and otherwise prints one line per epoch (a log
        file or a pipe then still shows the run moving); ``"lines"`` always prints the lines; ``True`` always
        shows the bar; ``False`` prints nothing.
        """
        last = self.ckpt_dir / "last.pt" if self.ckpt_dir is not None else None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if self.dist.is_main:
                remove_stale_temporaries(self.ckpt_dir)
        if resume and last is not None and last.exists():
            self.load(last)
            self._trim_log()
            if self.dist.is_main and self.progress is not False:
                at = f" batch {self.batch}" if self.batch else ""
                print(f"resuming {self.run_dir} from epoch {self.epoch}{at} of {self.cfg.epochs}", flush=True)
        elif self.dist.is_main and self.run_dir is not None:
            (self.run_dir / "metrics.jsonl").write_text("")
        barrier()
        from tqdm.auto import tqdm

        if self.dist.is_main and self.run_dir is not None and parse_loggers(self.cfg.logging.to):
            self.logs = RunLogs(self.run_dir, parse_loggers(self.cfg.logging.to), first_epoch=self.epoch)
        total = self.cfg.epochs * self.n_batches
        style = progress_style(self.progress)  # the one idiom (neurodyn.progress): bar, lines or nothing
        use_bar = style == "bar"
        self._print_lines = self.dist.is_main and style == "lines"
        bar = tqdm(
            total=total,
            initial=self.epoch * self.n_batches + self.batch,
            unit="step",
            disable=not (use_bar and self.dist.is_main),
            dynamic_ncols=True,
        )
        try:
            with self._terminate_as_interrupt():
                while self.epoch < self.cfg.epochs and not self.stopped_early and not self._out_of_time():
                    self._train_epoch(bar)
        except KeyboardInterrupt:
            self.save("last.pt")
            bar.close()
            if self.dist.is_main and self.run_dir is not None:
                print(
                    f"\ninterrupted: saved {self.ckpt_dir / 'last.pt'} at epoch {self.epoch} batch {self.batch}; "
                    "run the same command again to resume"
                )
            raise
        finally:
            if self.logs is not None:
                self.logs.close()
        bar.close()
        if self.epoch < self.cfg.epochs and self._out_of_time() and self.dist.is_main and self.progress is not False:
            spent = sum(h["seconds"] for h in self.history)
            print(
                f"stopped at the time limit after epoch {self.epoch}: {spent:.1f} s of train.time_limit="
                f"{self.cfg.time_limit:g} s",
                flush=True,
            )
        if self.stopped_early and self.dist.is_main and self.progress is not False:
            print(
                f"stopped early after epoch {self.epoch}: {self.cfg.early_stop} evaluations without a better "
                f"validation {self.monitor_key}",
                flush=True,
            )
        return self.history

    def _out_of_time(self) -> bool:
        """Whether ``train.time_limit`` forbids another epoch: the epochs so far (training and evaluation, as
        ``metrics.jsonl`` records them, so a resumed run decides the same) have used the limit, or one more epoch
        of their mean length would end more than 10 % past it. Whole epochs only: the schedule and the records
        stay those of complete epochs."""
        limit = self.cfg.time_limit
        if not limit or not self.history or self.batch:
            return False
        spent = sum(h["seconds"] for h in self.history)
        over = spent >= limit or spent + spent / len(self.history) > 1.1 * limit
        # every process stops together (each measured its own seconds): one over the limit stops them all
        return bool(all_reduce_max(torch.tensor([float(over)], dtype=torch.float64))[0] > 0)

    @contextlib.contextmanager
    def _terminate_as_interrupt(self):
        """SIGTERM (a batch scheduler's pre-emption, a session's stop, ``kill``) interrupts training as Ctrl-C does:
        ``last.pt`` is saved at the current batch and the run resumes exactly from there. Only in the main thread
        of a single process: under DDP the launcher stops every rank, and a save that waits for the others could
        hang."""
        if self.dist.world_size > 1 or threading.current_thread() is not threading.main_thread():
            yield
            return

        def interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        previous = signal.signal(signal.SIGTERM, interrupt)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _train_epoch(self, bar) -> None:
        cfg = self.cfg
        batches = global_batches(
            len(self.train_set), self.step_batch, cfg.seed, self.epoch, cfg.shuffle, world=self.dist.world_size
        )
        if self.batch == 0:
            self._epoch_sums = torch.zeros(2, dtype=torch.float64)
            self._epoch_t0 = time.time()
            self.schedule.start_epoch(self.epoch)
        self.ddp.train()
        while self.batch < len(batches):
            if self.interrupt_at is not None and self.interrupt_at(self.epoch, self.batch):
                raise KeyboardInterrupt
            loss = self._step(batches[self.batch])
            self.batch += 1
            self.global_step += 1
            bar.update(1)
            bar.set_postfix(epoch=f"{self.epoch + 1}/{cfg.epochs}", loss=f"{loss:.4g}", refresh=False)
        sums = all_reduce_sum(self._epoch_sums.clone())
        record = {
            "epoch": self.epoch,
            "train_loss": float(sums[0] / sums[1]),
            "lr": self.optimizer.param_groups[0]["lr"],
            "seconds": time.time() - self._epoch_t0,
        }
        improved = False
        if self.eval_set is not None and ((self.epoch + 1) % cfg.eval_every == 0 or self.epoch == cfg.epochs - 1):
            self.ddp.eval()
            record["val"] = self.task.evaluate(self.eval_model, self.eval_batches(self.eval_set))
            value = record["val"][self.monitor_key]
            improved = value < self.best if self.monitor_mode == "min" else value > self.best
            if improved:
                self.best = value
            self.stale_evals = 0 if improved else self.stale_evals + 1
            if cfg.early_stop and self.stale_evals >= cfg.early_stop:
                self.stopped_early = record["stopped_early"] = True
        self._log(record)
        self.epoch, self.batch = self.epoch + 1, 0  # checkpoints hold the position to start from
        if improved:
            self.save("best.pt")
        self.save("last.pt")
        if self.dist.is_main:
            key = self.monitor_key
            value = record.get("val", {}).get(key, float("nan"))
            bar.set_description(f"val {key} {value:.4g}")
            if self._print_lines:
                shown = f"  val {key} {value:.4g}" if "val" in record else ""
                print(
                    f"epoch {self.epoch}/{cfg.epochs}  train loss {record['train_loss']:.4g}{shown}  "
                    f"({record['seconds']:.1f} s)",
                    flush=True,
                )

    def _model_name(self) -> str:
        return getattr(self.model, "registry_name", type(self.model).__name__)

    def stage_progress(self):
        """The progress setting of the long stages around the epochs (the test evaluation): the trainer's, on the
        main process."""
        return self.progress if self.dist.is_main else False

    def measure_step_seconds(self, steps: int = 5, warmup: int = 2) -> float:
        """Median wall time (s) of one training step (forward, loss, backward, optimizer) on this machine, from
        ``steps`` steps after ``warmup``; the steps train the model (use a throwaway trainer)."""
        import statistics

        order = global_batches(
            len(self.train_set), self.step_batch, self.cfg.seed, 0, self.cfg.shuffle, world=self.dist.world_size
        )
        self.ddp.train()
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            self._step(order[i % len(order)])
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def _step(self, global_ids: torch.Tensor) -> float:
        """One optimizer step on the global batch ``global_ids``: this rank's share, in ``accumulate`` micro-batches
        whose gradients add up to the gradient of the global-batch mean loss (the same step as one batch of that
        size, up to rounding). Returns this rank's mean loss."""
        ids = rank_slice(global_ids, self.dist.rank, self.dist.world_size)
        micro = [m for m in ids.chunk(self.cfg.accumulate) if len(m)] if len(ids) else []
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float64)
        for k, part in enumerate(micro):
            batch = self._collate(self.train_set, part.tolist())
            sync = k == len(micro) - 1 or not self.dist.enabled
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                loss = self.task.training_loss(self.train_model, batch)
                if not torch.isfinite(loss):
                    if not nonfinite_tensors(self.model.state_dict()):
                        self.save("last.pt")  # finite weights: the step can be examined from here
                    raise TrainingDiverged(
                        f"the loss became {loss.item()} at epoch {self.epoch} batch {self.batch}; "
                        f"{self._kept('last.pt')}. {self._retry_hint()}"
                    )
                # scaled so that DDP's gradient average equals the gradient of the global-batch mean
                scale = len(part) * self.dist.world_size / len(global_ids)
                scaled = loss * scale
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            total += loss.detach().double().cpu() * len(part)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if self.cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.schedule.step()
        n = float(len(ids))
        self._epoch_sums += torch.stack([total, torch.tensor(n, dtype=torch.float64)])
        return float(total / max(n, 1.0))
