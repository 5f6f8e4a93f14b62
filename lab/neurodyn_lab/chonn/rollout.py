"""CHONN Fig. 5b-f, rollouts: shallow water (10 frames in, rollout to the end) and Navier-Stokes 40-step rollouts
from m = 3, 5, 10 frames; CHONN-FNO against FNO; mean and per-step relative L2.

    python -m neurodyn_lab run chonn/rollout --scale cpu --seeds 0 1
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neurodyn.train.runs import TrainedRun, batches
from neurodyn_lab.chonn.common import (
    fmt,
    header,
    mean_std,
    model_table,
    plot_relative_gain,
    plot_rollout_curves,
    relative_gains,
    run_specs,
    write_tables,
)
from neurodyn_lab.paths import records

DEFAULT_OUT = "chonn/rollout"


ROLLOUT_FIELD_METRICS = ("rmse", "nrmse", "max_err", "crmse", "brmse", "frmse_low", "frmse_mid", "frmse_high")


def run_rollout_benchmark(
    scale: str = "cpu",
    seeds: Sequence[int] = (0, 1),
    out_dir: Path | None = None,
    histories: Sequence[int] = (3, 5, 10),
    shallow_water: bool = True,
    navier_stokes: bool = True,
    overrides: Sequence[str] = (),
    train: bool = True,
    models: Sequence[str] = ("chonn_fno", "fno"),
) -> list[dict[str, Any]]:
    """CHONN-FNO vs FNO: shallow water (10 frames in) and NS rollouts (40 steps in the paper) from m = 3, 5, 10
    frames."""
    runs = [("swe", name, 10, f"{name}/shallow_water", []) for name in models] if shallow_water else []
    if navier_stokes:
        runs += [
            ("ns", name, m, f"{name}/navier_stokes_rollout", [f"data.t_in={m}", f"data.t_start={11 - m}"])
            for m in histories
            for name in models
        ]
    jobs = [
        (
            f"{task_name}-m{m}-{name}",
            f"{task_name} m={m} {name}",
            preset,
            ov,
            {"task": task_name, "model": name, "history": m},
        )
        for task_name, name, m, preset, ov in runs
    ]

    def evaluate(r: TrainedRun) -> dict[str, Any]:
        ev = r.task.evaluate(r.model, batches(r.split("test"), 10))
        return {
            "rel_l2": ev["rel_l2"],
            "rel_l2_per_step": ev["rel_l2_per_step"],
            **{k: ev[f"frame_{k}"] for k in ROLLOUT_FIELD_METRICS if f"frame_{k}" in ev},
        }

    return run_specs(
        "chonn-rollout",
        jobs,
        evaluate,
        lambda rec: f"rel_l2 {rec['rel_l2']:.4g}",
        scale,
        seeds,
        records(out_dir or DEFAULT_OUT),
        overrides,
        train,
    )


def report_rollout(results, out_dir: Path, scale: str, seeds: Sequence[int]) -> str:
    lines = header(
        "Shallow water and Navier-Stokes rollouts (Fig. 5b-f)",
        scale,
        seeds,
        f"`python -m neurodyn_lab run chonn/rollout --scale {scale}`",
    )
    swe = [r for r in results if r["task"] == "swe"]
    if swe:
        metrics = ("rel_l2", *ROLLOUT_FIELD_METRICS)
        table, means = model_table(swe, "model", metrics, ["chonn_fno", "fno"])
        lines += [
            "Shallow water (10 frames in, rollout over the remaining frames; field metrics over all rolled-out "
            "frames):",
            "",
            *table,
        ]
        if len(means) == 2:
            gains = relative_gains(means["chonn_fno"], {"fno": means["fno"]}, metrics)
            plot_relative_gain(gains, out_dir / "swe_gain.png", "Shallow water: CHONN-FNO vs FNO")
            lines += [
                "",
                "Relative gain of CHONN-FNO over FNO: "
                + ", ".join(f"{k} {100 * v[0]:+.1f} %" for k, v in gains.items()),
                "",
                "![swe gain](swe_gain.png)",
            ]
        curves = _mean_curves(swe, lambda r: r["model"])
        plot_rollout_curves(curves, out_dir / "swe_per_step.png", "Shallow water: per-step relative L2")
        lines += ["", "![swe per step](swe_per_step.png)"]
    ns = [r for r in results if r["task"] == "ns"]
    if ns:
        groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
        for r in ns:
            groups[(r["history"], r["model"])].append(r)
        T = len(ns[0]["rel_l2_per_step"])
        lines += [
            "",
            f"Navier-Stokes (nu = 1e-3), mean relative L2 over the {T}-step rollout "
            f"(targets t = 11..{10 + T}), mean ± std over seeds; 'CHONN below FNO': steps (of {T}) where "
            "CHONN-FNO's mean curve is below FNO's:",
            "",
            f"| history | CHONN-FNO | FNO | gain | error at step {T}, CHONN-FNO / FNO | CHONN below FNO | "
            "params CHONN / FNO |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for m in sorted({k[0] for k in groups}):
            a, b = groups.get((m, "chonn_fno"), []), groups.get((m, "fno"), [])
            if not a or not b:
                continue
            ma, mb = mean_std([r["rel_l2"] for r in a]), mean_std([r["rel_l2"] for r in b])
            ca, cb = np.mean([r["rel_l2_per_step"] for r in a], 0), np.mean([r["rel_l2_per_step"] for r in b], 0)
            below = int((ca < cb).sum())
            lines.append(
                f"| {m} -> 1 | {fmt(*ma)} | {fmt(*mb)} | {100 * (1 - ma[0] / mb[0]):+.1f} % | "
                f"{ca[-1]:.4g} / {cb[-1]:.4g} | {below} / {len(ca)} | "
                f"{a[0]['params']:,} / {b[0]['params']:,} |"
            )
        curves = _mean_curves(ns, lambda r: f"{r['model']} {r['history']}->1")
        plot_rollout_curves(curves, out_dir / "ns_per_step.png", "Navier-Stokes: per-step relative L2")
        lines += ["", "![ns per step](ns_per_step.png)"]
    return write_tables(out_dir, lines)


def _mean_curves(results, key) -> dict[str, list[float]]:
    from collections import defaultdict

    g: dict[str, list] = defaultdict(list)
    for r in results:
        g[key(r)].append(r["rel_l2_per_step"])
    return {k: np.mean(v, 0).tolist() for k, v in sorted(g.items())}
