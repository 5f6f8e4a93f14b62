"""``python -m neurodyn_lab reproduce <paper> [--table T] [--scale tiny|cpu|paper] [--device cuda] [--seeds ...]
[--dry-run] [--records DIR]``: one paper table as a resumable queue.

Before anything trains it prints the plan (every row: preset, overrides, seeds, epochs, the paper's number) and the
estimated cost of the runs not yet recorded (:mod:`~neurodyn_lab.reproduce.cost`: what each estimate rests on is
printed beside it). Then it trains them (:func:`neurodyn_lab.queue.run_jobs`: a recorded run is never trained
again, an interrupted one resumes from its untracked run folder), prints our numbers (mean ± std over seeds) beside
the paper's and writes that table, the page section, to ``<records>/table.md``. ``--dry-run`` stops after the plan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurodyn_lab.paths import RECORDS, relative
from neurodyn_lab.queue import Job, run_jobs
from neurodyn_lab.records import load_results, write_text
from neurodyn_lab.reproduce.cost import Timing, estimate
from neurodyn_lab.reproduce.tables import PAPERS, Row, Table, all_tables


def records_dir(table: Table, scale: str) -> Path:
    """Where a table's records go by default: ``lab/records/<paper>/reproduce_<table>-<scale>``."""
    return RECORDS / table.paper / f"reproduce_{table.name}-{scale}"


def _split(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(data / train overrides, model overrides)."""
    return [o for o in overrides if not o.startswith("model.")], [o for o in overrides if o.startswith("model.")]


def epochs_of(table: Table, row: Row, scale: str) -> int:
    """The epochs a row trains at ``scale``: the table's, else its preset's."""
    if table.epochs and scale in table.epochs:
        return table.epochs[scale]
    from neurodyn.experiments import load_experiment

    return int(load_experiment(row.preset, scale, list(_split(row.overrides)[0]))["train"]["epochs"])


def jobs_of(table: Table, scale: str, seeds: Sequence[int]) -> list[Job]:
    """One :class:`~neurodyn_lab.queue.Job` per row and seed, ``<label>-s<seed>``."""
    jobs = []
    for seed in seeds:
        for row in table.rows:
            other, model = _split((*table.common, *row.overrides))
            epochs = [f"train.epochs={table.epochs[scale]}"] if table.epochs and scale in table.epochs else []
            jobs.append(
                Job(
                    f"{row.label}-s{seed}",
                    row.preset,
                    seed,
                    [*other, *epochs],
                    {"label": row.label, "table": f"{table.paper}/{table.name}"},
                    row.label,
                    row.model_from,
                    model,
                )
            )
    return jobs


def _fmt_hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:.3g}" if hours >= 0.01 else f"{hours:.2g}"


def plan(table: Table, scale: str, seeds: Sequence[int], device: str, recorded: set[str]) -> tuple[list[str], float]:
    """The plan's lines and the estimated seconds of the runs not yet recorded."""
    unit = "GPU-hours" if device.startswith("cuda") else "CPU-hours"
    lines = [
        f"| model | preset | overrides | seeds (to run) | epochs | paper | s / epoch | estimated {unit} | "
        "the estimate rests on |",
        "|---|---|---|---|---:|---|---:|---:|---|",
    ]
    total, missing = 0.0, []
    for row in table.rows:
        other, model = _split((*table.common, *row.overrides))
        epochs = epochs_of(table, row, scale)
        todo = [s for s in seeds if f"{row.label}-s{s}" not in recorded]
        t: Timing = estimate(row.preset, scale, model, row.model_from, other)
        if t.seconds_per_epoch is None:
            missing.append(row.label)
            cost, spe = "?", "?"
        else:
            seconds = t.seconds_per_epoch * epochs * len(todo)
            total += seconds
            cost, spe = _fmt_hours(seconds), f"{t.seconds_per_epoch:.3g}"
        preset = row.preset + (f" (model of {row.model_from})" if row.model_from else "")
        lines.append(
            f"| {row.label} | {preset} | {' '.join(row.overrides) or '-'} | {' '.join(map(str, seeds))} "
            f"({len(todo)}) | {epochs} | {row.paper} | {spe} | {cost} | {t.how}: {t.source} |"
        )
    lines += [
        "",
        f"Estimated cost of the runs to go: {_fmt_hours(total)} {unit} (an estimate: the seconds per epoch "
        "the records measured, times epochs and seeds; one torch thread on a shared 2-core CPU, so a quiet or "
        "larger machine is faster).",
    ]
    if device.startswith("cuda"):
        lines.append("No record holds a GPU timing yet: the GPU-hours shown are the CPU estimate, an upper bound.")
    if missing:
        lines.append(f"No estimate for {', '.join(missing)}: no record measures those presets' training time.")
    return lines, total


def _ours(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4g} (1 seed)"
    return f"{statistics.mean(values):.4g} ± {statistics.stdev(values):.2g} ({len(values)} seeds)"


def result_table(table: Table, scale: str, seeds: Sequence[int], records: list[dict[str, Any]]) -> str:
    """Ours (mean ± std over the recorded seeds) beside the paper's number, one row per model: the page section."""
    lines = [
        f"### {table.title}",
        "",
        f"Ours at `{scale}` scale, seeds {' '.join(map(str, seeds))}; the metric: "
        f"`{table.reported}` (test split, final model). {table.note}.",
        "",
        "| model | preset | ours | paper |",
        "|---|---|---:|---:|",
    ]
    for row in table.rows:
        values = [
            r[table.reported]
            for r in records
            if r.get("label") == row.label
            and r.get("seed") in seeds
            and isinstance(r.get(table.reported), (int, float))
        ]
        lines.append(f"| {row.label} | {row.preset} | {_ours(values)} | {row.paper} |")
    lines += [
        "",
        f"Made by `python -m neurodyn_lab reproduce {table.paper} --table {table.name} --scale {scale}` "
        "from the records beside this file.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    tables = all_tables()
    ap = argparse.ArgumentParser(prog="python -m neurodyn_lab reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("paper", choices=PAPERS)
    ap.add_argument("--table", default=None, help="the table (default: the paper's first; an unknown one lists them)")
    ap.add_argument("--scale", default="cpu", choices=("tiny", "cpu", "paper"))
    ap.add_argument("--device", default="cpu", help="where the runs train (cpu, cuda)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="training seeds (default: the table's)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its cost only")
    ap.add_argument(
        "--records",
        type=Path,
        default=None,
        help="the records folder (default lab/records/<paper>/reproduce_<table>-<scale>)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the runs")
    a = ap.parse_args(argv)
    mine = tables[a.paper]
    name = a.table or next(iter(mine))
    if name not in mine:
        print(f"{a.paper} has the tables {', '.join(mine)}", file=sys.stderr)
        return 2
    table = mine[name]
    seeds = list(a.seeds or table.seeds)
    folder = a.records or records_dir(table, a.scale)
    recorded = {r.get("run") for r in load_results(folder)} if folder.exists() else set()
    print(
        f"## {table.title}\n\n{table.note}.\n\nRecords: {relative(folder)} ({len(recorded)} runs recorded); "
        f"scale {a.scale}, device {a.device}.\n"
    )
    lines, _ = plan(table, a.scale, seeds, a.device, recorded)
    print("\n".join(lines), flush=True)
    if a.dry_run:
        return 0
    records = run_jobs(
        jobs_of(table, a.scale, seeds),
        folder,
        a.scale,
        evaluate=table.evaluate,
        metric=table.metric,
        tag=f"reproduce {a.paper}/{name}",
        device=a.device,
        threads=a.threads,
    )
    text = result_table(table, a.scale, seeds, records)
    write_text(folder / "table.md", text)
    print("\n" + text + f"\nwritten: {relative(folder / 'table.md')}")
    return 0
