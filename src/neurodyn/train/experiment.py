"""From an experiment config (a merged preset) to a trained run folder.

``run_experiment(cfg, run_dir)`` assembles the data (:func:`neurodyn.data.assembly.build_data`: the
dataset, generated when missing, and the normalizers fitted on the training split), builds the model with
the data's channel counts and the task, trains with the one trainer and writes ``config.yaml``,
``metrics.jsonl``, the checkpoints and ``summary.md``. The plots are drawn above this layer
(:func:`neurodyn.plots.write_run_plots`); :mod:`neurodyn.train.runs` restores and re-evaluates runs.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import torch
import yaml

from ..checkpoint_io import read_checkpoint
from ..data.assembly import build_data, build_test_sets, named_test_files, split_sizes, without_generator
from ..data.config import DataConfig
from ..data.datasets import SteadyDataset
from ..errors import ConfigError
from ..models import build, count_parameters
from ..models.registry import check_fits_in_memory, check_model_config, config_fields, module_device
from ..nn.sequence_host import resolve_conv_stride
from .checkpoint import check_resume_config
from .epoch_cost import cost_line, estimate_epoch, steps_line
from .distributed import DistInfo, barrier
from .metrics import metric_definition, shown_metrics
from .run_folder import check_trainable, foreign_config, open_run_folder, training_lock
from .sequence_task import METRIC_DEFINITIONS as SEQUENCE_METRICS
from .tasks import AutoregressiveTask, SteadyTask, evaluate_stage
from .trainer import MIN_VAL_FOR_BEST, TrainConfig, Trainer, split_cases


def model_channels(cfg: dict[str, Any], train_set) -> dict[str, int]:
    """Input/output channel counts (and context length) the model needs for this data and task."""
    if isinstance(train_set, SteadyDataset):
        return {"in_channels": train_set.in_channels, "out_channels": train_set.out_channels}
    if cfg.get("task") == "sequence":
        return {"in_channels": train_set.in_channels, "out_channels": train_set.n_targets,
                "per_step": train_set.per_step}
    step = DataConfig.parse(cfg["data"]).windows.step
    c = train_set.channels
    fac = train_set.frames_as_channels
    out = {"in_channels": (train_set.t_in * c if fac else c) + train_set.cf_channels,
           "out_channels": step * c if fac else c}
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
            raise ConfigError(f"model.{key}={m[key]} but the data and task need {have}; drop the override "
                              "or change the data section")
        m[key] = have
    if cfg.get("task") == "sequence":  # conv_stride "auto": the strides for the training series' length
        m = resolve_conv_stride(m, train_set.length)
    return build(name, m)


def check_model_accepts(model: torch.nn.Module, task, dataset, name: str, what: str = "this dataset",
                        values: bool = True) -> None:
    """One forward pass on a sample of ``dataset``, so that a resolution or channel count the model cannot
    take fails now, with the data's shape named, rather than deep inside the first step (or, for a test
    file, after the whole training). ``values=False`` passes zeros of the sample's shapes instead of its
    values (for test data before training: nothing of it may reach the model before training ends)."""
    item = dataset[0]
    device = module_device(model)  # the model may already be on an accelerator; the dataset's samples never are
    batch = {k: (v[None] if values else torch.zeros_like(v[None])).to(device)
             for k, v in item.items() if torch.is_tensor(v) and v.dim() > 0}
    was_training = model.training
    model.eval()  # a shape check: no batch-norm statistics of one sample (nor an update of the running ones)
    try:
        with torch.no_grad():
            out = task.predict(model, batch)
    except (ValueError, RuntimeError) as exc:
        msg = " ".join(str(exc).split())
        raise ConfigError(f"model {name!r} cannot take {what}'s input of shape "
                          f"{tuple(item['x'].shape)}: {msg}") from None
    finally:
        model.train(was_training)
    want = task.expected_output_shape(batch) if hasattr(task, "expected_output_shape") else batch["y"].shape
    if tuple(out.shape) != tuple(want):
        raise ConfigError(f"model {name!r} returns shape {tuple(out.shape[1:])} on {what} where the task needs "
                          f"{tuple(want[1:])}")


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
        return SequenceTask(train.kind, data["x_norm"], data.get("y_norm"), per_step=train.per_step,
                            n_targets=train.n_targets, rul=data["config"].generator == "bearing")
    train = data["sets"]["train"]
    return AutoregressiveTask(loss, data["u_norm"], train.channels, train.frames_as_channels,
                              step=data["config"].windows.step, cf_norm=data.get("cf_norm"),
                              ctx_norm=data.get("ctx_norm"), train_mode=tcfg.rollout.mode,
                              pushforward=tcfg.rollout.pushforward, input_noise=tcfg.rollout.input_noise,
                              eval_mode=tcfg.rollout.eval_mode)


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
            raise ConfigError(f"data.n_train={data.splits.n_train} leaves no training sample (data.n_val="
                              f"{data.splits.n_val} carves its share from it); give data.n_train >= 1")
    named_test_files(data)  # a missing test file fails before any data is generated or loaded
    return tcfg


def check_scan_backend(model: dict[str, Any], device: str | torch.device) -> None:
    """One ConfigError when a scan section of ``model`` asks for ``backend: triton`` where the Triton kernels cannot
    run: without the triton package, or on the CPU without ``TRITON_INTERPRET=1`` (its slow interpreter)."""
    from ..ops import triton_kernels

    asked = [f"model.{key}.backend" for key, value in model.items()
             if isinstance(value, dict) and value.get("backend") == "triton"]
    if not asked:
        return
    if not triton_kernels.triton_importable():
        raise ConfigError(f"{asked[0]}=triton needs the triton package (pip install 'neurodyn[triton]'); or use "
                          f"{asked[0]}=auto")
    if torch.device(device).type != "cuda" and not triton_kernels.interpreter_requested():
        raise ConfigError(f"{asked[0]}=triton runs the Triton kernels, which need a CUDA device (training here is on "
                          f"{torch.device(device).type}; TRITON_INTERPRET=1 runs them on the CPU, very slowly): use "
                          f"{asked[0]}=auto, or train with --device cuda")


def check_data_file(path: str | Path) -> None:
    """One DataError unless ``path`` (``data.path``) is a store file that can be read."""
    from ..data.store import StoredDataset

    StoredDataset(path, verify=False)


def run_experiment(cfg: dict[str, Any], run_dir: str | Path, device: str | torch.device = "cpu",
                   resume: bool = True, dist: DistInfo | None = None, progress: bool | None = None,
                   interrupt_at=None) -> dict[str, Any]:
    """Train the experiment ``cfg`` into ``run_dir``; returns the final evaluation metrics.

    The main process holds the run folder's lock (:func:`neurodyn.train.run_folder.training_lock`) throughout,
    so a second training of the same folder is refused instead of interleaving with this one."""
    dist = dist or DistInfo()
    run_dir = Path(run_dir)
    if isinstance(cfg.get("data"), dict):
        cfg = {**cfg, "data": without_generator(cfg["data"])}
    tcfg = check_config(cfg, device)
    with training_lock(run_dir) if dist.is_main else contextlib.nullcontext():
        return _run_locked(cfg, tcfg, run_dir, device, resume, dist, progress, interrupt_at)


def _run_locked(cfg: dict[str, Any], tcfg: TrainConfig, run_dir: Path, device, resume: bool, dist: DistInfo,
                progress: bool | None, interrupt_at) -> dict[str, Any]:
    """The body of :func:`run_experiment`, under the run folder's lock."""
    if dist.is_main:
        check_trainable(run_dir)
    why = foreign_config(run_dir)
    if why:
        raise ConfigError(f"run folder {run_dir} holds a config.yaml that {why}, which a training does not write "
                          "over; train into another folder with --run-name NAME")
    if resume:  # before any data is generated or loaded
        check_resume_config(cfg, run_dir, tcfg)
    torch.manual_seed(tcfg.seed)
    data = build_data(cfg, device, progress if dist.is_main else False, dist.is_main, barrier,
                      train_window_steps=tcfg.window_steps)
    model = build_model(cfg, data["sets"]["train"])
    task = build_task(cfg, data, tcfg)
    check_model_accepts(model, task, data["sets"]["train"], cfg["model"]["name"])
    test_sets = build_test_sets(cfg)
    for name, dataset in test_sets.items():  # before training: a resolution the model refuses fails now
        check_model_accepts(model, task, dataset, cfg["model"]["name"], what=f"test file {name!r}", values=False)
    eval_set = monitored_set(data["sets"])
    if tcfg.early_stop and eval_set is None:
        raise ConfigError(f"train.early_stop={tcfg.early_stop} stops on the validation split, and this run has none "
                          "(data.n_val = 0); set data.n_val (e.g. auto) or train.early_stop=0")
    recorded = recorded_config(cfg, data["record"])
    if dist.is_main:
        open_run_folder(run_dir)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(recorded, sort_keys=False))
    # the checkpoint holds the recorded config: data.file's shapes give a moved training file's length to time pooling
    trainer = Trainer(model, task, data["sets"]["train"], eval_set, tcfg, run_dir, experiment=recorded,
                      device=device, dist_info=dist, progress=progress, interrupt_at=interrupt_at)
    if dist.is_main and progress is not False:
        tests = f" + test files {', '.join(f'{k} ({len(v)})' for k, v in test_sets.items())}" if test_sets else ""
        sizes = " / ".join(f"{len(data['sets'][k]) if k in data['sets'] else 0} {k}" for k in ("train", "val", "test"))
        print(f"{cfg.get('preset', 'experiment')} [{cfg.get('scale', '?')}]: model {cfg['model']['name']} with "
              f"{count_parameters(model):,} parameters; {sizes} samples from {data['path']}{tests}; "
              f"processes: {dist.world_size}", flush=True)
        for line in header_lines(model, task, data["sets"]["train"], eval_set, tcfg, device, dist):
            print(line, flush=True)
    history = trainer.fit(resume=resume)
    tests = evaluate_tests(trainer, task, data["sets"].get("test"), test_sets)
    if dist.is_main:
        baselines = {} if dist.enabled else baseline_scores(trainer, task, data["sets"]["train"],
                                                            _tested(data["sets"].get("test"), test_sets))
        write_summary(recorded, history, count_parameters(model), run_dir, monitor=trainer.monitor_key,
                      mode=trainer.monitor_mode, tests=tests, baselines=baselines,
                      classes=getattr(data["sets"]["train"], "classes", None), n_val=split_cases(eval_set),
                      channels=field_channels(data["sets"]["train"]), steps=steps_line(data["sets"]["train"], model))
    final = dict(tests.get("test", {}).get("last", {}))
    final.update({f"{name}/{trainer.monitor_key}": m["last"][trainer.monitor_key]
                  for name, m in tests.items() if name != "test"})
    return final


def header_lines(model: torch.nn.Module, task, train_set, eval_set, tcfg: TrainConfig, device,
                 dist: DistInfo) -> list[str]:
    """The run header's lines after the first (:mod:`neurodyn.train.epoch_cost`): how a sequence run's series reach
    the model (raw or pooled, and a strided front end's steps), and the cost per epoch estimated from a few timed
    steps of a copy of the model (not with several processes, nor before ``torch.compile`` has compiled)."""
    lines = [line for line in [steps_line(train_set, model)] if line]
    if dist.enabled or tcfg.compile:
        why = f"{dist.world_size} processes" if dist.enabled else "train.compile (the first steps compile)"
        return [*lines, f"cost: not estimated before training ({why})"]
    try:
        lines.append(cost_line(estimate_epoch(model, task, train_set, eval_set, tcfg, device, steps=3, warmup=1,
                                              eval_batches=2), tcfg))
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


def evaluate_tests(trainer: Trainer, task, test_split, test_files: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The one evaluation of the test data, after training: ``{set: {"last": metrics, "best": metrics}}`` for the
    test split (``"test"``) and each test file, of the final model (``last``) and of the checkpoint the validation
    split selected (``best``, when there is one). Logged as one record of ``metrics.jsonl``."""
    sets = _tested(test_split, test_files)
    if not sets:
        return {}
    model = trainer.model
    model.eval()
    progress = trainer._stage_progress()  # one stage per set and checkpoint (neurodyn.progress)

    def evaluate(name, ds, which):
        what = f"testing the {which} model on {'the test split' if name == 'test' else repr(name)}"
        return evaluate_stage(task, model, trainer.eval_batches(ds), len(ds), what, progress)

    out = {name: {"last": evaluate(name, ds, "final")} for name, ds in sets.items()}
    best = trainer.ckpt_dir / "best.pt"
    if trainer.eval_set is not None and best.exists():
        state = {k: v.clone() for k, v in model.state_dict().items()}
        model.load_state_dict(read_checkpoint(best, map_location=trainer.device)["model_state"])
        for name, ds in sets.items():
            out[name]["best"] = evaluate(name, ds, "best validation epoch's")
        model.load_state_dict(state)
    trainer.log_extra({"epoch": trainer.epoch - 1, "test": out})
    return out


def _tested(test_split, test_files: dict[str, Any]) -> dict[str, Any]:
    return ({"test": test_split} if test_split is not None and len(test_split) else {}) | dict(test_files)


# the 1-NN baseline of a run's summary is skipped above this many (train x test series x steps x channels)
KNN_SUMMARY_LIMIT = 2e10


def baseline_scores(trainer: Trainer, task, train_set, sets: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the simplest predictors score on each test set of a sequence run (per-sequence targets), for the
    summary: ``majority`` (the most frequent training class, or the training mean) and ``1-NN`` (the nearest
    training series, squared Euclidean distance, ``models.fitted_baselines``), fitted on the training split with
    the run's normalizers. ``{set: {"majority": metrics, "1-NN": metrics | None}}``; 1-NN is None (skipped) where
    it would cost more than ``KNN_SUMMARY_LIMIT`` element operations."""
    if getattr(task, "name", "") != "sequence" or task.per_step or not sets or not len(train_set):
        return {}
    out: dict[str, dict[str, Any]] = {name: {} for name in sets}
    for label, name in (("majority", "majority"), ("1-NN", "knn")):
        model = build(name, in_channels=train_set.in_channels, out_channels=task.n_targets).to(trainer.device)
        size = train_set[0]["x"].numel()
        if name == "knn" and len(train_set) * sum(len(ds) for ds in sets.values()) * size > KNN_SUMMARY_LIMIT:
            out = {k: v | {label: None} for k, v in out.items()}
            continue
        task.fit_model(model, trainer.eval_batches(train_set), progress=trainer._stage_progress())
        model.eval()
        for set_name, ds in sets.items():
            where = "the test split" if set_name == "test" else repr(set_name)
            out[set_name][label] = evaluate_stage(task, model, trainer.eval_batches(ds), len(ds),
                                                  f"baseline {label} on {where}", trainer._stage_progress())
    return out


def monitored_set(sets: dict[str, Any]):
    """What the trainer evaluates each epoch and selects ``best.pt`` by: the validation split, or nothing (then
    nothing is selected). Never the test split or a test file: they are evaluated once, after training."""
    val = sets.get("val")
    return val if val is not None and len(val) else None


def confusion_table(confusion: list[list[int]], classes: list[str] | None = None) -> list[str]:
    """Markdown lines of a confusion matrix ``confusion[true][predicted]``, rows and columns named by ``classes``
    (class indices where there are none)."""
    names = [str(c) for c in classes] if classes and len(classes) == len(confusion) else \
        [str(k) for k in range(len(confusion))]
    return (["Confusion matrix of the final model (rows: true class, columns: predicted):", "",
             "| true / predicted | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
            + [f"| {name} | " + " | ".join(str(v) for v in row) + " |" for name, row in zip(names, confusion)])


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
        text = (SEQUENCE_METRICS.get(name) if sequence
                else metric_definition(name, autoregressive=task == "autoregressive"))
        lines.append(f"- `{name}`: {text or 'defined in ' + source}")
    return lines


def write_summary(cfg: dict[str, Any], history: list[dict[str, Any]], n_params: int, run_dir: Path,
                  monitor: str = "rel_l2", mode: str = "min", tests: dict[str, dict[str, Any]] | None = None,
                  baselines: dict[str, dict[str, Any]] | None = None, classes: list[str] | None = None,
                  n_val: int | None = None, channels: int | None = None, steps: str | None = None) -> None:
    """``summary.md``: the run's settings, the validation curve's best epoch, and the one evaluation of the test
    split and test files (the final model, and the checkpoint the validation split selected), beside the
    ``baselines`` of the same sets (:func:`baseline_scores`), with the final model's confusion matrix (rows: true
    class, columns: predicted; named by ``classes``) where the task reports one. ``n_val``: the validation split's
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
        validation = (f"- validation {name}: best {best:.5g} at epoch {best_epoch} (selects `best.pt`{cases}), "
                      f"final {curve[-1][1]:.5g}")
        if n_val and n_val < MIN_VAL_FOR_BEST:
            validation += (f"\n- note: `best.pt` is chosen on {n_val} validation cases (under {MIN_VAL_FOR_BEST}), "
                           "so `neurodyn evaluate` / `predict` use `last.pt` unless given `--which best`")
    else:
        validation = "- validation: none (data.n_val = 0): no checkpoint was selected"
    lines = [f"# {cfg.get('preset', 'experiment')} — scale `{cfg.get('scale', '?')}`", "",
             f"- model: `{cfg['model']['name']}`, {n_params:,} parameters",
             f"- data: {json.dumps({k: v for k, v in cfg['data'].items()})}",
             *([f"- {steps}"] if steps else []),
             f"- training: {len(history)} epochs, final train loss {history[-1]['train_loss']:.5g}" if history else "",
             f"- time: {sum(h['seconds'] for h in history):.1f} s of training", validation,
             "- test: evaluated once, after training, with the training normalizers", ""]
    shown: list[str] = []
    notes: list[str] = []
    for set_name, by_model in (tests or {}).items():
        keys, set_notes = shown_metrics(by_model["last"], channels)
        shown += [k for k in keys if k not in shown]
        notes += [n for n in set_notes if n not in notes]
        columns = {m: by_model[m] for m in ("last", "best") if m in by_model}
        base = (baselines or {}).get(set_name, {})
        columns.update({label: metrics for label, metrics in base.items() if metrics is not None})
        header = {"last": "final model", "best": "best validation epoch", "majority": "majority (baseline)",
                  "1-NN": "1-NN Euclidean (baseline)"}
        title = "Test split" if set_name == "test" else f"Test file `{set_name}`"
        lines += [f"{title}:", "", "| metric | " + " | ".join(header.get(m, m) for m in columns) + " |",
                  "| --- |" + " --- |" * len(columns)]
        lines += [f"| {k} | " + " | ".join(f"{c.get(k, float('nan')):.5g}" for c in columns.values()) + " |"
                  for k in keys]
        if steps and any(m is not None for m in base.values()):
            lines += ["", f"(the baselines read the training split as the model does: {steps.split(';')[0]})"]
        if base.get("1-NN", 0) is None:
            lines += ["", f"(1-NN skipped: more than {KNN_SUMMARY_LIMIT:.0e} element operations; train the "
                      "`knn/sequence` preset to score it)"]
        if "confusion" in by_model["last"]:
            lines += ["", *confusion_table(by_model["last"]["confusion"], classes)]
        lines.append("")
    if not tests:
        lines += ["No test split and no test files: nothing was tested (`neurodyn evaluate RUN --data FILE`).", ""]
    if shown:
        lines += metric_definitions(shown, task=cfg.get("task")) + [""]
        if notes:
            lines += ["Not shown:", "", *[f"- {n}" for n in notes], ""]
    # no image links here: the plots are drawn above this layer, which links each one it writes
    # (neurodyn.plots.link_plots), so a summary never links an image that does not exist
    (run_dir / "summary.md").write_text("\n".join(lines))
