"""CHONN experiments' shared parts: the run list of an experiment as a queue, the table formatting, the plots.

Every CHONN experiment (:mod:`~neurodyn_lab.chonn.order`, :mod:`~neurodyn_lab.chonn.poisson`,
:mod:`~neurodyn_lab.chonn.darcy`, :mod:`~neurodyn_lab.chonn.rollout`) trains presets through
:func:`neurodyn_lab.queue.run_jobs`: one record per run, ``<records>/runs/<stem>-s<seed>/result.json``; the run
folders train in the untracked twin (``lab/runs/chonn/<claim>``). A run recorded is never trained again, so an
experiment can be split over invocations (``--seeds 0`` in one, ``--seeds 1`` later); the tables and plots always
cover every recorded run, and ``--report`` only rebuilds them.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurodyn.train.runs import TrainedRun, read_history
from neurodyn_lab.queue import Job, run_jobs
from neurodyn_lab.records import write_text


def jobs_for(specs: Sequence[tuple[str, str, str, list[str], dict[str, Any]]], seeds: Sequence[int]) -> list[Job]:
    """Per seed, one :class:`Job` ``<stem>-s<seed>`` per ``(stem, label, preset, overrides, keys)``."""
    return [
        Job(f"{stem}-s{seed}", preset, seed, list(overrides), keys, label)
        for seed in seeds
        for stem, label, preset, overrides, keys in specs
    ]


def run_specs(
    tag: str,
    specs,
    evaluate: Callable[[TrainedRun], dict[str, Any]],
    summary: Callable[[dict], str],
    scale: str,
    seeds: Sequence[int],
    out_dir: Path,
    overrides: Sequence[str],
    train: bool,
) -> list[dict[str, Any]]:
    """Every job for every seed through :func:`neurodyn_lab.queue.run_jobs` (records: ``<out_dir>/runs/``)."""
    return run_jobs(
        jobs_for(specs, seeds),
        out_dir,
        scale,
        evaluate=evaluate,
        summary=summary,
        tag=tag,
        overrides=overrides,
        train=train,
        workers=WORKERS["n"],
        threads=WORKERS["threads"],
    )


WORKERS = {"n": 0, "threads": None}  # --workers: trainings in parallel processes (run_jobs), each with --threads


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return float("nan"), float("nan")
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0


def fmt(m: float, s: float | None = None, digits: int = 4) -> str:
    if not math.isfinite(m):
        return "-"
    txt = f"{m:.{digits}g}"
    return txt + (f" ± {s:.2g}" if s is not None and math.isfinite(s) and s > 0 else "")


def header(title: str, scale: str, seeds: Sequence[int], extra: str = "") -> list[str]:
    return [
        f"## {title}",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; scale `{scale}`; "
        f"training seeds {list(seeds)}; torch threads {torch.get_num_threads()}" + (f"; {extra}" if extra else ""),
        "",
    ]


def write_tables(out_dir: Path, lines: Sequence[str]) -> str:
    """Write the report ``lines`` to ``<out_dir>/tables.md``; returns its text."""
    text = "\n".join(lines) + "\n"
    write_text(out_dir / "tables.md", text)
    return text


# ------------------------------------------------------------------------------------------------
# relative-gain and rollout plots


def relative_gains(
    chonn: dict[str, float], baselines: dict[str, dict[str, float]], metrics: Sequence[str]
) -> dict[str, tuple[float, str]]:
    """Per metric: ``1 - chonn / min(baselines)`` (positive: CHONN lower = better) and the stronger baseline."""
    out = {}
    for m in metrics:
        vals = {name: b[m] for name, b in baselines.items() if m in b and math.isfinite(b[m])}
        if not vals or m not in chonn:
            continue
        best = min(vals, key=vals.get)
        out[m] = (1.0 - chonn[m] / vals[best] if vals[best] else float("nan"), best)
    return out


def plot_relative_gain(gains: dict[str, tuple[float, str]], path: Path, title: str) -> None:
    """Bar chart of the relative gain of CHONN over the stronger baseline per metric (like Figs. 4d / 5c)."""
    from neurodyn.plots import plt, save_figure  # matplotlib only when a plot is drawn

    names = list(gains)
    vals = [100 * gains[n][0] for n in names]
    fig, ax = plt.subplots(figsize=(1.1 * len(names) + 2, 3.4))
    ax.bar(range(len(names)), vals, color=["tab:green" if v >= 0 else "tab:red" for v in vals])
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("gain over stronger baseline (%)")
    ax.set_title(title, fontsize=10)
    for i, n in enumerate(names):
        ax.annotate(gains[n][1], (i, vals[i]), ha="center", va="bottom" if vals[i] >= 0 else "top", fontsize=7)
    save_figure(fig, path, dpi=120)


def plot_rollout_curves(curves: dict[str, list[float]], path: Path, title: str) -> None:
    """Per-step relative L2 of several models (like Fig. 5f); the non-CHONN baselines dashed."""
    from neurodyn.plots import plot_rollout_curves as plot_curves

    plot_curves(curves, path, title, baselines=[n for n in curves if "chonn" not in n], log=True)


def plot_training_curves(runs: dict[str, Path], path: Path, title: str) -> None:
    """Training loss per epoch of several runs (``label -> run folder``) on one log axis; depth stacks and
    the plain U-Net (labels starting with ``d`` or ``order 0``) dashed."""
    from neurodyn.plots import plt, save_figure

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for label, run_dir in runs.items():
        h = read_history(run_dir)
        dashed = label.split()[-1].startswith("d") or label.endswith("order 0")
        ax.semilogy([r["epoch"] + 1 for r in h], [r["train_loss"] for r in h], label=label, ls="--" if dashed else "-")
    ax.set_xlabel("epoch"), ax.set_ylabel("training loss"), ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    save_figure(fig, path, dpi=120)


def model_table(results, key: str, metrics: Sequence[str], order: Sequence[str]) -> tuple[list[str], dict]:
    """Markdown rows per model (``key``): parameters, mean ± std of each metric over seeds, s / epoch; and the means."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[r[key]].append(r)
    lines = [
        "| model | params | " + " | ".join(metrics) + " | s / epoch | n |",
        "| --- | ---: | " + " | ".join("---:" for _ in metrics) + " | ---: | ---: |",
    ]
    means = {}
    for name in [m for m in order if m in groups]:
        rs = groups[name]
        st = {m: mean_std([r.get(m) for r in rs]) for m in metrics}  # a band a grid lacks: "-"
        means[name] = {m: st[m][0] for m in metrics}
        lines.append(
            f"| {name} | {rs[0]['params']:,} | "
            + " | ".join(fmt(*st[m]) for m in metrics)
            + f" | {statistics.median(r['seconds_per_epoch'] for r in rs):.1f} | {len(rs)} |"
        )
    return lines, means
