"""CPU-scale versions of the ST-SSM paper's Table 1 (KS nu = 0.1) and Table 5 (factorisations on TorusLi),
through the experiment API, several seeds, with the paper's numbers beside ours.

    # Table 1: KS nu = 0.1 at 64 and 32 points; ST-SSM, FFNO, Multi-Input FFNO, S4-FFNO, U-Net; 3 seeds
    python -m neurodyn_lab run stssm/table1 --seeds 0 1 2
    # Table 5: ST-SSM vs ST-SSM-VM vs ST-SSM-FF vs FNO2D-R on a small TorusLi-like set (16 x 16); 2 seeds
    python -m neurodyn_lab run stssm/table5 --seeds 0 1
    # only some runs / the tables of what is recorded
    python -m neurodyn_lab run stssm/table1 --only stssm-r32 ffno-r32 --seeds 0
    python -m neurodyn_lab run stssm/table1 --report

Every run is ``run_experiment(load_experiment(preset, "cpu", overrides))``, i.e. the same as
``neurodyn train <preset> --scale cpu <overrides>``, with the table's budget overrides (``BUDGET``) plus
``train.seed``; all models of a table read the same generated data file and are scored on the same frames
(KS: frames 4..25 from the true frames 0..3; TorusLi: frames 11..20 from frames 7..10; Markovian models
get only the last given frame). ``train.seed`` changes initialisation and batch order, not the data. The
numbers recorded are the final model's test relative L2 over the whole horizon (the paper's eq. 11),
computed on de-normalised fields, twice: rolled out from the given frames (``rel_l2``) and teacher-forced,
every frame predicted from the true frames before it (``rel_l2_teacher_forced``; the paper's ST-SSM rows
are "teacher-forced" and which of the two it scored is not stated). One record per run,
``lab/records/<tag>/runs/<run>/result.json`` (tag ``stssm/tables``; its ``table`` key names the table);
existing runs are skipped (``--force`` redoes them). The report adds the persistence forecast ``u(t+1) =
u(t)`` on the same test split, scored by the same task evaluation, as the floor a trained model has to beat,
and the first-step and steps-1-5 errors next to
the whole-horizon one.
Threads: ``--threads`` (2) with ``OMP_WAIT_POLICY=PASSIVE`` (set below when unset).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

from neurodyn_lab.paths import records, runs_for
from neurodyn_lab.records import write_json, write_run_record, write_text

DEFAULT_TAG = "stssm/tables"  # the cpu-scale records, lab/records/<tag>/
OUT = records(DEFAULT_TAG)

# label -> (preset, extra overrides); the budget is added per table
RUNS = {
    "1": {
        f"{m}-r{r}": (p, [f"data.resolution={r}"] + ov)
        for r in (64, 32)
        for m, (p, ov) in {
            "stssm": ("stssm/ks-nu0.1", []),
            "ffno": ("ffno/ks-nu0.1", []),
            "mi-ffno": ("ffno/ks-nu0.1-multi", []),
            "s4ffno": ("s4ffno/ks-nu0.1", []),
            "unet": ("unet/ks-nu0.1", []),
        }.items()
    },
    "5": {
        "stssm": ("stssm/torus-li", []),
        "stssm-vm": ("stssm/torus-li", ["model.factorization=zigzag"]),
        "stssm-ff": ("stssm/torus-li", ["model.factorization=parallel"]),
        "fno2d-r": ("ffno/torus-li-fno2d-r", []),
    },
}
BUDGET = {
    # cpu preset data (512 / 128 trajectories solved at 512 points); every 2nd window (5,632), batch 8,
    # 10 epochs = 7,040 optimizer steps (small batches: ~4x the windows per second of batch 32 on this CPU);
    # one epoch at 64 points, 1 thread, unloaded: ST-SSM 71 s, FFNO 12 s, S4-FFNO 28 s, U-Net 29 s
    "1": ["data.window_stride=2", "train.batch_size=8", "train.epochs=10", "train.eval_every=1000"],
    # TorusLi-like cpu data (nu = 1e-3, simulated at 32^2) stored at 16^2, 200 / 40 trajectories; every 2nd
    # window (1,000), batch 4, 6 epochs = 1,500 optimizer steps; one epoch: ST-SSM 50 s, VM 144 s, FF 58 s
    "5": [
        "data.resolution=16",
        "data.sim_resolution=32",
        "data.window_stride=2",
        "train.batch_size=4",
        "train.epochs=6",
        "train.eval_every=1000",
    ],
}
# the paper's numbers (relative L2) and parameter counts
PAPER = {
    "1": {
        "stssm-r64": (0.0048, 203_713),
        "ffno-r64": (0.0688, 1_191_042),
        "mi-ffno-r64": (0.0232, 1_191_234),
        "s4ffno-r64": (0.0247, 1_211_778),
        "unet-r64": (0.0631, 2_707_905),
        "stssm-r32": (0.0162, 203_713),
        "ffno-r32": (0.1127, 666_754),
        "mi-ffno-r32": (0.0466, 666_946),
        "s4ffno-r32": (0.0535, 687_490),
        "unet-r32": (0.1243, 2_707_905),
    },
    "5": {
        "stssm": (0.0345, 369_665),
        "stssm-vm": (0.0495, 402_945),
        "stssm-ff": (0.0403, 503_297),
        "fno2d-r": (0.0718, 1_115_841),
    },
}


def run_one(table: str, label: str, seed: int, args, out: Path) -> dict:
    from neurodyn.train.runs import read_history
    from neurodyn_lab.queue import train_preset

    preset, extra = RUNS[table][label]
    ov = BUDGET[table] + extra + list(args.common) + [f"train.seed={seed}"]
    run_dir = runs_dir(args) / f"{label}-s{seed}"
    cpu0 = time.process_time()
    r = train_preset(preset, args.scale, run_dir, ov, seed=seed, resume=not args.force)
    cpu = time.process_time() - cpu0
    cfg, final, history = r.cfg, r.final, read_history(run_dir)
    rec = {
        "table": table,
        "label": label,
        "preset": preset,
        "scale": args.scale,
        "seed": seed,
        "overrides": ov,
        "rel_l2": final.get("rel_l2"),
        "rel_l2_per_step": final.get("rel_l2_per_step"),
        "rel_l2_teacher_forced": final.get("rel_l2_teacher_forced"),
        "epochs": r.epochs,
        "train_seconds": r.train_seconds,
        "wall_seconds": r.wall_seconds,
        "cpu_seconds": cpu,
        "params": r.params,
        "n_train": cfg["data"].get("n_train"),
        "n_test": cfg["data"].get("n_test"),
        "resolution": cfg["data"].get("resolution"),
        "final_train_loss": r.final_train_loss,
        "train_loss_curve": [h["train_loss"] for h in history],
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "load_avg": os.getloadavg(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        **validation_record(run_dir),
    }
    write_run_record(out.parent.parent.parent, out.parent.name, rec, run_dir=run_dir)
    return rec


def validation_record(run_dir: Path) -> dict:
    """What the validation split chose in a finished run folder: ``n_val``, the validation rollout error per
    evaluated epoch (``curve``), its best value and epoch, and the test errors of the checkpoint it selected
    (``best.pt``: ``test_rel_l2_at_best_val``, ``test_rel_l2_teacher_forced_at_best_val``); ``{}`` when the run
    had no validation split."""
    from neurodyn.data.assembly import split_sizes
    from neurodyn.train.runs import read_history, read_test_metrics

    evaluated = [h for h in read_history(run_dir) if "rel_l2" in h.get("val", {})]
    if not evaluated:
        return {}
    curve = [h["val"]["rel_l2"] for h in evaluated]
    at_best = read_test_metrics(run_dir).get("test", {}).get("best", {})
    return {
        "n_val": split_sizes(yaml.safe_load((run_dir / "config.yaml").read_text())["data"])[1],
        "curve": curve,
        "curve_epochs": [h["epoch"] + 1 for h in evaluated],
        "best_val_rel_l2": min(curve),
        "best_val_epoch": evaluated[curve.index(min(curve))]["epoch"] + 1,
        "test_rel_l2_at_best_val": at_best.get("rel_l2"),
        "test_rel_l2_teacher_forced_at_best_val": at_best.get("rel_l2_teacher_forced"),
    }


class _Persistence(torch.nn.Module):
    """``u_{t+1} = u_t``: returns the last input frame (time layout ``(B, T, *spatial, C)``)."""

    def __init__(self, channels: int):
        super().__init__()
        self.channels = channels

    def forward(self, x, pos=None, ctx=None):
        return x[:, -1:, ..., : self.channels]


def persistence(table: str, args) -> dict:
    """Relative L2 of the persistence forecast on the table's test split, by the task's own evaluation."""
    from torch.utils.data import default_collate

    from neurodyn.data.assembly import build_data
    from neurodyn.experiments import load_experiment
    from neurodyn.train.experiment import build_task, train_config

    preset, extra = next(iter(RUNS[table].values()))  # an ST-SSM preset: time layout, K given frames
    cfg = load_experiment(preset, args.scale, BUDGET[table] + extra + list(args.common))
    tcfg = train_config(cfg)
    data = build_data(cfg, progress=False, train_window_steps=tcfg.window_steps)
    task = build_task(cfg, data, tcfg)
    test = data["sets"]["test"]
    batches = (default_collate([test[i] for i in range(j, min(j + 32, len(test)))]) for j in range(0, len(test), 32))
    res = task.evaluate(_Persistence(test.channels), batches)
    return {
        "rel_l2": res["rel_l2"],
        "teacher_forced": res["rel_l2_teacher_forced"],
        "resolution": cfg["data"].get("resolution"),
        "first_step": res["rel_l2_per_step"][0],
        "per_step": res["rel_l2_per_step"],
        "steps_1_5": statistics.mean(res["rel_l2_per_step"][:5]),
    }


def runs_dir(args) -> Path:
    """Where the run folders train: ``--runs-dir``, by default ``lab/runs/<tag>`` (untracked)."""
    return Path(args.runs_dir) if args.runs_dir else runs_for(records(args.tag))


def backfill(table: str, runs: Path) -> None:
    """Add :func:`validation_record` to the recorded runs of ``table`` written before records kept it, from
    their run folders under ``runs`` (those that are still there)."""
    for f in sorted(OUT.glob("runs/*/result.json")):
        rec = json.loads(f.read_text())
        if rec.get("table") != table:
            continue
        run_dir = runs / f.parent.name
        if "n_val" not in rec and (run_dir / "metrics.jsonl").exists():
            write_json(f, {**rec, **validation_record(run_dir)})


def load(table: str) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for f in sorted(OUT.glob("runs/*/result.json")):
        r = json.loads(f.read_text())
        if r.get("table") == table:
            rows.setdefault(r["label"], []).append(r)
    return rows


def _ms(values: list[float]) -> str:
    return f"{statistics.mean(values):.4f} +- {statistics.stdev(values) if len(values) > 1 else 0.0:.4f}"


def report(table: str, args=None) -> None:
    """Markdown table: rollout and teacher-forced horizon errors (mean +- std over seeds) beside the paper's.

    Printed, and written to ``<OUT>/table<k>.md`` with a plot of the mean per-step rollout error of every
    run (and of persistence) in ``<OUT>/table<k>_per_step.png``."""
    rows = load(table)
    if not rows:
        print(f"no runs of table {table} recorded under {OUT / 'runs'}")
        return
    lines = [
        "| run | params (paper) | res | seeds | rollout rel. L2 | per seed | teacher-forced rel. L2 | paper | "
        "1st step | steps 1-5 | train min / run | final train loss | rollout at best validation (epoch) |",
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    means, forced, curves = {}, {}, {}
    for label in RUNS[table]:
        rs = sorted(rows.get(label, []), key=lambda r: r["seed"])
        if not rs:
            continue
        v = [r["rel_l2"] for r in rs]
        tf = [r["rel_l2_teacher_forced"] for r in rs if r.get("rel_l2_teacher_forced") is not None]
        means[label] = statistics.mean(v)
        curves[label] = [statistics.mean(step) for step in zip(*(r["rel_l2_per_step"] for r in rs))]
        if tf:
            forced[label] = statistics.mean(tf)
        pv, pp = PAPER[table][label]
        lines.append(
            f"| {label} | {rs[0]['params']:,} ({pp:,}) | {rs[0]['resolution']} | "
            f"{','.join(str(r['seed']) for r in rs)} | {_ms(v)} | {' '.join(f'{x:.4f}' for x in v)} | "
            f"{_ms(tf) if tf else '-'} | {pv:.4f} | "
            f"{statistics.mean(r['rel_l2_per_step'][0] for r in rs):.4f} | "
            f"{statistics.mean(statistics.mean(r['rel_l2_per_step'][:5]) for r in rs):.4f} | "
            f"{statistics.mean(r['train_seconds'] for r in rs) / 60:.1f} | "
            f"{statistics.mean(r['final_train_loss'] for r in rs):.4f} | {_at_best(rs)} |"
        )
    if args is not None and not args.no_persistence:
        # persistence only at the resolutions that have runs: a plot of the baseline alone says nothing
        res = [""] if table == "5" else [r for r, g in _by_resolution(table, means).items() if g]
        for r in res:
            if r:
                args.common = [c for c in args.common if not c.startswith("data.resolution")] + [
                    f"data.resolution={r.removeprefix('r')}"
                ]
            p = persistence(table, args)
            curves[f"persistence{'-' + r if r else ''}"] = p["per_step"]
            lines.append(
                f"| persistence u(t+1) = u(t) | 0 | {p['resolution']} | - | {p['rel_l2']:.4f} | - | "
                f"{p['teacher_forced']:.4f} | - | {p['first_step']:.4f} | {p['steps_1_5']:.4f} | - | - "
                "| - |"
            )
    for g in _by_resolution(table, means).values():
        if len(g) < 2:
            continue
        paper = sorted(g, key=lambda k: PAPER[table][k][0])
        lines.append(f"\nordering (best first), paper:          {' < '.join(paper)}")
        for name, score in (("rollout", means), ("teacher-forced", forced)):
            if all(k in score for k in g):
                ours = sorted(g, key=score.get)
                lines.append(
                    f"ordering (best first), ours {name + ':':16s}{' < '.join(ours)}  "
                    f"(same as the paper: {ours == paper}; best {ours[0]} / paper {paper[0]})"
                )
    text = "\n".join(lines)
    print(text)
    write_text(OUT / f"table{table}.md", text + "\n")
    _plot_per_step(table, curves, _scale_label(args))


def _at_best(rs: list[dict]) -> str:
    """The test rollout error of the checkpoint the validation split chose (mean +- std) and its epochs, or "-"
    for records without a validation split."""
    chosen = [r for r in rs if r.get("test_rel_l2_at_best_val") is not None]
    if len(chosen) < len(rs):
        return "-"
    return (
        f"{_ms([r['test_rel_l2_at_best_val'] for r in chosen])} ({', '.join(str(r['best_val_epoch']) for r in chosen)})"
    )


def _by_resolution(table: str, names) -> dict[str, list[str]]:
    """Table 1's labels grouped by resolution suffix (``{"r64": [...], "r32": [...]}``); Table 5: one group."""
    if table != "1":
        return {"": list(names)}
    return {f"r{r}": [k for k in names if k.endswith(f"-r{r}")] for r in (64, 32)}


def _scale_label(args) -> str:
    """What the plot titles call the runs: ``"cpu scale"`` for the default results folder, else its tag
    (``"stssm/table1_protocol"``), since a tagged run list overrides the scale's budget."""
    if args is None or args.tag == DEFAULT_TAG:
        return f"{getattr(args, 'scale', 'cpu')} scale"
    return args.tag


def _plot_per_step(table: str, curves: dict[str, list[float]], scale_label: str) -> None:
    """Mean per-step rollout error of each run, one plot per resolution (Table 1) or one plot (Table 5)."""
    from neurodyn.plots import plot_rollout_curves

    for suffix, names in _by_resolution(table, curves).items():
        if names:
            path = OUT / f"table{table}{'_' + suffix if suffix else ''}_per_step.png"
            title = f"ST-SSM Table {table}, {scale_label}{', ' + suffix if suffix else ''}: rollout error per step"
            plot_rollout_curves(
                {k: curves[k] for k in names}, path, title, baselines=[k for k in names if "persistence" in k], log=True
            )
            print(f"plot: {path}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", choices=sorted(RUNS), required=True)
    ap.add_argument("--only", nargs="*", default=None, help="labels to run (default: all of the table)")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--common", nargs="*", default=[], help="extra overrides for every run")
    ap.add_argument(
        "--tag",
        default=DEFAULT_TAG,
        help="the claim: records go to lab/records/<tag>/runs/<run>/result.json, the report to <tag>/table<k>.md",
    )
    ap.add_argument("--runs-dir", default=None, help="where the run folders train (default lab/runs/<tag>, untracked)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument(
        "--no-persistence",
        action="store_true",
        help="leave the persistence forecast out of the report (it generates the data when missing)",
    )
    ap.add_argument(
        "--estimate",
        action="store_true",
        help="only time a few training steps of each run (at --threads) and print the CPU hours of "
        "--seeds runs with the budget and --common overrides",
    )
    args = ap.parse_args(argv)
    global OUT
    OUT = records(args.tag)
    if args.estimate:
        print(estimate(args))
        return
    backfill(args.table, runs_dir(args))
    if args.report:
        report(args.table, args)
        return
    torch.set_num_threads(args.threads)
    labels = args.only or list(RUNS[args.table])
    unknown = [l for l in labels if l not in RUNS[args.table]]
    if unknown:
        raise SystemExit(f"unknown run(s) {unknown}; table {args.table} has {list(RUNS[args.table])}")
    for seed in args.seeds:
        for label in labels:
            out = OUT / "runs" / f"{label}-s{seed}" / "result.json"
            if out.exists() and not args.force:
                print(f"{label} seed {seed}: recorded already ({out})")
                continue
            rec = run_one(args.table, label, seed, args, out)
            print(
                f"{label} seed {seed}: test rel. L2 {rec['rel_l2']:.4f}, {rec['params']:,} parameters, "
                f"{rec['train_seconds']:.0f} s training, load {rec['load_avg'][0]:.1f}",
                flush=True,
            )
    print(f"\ncommand: {' '.join([Path(sys.executable).name] + sys.argv)}\n")
    report(args.table, args)


def estimate(args) -> str:
    """Parameters, seconds per epoch and CPU hours of the table's runs (:func:`neurodyn.compare.estimate_table`)."""
    from neurodyn.compare import estimate_table
    from neurodyn.experiments import load_experiment

    torch.set_num_threads(args.threads)
    labels = args.only or list(RUNS[args.table])
    cfgs = {
        label: load_experiment(
            RUNS[args.table][label][0], args.scale, BUDGET[args.table] + RUNS[args.table][label][1] + list(args.common)
        )
        for label in labels
    }
    return estimate_table(cfgs, next(iter(cfgs.values()))["train"]["epochs"], len(args.seeds))


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run stssm/table1 | stssm/table5`` entry point: ``--scale`` is the presets' scale."""
    return main(["--scale", scale, *argv]) or 0


if __name__ == "__main__":
    main()
