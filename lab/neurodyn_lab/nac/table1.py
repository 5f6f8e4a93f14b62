"""NAC paper Table 1 at our scale: NAC (its three profiles, modes, Top-K) vs the baselines.

    python -m neurodyn_lab run nac/table1 --scale cpu                        # everything
    python -m neurodyn_lab run nac/table1 --scale cpu --tasks event_digits --seeds 0 1 \\
        --epochs 8 --variants paper tuned gru

Each run is ``neurodyn train <model>/<task>`` at the given scale (presets in
``src/neurodyn/experiments/``) with ``train.seed`` and ``data.seed`` set to the seed, evaluated on
the test split after the last epoch. Each run's record is added to ``lab/records/nac/table1/results.json`` (a run
already there is skipped, so the command resumes; the run folders train in ``lab/runs/nac/table1``, untracked) and a
markdown table (mean +- std over seeds) is printed.

NAC variants are named after the ``compat`` profile they run (``src/neurodyn/models/nac.py``): ``paper``,
``tuned`` and ``released`` take every option from that profile (options a preset sets, such as the two inits of
``nac/bearing``'s cpu scale, are cleared; ``--set model.options.<name>=...`` sets one again), and the Table 1
ablations ``paper-euler``, ``paper-steady``, ``paper-2k``, ``paper-pw`` change the paper profile's mode or Top-K.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import platform
import statistics
import sys
from pathlib import Path

import torch

from neurodyn.nn.nac import NACOptions
from neurodyn_lab.paths import records, runs_for
from neurodyn_lab.records import load_results, write_store

DEFAULT_OUT = "nac/table1"


def _nac(compat: str, *extra: str) -> tuple[str, list[str]]:
    """NAC with every option from the profile ``compat`` (a preset's own ``options`` cleared), then ``extra``."""
    cleared = (f"model.options.{name}=null" for name in NACOptions.__dataclass_fields__)
    return "nac", [f"model.compat={compat}", *cleared, *extra]


VARIANTS = {  # name -> (preset model, overrides)
    "paper": _nac("paper"),  # NAC-Exact/05s/8k as the paper prints it
    "tuned": _nac("tuned"),  # our measured choices
    "released": _nac("released"),  # the authors' released code
    "paper-euler": _nac("paper", "model.mode=euler"),  # Table 1's NAC-Euler
    "paper-steady": _nac("paper", "model.mode=steady"),  # NAC-Steady
    "paper-2k": _nac("paper", "model.topk=2"),  # NAC-2k
    "paper-pw": _nac("paper", "model.topk=null"),  # NAC-PW
    "gru": ("gru", []),
    "lstm": ("lstm", []),
    "cfc": ("cfc", []),
    "ltc": ("ltc", []),
    "mha": ("mha", []),
    "odernn": ("odernn", []),
}
# Variants of earlier results in the records, shown by --table-only and --plot-curves but not run again: they ran
# the preset's NAC with compat="paper" as that name was then (once the tuned choices were measured: today's
# "tuned", with nac/bearing's two inits reverted; before that: T = 1, the query's time, the released code's inits),
# or compat="released" as it was then (with the preset's pair time and conv init); -euler / -steady / -2k / -pw
# changed the mode or Top-K.
STORED = ("nac-exact", "nac-euler", "nac-steady", "nac-2k", "nac-pw", "nac-released")
TASKS = ("event_digits", "activity", "bearing")
METRIC = {"event_digits": ("accuracy", "max"), "activity": ("accuracy", "max"), "bearing": ("rmse", "min")}


def run(scale: str, argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m neurodyn_lab run nac/table1")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    p.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANTS),
        choices=[*VARIANTS, *STORED],
        help=f"runs of {', '.join(STORED)} (earlier names) are only shown, not made",
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--epochs", type=int, default=0, help="override train.epochs (0: the preset's)")
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="further preset overrides for every run, e.g. data.n_train=500 (recorded with the results)",
    )
    p.add_argument("--tag", default="", help="a label for runs of changed code or defaults (kept apart in the table)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=DEFAULT_OUT, help="the claim the records go to (lab/records/<out>), or a folder")
    p.add_argument("--runs-dir", default=None, help="where the run folders train (default lab/runs/<out>, untracked)")
    p.add_argument("--table-only", action="store_true", help="print the table of the stored results")
    p.add_argument(
        "--plot-curves",
        metavar="OUT.png",
        default=None,
        help="only plot the per-epoch test metric (mean over seeds) of the stored runs of --tasks "
        "(one task), --variants, --tag, --set (NAC variants only) and --epochs, one curve per variant",
    )
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    from neurodyn.experiments import load_experiment
    from neurodyn_lab.queue import train_preset

    out = records(a.out)
    runs_dir = Path(a.runs_dir) if a.runs_dir else runs_for(out)
    done = load_results(out)
    key = lambda r: (
        r["task"],
        r["variant"],
        r["seed"],
        r["scale"],
        r["epochs"],
        tuple(r.get("set", ())),
        r.get("tag", ""),
    )
    have = {key(r) for r in done}
    if a.plot_curves:
        print(plot_curves(done, a, scale))
        return 0
    if not a.table_only:
        stored = [v for v in a.variants if v in STORED]
        if stored:
            p.error(
                f"{', '.join(stored)}: variants of earlier results, shown but not run again; run paper, tuned "
                "or released (see the module docstring)"
            )
        for task in a.tasks:
            for variant in a.variants:
                model, extra = VARIANTS[variant]
                for seed in a.seeds:
                    over = [*extra, *a.set, f"train.seed={seed}", f"data.seed={seed}"]
                    if a.epochs:
                        over.append(f"train.epochs={a.epochs}")
                    cfg = load_experiment(f"{model}/{task}", scale, over)
                    rec_key = (task, variant, seed, scale, cfg["train"]["epochs"], tuple(a.set), a.tag)
                    if rec_key in have:
                        continue
                    run_dir = runs_dir / _run_folder(task, variant, scale, seed, a.tag, a.set)
                    r = train_preset(f"{model}/{task}", scale, run_dir, over, resume=False)
                    final = r.final
                    rec = {
                        "task": task,
                        "variant": variant,
                        "seed": seed,
                        "scale": scale,
                        "set": list(a.set),
                        "tag": a.tag,
                        "curve": [h["val"][METRIC[task][0]] for h in _history(run_dir)],
                        "curve_split": "val",
                        "epochs": cfg["train"]["epochs"],
                        "final": final,
                        "n_train": r.epochs and cfg["data"].get("n_train"),
                        "threads": a.threads,
                        "train_seconds": r.train_seconds,
                        "wall_seconds": r.wall_seconds,
                        "date": datetime.date.today().isoformat(),
                        "host": platform.node(),
                    }
                    done.append(rec)
                    write_store(out, done)
                    have.add(rec_key)
                    print(f"{task:>12s} {variant:>13s} seed {seed}: {final}  ({r.wall_seconds:.0f} s)", flush=True)
    print(table(done, scale))
    return 0


def _run_folder(task: str, variant: str, scale: str, seed: int, tag: str, sets: list[str]) -> str:
    """Run folder name; ``--set`` overrides add a short hash, so two runs differing only there never share a
    folder (they overwrote each other's checkpoints when run at the same time)."""
    name = f"{task}-{variant}-{scale}-s{seed}" + (f"-{tag}" if tag else "")
    if sets:
        name += "-" + hashlib.sha1(";".join(sets).encode()).hexdigest()[:8]
    return name


def plot_curves(records: list[dict], a, scale: str) -> str:
    """Mean (over seeds) per-epoch test metric of each variant's stored runs matching the selection; writes
    ``a.plot_curves`` and returns a text summary (metric at every 5th epoch, final)."""
    from neurodyn.plots import plot_seed_mean_curves

    task = a.tasks[0]
    metric, _ = METRIC[task]
    groups = {}
    for variant in a.variants:
        want_set = list(a.set) if _is_nac(variant) else []  # --set holds NAC model keys
        groups[variant] = [
            r["curve"]
            for r in records
            if r["task"] == task
            and r["variant"] == variant
            and r["scale"] == scale
            and r.get("tag", "") == a.tag
            and list(r.get("set", [])) == want_set
            and r.get("curve")
            and (not a.epochs or r["epochs"] == a.epochs)
        ]
    # runs before the validation split recorded the test metric per epoch; later ones the validation metric
    split = {r.get("curve_split", "test") for r in records if r["task"] == task and r.get("tag", "") == a.tag}
    split = "validation" if split == {"val"} else "test" if split == {"test"} else "validation / test"
    means = plot_seed_mean_curves(groups, a.plot_curves, f"{split} {metric}", f"{task} ({scale}), mean over seeds")
    lines = [f"{task}: {split} {metric} per epoch, mean over seeds (tag {a.tag or '-'}, {' '.join(a.set) or 'preset'})"]
    lines += [
        f"{v} ({len(groups[v])} seeds): " + " / ".join(f"{x:.3f}" for x in m[4::5]) + f"; final {m[-1]:.4f}"
        for v, m in means.items()
    ]
    return "\n".join(lines + [f"-> {a.plot_curves}"])


def _is_nac(variant: str) -> bool:
    return variant in STORED or VARIANTS[variant][0] == "nac"


def _history(run_dir: Path) -> list[dict]:
    from neurodyn.train.runs import read_history

    return [h for h in read_history(run_dir) if "val" in h]


def table(records: list[dict], scale: str) -> str:
    lines = []
    for task in TASKS:
        rows = [r for r in records if r["task"] == task and r["scale"] == scale]
        if not rows:
            continue
        metric, _ = METRIC[task]
        extra = ["score"] if task == "bearing" else []
        lines += [
            "",
            f"**{task}** ({scale} scale; test {metric}"
            + (", score (eq. 58, sum)" if extra else "")
            + "; mean ± std over seeds)",
            "",
            "| variant | " + " | ".join([metric, *extra]) + " | seeds | epochs | overrides | train s/run |",
            "| --- | " + " | ".join("---" for _ in [metric, *extra]) + " | --- | --- | --- | --- |",
        ]
        budgets = sorted({(r.get("tag", ""), r["epochs"], tuple(r.get("set", ()))) for r in rows})
        for variant, (tag, epochs, extra_set) in ((v, b) for b in budgets for v in (*VARIANTS, *STORED)):
            # one row per variant, tag and budget: runs with other epochs or overrides are not averaged together
            rs = [
                r
                for r in rows
                if r["variant"] == variant
                and (r.get("tag", ""), r["epochs"], tuple(r.get("set", ()))) == (tag, epochs, extra_set)
            ]
            if not rs:
                continue
            cells = []
            for m in [metric, *extra]:
                vals = [r["final"][m] for r in rs]
                sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
                cells.append(f"{statistics.mean(vals):.4f} ± {sd:.4f}" if len(vals) > 1 else f"{vals[0]:.4f}")
            name = f"{variant} [{tag}]" if tag else variant
            lines.append(
                f"| {name} | " + " | ".join(cells) + f" | {len(rs)} | {epochs} | "
                f"{' '.join(extra_set) or '-'} | "
                f"{statistics.mean(r['train_seconds'] for r in rs):.0f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    from neurodyn_lab.cli import script_main

    sys.exit(script_main(run))
