"""Which model is best on my data for my budget: ``neurodyn compare PRESET... --budget 60s``.

Every preset's model trains on ONE dataset (the task and data sections of ``data_from``, by default the first
preset, with the ``data.*`` overrides, so the same samples and the same split), with its own preset's training
settings (optimiser, learning rate, batch size: what each model is tuned with), for several seeds, and is
scored on the same test sets (the test split and every ``data.test_path`` file, e.g. two resolutions).

Equal budgets: ``epochs=N`` gives every model N epochs; ``budget_seconds=B`` gives every model the number of
epochs that fits in B seconds of training on this machine, estimated before training from the median time of
a few training steps and one evaluation pass (so the learning-rate schedule is built for the epochs the model
will actually run), and ``train.time_limit`` stops a run after the epoch that used the budget (or before one
that would end more than 10 % past it), so a short estimate cannot overrun it. Both the epochs and the measured
seconds are reported.

Writes into ``out_dir``: ``results.json`` (one record per model, seed and config: a run's name ends with a hash
of its resolved config, so a recorded run is reused only for that very config, never after the overrides change,
and an interrupted comparison resumes), ``compare.md`` (the table: the task's metric per test set, rel. L2
for fields, accuracy or RMSE for sequences, as mean ± std over seeds, parameters, epochs, s/epoch, training
seconds) and ``error_vs_time.png`` (the validation metric against training seconds, one line per run). Run
folders go to ``out_dir/runs/``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .errors import ConfigError
from .files import check_outside_runs
from .train.predict import TrainedRun
from .train.queue import Job, preset_config, run_jobs
from .train.runs import read_history

__all__ = ["parse_budget", "estimate_epochs", "compare", "comparison_table", "is_override"]

# ``section.key[.key...]=value``: a config override; a compared entry is ``PRESET`` or ``LABEL=PRESET;...`` with a
# label without dots, so the two never look alike
_OVERRIDE = re.compile(r"[A-Za-z_][\w-]*(\.[\w-]+)+=")


def is_override(word: str) -> bool:
    """Whether a word of ``neurodyn compare``'s command line is a config override (``data.path=X``: the part
    before the first ``=`` is a dotted key) rather than a compared entry (``PRESET`` or ``LABEL=PRESET;...``,
    whose label holds no dot)."""
    return bool(_OVERRIDE.match(str(word)))


def parse_budget(text: str) -> float:
    """``"90"``, ``"90s"``, ``"2m"``, ``"1.5h"`` -> seconds (> 0)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smh]?)\s*", str(text))
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"a budget is a positive time such as 60s, 5m or 1h; got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _stem(preset: str) -> str:
    return preset.replace("/", "-")


def config_key(cfg: dict[str, Any]) -> str:
    """A short hash of a resolved config (its prose left out): names a compared run, so that a recorded run is
    reused only for the very config it trained, and changed overrides train anew."""
    text = json.dumps({k: v for k, v in cfg.items() if k != "description"}, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def parse_entry(text: str) -> tuple[str, str, list[str]]:
    """A compared model: ``PRESET`` or ``LABEL=PRESET;key=value;...`` -> (label, preset, the entry's overrides).

    The labelled form compares one preset under several settings, e.g. ``nac-paper=nac/sequence;model.compat=paper``
    beside ``nac/sequence``; a bare preset is its own label."""
    labelled = "=" in str(text).split(";")[0]
    label, _, rest = str(text).partition("=") if labelled else (str(text), "", str(text))
    preset, *overrides = [part.strip() for part in rest.split(";")]
    label = label.strip() if labelled else preset
    if not preset or not label or (labelled and ("/" in label or "." in label)):
        raise ConfigError(
            f"a compared model is PRESET or LABEL=PRESET;key=value;... (a label has no '/' and no "
            f"'.': a dotted key=value is an override); got {text!r}"
        )
    return label, preset, [o for o in overrides if o]


def estimate_epochs(cfg: dict[str, Any], budget_seconds: float, device: str | torch.device = "cpu") -> dict[str, Any]:
    """How many epochs of ``cfg`` fit in ``budget_seconds`` of training here: the median time of a few training
    steps times the batches per epoch, plus one evaluation pass over the monitored set
    (:func:`neurodyn.train.epoch_cost.estimate_epoch`, which every training's header prints too). Also the timed
    model's parameter count (``params``)."""
    from .data.assembly import build_data
    from .models import count_parameters
    from .train.epoch_cost import estimate_epoch
    from .train.experiment import build_model, build_task, monitored_set, train_config

    tcfg = train_config(cfg)
    data = build_data(cfg, device, progress=False, train_window_steps=tcfg.window_steps)
    model = build_model(cfg, data["sets"]["train"])
    task = build_task(cfg, data, tcfg)
    est = estimate_epoch(model, task, data["sets"]["train"], monitored_set(data["sets"]), tcfg, device)
    epoch = est["estimated_seconds_per_epoch"]
    epochs = 1 if est["fitted"] else max(1, int(budget_seconds // epoch))  # fitted in one pass: one epoch
    return {
        "epochs": epochs,
        "estimated_seconds_per_epoch": epoch,
        "step_seconds": est["step_seconds"],
        "params": count_parameters(model),
    }


def estimate_table(cfgs: dict[str, dict[str, Any]], epochs: int, seeds: int, device: str | torch.device = "cpu") -> str:
    """Markdown: for each labelled config, its parameters, the seconds per epoch :func:`estimate_epochs` measures
    (at the current ``torch.get_num_threads()``) and the CPU hours of ``epochs`` x ``seeds`` runs of it
    (seconds x threads); the total last. What a paper experiment at our scale will cost, before it starts."""
    threads = torch.get_num_threads()
    lines = [
        f"| run | params | s / epoch ({threads} thread{'s' if threads > 1 else ''}) | "
        f"CPU-h ({epochs} epochs x {seeds} seeds) |",
        "|---|---:|---:|---:|",
    ]
    total = 0.0
    for label, cfg in cfgs.items():
        estimate = estimate_epochs(cfg, 1.0, device)
        params, per_epoch = estimate["params"], estimate["estimated_seconds_per_epoch"]
        hours = per_epoch * threads * epochs * seeds / 3600
        total += hours
        lines.append(f"| {label} | {params:,} | {per_epoch:.0f} | {hours:.2f} |")
    lines.append(f"| total | | | {total:.2f} |")
    return "\n".join(lines)


def _evaluate(r: TrainedRun, progress: Any = False) -> dict[str, Any]:
    """The test sets' main metric (the task's monitored one: rel. L2 for fields, accuracy or RMSE for sequences),
    every scalar metric of each test set (``set_metrics``: e.g. R^2 and MAE beside RMSE), and its validation curve
    against training seconds (``curve_rel_l2`` holds that metric, whatever its name)."""
    metric = getattr(r.task, "monitor", ("rel_l2", "min"))[0]
    history = read_history(r.run_dir)
    elapsed, times, errors = 0.0, [], []
    for h in history:
        elapsed += h["seconds"]
        if "val" in h and metric in h["val"]:
            times.append(elapsed)
            errors.append(h["val"][metric])
    scores = r.evaluate(progress=progress)
    return {
        "sets": {k: v.get(metric) for k, v in scores.items()},
        "metric": metric,
        "set_metrics": {
            k: {m: float(x) for m, x in v.items() if isinstance(x, (int, float))} for k, v in scores.items()
        },
        "curve_seconds": times,
        "curve_rel_l2": errors,
    }


METRIC_NAMES = {"rel_l2": "rel. L2"}


def _field_or_sequence(task: str) -> str:
    return "sequence" if task == "sequence" else "field"


def check_presets(
    entries: dict[str, tuple[str, list[str]]],
    scale: str,
    overrides: Sequence[str],
    own: dict[str, list[str]],
    data_from: str,
    device: str | torch.device = "cpu",
    progress: Any = False,
) -> dict[str, dict[str, Any]]:
    """Every compared model's config (by label; ``entries``: label -> (preset, its overrides), as ``parse_entry``
    gives them) on the data of ``data_from``, checked before anything trains; one ConfigError naming the first one
    that does not fit and why.

    In order, so that the cheap checks fail first: every preset and override loads (unknown names and keys); a
    preset made for sequences (``task: sequence``) is not put on fields or the other way round; the train section
    and model keys are valid (``check_config``); then, on the shared data (generated if missing, as training would),
    every model builds and takes a sample of the training split and of each test file (``progress``: of the data
    made, :mod:`neurodyn.progress`)."""
    from .data.assembly import build_data, build_test_sets
    from .train.experiment import build_model, build_task, check_config, check_model_accepts

    source = _field_or_sequence(preset_config(data_from, scale, overrides)["task"])
    cfgs, tcfgs = {}, {}
    for label, (preset, _) in entries.items():
        kind = _field_or_sequence(preset_config(preset, scale, overrides, own.get(label, ()))["task"])
        if kind != source:
            raise ConfigError(
                f"preset {preset!r} is a {kind} model and cannot train on the {source} data of "
                f"{data_from!r}; compare presets of the same kind of task."
            )
        cfgs[label] = cfg = preset_config(preset, scale, overrides, own.get(label, ()), data_from=data_from)
        tcfgs[label] = check_config(cfg)
    first = next(iter(cfgs))
    data = build_data(cfgs[first], device, progress=progress, train_window_steps=tcfgs[first].window_steps)
    test_files = build_test_sets(cfgs[first])
    for preset, cfg in cfgs.items():
        name = cfg["model"]["name"]
        try:
            model = build_model(cfg, data["sets"]["train"])
            task = build_task(cfg, data, tcfgs[preset])
            check_model_accepts(model, task, data["sets"]["train"], name, data_from)
            for file, dataset in test_files.items():
                check_model_accepts(model, task, dataset, name, f"test file {file!r}", values=False)
        except ConfigError as exc:
            raise ConfigError(f"preset {preset!r} does not fit the data of {data_from!r}: {exc}") from None
    return cfgs


def compare(
    presets: Sequence[str],
    out_dir: str | Path,
    scale: str = "cpu",
    *,
    seeds: Sequence[int] = (0,),
    epochs: int | None = None,
    budget_seconds: float | None = None,
    data_from: str | None = None,
    overrides: Sequence[str] = (),
    preset_overrides: dict[str, Sequence[str]] | None = None,
    device: str | torch.device = "cpu",
    progress: Any = False,
) -> list[dict[str, Any]]:
    """Train every preset's model on one dataset at one budget (module docstring); returns the records and
    writes ``compare.md`` and ``error_vs_time.png`` into ``out_dir``. ``overrides`` apply to every preset,
    ``preset_overrides[preset]`` to that one only (e.g. FNO's modes on a small grid). ``progress`` (the one idiom of
    :mod:`neurodyn.progress`; False, the default: nothing): the data made, each training and each evaluation."""
    if not presets:
        raise ConfigError("compare needs at least one preset (e.g. fno/darcy lamo/darcy)")
    if (epochs is None) == (budget_seconds is None):
        raise ConfigError("give the budget as either epochs or seconds (--epochs N or --budget 60s), not both")
    if epochs is not None and epochs < 1:
        raise ConfigError(f"--epochs must be >= 1; got {epochs}")
    if len(set(presets)) != len(presets):
        raise ConfigError(f"a preset is listed twice: {list(presets)}")
    seeds = [int(s) for s in seeds]
    twice = next((s for s in seeds if seeds.count(s) > 1), None)
    if twice is not None:
        raise ConfigError(
            f"seed {twice} is listed twice in --seeds {' '.join(map(str, seeds))}; one seed is one run, "
            "so give distinct seeds (e.g. --seeds 0 1)"
        )
    entries = {}
    for text in presets:
        label, preset, entry_overrides = parse_entry(text)
        if label in entries:
            raise ConfigError(f"{label!r} is compared twice; give one of them a label: LABEL={preset};key=value")
        entries[label] = (preset, entry_overrides)
    data_from = data_from or next(iter(entries.values()))[0]
    out_dir = Path(out_dir)
    check_outside_runs(out_dir, "--out")  # the compared runs go below it, never into another run's folder
    jobs = []
    unknown = sorted(set(preset_overrides or {}) - set(entries))
    if unknown:
        raise ConfigError(f"preset_overrides name presets that are not compared: {unknown}")
    own = {
        label: [*entry_overrides, *(preset_overrides or {}).get(label, ())]
        for label, (_, entry_overrides) in entries.items()
    }
    cfgs = check_presets(entries, scale, overrides, own, data_from, device, progress)  # before anything trains
    for label, cfg in cfgs.items():
        preset = entries[label][0]
        if budget_seconds is not None:
            est = estimate_epochs(cfg, budget_seconds, device)
            n_epochs = est["epochs"]
            print(
                f"{label}: {est['step_seconds']:.3g} s/step, ~{est['estimated_seconds_per_epoch']:.3g} s/epoch "
                f"-> {n_epochs} epochs in {budget_seconds:g} s",
                flush=True,
            )
        else:
            n_epochs = epochs
        budget = f"{budget_seconds:g}s" if budget_seconds is not None else f"{epochs}ep"
        # the estimate sizes the schedule; the time limit holds the budget when the estimate was short
        limit = [f"train.time_limit={budget_seconds:g}"] if budget_seconds is not None else []
        for seed in seeds:
            jobs.append(
                Job(
                    name=f"{_stem(label)}-{budget}-s{seed}-{config_key(cfg)}",
                    preset=preset,
                    seed=int(seed),
                    overrides=[f"train.epochs={n_epochs}", *limit],
                    keys={"preset": label, "budget": budget},
                    label=label,
                    data_from=data_from,
                    model_overrides=own[label],
                )
            )
    records = run_jobs(
        jobs,
        out_dir,
        scale,
        evaluate=lambda r: _evaluate(r, progress),
        overrides=list(overrides),
        device=device,
        progress=progress,
        summary=lambda r: ", ".join(f"{k} {v:.4g}" for k, v in r["sets"].items() if v is not None),
    )
    table = comparison_table(records, title=f"{', '.join(presets)} on the data of {data_from} ({scale} scale)")
    (out_dir / "compare.md").write_text(table)
    print("\n" + table)
    from .plots import plot_error_vs_time

    plot_error_vs_time(records, out_dir / "error_vs_time.png")
    print(f"written: {out_dir / 'compare.md'}, {out_dir / 'error_vs_time.png'}, {out_dir / 'results.json'}")
    return records


def _mean_std(values: list[float]) -> str:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "n/a"
    if len(set(values)) == 1:
        return f"{values[0]:.4g}"
    return f"{statistics.mean(values):.4g} ± {statistics.stdev(values):.2g}"


def comparison_table(records: Sequence[dict[str, Any]], title: str = "") -> str:
    """Markdown: one row per preset and budget, rel. L2 per test set (mean ± std over seeds), parameters,
    epochs, median s/epoch, training seconds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["preset"], r["budget"]), []).append(r)
    sets = list(dict.fromkeys(k for r in records for k in r["sets"]))
    metric = METRIC_NAMES.get(records[0].get("metric", "rel_l2"), records[0].get("metric")) if records else "rel. L2"
    lines = ([f"# {title}", ""] if title else []) + [
        "| model (preset) | budget | seeds | "
        + " | ".join(f"{metric} {s}" for s in sets)
        + " | parameters | epochs | s/epoch | training s |",
        "| --- | --- | --- |" + " --- |" * len(sets) + " --- | --- | --- | --- |",
    ]
    for (preset, budget), rs in groups.items():
        cells = [_mean_std([r["sets"].get(s) for r in rs]) for s in sets]
        lines.append(
            f"| {rs[0]['model']} ({preset}) | {budget} | {len(rs)} | "
            + " | ".join(cells)
            + f" | {rs[0]['params']:,} | {_mean_std([r['epochs'] for r in rs])} | "
            f"{_mean_std([r['seconds_per_epoch'] for r in rs])} | "
            f"{_mean_std([r['train_seconds'] for r in rs])} |"
        )
    return "\n".join(lines) + "\n"
