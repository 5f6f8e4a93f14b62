"""CHONN Fig. 3, the order-defined 1-D benchmark: targets T_n = (I - tau^2 d_ss)^-n; CHONN of order n (one n-cell
block) against n stacked first-order blocks ("d n"), plus the parameter-matched composites (2x2 against d3; 2x3, 3x2
against d4). Metrics (per sample, averaged): RelL2 point (48), spectral (49, one-sided rfft), derivative (50,
periodic central difference).

    python -m neurodyn_lab run chonn/order --scale cpu --seeds 0 1 2
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurodyn.train.metrics import order_metrics
from neurodyn.train.runs import TrainedRun, predict
from neurodyn_lab.chonn.common import fmt, header, mean_std, run_specs, write_tables
from neurodyn_lab.paths import records

DEFAULT_OUT = "chonn/order"


ORDER_MODELS = {
    "o1": (1,),
    "o2": (2,),
    "o3": (3,),
    "o4": (4,),
    "d2": (1, 1),
    "d3": (1, 1, 1),
    "d4": (1, 1, 1, 1),
    "2x2": (2, 2),
    "2x3": (2, 2, 2),
    "3x2": (3, 3),
}
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


def run_order_benchmark(
    scale: str = "cpu",
    seeds: Sequence[int] = (0, 1, 2),
    out_dir: Path | None = None,
    targets: Sequence[int] = (1, 2, 3, 4),
    grid: Sequence[tuple[int, str]] | None = None,
    overrides: Sequence[str] = (),
    train: bool = True,
) -> list[dict[str, Any]]:
    """Train and evaluate every (target, model) of ``grid`` for every seed; returns the result records."""
    jobs = [
        (
            f"T{n}-{name}",
            f"T{n} {name}",
            "chonn1d/order1d",
            [f"data.order={n}", f"model.orders={list(ORDER_MODELS[name])}"],
            {"target": n, "model": name},
        )
        for n, name in (grid or default_order_grid(targets))
    ]

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        return order_metrics(*predict(r.task, r.model, r.split("test")))

    return run_specs(
        "chonn-order",
        jobs,
        evaluate,
        lambda rec: ", ".join(f"{k} {rec[k]:.4g}" for k in ORDER_METRICS),
        scale,
        seeds,
        records(out_dir or DEFAULT_OUT),
        overrides,
        train,
    )


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
    cell = lambda g, k, m: (fmt(*mean_std([r[m] for r in g[k]])) + f" ({len(g[k])})") if g.get(k) else "-"
    lines = [
        "| target | model | RelL2 point before | after | RelL2 der before | after |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for k in keys:
        lines.append(
            f"| T{k[0]} | {k[1]} | {cell(gb, k, 'rel_l2_point')} | {cell(ga, k, 'rel_l2_point')} | "
            f"{cell(gb, k, 'rel_l2_der')} | {cell(ga, k, 'rel_l2_der')} |"
        )

    def gain(g, n):
        by_seed = {r["seed"]: r for r in g.get((n, f"d{n}"), [])}
        pairs = [(r, by_seed[r["seed"]]) for r in g.get((n, f"o{n}"), []) if r["seed"] in by_seed]
        if not pairs:
            return "-"
        v = [1 - a["rel_l2_der"] / b["rel_l2_der"] for a, b in pairs]
        wins = sum(x > 0 for x in v)
        return f"{fmt(*mean_std(v), digits=3)} ({wins} / {len(v)} seeds)"

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
    lines = header(
        "Order-defined 1-D benchmark (Fig. 3)",
        scale,
        seeds,
        "`python -m neurodyn_lab run chonn/order --scale " + scale + "`",
    )
    lines += [
        "| target | model | blocks x order | params | RelL2 point | RelL2 spec | RelL2 der | s / epoch | n |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    stats: dict[tuple[int, str], dict[str, tuple[float, float]]] = {}
    for n, name in sorted(groups, key=lambda k: (k[0], list(ORDER_MODELS).index(k[1]))):
        rs = groups[(n, name)]
        st = {m: mean_std([r[m] for r in rs]) for m in ORDER_METRICS}
        stats[(n, name)] = st
        orders = ORDER_MODELS[name]
        shape = f"{len(orders)} x {orders[0]}"
        lines.append(
            f"| T{n} | {name} | {shape} | {rs[0]['params']:,} | "
            + " | ".join(fmt(*st[m]) for m in ORDER_METRICS)
            + f" | {statistics.median(r['seconds_per_epoch'] for r in rs):.1f} | {len(rs)} |"
        )
    # CHONN vs depth at matched order: relative reduction of each error, per target, seed-paired
    lines += [
        "",
        "Relative reduction of each error by CHONN order n over the depth-n stack on T_n, "
        "`1 - err(o_n) / err(d_n)` (positive: CHONN better), mean ± std over seeds (paired by seed):",
        "",
        "| target | RelL2 point | RelL2 spec | RelL2 der | CHONN better on der in |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
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
            cells.append(fmt(*mean_std(red), digits=3))
            if m == "rel_l2_der":
                gains_der[n] = mean_std(red)
                wins = sum(v > 0 for v in red)
        lines.append(f"| T{n} | " + " | ".join(cells) + f" | {wins} / {len(pairs)} seeds |")
    # parameter-matched composite
    rows = []
    for n in sorted({k[0] for k in groups}):
        if (n, "2x2") in groups and (n, "d3") in groups:
            a, b = stats[(n, "2x2")], stats[(n, "d3")]
            pa, pb = groups[(n, "2x2")][0]["params"], groups[(n, "d3")][0]["params"]
            rows.append(
                f"| T{n} | {pa:,} / {pb:,} | "
                + " | ".join(f"{fmt(*a[m])} / {fmt(*b[m])}" for m in ORDER_METRICS)
                + " |"
            )
    if rows:
        lines += [
            "",
            "Parameter-matched composite 2x2 (two 2-order blocks) vs depth 3 (three first-order blocks), 2x2 / D3:",
            "",
            "| target | params | RelL2 point | RelL2 spec | RelL2 der |",
            "| --- | ---: | ---: | ---: | ---: |",
            *rows,
        ]
    if gains_der:
        _plot_order_gains(gains_der, out_dir / "order_derivative_gain.png")
        lines += ["", "![derivative gain](order_derivative_gain.png)"]
    return write_tables(out_dir, lines)


def _plot_order_gains(gains: dict[int, tuple[float, float]], path: Path) -> None:
    from neurodyn.plots import plt, save_figure  # matplotlib only when a plot is drawn

    ns = sorted(gains)
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    ax.bar(
        [f"T{n}" for n in ns],
        [100 * gains[n][0] for n in ns],
        yerr=[100 * gains[n][1] for n in ns],
        color="tab:blue",
        capsize=3,
    )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylabel("reduction of RelL2_der (%)")
    ax.set_title("CHONN order n vs depth-n stack (like Fig. 3b)", fontsize=9)
    save_figure(fig, path, dpi=120)
