"""CHONN experiments: drivers, tables and relative-gain plots (the paper's metrics are
``neurodyn.train.metrics.order_metrics`` / ``poisson_metrics``).

``neurodyn bench chonn-order | chonn-poisson | chonn-darcy | chonn-rollout [--scale cpu] [options]``,
``python benchmarks/chonn_experiments.py order|poisson|darcy|rollout [--scale cpu] [options]``, or from
Python ``run_order_benchmark(scale, seeds, out_dir)`` etc. Every run trains a preset with
:func:`neurodyn.bench.jobs.run_jobs` into ``<out_dir>/runs/<name>`` and writes ``result.json`` beside it.
``<out_dir>/results.json`` is the record of every finished run of the folder,
keyed by run name (``"run": "<stem>-s<seed>"``): each invocation merges its runs into it, so a benchmark
can be split over invocations (``--seeds 0`` in one, ``--seeds 1`` later) and the run folders (large,
not committed) can be deleted without losing a result. A run recorded in either place is never trained
again; the tables and plots always cover every recorded run, and ``--report`` only rebuilds them.
Outputs in ``out_dir`` (default ``benchmarks/results/chonn_<name>``): ``results.json``, ``tables.md`` (its
images linked from beside it) and PNG plots.

Experiments (paper 000, Figs. 3-5; the paper reports figures only, so these are our own measurements):

* ``chonn-order`` (Fig. 3): targets T_n = (I - tau^2 d_ss)^-n; CHONN of order n (one n-cell block)
  against n stacked first-order blocks ("D n"), plus the parameter-matched composite 2x2 against D3.
  Metrics (per sample, averaged): RelL2 point (48), spectral (49, one-sided rfft), derivative (50,
  periodic central difference).
* ``chonn-poisson`` (Fig. 4g): U-Net (order 0) and CHONN-UNet orders 1-4; RelL1 % (59), range-normalised
  nRMSE (60), MaxMSE (61) on the in-distribution (K = 16) and out-of-distribution (K = 20) test sets.
* ``chonn-darcy`` (Fig. 4c-d): CHONN-UNet vs U-Net vs FNO, one training protocol; the PDEBench-style table
  of :mod:`neurodyn.train.metrics` plus RelL1.
* ``chonn-rollout`` (Fig. 5b-f): shallow water (10 frames in, rollout to the end) and Navier-Stokes 40-step
  rollouts from m = 3, 5, 10 frames; CHONN-FNO vs FNO; mean and per-step relative L2.

Script-only helpers (no training): ``gain [--merges sum mean norm]`` prints the scale of freshly
built Cascaded Kirchhoff Blocks per stage (:func:`gain_table`); ``curves OUT.png TITLE LABEL=RUN_DIR ...`` plots
the training losses of finished runs; ``compare-order BEFORE_DIR AFTER_DIR`` puts two order-benchmark records
side by side.

Timing and threads: ``--threads`` (default 1) is set with ``torch.set_num_threads`` before anything runs.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from neurodyn.train.metrics import order_metrics, poisson_metrics  # noqa: E402
from neurodyn.train.runs import TrainedRun, batches, predict, read_history  # noqa: E402
from neurodyn.bench.jobs import Job, load_results, run_jobs  # noqa: E402

RESULTS = HERE / "results"  # experiment folders: results/chonn_<experiment>


def _jobs(specs: Sequence[tuple[str, str, str, list[str], dict[str, Any]]], seeds: Sequence[int]) -> list[Job]:
    """Per seed, one :class:`Job` ``<stem>-s<seed>`` per ``(stem, label, preset, overrides, keys)``."""
    return [Job(f"{stem}-s{seed}", preset, seed, list(overrides), keys, label)
            for seed in seeds for stem, label, preset, overrides, keys in specs]


def _run(tag: str, specs, evaluate: Callable[[TrainedRun], dict[str, Any]], summary: Callable[[dict], str],
         scale: str, seeds: Sequence[int], out_dir: Path, overrides: Sequence[str],
         train: bool) -> list[dict[str, Any]]:
    """Every job for every seed through :func:`neurodyn.bench.jobs.run_jobs` (store: ``<out_dir>/results.json``)."""
    return run_jobs(_jobs(specs, seeds), out_dir, scale, evaluate=evaluate, summary=summary, tag=tag,
                    overrides=overrides, train=train, workers=WORKERS["n"], threads=WORKERS["threads"])


WORKERS = {"n": 0, "threads": None}  # --workers: trainings in parallel processes (run_jobs), each with --threads


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return float("nan"), float("nan")
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0


def _fmt(m: float, s: float | None = None, digits: int = 4) -> str:
    if not math.isfinite(m):
        return "-"
    txt = f"{m:.{digits}g}"
    return txt + (f" ± {s:.2g}" if s is not None and math.isfinite(s) and s > 0 else "")


def _header(title: str, scale: str, seeds: Sequence[int], extra: str = "") -> list[str]:
    return [f"## {title}", "", f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; scale `{scale}`; "
            f"training seeds {list(seeds)}; torch threads {torch.get_num_threads()}"
            + (f"; {extra}" if extra else ""), ""]


def _write_tables(out_dir: Path, lines: Sequence[str]) -> str:
    """Write the report ``lines`` to ``<out_dir>/tables.md``; returns its text."""
    text = "\n".join(lines) + "\n"
    (out_dir / "tables.md").write_text(text)
    return text


# ------------------------------------------------------------------------------------------------
# relative-gain and rollout plots


def relative_gains(chonn: dict[str, float], baselines: dict[str, dict[str, float]],
                   metrics: Sequence[str]) -> dict[str, tuple[float, str]]:
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


# ------------------------------------------------------------------------------------------------
# (a) the order-defined 1-D benchmark

ORDER_MODELS = {"o1": (1,), "o2": (2,), "o3": (3,), "o4": (4,), "d2": (1, 1), "d3": (1, 1, 1),
                "d4": (1, 1, 1, 1), "2x2": (2, 2), "2x3": (2, 2, 2), "3x2": (3, 3)}
ORDER_METRICS = ("rel_l2_point", "rel_l2_spec", "rel_l2_der")


def default_order_grid(targets: Sequence[int], composite_targets: Sequence[int] = (3,)) -> list[tuple[int, str]]:
    """Matched order (CHONN order n and depth n on T_n; n = 1 is one model) and the parameter-matched
    2x2 vs D3 on ``composite_targets``."""
    grid = []
    for n in targets:
        grid.append((n, f"o{n}"))
        if n > 1:
            grid.append((n, f"d{n}"))
    for n in targets:
        if n in composite_targets:
            for m in ("2x2", "d3"):
                if (n, m) not in grid:
                    grid.append((n, m))
    return grid


def run_order_benchmark(scale: str = "cpu", seeds: Sequence[int] = (0, 1, 2), out_dir: Path | None = None,
                        targets: Sequence[int] = (1, 2, 3, 4), grid: Sequence[tuple[int, str]] | None = None,
                        overrides: Sequence[str] = (), train: bool = True) -> list[dict[str, Any]]:
    """Train and evaluate every (target, model) of ``grid`` for every seed; returns the result records."""
    jobs = [(f"T{n}-{name}", f"T{n} {name}", "chonn1d/order1d",
                 [f"data.order={n}", f"model.orders={list(ORDER_MODELS[name])}"], {"target": n, "model": name})
            for n, name in (grid or default_order_grid(targets))]

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        return order_metrics(*predict(r.task, r.model, r.split("test")))

    return _run("chonn-order", jobs, evaluate, lambda rec: ", ".join(f"{k} {rec[k]:.4g}" for k in ORDER_METRICS),
                     scale, seeds, Path(out_dir or RESULTS / "chonn_order"), overrides, train)


def compare_order(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """Markdown: every (target, model) of two order-benchmark records side by side (mean ± std over seeds), then
    the derivative gain of ``o_n`` over ``d_n`` (seed-paired) and the 2x2 / D3 ratio, before and after."""
    from collections import defaultdict

    def groups(rs):
        g: dict[tuple[int, str], list[dict]] = defaultdict(list)
        for r in rs:
            g[(r["target"], r["model"])].append(r)
        return g

    gb, ga = groups(before), groups(after)
    keys = sorted(set(gb) | set(ga), key=lambda k: (k[0], list(ORDER_MODELS).index(k[1])))
    cell = lambda g, k, m: (_fmt(*_mean_std([r[m] for r in g[k]])) + f" ({len(g[k])})") if g.get(k) else "-"
    lines = ["| target | model | RelL2 point before | after | RelL2 der before | after |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for k in keys:
        lines.append(f"| T{k[0]} | {k[1]} | {cell(gb, k, 'rel_l2_point')} | {cell(ga, k, 'rel_l2_point')} | "
                     f"{cell(gb, k, 'rel_l2_der')} | {cell(ga, k, 'rel_l2_der')} |")

    def gain(g, n):
        by_seed = {r["seed"]: r for r in g.get((n, f"d{n}"), [])}
        pairs = [(r, by_seed[r["seed"]]) for r in g.get((n, f"o{n}"), []) if r["seed"] in by_seed]
        if not pairs:
            return "-"
        v = [1 - a["rel_l2_der"] / b["rel_l2_der"] for a, b in pairs]
        wins = sum(x > 0 for x in v)
        return f"{_fmt(*_mean_std(v), digits=3)} ({wins} / {len(v)} seeds)"

    lines += ["", "| target | der gain of o_n over d_n, before | after |", "| --- | ---: | ---: |"]
    for n in sorted({k[0] for k in keys if k[0] > 1}):
        lines.append(f"| T{n} | {gain(gb, n)} | {gain(ga, n)} |")
    return "\n".join(lines)


def report_order(results: list[dict[str, Any]], out_dir: Path, scale: str, seeds: Sequence[int]) -> str:
    """Markdown tables (mean ± std over seeds) and the derivative-gain plot of the order benchmark."""
    from collections import defaultdict

    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for r in results:
        groups[(r["target"], r["model"])].append(r)
    lines = _header("Order-defined 1-D benchmark (Fig. 3)", scale, seeds,
                    "`neurodyn bench chonn-order --scale " + scale + "`")
    lines += ["| target | model | blocks x order | params | RelL2 point | RelL2 spec | RelL2 der | s / epoch | n |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    stats: dict[tuple[int, str], dict[str, tuple[float, float]]] = {}
    for (n, name) in sorted(groups, key=lambda k: (k[0], list(ORDER_MODELS).index(k[1]))):
        rs = groups[(n, name)]
        st = {m: _mean_std([r[m] for r in rs]) for m in ORDER_METRICS}
        stats[(n, name)] = st
        orders = ORDER_MODELS[name]
        shape = f"{len(orders)} x {orders[0]}"
        lines.append(f"| T{n} | {name} | {shape} | {rs[0]['params']:,} | "
                     + " | ".join(_fmt(*st[m]) for m in ORDER_METRICS)
                     + f" | {statistics.median(r['seconds_per_epoch'] for r in rs):.1f} | {len(rs)} |")
    # CHONN vs depth at matched order: relative reduction of each error, per target, seed-paired
    lines += ["", "Relative reduction of each error by CHONN order n over the depth-n stack on T_n, "
              "`1 - err(o_n) / err(d_n)` (positive: CHONN better), mean ± std over seeds (paired by seed):", "",
              "| target | RelL2 point | RelL2 spec | RelL2 der | CHONN better on der in |",
              "| --- | ---: | ---: | ---: | ---: |"]
    gains_der = {}
    for n in sorted({k[0] for k in groups}):
        a, b = groups.get((n, f"o{n}"), []), groups.get((n, f"d{n}"), [])
        by_seed = {r["seed"]: r for r in b}
        pairs = [(r, by_seed[r["seed"]]) for r in a if r["seed"] in by_seed]
        if not pairs:
            continue
        cells, wins = [], 0
        for m in ORDER_METRICS:
            red = [1 - x[m] / y[m] for x, y in pairs]
            cells.append(_fmt(*_mean_std(red), digits=3))
            if m == "rel_l2_der":
                gains_der[n] = _mean_std(red)
                wins = sum(v > 0 for v in red)
        lines.append(f"| T{n} | " + " | ".join(cells) + f" | {wins} / {len(pairs)} seeds |")
    # parameter-matched composite
    rows = []
    for n in sorted({k[0] for k in groups}):
        if (n, "2x2") in groups and (n, "d3") in groups:
            a, b = stats[(n, "2x2")], stats[(n, "d3")]
            pa, pb = groups[(n, "2x2")][0]["params"], groups[(n, "d3")][0]["params"]
            rows.append(f"| T{n} | {pa:,} / {pb:,} | "
                        + " | ".join(f"{_fmt(*a[m])} / {_fmt(*b[m])}" for m in ORDER_METRICS) + " |")
    if rows:
        lines += ["", "Parameter-matched composite 2x2 (two 2-order blocks) vs depth 3 (three first-order blocks), "
                  "2x2 / D3:", "", "| target | params | RelL2 point | RelL2 spec | RelL2 der |",
                  "| --- | ---: | ---: | ---: | ---: |", *rows]
    if gains_der:
        _plot_order_gains(gains_der, out_dir / "order_derivative_gain.png")
        lines += ["", "![derivative gain](order_derivative_gain.png)"]
    return _write_tables(out_dir, lines)


def _plot_order_gains(gains: dict[int, tuple[float, float]], path: Path) -> None:
    from neurodyn.plots import plt, save_figure  # matplotlib only when a plot is drawn

    ns = sorted(gains)
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    ax.bar([f"T{n}" for n in ns], [100 * gains[n][0] for n in ns], yerr=[100 * gains[n][1] for n in ns],
           color="tab:blue", capsize=3)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylabel("reduction of RelL2_der (%)")
    ax.set_title("CHONN order n vs depth-n stack (like Fig. 3b)", fontsize=9)
    save_figure(fig, path, dpi=120)


# ------------------------------------------------------------------------------------------------
# (b) Poisson order ablation

POISSON_METRICS = ("rel_l1_pct", "nrmse_range", "max_mse")


def _ood_dataset(scale: str):
    from neurodyn.data.assembly import ensure_dataset
    from neurodyn.data.datasets import SteadyDataset
    from neurodyn.data.store import StoredDataset
    from neurodyn.experiments import load_experiment

    d = load_experiment("data/poisson_ood", scale)["data"]
    store = StoredDataset(ensure_dataset(d, progress=False))
    return SteadyDataset(store, np.arange(store.n_samples))


def run_poisson_benchmark(scale: str = "cpu", seeds: Sequence[int] = (0, 1), out_dir: Path | None = None,
                          orders: Sequence[int] = (0, 1, 2, 3, 4), overrides: Sequence[str] = (),
                          train: bool = True) -> list[dict[str, Any]]:
    """U-Net (order 0) and CHONN-UNet orders 1-4 on Poisson; ID (K = 16) and OOD (K = 20) metrics."""
    jobs = [(f"order{order}", f"order {order}", "unet/poisson" if order == 0 else "chonn_unet/poisson",
                 [] if order == 0 else [f"model.order={order}"], {"order": order}) for order in orders]
    ood = []  # the OOD test set, built when first needed

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        rec = {f"id_{k}": v for k, v in poisson_metrics(*predict(r.task, r.model, r.split("test"), 16)).items()}
        if not ood:
            ood.append(_ood_dataset(scale))
        rec.update({f"ood_{k}": v for k, v in poisson_metrics(*predict(r.task, r.model, ood[0], 16)).items()})
        return rec

    return _run("chonn-poisson", jobs, evaluate,
                     lambda rec: f"ID RelL1 {rec['id_rel_l1_pct']:.3f} %, OOD RelL1 {rec['ood_rel_l1_pct']:.3f} %",
                     scale, seeds, Path(out_dir or RESULTS / "chonn_poisson"), overrides, train)


def best_poisson_order(groups: dict[int, list[dict]], means: dict[int, dict[str, float]]) -> tuple[int, str]:
    """The CKB order (> 0) whose gain over order 0 the report shows, and how it was chosen: the lowest mean best
    validation rel. L2 (``best_val_rel_l2``) when every run of every order records one; otherwise the lowest mean
    in-distribution **test** RelL1, which is a choice on the test split and is labelled so (†)."""
    orders = [o for o in means if o > 0]

    def val(o: int) -> float | None:
        vs = [r.get("best_val_rel_l2") for r in groups[o]]
        ok = vs and all(isinstance(v, (int, float)) and math.isfinite(v) for v in vs)
        return float(np.mean(vs)) if ok else None

    vals = {o: val(o) for o in orders}
    if all(v is not None for v in vals.values()):
        return min(orders, key=lambda o: vals[o]), "lowest validation rel. L2"
    return min(orders, key=lambda o: means[o]["id_rel_l1_pct"]), "lowest test ID RelL1: chosen on test †"


def report_poisson(results: list[dict[str, Any]], out_dir: Path, scale: str, seeds: Sequence[int]) -> str:
    from collections import defaultdict

    groups: dict[int, list[dict]] = defaultdict(list)
    for r in results:
        groups[r["order"]].append(r)
    lines = _header("Poisson order ablation (Fig. 4g)", scale, seeds, f"`neurodyn bench chonn-poisson --scale {scale}`")
    lines += ["| order | params | ID RelL1 % | ID nRMSE | ID MaxMSE | "
              "OOD RelL1 % | OOD nRMSE | OOD MaxMSE | s / epoch | n |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    means: dict[int, dict[str, float]] = {}
    for order in sorted(groups):
        rs = groups[order]
        cells = []
        means[order] = {}
        for pre in ("id", "ood"):
            for m in POISSON_METRICS:
                ms = _mean_std([r[f"{pre}_{m}"] for r in rs])
                means[order][f"{pre}_{m}"] = ms[0]
                cells.append(_fmt(*ms))
        lines.append(f"| {order} | {rs[0]['params']:,} | " + " | ".join(cells)
                     + f" | {statistics.median(r['seconds_per_epoch'] for r in rs):.1f} | {len(rs)} |")
    if 0 in means and len(means) > 1:
        keys = [f"{p}_{m}" for p in ("id", "ood") for m in POISSON_METRICS]
        best, how = best_poisson_order(groups, means)
        gains = relative_gains(means[best], {"order 0": means[0]}, keys)
        plot_relative_gain(gains, out_dir / "poisson_gain.png",
                           f"Poisson: CHONN-UNet order {best} ({how}) vs U-Net")
        lines += ["", f"Relative gain of the order chosen by {how} ({best}) over order 0: " + ", ".join(
            f"{k} {100 * v[0]:+.1f} %" for k, v in gains.items()),
            "", "![poisson gain](poisson_gain.png)"]
    return _write_tables(out_dir, lines)


# ------------------------------------------------------------------------------------------------
# (c) Darcy

DARCY_MODELS = {"chonn_unet": "chonn_unet/darcy", "unet": "unet/darcy", "fno": "fno/darcy"}
DARCY_METRICS = ("rel_l2", "rel_l1_pct", "rmse", "nrmse", "max_err", "crmse", "brmse", "frmse_low", "frmse_mid",
                 "frmse_high")
# one protocol for the three models at cpu scale (overrides every preset's own training section)
DARCY_PROTOCOL = {"cpu": ["train.epochs=4", "train.batch_size=20", "train.optimizer=adamw", "train.scheduler=onecycle",
                          "train.lr=2e-3", "train.weight_decay=1e-4", "train.loss=rel_l2", "data.n_train=1000",
                          "data.n_test=200"],
                  "tiny": ["train.epochs=1"], "paper": []}
DARCY_MODEL_OVERRIDES = {"cpu": {"chonn_unet": ["model.init_features=8"], "unet": ["model.init_features=8"],
                                 "fno": ["model.width=32", "model.modes=[12,12]"]}}


def run_darcy_benchmark(scale: str = "cpu", seeds: Sequence[int] = (0, 1), out_dir: Path | None = None,
                        models: Sequence[str] = tuple(DARCY_MODELS), overrides: Sequence[str] = (),
                        train: bool = True) -> list[dict[str, Any]]:
    """CHONN-UNet vs U-Net vs FNO on Darcy with one protocol; PDEBench-style metrics + RelL1."""
    from neurodyn.train.metrics import evaluate_fields

    jobs = [(name, name, DARCY_MODELS[name],
                 [*DARCY_PROTOCOL.get(scale, []), *DARCY_MODEL_OVERRIDES.get(scale, {}).get(name, [])], {"model": name})
            for name in models]

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        pred, true = predict(r.task, r.model, r.split("test"), 20)
        return {**evaluate_fields(pred, true), "rel_l1_pct": poisson_metrics(pred, true)["rel_l1_pct"],
                "train_loss_curve": [h["train_loss"] for h in read_history(r.run_dir)]}

    return _run("chonn-darcy", jobs, evaluate, lambda rec: f"rel_l2 {rec['rel_l2']:.4g}", scale, seeds,
                     Path(out_dir or RESULTS / "chonn_darcy"), overrides, train)


def _model_table(results, key: str, metrics: Sequence[str], order: Sequence[str]) -> tuple[list[str], dict]:
    from collections import defaultdict

    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[r[key]].append(r)
    lines = ["| model | params | " + " | ".join(metrics) + " | s / epoch | n |",
             "| --- | ---: | " + " | ".join("---:" for _ in metrics) + " | ---: | ---: |"]
    means = {}
    for name in [m for m in order if m in groups]:
        rs = groups[name]
        st = {m: _mean_std([r.get(m) for r in rs]) for m in metrics}  # a band a grid lacks: "-"
        means[name] = {m: st[m][0] for m in metrics}
        lines.append(f"| {name} | {rs[0]['params']:,} | " + " | ".join(_fmt(*st[m]) for m in metrics)
                     + f" | {statistics.median(r['seconds_per_epoch'] for r in rs):.1f} | {len(rs)} |")
    return lines, means


def report_darcy(results, out_dir: Path, scale: str, seeds: Sequence[int]) -> str:
    lines = _header("Darcy flow (Fig. 4c-d)", scale, seeds, f"`neurodyn bench chonn-darcy --scale {scale}`")
    table, means = _model_table(results, "model", DARCY_METRICS, list(DARCY_MODELS))
    lines += table
    if "chonn_unet" in means and len(means) > 1:
        gains = relative_gains(means["chonn_unet"], {k: v for k, v in means.items() if k != "chonn_unet"},
                               DARCY_METRICS)
        plot_relative_gain(gains, out_dir / "darcy_gain.png", "Darcy: CHONN-UNet vs stronger of U-Net / FNO")
        lines += ["", "Relative gain of CHONN-UNet over the stronger baseline per metric: " + ", ".join(
            f"{k} {100 * v[0]:+.1f} % (vs {v[1]})" for k, v in gains.items()),
            "", "![darcy gain](darcy_gain.png)"]
    return _write_tables(out_dir, lines)


# ------------------------------------------------------------------------------------------------
# (d) shallow water and Navier-Stokes rollouts

ROLLOUT_FIELD_METRICS = ("rmse", "nrmse", "max_err", "crmse", "brmse", "frmse_low", "frmse_mid", "frmse_high")


def run_rollout_benchmark(scale: str = "cpu", seeds: Sequence[int] = (0, 1), out_dir: Path | None = None,
                          histories: Sequence[int] = (3, 5, 10), shallow_water: bool = True,
                          navier_stokes: bool = True, overrides: Sequence[str] = (),
                          train: bool = True, models: Sequence[str] = ("chonn_fno", "fno")) -> list[dict[str, Any]]:
    """CHONN-FNO vs FNO: shallow water (10 frames in) and NS rollouts (40 steps in the paper) from m = 3, 5, 10
    frames."""
    runs = [("swe", name, 10, f"{name}/shallow_water", []) for name in models] if shallow_water else []
    if navier_stokes:
        runs += [("ns", name, m, f"{name}/navier_stokes_rollout", [f"data.t_in={m}", f"data.t_start={11 - m}"])
                 for m in histories for name in models]
    jobs = [(f"{task_name}-m{m}-{name}", f"{task_name} m={m} {name}", preset, ov,
                 {"task": task_name, "model": name, "history": m}) for task_name, name, m, preset, ov in runs]

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        ev = r.task.evaluate(r.model, batches(r.split("test"), 10))
        return {"rel_l2": ev["rel_l2"], "rel_l2_per_step": ev["rel_l2_per_step"],
                **{k: ev[f"frame_{k}"] for k in ROLLOUT_FIELD_METRICS if f"frame_{k}" in ev}}

    return _run("chonn-rollout", jobs, evaluate, lambda rec: f"rel_l2 {rec['rel_l2']:.4g}", scale, seeds,
                     Path(out_dir or RESULTS / "chonn_rollout"), overrides, train)


def report_rollout(results, out_dir: Path, scale: str, seeds: Sequence[int]) -> str:
    from collections import defaultdict

    lines = _header("Shallow water and Navier-Stokes rollouts (Fig. 5b-f)", scale, seeds,
                    f"`neurodyn bench chonn-rollout --scale {scale}`")
    swe = [r for r in results if r["task"] == "swe"]
    if swe:
        metrics = ("rel_l2", *ROLLOUT_FIELD_METRICS)
        table, means = _model_table(swe, "model", metrics, ["chonn_fno", "fno"])
        lines += ["Shallow water (10 frames in, rollout over the remaining frames; field metrics over all rolled-out "
                  "frames):", "", *table]
        if len(means) == 2:
            gains = relative_gains(means["chonn_fno"], {"fno": means["fno"]}, metrics)
            plot_relative_gain(gains, out_dir / "swe_gain.png", "Shallow water: CHONN-FNO vs FNO")
            lines += ["", "Relative gain of CHONN-FNO over FNO: " + ", ".join(
                f"{k} {100 * v[0]:+.1f} %" for k, v in gains.items()),
                "", "![swe gain](swe_gain.png)"]
        curves = _mean_curves(swe, lambda r: r["model"])
        plot_rollout_curves(curves, out_dir / "swe_per_step.png", "Shallow water: per-step relative L2")
        lines += ["", "![swe per step](swe_per_step.png)"]
    ns = [r for r in results if r["task"] == "ns"]
    if ns:
        groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
        for r in ns:
            groups[(r["history"], r["model"])].append(r)
        T = len(ns[0]["rel_l2_per_step"])
        lines += ["", f"Navier-Stokes (nu = 1e-3), mean relative L2 over the {T}-step rollout "
                  f"(targets t = 11..{10 + T}), mean ± std over seeds; 'CHONN below FNO': steps (of {T}) where "
                  "CHONN-FNO's mean curve is below FNO's:",
                  "", f"| history | CHONN-FNO | FNO | gain | error at step {T}, CHONN-FNO / FNO | CHONN below FNO | "
                  "params CHONN / FNO |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for m in sorted({k[0] for k in groups}):
            a, b = groups.get((m, "chonn_fno"), []), groups.get((m, "fno"), [])
            if not a or not b:
                continue
            ma, mb = _mean_std([r["rel_l2"] for r in a]), _mean_std([r["rel_l2"] for r in b])
            ca, cb = np.mean([r["rel_l2_per_step"] for r in a], 0), np.mean([r["rel_l2_per_step"] for r in b], 0)
            below = int((ca < cb).sum())
            lines.append(f"| {m} -> 1 | {_fmt(*ma)} | {_fmt(*mb)} | {100 * (1 - ma[0] / mb[0]):+.1f} % | "
                         f"{ca[-1]:.4g} / {cb[-1]:.4g} | {below} / {len(ca)} | "
                         f"{a[0]['params']:,} / {b[0]['params']:,} |")
        curves = _mean_curves(ns, lambda r: f"{r['model']} {r['history']}->1")
        plot_rollout_curves(curves, out_dir / "ns_per_step.png", "Navier-Stokes: per-step relative L2")
        lines += ["", "![ns per step](ns_per_step.png)"]
    return _write_tables(out_dir, lines)


def _mean_curves(results, key) -> dict[str, list[float]]:
    from collections import defaultdict

    g: dict[str, list] = defaultdict(list)
    for r in results:
        g[key(r)].append(r["rel_l2_per_step"])
    return {k: np.mean(v, 0).tolist() for k, v in sorted(g.items())}


# ------------------------------------------------------------------------------------------------
# gain of the cascade at initialisation (the measurement behind merge="mean")

GAIN_CASES = (("uni", 1, 16), ("bi", 1, 16), ("cross", 2, 64))  # (scan, dims, d_model)


def init_gain(merge: str, scan: str, dims: int, d_model: int, order: int, seeds: Sequence[int] = (0, 1, 2),
              size: int = 256, batch: int = 8, **block_kw) -> dict[str, Any]:
    """Scale of a freshly built :class:`~neurodyn.nn.kirchhoff.CascadedKirchhoffBlock` on ``x ~ N(0, 1)``.

    Returns, averaged over ``seeds`` (one block and one input per seed): ``stage`` (``std(y_r) / std(y_{r-1})``
    with ``y_0 = u``, Eq. 35), ``cum`` (``std(y_r) / std(u)``), ``branch`` (``std(W_o(ybar * g)) / std(x)``)
    and ``grad`` (the norm of the loss gradient ``mean(out^2)`` at ``in_proj.weight``, the block's first layer).
    ``size`` is the sequence length (1-D) or the number of grid points (2-D: a square grid).
    """
    from neurodyn.nn.kirchhoff import CascadedKirchhoffBlock

    stage, cum, branch, grad = [], [], [], []
    for seed in seeds:
        torch.manual_seed(seed)
        blk = CascadedKirchhoffBlock(d_model, order=order, dims=dims, scan=scan, merge=merge, **block_kw)
        side = int(round(math.sqrt(size)))
        x = torch.randn(batch, *((size,) if dims == 1 else (side, side)), d_model)
        with torch.no_grad():
            xn = blk.norm(x)
            u = F_silu(blk.conv(blk.in_proj(xn).chunk(2, dim=-1)[0].movedim(-1, 1)))
            ys = blk.stages(u)
        stds = [u.std().item()] + [y.std().item() for y in ys]
        stage.append([stds[r + 1] / stds[r] for r in range(order)])
        cum.append([stds[r + 1] / stds[0] for r in range(order)])
        out = blk(x, residual=False)
        branch.append(out.std().item() / x.std().item())
        out.square().mean().backward()
        grad.append(blk.in_proj.weight.grad.norm().item())
    return {"merge": merge, "scan": scan, "dims": dims, "d_model": d_model, "order": order,
            "stage": np.mean(stage, 0).tolist(), "cum": np.mean(cum, 0).tolist(),
            "branch": float(np.mean(branch)), "grad": float(np.mean(grad))}


def F_silu(x):
    return torch.nn.functional.silu(x)


def gain_table(merges: Sequence[str], orders: Sequence[int] = (1, 2, 3, 4), seeds: Sequence[int] = (0, 1, 2),
               **block_kw) -> str:
    """Markdown table of :func:`init_gain` for every merge, scan mode (``GAIN_CASES``) and order; the
    gradient column is relative to the first-order block of the same merge and scan."""
    lines = ["| merge | scan | order | stage gains std(y_r)/std(y_r-1) | std(y_r)/std(u) | branch/x "
             "| grad / order-1 grad |",
             "| --- | --- | ---: | --- | --- | ---: | ---: |"]
    for merge in merges:
        for scan, dims, d_model in GAIN_CASES:
            g1 = None
            for n in orders:
                g = init_gain(merge, scan, dims, d_model, n, seeds, **block_kw)
                g1 = g["grad"] if n == 1 else g1
                rel = g["grad"] / g1 if g1 else float("nan")
                lines.append(f"| {merge} | {scan} | {n} | " + " / ".join(f"{v:.3g}" for v in g["stage"]) + " | "
                             + " / ".join(f"{v:.3g}" for v in g["cum"]) + f" | {g['branch']:.3g} | {rel:.3g} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# command line (``neurodyn bench chonn-*`` or ``python benchmarks/chonn_experiments.py EXPERIMENT``)

EXPERIMENTS = {
    "order": (run_order_benchmark, report_order, (0, 1, 2)),
    "poisson": (run_poisson_benchmark, report_poisson, (0, 1)),
    "darcy": (run_darcy_benchmark, report_darcy, (0, 1)),
    "rollout": (run_rollout_benchmark, report_rollout, (0, 1)),
}


def run(scale: str, argv: Sequence[str]) -> int:
    """``run(scale, [EXPERIMENT, *options])``: one of the four CHONN experiments (order, poisson, darcy,
    rollout), then its tables and plots."""
    argv = list(argv)
    sub = argv.pop(0).removeprefix("chonn-") if argv and not argv[0].startswith("-") else ""
    if sub == "curves":  # learning curves of finished runs: curves OUT.png TITLE LABEL=RUN_DIR ...
        if len(argv) < 3:
            print("usage: chonn_experiments.py curves OUT.png TITLE LABEL=RUN_DIR [...]", file=sys.stderr)
            return 2
        plot_training_curves({k: Path(v) for k, v in (a.split("=", 1) for a in argv[2:])}, Path(argv[0]), argv[1])
        return 0
    if sub == "compare-order":  # compare-order BEFORE_DIR AFTER_DIR: two finished order benchmarks side by side
        print(compare_order(load_results(Path(argv[0])), load_results(Path(argv[1]))))
        return 0
    if sub == "gain":  # no training: the cascade's scale at initialisation
        p = argparse.ArgumentParser(prog="chonn_experiments.py gain", description=gain_table.__doc__)
        p.add_argument("--merges", nargs="+", default=["sum", "mean"], help="merge modes of the block")
        p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
        p.add_argument("--discretization", default="zoh")
        a = p.parse_args(argv)
        torch.set_num_threads(1)
        print(gain_table(a.merges, seeds=a.seeds, discretization=a.discretization))
        return 0
    if sub not in EXPERIMENTS:
        print(f"usage: chonn_experiments.py {{{','.join(EXPERIMENTS)}}} [--scale S] [options]", file=sys.stderr)
        return 2
    name = f"chonn-{sub}"
    run_fn, report_fn, default_seeds = EXPERIMENTS[sub]
    from neurodyn.bench import BENCHMARKS

    p = argparse.ArgumentParser(prog=f"neurodyn bench {name}", description=BENCHMARKS[name].description)
    p.add_argument("--seeds", type=int, nargs="+", default=list(default_seeds), help="training seeds")
    p.add_argument("--out", type=Path, default=None, help=f"output folder (default {RESULTS / f'chonn_{sub}'})")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--report", action="store_true", help="only rebuild tables and plots from finished runs")
    p.add_argument("--only", nargs="+", default=None,
                   help="subset: order: TARGET:MODEL pairs (e.g. 3:o3 3:d3); poisson: orders; darcy: models; "
                        "rollout: swe and/or ns-<m> (with --models)")
    p.add_argument("--models", nargs="+", default=None, help="rollout only: chonn_fno and/or fno")
    p.add_argument("--workers", type=int, default=0,
                   help="train this many runs at a time, each in its own process with --threads threads (default 0: "
                        "one at a time in this process)")
    p.add_argument("overrides", nargs="*", help="key.path=value overrides applied to every run")
    a = p.parse_args(argv)
    torch.set_num_threads(int(a.threads))
    WORKERS.update(n=int(a.workers), threads=int(a.threads))
    out = Path(a.out or RESULTS / f"chonn_{sub}")
    kw: dict[str, Any] = {"overrides": a.overrides, "train": not a.report}
    if a.only:
        if sub == "order":
            kw["grid"] = [(int(t), m) for t, m in (x.split(":") for x in a.only)]
        elif sub == "poisson":
            kw["orders"] = [int(x) for x in a.only]
        elif sub == "darcy":
            kw["models"] = list(a.only)
        else:
            kw["shallow_water"] = "swe" in a.only
            hist = [int(x.split("-")[1]) for x in a.only if x.startswith("ns-")]
            kw["navier_stokes"] = bool(hist)
            if hist:
                kw["histories"] = hist
    if a.models and sub == "rollout":
        kw["models"] = list(a.models)
    run_fn(scale, a.seeds, out, **kw)
    results = load_results(out)  # the tables cover every recorded run of the folder, whatever the subset
    if not results:
        print(f"no finished runs in {out}", file=sys.stderr)
        return 1
    print(report_fn(results, out, scale, sorted({r["seed"] for r in results})))
    return 0


if __name__ == "__main__":
    from neurodyn.bench import script_main

    sys.exit(script_main(run))
