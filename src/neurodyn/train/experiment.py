"""From an experiment config (a merged preset) to a trained run folder.

``run_experiment(cfg, run_dir)`` assembles the data (:func:`neurodyn.data.assembly.build_data`: the
dataset, generated when missing, and the normalizers fitted on the training split), builds the model with
the data's channel counts and the task, trains with the one trainer (a fitted baseline, a
:class:`~neurodyn.baselines.fitted.FittedSequenceModel`, is fitted in one pass by
:func:`neurodyn.baselines.fit.fit_baseline` instead) and writes ``config.yaml``, ``metrics.jsonl``, the checkpoints
and ``summary.md``. The plots are drawn above this layer (:func:`neurodyn.plots.write_run_plots`);
:mod:`neurodyn.train.runs` restores and re-evaluates runs.

``train_experiment(cfg, run_dir, data=...)`` is the same with prepared data (``data``: what ``build_data`` returns,
e.g. :func:`neurodyn.data.assembly.build_sequence_data` over arrays held in memory, as the sequence estimators do)
and ``run_dir=None`` (nothing written: no folder, config, checkpoint, metrics or summary); it returns the trained
model, its task and recorded config (:class:`TrainedExperiment`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from ..baselines.fit import batches as baseline_batches
from ..baselines.fit import fit_baseline
from ..baselines.fitted import FittedSequenceModel
from ..data.assembly import build_data, build_test_sets, named_test_files, split_sizes, without_generator
from ..data.config import DataConfig
from ..data.datasets import SteadyDataset
from ..errors import ConfigError
from ..models import build, count_parameters
from ..models.registry import check_fits_in_memory, check_model_config, config_fields, module_device
from ..nn.sequence_host import resolve_conv_stride
from ..progress import evaluate_stage
from .checkpoint import check_resume_config
from .distributed import DistInfo, barrier
from .epoch_cost import cost_line, estimate_epoch, steps_line
from .logs import RunLogs, parse_loggers
from .metrics import metric_definition, shown_metrics
from .run_folder import check_trainable, foreign_config, open_run_folder, training_lock
from .sequence_task import METRIC_DEFINITIONS as SEQUENCE_METRICS
from .tasks import AutoregressiveTask, SteadyTask
from .trainer import MIN_VAL_FOR_BEST, TrainConfig, Trainer, split_cases


def model_channels(cfg: dict[str, Any], train_set) -> dict[str, int]:
    """Input/output channel counts (and context length) the model needs for this data and task."""
    if isinstance(train_set, SteadyDataset):
        return {"in_channels": train_set.in_channels, "out_channels": train_set.out_channels}
    if cfg.get("task") == "sequence":
        return {
            "in_channels": train_set.in_channels,
            "out_channels": train_set.n_targets,
            "per_step": train_set.per_step,
        }
    step = DataConfig.parse(cfg["data"]).windows.step
    c = train_set.channels
    fac = train_set.frames_as_channels
    out = {
        "in_channels": (train_set.t_in * c if fac else c) + train_set.cf_channels,
        "out_channels": step * c if fac else c,
    }
    if train_set.n_ctx:
        out["ctx_channels"] = train_set.n_ctx
    return out


def build_model(cfg: dict[str, Any], train_set) -> torch.nn.Module:
    m = dict(cfg["model"])
    if "name" not in m:
        raise ConfigError("the model section needs a 'name' (see `neurodyn info models`)")
    name = m.pop("name")
    derived = model_channels(cfg, train_set)
    spatial = getattr(train_set, "spatial_shape", None)
    if spatial and "grid_size" in config_fields(name):
        derived["grid_size"] = list(spatial)  # the nominal grid of a resolution-aware model: the training grid
    for key, have in derived.items():
        if m.get(key) not in (None, have):
            raise ConfigError(
                f"model.{key}={m[key]} but the data and task need {have}; drop the override or change the data section"
            )
        m[key] = have
    if cfg.get("task") == "sequence":  # conv_stride "auto": the strides for the training series' length
        m = resolve_conv_stride(m, train_set.length)
    return build(name, m)


def check_model_accepts(
    model: torch.nn.Module, task, dataset, name: str, what: str = "this dataset", values: bool = True
) -> None:
    """One forward pass on a sample of ``dataset``, so that a resolution or channel count the model cannot
    take fails now, with the data's shape named, rather than deep inside the first step (or, for a test
    file, after the whole training). ``values=False`` passes zeros of the sample's shapes instead of its
    values (for test data before training: nothing of it may reach the model before training ends)."""
    item = dataset[0]
    device = module_device(model)  # the model may already be on an accelerator; the dataset's samples never are
    batch = {
        k: (v[None] if values else torch.zeros_like(v[None])).to(device)
        for k, v in item.items()
        if torch.is_tensor(v) and v.dim() > 0
    }
    was_training = model.training
    model.eval()  # a shape check: no batch-norm statistics of one sample (nor an update of the running ones)
    try:
        with torch.no_grad():
            out = task.predict(model, batch)
    except (ValueError, RuntimeError) as exc:
        msg = " ".join(str(exc).split())
        raise ConfigError(
            f"model {name!r} cannot take {what}'s input of shape {tuple(item['x'].shape)}: {msg}"
        ) from None
    finally:
        model.train(was_training)
    want = task.expected_output_shape(batch) if hasattr(task, "expected_output_shape") else batch["y"].shape
    if tuple(out.shape) != tuple(want):
        raise ConfigError(
            f"model {name!r} returns shape {tuple(out.shape[1:])} on {what} where the task needs {tuple(want[1:])}"
        )


def is_point_cloud(dataset) -> bool:
    """Whether a steady dataset holds point clouds (one point axis with coordinates ``pos``), not grids."""
    return bool(getattr(dataset, "has_pos", False)) and len(getattr(dataset, "spatial_shape", ())) == 1


def build_task(cfg: dict[str, Any], data: dict[str, Any], tcfg: TrainConfig):
    """The task of ``cfg`` on ``data``: its loss and training / evaluation modes come from ``tcfg`` (the parsed
    train section, :func:`train_config`), its normalizers from ``data``."""
    loss = tcfg.loss_fn()
    if cfg.get("task", "steady") == "steady":
        return SteadyTask(loss, data["x_norm"], data["y_norm"], grid=not is_point_cloud(data["sets"]["train"]))
    if cfg.get("task") == "sequence":
        from .sequence_task import SequenceTask

        train = data["sets"]["train"]
        return SequenceTask(
            train.kind,
            data["x_norm"],
            data.get("y_norm"),
            per_step=train.per_step,
            n_targets=train.n_targets,
            rul=data["config"].generator == "bearing",
        )
    train = data["sets"]["train"]
    return AutoregressiveTask(
        loss,
        data["u_norm"],
        train.channels,
        train.frames_as_channels,
        step=data["config"].windows.step,
        cf_norm=data.get("cf_norm"),
        ctx_norm=data.get("ctx_norm"),
        train_mode=tcfg.rollout.mode,
        pushforward=tcfg.rollout.pushforward,
        input_noise=tcfg.rollout.input_noise,
        eval_mode=tcfg.rollout.eval_mode,
    )


def train_config(cfg: dict[str, Any]) -> TrainConfig:
    """The train section of ``cfg`` parsed and validated, once: every training setting is read from the result."""
    return TrainConfig.from_options(cfg.get("train") or {})


def check_config(cfg: dict[str, Any], device: str | torch.device = "cpu", *, data: bool = True) -> TrainConfig:
    """Every key and value of ``cfg`` that can be checked without training: the train section, the model's name, keys
    and values (built on the meta device) and whether it fits ``device``'s memory, a Triton scan backend against
    ``device``, the split sizes (at least one training sample), the generator's options, the data file (it exists
    and is a readable store) and the test files. Returns the train config.

    Runs before anything compares the config with a run folder's, so a typo is reported as a typo (with the
    closest key), never as "trained with another config"; and before any side effect (``--fresh`` removing a run,
    data generated or loaded), so a value refused later cannot have cost anything. ``data=False`` leaves the data
    section out (a caller that brings its own data checks it itself: the estimators' arrays)."""
    tcfg = train_config(cfg)
    model = cfg.get("model") or {}
    if "name" not in model:
        raise ConfigError("the model section needs a 'name' (see `neurodyn info models`)")
    n_params = check_model_config(model["name"], {k: v for k, v in model.items() if k != "name"})
    check_fits_in_memory(model["name"], n_params, device)
    check_scan_backend(model, device)
    if not data:
        return tcfg
    data = DataConfig.parse(without_generator(cfg.get("data") or {}))  # every data value, the generator's options
    data.check_source()
    if data.path:
        check_data_file(data.path)
    if data.splits.n_train != "all":  # ("all" counts the samples of data.path: checked when it is read)
        n_train = split_sizes(data)[0]
        if n_train < 1:
            raise ConfigError(
                f"data.n_train={data.splits.n_train} leaves no training sample (data.n_val="
                f"{data.splits.n_val} carves its share from it); give data.n_train >= 1"
            )
    named_test_files(data)  # a missing test file fails before any data is generated or loaded
    return tcfg


def check_scan_backend(model: dict[str, Any], device: str | torch.device) -> None:
    """One ConfigError when a scan section of ``model`` asks for ``backend: triton`` where the Triton kernels cannot
    run: without the triton package, or on the CPU without ``TRITON_INTERPRET=1`` (its slow interpreter)."""
    from ..ops import triton_loader

    asked = [
        f"model.{key}.backend"
        for key, value in model.items()
        if isinstance(value, dict) and value.get("backend") == "triton"
    ]
    if not asked:
        return
    if not triton_loader.triton_importable():
        raise ConfigError(
            f"{asked[0]}=triton needs the triton package (pip install 'neurodyn[triton]'); or use {asked[0]}=auto"
        )
    if torch.device(device).type != "cuda" and not triton_loader.interpreter_requested():
        raise ConfigError(
            f"{asked[0]}=triton runs the Triton kernels, which need a CUDA device (training here is on "
            f"{torch.device(device).type}; TRITON_INTERPRET=1 runs them on the CPU, very slowly): use "
            f"{asked[0]}=auto, or train with --device cuda"
        )


def check_data_file(path: str | Path) -> None:
    """One DataError unless ``path`` (``data.path``) is a store file that can be read."""
    from ..data.store import StoredDataset

    StoredDataset(path, verify=False)


def run_experiment(
    cfg: dict[str, Any],
    run_dir: str | Path,
    device: str | torch.device = "cpu",
    resume: bool = True,
    dist: DistInfo | None = None,
    progress: bool | None = None,
    interrupt_at=None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train the experiment ``cfg`` into ``run_dir``; returns the final evaluation metrics. ``data``: the data
    prepared already (:func:`train_experiment`) instead of the config's store.

    The main process holds the run folder's lock (:func:`neurodyn.train.run_folder.training_lock`) throughout,
    so a second training of the same folder is refused instead of interleaving with this one."""
    return train_experiment(cfg, run_dir, device, resume, dist, progress, interrupt_at, data).metrics


@dataclass
class TrainedExperiment:
    """What :func:`train_experiment` trained: the final ``model`` (eval mode) and its ``task`` (with the training
    normalizers), the config the run records (``cfg``), its parsed train section, the final evaluation ``metrics``
    and, where a validation split selected an epoch other than the last, that epoch's weights (``best_state``;
    None: the best is the final model, or there is no validation split)."""

    model: torch.nn.Module
    task: Any
    cfg: dict[str, Any]
    train_config: TrainConfig
    metrics: dict[str, Any]
    best_state: dict[str, torch.Tensor] | None = None


def train_experiment(
    cfg: dict[str, Any],
    run_dir: str | Path | None,
    device: str | torch.device = "cpu",
    resume: bool = True,
    dist: DistInfo | None = None,
    progress: bool | None = None,
    interrupt_at=None,
    data: dict[str, Any] | None = None,
) -> TrainedExperiment:
    """:func:`run_experiment`, returning what it trained (module docstring). ``data``: a ``build_data``-like dict
    (``config``, ``path``, ``store``, ``record``, ``sets``, the normalizers) used instead of the config's store; the
    caller has checked its data section then (only the train and model sections are checked here). ``run_dir=None``:
    nothing is written and nothing resumed."""
    dist = dist or DistInfo()
    if isinstance(cfg.get("data"), dict):
        cfg = {**cfg, "data": without_generator(cfg["data"])}
    tcfg = check_config(cfg, device, data=data is None)
    if run_dir is None:
        return _train(cfg, tcfg, None, device, False, dist, progress, interrupt_at, data)
    run_dir = Path(run_dir)
    with training_lock(run_dir) if dist.is_main else contextlib.nullcontext():
        return _train(cfg, tcfg, run_dir, device, resume, dist, progress, interrupt_at, data)


def _train(
    cfg: dict[str, Any],
    tcfg: TrainConfig,
    run_dir: Path | None,
    device,
    resume: bool,
    dist: DistInfo,
    progress: bool | None,
    interrupt_at,
    data: dict[str, Any] | None,
) -> TrainedExperiment:
    """The body of :func:`train_experiment`, under the run folder's lock (when there is a folder)."""
    if run_dir is not None:
        if dist.is_main:
            check_trainable(run_dir)
        why = foreign_config(run_dir)
        if why:
            raise ConfigError(
                f"run folder {run_dir} holds a config.yaml that {why}, which a training does not write "
                "over; train into another folder with --run-name NAME"
            )
        if resume:  # before any data is generated or loaded
            check_resume_config(cfg, run_dir, tcfg)
    torch.manual_seed(tcfg.seed)
    if data is None:
        data = build_data(
            cfg,
            device,
            progress if dist.is_main else False,
            dist.is_main,
            barrier,
            train_window_steps=tcfg.window_steps,
        )
    train_set = data["sets"]["train"]
    model = build_model(cfg, train_set)
    fitted = isinstance(model, FittedSequenceModel)
    if fitted and dist.enabled:
        raise ConfigError(
            f"model {cfg['model']['name']!r} is fitted in one pass, not trained by gradient descent; "
            "run it in one process (no torchrun)"
        )
    task = build_task(cfg, data, tcfg)
    check_model_accepts(model, task, train_set, cfg["model"]["name"])
    test_sets = build_test_sets(cfg)
    for name, dataset in test_sets.items():  # before training: a resolution the model refuses fails now
        check_model_accepts(model, task, dataset, cfg["model"]["name"], what=f"test file {name!r}", values=False)
    eval_set = monitored_set(data["sets"])
    if tcfg.early_stop and eval_set is None:
        raise ConfigError(
            f"train.early_stop={tcfg.early_stop} stops on the validation split, and this run has none "
            "(data.n_val = 0); set data.n_val (e.g. auto) or train.early_stop=0"
        )
    recorded = recorded_config(cfg, data["record"])
    main = dist.is_main and run_dir is not None
    if main:
        open_run_folder(run_dir)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(recorded, sort_keys=False))
    if dist.is_main and progress is not False:
        tests = f" + test files {', '.join(f'{k} ({len(v)})' for k, v in test_sets.items())}" if test_sets else ""
        sizes = " / ".join(f"{len(data['sets'][k]) if k in data['sets'] else 0} {k}" for k in ("train", "val", "test"))
        print(
            f"{cfg.get('preset', 'experiment')} [{cfg.get('scale', '?')}]: model {cfg['model']['name']} with "
            f"{count_parameters(model):,} parameters; {sizes} samples from {data['path']}{tests}; "
            f"processes: {dist.world_size}",
            flush=True,
        )
        for line in header_lines(model, task, train_set, eval_set, tcfg, device, dist):
            print(line, flush=True)
    batch_size = tcfg.eval_batch_size or tcfg.batch_size
    done = _fit(model, task, train_set, eval_set, tcfg, run_dir, recorded, device, dist, progress, resume, interrupt_at)
    history, log, best_state, epoch, passes = done
    tests = evaluate_tests(model, task, data["sets"].get("test"), test_sets, best_state=best_state, **passes)
    if fitted and eval_set is not None:  # its one model is the best validation epoch's too (best.pt holds it)
        tests = {name: {**m, "best": m["last"]} for name, m in tests.items()}
    if tests:
        log({"epoch": epoch, "test": tests})
    if main:
        scored, val_scores = _tested(data["sets"].get("test"), test_sets), None
        if not scored and eval_set is not None and getattr(task, "name", "") == "sequence":
            # no test data (an estimator's run by default): the final model and the baselines on the validation split
            scored = {VALIDATION: eval_set}
            val_scores = evaluate_tests(model, task, None, scored, **passes)[VALIDATION]["last"]
        baselines = (
            {}
            if dist.enabled
            else baseline_scores(
                task, train_set, scored, device=device, batch_size=batch_size, progress=passes["progress"]
            )
        )
        key, mode = getattr(task, "monitor", ("rel_l2", "min"))
        write_summary(
            recorded,
            history,
            count_parameters(model),
            run_dir,
            monitor=key,
            mode=mode,
            tests=tests,
            baselines=baselines,
            classes=getattr(train_set, "classes", None),
            n_val=split_cases(eval_set),
            channels=field_channels(train_set),
            val_scores=val_scores,
            steps=steps_line(train_set, model),
        )
    key = getattr(task, "monitor", ("rel_l2", "min"))[0]
    final = dict(tests.get("test", {}).get("last", {}))
    final.update({f"{name}/{key}": m["last"][key] for name, m in tests.items() if name != "test"})
    model.eval()
    return TrainedExperiment(model, task, recorded, tcfg, final, best_state)


def _fit(
    model,
    task,
    train_set,
    eval_set,
    tcfg: TrainConfig,
    run_dir: Path | None,
    recorded: dict[str, Any],
    device,
    dist: DistInfo,
    progress,
    resume: bool,
    interrupt_at,
):
    """Train ``model`` with the trainer, or fit a baseline in its one pass (:func:`neurodyn.baselines.fit.
    fit_baseline`). Returns ``(history, log, best_state, epoch, passes)``: the epoch records, what logs a record to
    ``metrics.jsonl``, the best validation epoch's weights (None: none, or the final model's), the last epoch, and
    how the test sets are passed over (``batches`` of a dataset, the stages' ``progress``)."""
    batch_size = tcfg.eval_batch_size or tcfg.batch_size
    if isinstance(model, FittedSequenceModel):
        run = fit_baseline(
            model,
            task,
            train_set,
            eval_set,
            run_dir,
            batch_size=batch_size,
            device=device,
            train_config=asdict(tcfg),
            experiment=recorded,
            progress=progress,
            resume=resume,
        )
        if run_dir is not None and dist.is_main and parse_loggers(tcfg.logging.to) and not run.reloaded:
            logs = RunLogs(run_dir, parse_loggers(tcfg.logging.to))
            logs.epoch(run.history[-1], run.history)
            logs.close()
        passes = {"batches": lambda ds: baseline_batches(ds, batch_size, device), "progress": progress}
        return run.history, run.log_extra, None, 0, passes
    # the checkpoint holds the recorded config: data.file's shapes give a moved training file's length to pooling
    trainer = Trainer(
        model,
        task,
        train_set,
        eval_set,
        tcfg,
        run_dir,
        experiment=recorded,
        device=device,
        dist_info=dist,
        progress=progress,
        interrupt_at=interrupt_at,
    )
    history = trainer.fit(resume=resume)
    passes = {"batches": trainer.eval_batches, "progress": trainer.stage_progress()}
    return history, trainer.log_extra, trainer.best_state(), trainer.epoch - 1, passes


def header_lines(
    model: torch.nn.Module, task, train_set, eval_set, tcfg: TrainConfig, device, dist: DistInfo
) -> list[str]:
    """The run header's lines after the first (:mod:`neurodyn.train.epoch_cost`): how a sequence run's series reach
    the model (raw or pooled, and a strided front end's steps), and the cost per epoch estimated from a few timed
    steps of a copy of the model (not with several processes, nor before ``torch.compile`` has compiled)."""
    lines = [line for line in [steps_line(train_set, model)] if line]
    if isinstance(model, FittedSequenceModel):  # timing it would fit it twice
        return [*lines, "cost: fitted in one pass (no epochs); its time is in summary.md"]
    if dist.enabled or tcfg.compile:
        why = f"{dist.world_size} processes" if dist.enabled else "train.compile (the first steps compile)"
        return [*lines, f"cost: not estimated before training ({why})"]
    try:
        lines.append(
            cost_line(
                estimate_epoch(model, task, train_set, eval_set, tcfg, device, steps=3, warmup=1, eval_batches=2), tcfg
            )
        )
    except (RuntimeError, ValueError, TypeError) as exc:  # an estimate never stops a training; say why it is missing
        lines.append(f"cost: not estimated ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
    return lines


def recorded_config(cfg: dict[str, Any], record: dict[str, Any] | None) -> dict[str, Any]:
    """The config a run writes (``config.yaml``, ``summary.md``): ``cfg``, and for a run on a file (``data.path``)
    the ``record`` of the file it read under ``data.file`` (path, sha256, shapes:
    :func:`~neurodyn.data.assembly.file_record`)."""
    if record is None:
        return cfg
    return {**cfg, "data": {**cfg["data"], "file": record}}


def evaluate_tests(
    model: torch.nn.Module,
    task,
    test_split,
    test_files: dict[str, Any],
    *,
    batches,
    best_state: dict[str, torch.Tensor] | None = None,
    progress: Any = False,
) -> dict[str, dict[str, Any]]:
    """The one evaluation of the test data, after training: ``{set: {"last": metrics, "best": metrics}}`` for the
    test split (``"test"``) and each test file, of the final model (``last``) and of the weights the validation split
    selected (``best``, when given: ``best_state``). ``batches(dataset)``: the batches of a set (the trainer's, one
    process's share); ``progress``: one stage per set and checkpoint (:mod:`neurodyn.progress`). The caller logs the
    result as one record of ``metrics.jsonl``."""
    sets = _tested(test_split, test_files)
    if not sets:
        return {}
    model.eval()

    def evaluate(name, ds, which):
        what = f"testing the {which} model on {'the test split' if name == 'test' else repr(name)}"
        return evaluate_stage(task, model, batches(ds), len(ds), what, progress)

    out = {name: {"last": evaluate(name, ds, "final")} for name, ds in sets.items()}
    if best_state is not None:
        state = {k: v.clone() for k, v in model.state_dict().items()}
        model.load_state_dict(best_state)
        for name, ds in sets.items():
            out[name]["best"] = evaluate(name, ds, "best validation epoch's")
        model.load_state_dict(state)
    return out


def _tested(test_split, test_files: dict[str, Any]) -> dict[str, Any]:
    return ({"test": test_split} if test_split is not None and len(test_split) else {}) | dict(test_files)


# the 1-NN baseline of a run's summary is skipped above this many (train x test series x steps x channels)
KNN_SUMMARY_LIMIT = 2e10
# the name of the validation split among the sets a summary scores (a sequence run without test data)
VALIDATION = "validation split"


def baseline_scores(
    task,
    train_set,
    sets: dict[str, Any],
    *,
    device: str | torch.device = "cpu",
    batch_size: int = 256,
    progress: Any = False,
) -> dict[str, dict[str, Any]]:
    """What the simplest predictors score on each test set of a sequence run (per-sequence targets), for the
    summary: ``majority`` (the most frequent training class, or the training mean) and ``1-NN`` (the nearest
    training series, squared Euclidean distance), fitted on the training split with the run's normalizers by the
    baselines' own path (:func:`neurodyn.baselines.fit.fit_baseline`). ``{set: {"majority": metrics, "1-NN": metrics
    | None}}``; 1-NN is None (skipped) where it would cost more than ``KNN_SUMMARY_LIMIT`` element operations."""
    if getattr(task, "name", "") != "sequence" or task.per_step or not sets or not len(train_set):
        return {}
    out: dict[str, dict[str, Any]] = {name: {} for name in sets}
    for label, name in (("majority", "majority"), ("1-NN", "knn")):
        size = train_set[0]["x"].numel()
        if name == "knn" and len(train_set) * sum(len(ds) for ds in sets.values()) * size > KNN_SUMMARY_LIMIT:
            out = {k: v | {label: None} for k, v in out.items()}
            continue
        model = build(name, in_channels=train_set.in_channels, out_channels=task.n_targets)
        fit_baseline(
            model, task, train_set, batch_size=batch_size, device=device, progress=progress, training_loss=False
        )
        for set_name, ds in sets.items():
            where = "the test split" if set_name == "test" else repr(set_name)
            out[set_name][label] = evaluate_stage(
                task, model, baseline_batches(ds, batch_size, device), len(ds), f"baseline {label} on {where}", progress
            )
    return out


def monitored_set(sets: dict[str, Any]):
    """What the trainer evaluates each epoch and selects ``best.pt`` by: the validation split, or nothing (then
    nothing is selected). Never the test split or a test file: they are evaluated once, after training."""
    val = sets.get("val")
    return val if val is not None and len(val) else None


def confusion_table(confusion: list[list[int]], classes: list[str] | None = None) -> list[str]:
    """Markdown lines of a confusion matrix ``confusion[true][predicted]``, rows and columns named by ``classes``
    (class indices where there are none)."""
    names = (
        [str(c) for c in classes]
        if classes and len(classes) == len(confusion)
        else [str(k) for k in range(len(confusion))]
    )
    return [
        "Confusion matrix of the final model (rows: true class, columns: predicted):",
        "",
        "| true / predicted | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
    ] + [f"| {name} | " + " | ".join(str(v) for v in row) + " |" for name, row in zip(names, confusion)]


def field_channels(train_set) -> int | None:
    """The channels of one target field the metrics compare (steady: the target's channels; autoregressive: one
    frame's), or None for a sequence set."""
    if isinstance(train_set, SteadyDataset):
        return train_set.out_channels
    return getattr(train_set, "channels", None)


def metric_definitions(names: list[str], task: str | None = None) -> list[str]:
    """Markdown lines defining each metric of ``names`` in one line with its units (``task``: ``sequence``, the
    sequence task's metrics, :mod:`neurodyn.train.sequence_task`; else the field metrics of a steady or
    ``autoregressive`` task, :mod:`neurodyn.train.metrics`, PDEBench's conventions)."""
    sequence = task == "sequence"
    source = "`neurodyn.train.sequence_task`" if sequence else "`neurodyn.train.metrics`, PDEBench's conventions"
    lines = [f"Metrics ({source}):", ""]
    for name in names:
        text = (
            SEQUENCE_METRICS.get(name) if sequence else metric_definition(name, autoregressive=task == "autoregressive")
        )
        lines.append(f"- `{name}`: {text or 'defined in ' + source}")
    return lines


def write_summary(
    cfg: dict[str, Any],
    history: list[dict[str, Any]],
    n_params: int,
    run_dir: Path,
    monitor: str = "rel_l2",
    mode: str = "min",
    tests: dict[str, dict[str, Any]] | None = None,
    baselines: dict[str, dict[str, Any]] | None = None,
    classes: list[str] | None = None,
    n_val: int | None = None,
    channels: int | None = None,
    val_scores: dict[str, Any] | None = None,
    steps: str | None = None,
) -> None:
    """``summary.md``: the run's settings, the validation curve's best epoch, and the one evaluation of the test
    split and test files (the final model, and the checkpoint the validation split selected), beside the
    ``baselines`` of the same sets (:func:`baseline_scores`), with the final model's confusion matrix (rows: true
    class, columns: predicted; named by ``classes``) where the task reports one. A run without test data (no
    ``tests``) given ``val_scores``, the final model's metrics on the validation split, shows them beside the
    baselines of that split (``baselines[VALIDATION]``) instead, said to be no test. ``n_val``: the validation split's
    cases, stated with a remark when they are fewer than ``MIN_VAL_FOR_BEST`` (``best.pt`` then chosen on few).
    ``steps``: a sequence run's :func:`~neurodyn.train.epoch_cost.steps_line` (raw or pooled series), written under
    the data line. ``channels``: the channels of one target field (:func:`field_channels`), which tell the metrics
    that are one quantity by definition (:func:`neurodyn.train.metrics.shown_metrics`). Every metric a table shows
    is defined below it in one line with its units; Fourier bands a grid has no mode in are marked n/a, never 0."""
    pick = min if mode == "min" else max
    curve = [(h["epoch"] + 1, h["val"][monitor]) for h in history if "val" in h]
    name = "rel. L2" if monitor == "rel_l2" else monitor
    if curve:
        best_epoch, best = pick(curve, key=lambda c: c[1])
        cases = f"; {n_val} validation cases" if n_val else ""
        validation = (
            f"- validation {name}: best {best:.5g} at epoch {best_epoch} (selects `best.pt`{cases}), "
            f"final {curve[-1][1]:.5g}"
        )
        if n_val and n_val < MIN_VAL_FOR_BEST:
            validation += (
                f"\n- note: `best.pt` is chosen on {n_val} validation cases (under {MIN_VAL_FOR_BEST}), "
                "so `neurodyn evaluate` / `predict` use `last.pt` unless given `--which best`"
            )
    else:
        validation = "- validation: none (data.n_val = 0): no checkpoint was selected"
    lines = [
        f"# {cfg.get('preset', 'experiment')} — scale `{cfg.get('scale', '?')}`",
        "",
        f"- model: `{cfg['model']['name']}`, {n_params:,} parameters",
        f"- data: {json.dumps({k: v for k, v in cfg['data'].items()})}",
        *([f"- {steps}"] if steps else []),
        f"- training: {len(history)} epochs, final train loss {history[-1]['train_loss']:.5g}" if history else "",
        f"- time: {sum(h['seconds'] for h in history):.1f} s of training",
        validation,
        "- test: evaluated once, after training, with the training normalizers",
        "",
    ]
    shown: list[str] = []
    notes: list[str] = []
    scored = dict(tests or {})
    if not scored:
        lines += ["No test split and no test files: nothing was tested (`neurodyn evaluate RUN --data FILE`).", ""]
        if val_scores is not None:
            scored = {VALIDATION: {"last": val_scores}}
    for set_name, by_model in scored.items():
        keys, set_notes = shown_metrics(by_model["last"], channels)
        shown += [k for k in keys if k not in shown]
        notes += [n for n in set_notes if n not in notes]
        columns = {m: by_model[m] for m in ("last", "best") if m in by_model}
        base = (baselines or {}).get(set_name, {})
        columns.update({label: metrics for label, metrics in base.items() if metrics is not None})
        header = {
            "last": "final model",
            "best": "best validation epoch",
            "majority": "majority (baseline)",
            "1-NN": "1-NN Euclidean (baseline)",
        }
        title = (
            "Test split"
            if set_name == "test"
            else "The validation split (no test data: these are not test scores; the validation split also chose "
            "`best.pt`; `data.n_test=K` holds a test split out)"
            if set_name == VALIDATION and not tests
            else f"Test file `{set_name}`"
        )
        lines += [
            f"{title}:",
            "",
            "| metric | " + " | ".join(header.get(m, m) for m in columns) + " |",
            "| --- |" + " --- |" * len(columns),
        ]
        lines += [
            f"| {k} | " + " | ".join(f"{c.get(k, float('nan')):.5g}" for c in columns.values()) + " |" for k in keys
        ]
        if steps and any(m is not None for m in base.values()):
            lines += ["", f"(the baselines read the training split as the model does: {steps.split(';')[0]})"]
        if base.get("1-NN", 0) is None:
            lines += [
                "",
                f"(1-NN skipped: more than {KNN_SUMMARY_LIMIT:.0e} element operations; train the "
                "`knn/sequence` preset to score it)",
            ]
        if "confusion" in by_model["last"]:
            lines += ["", *confusion_table(by_model["last"]["confusion"], classes)]
        lines.append("")
    if shown:
        lines += metric_definitions(shown, task=cfg.get("task")) + [""]
        if notes:
            lines += ["Not shown:", "", *[f"- {n}" for n in notes], ""]
    # no image links here: the plots are drawn above this layer, which links each one it writes
    # (neurodyn.plots.link_plots), so a summary never links an image that does not exist
    (run_dir / "summary.md").write_text("\n".join(lines))
