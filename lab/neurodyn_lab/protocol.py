"""The protocol experiments: paper experiments at their protocol (CHONN) or scaled to two cores, as resumable queues.

    python -m neurodyn_lab run protocol --status    # per experiment: runs recorded, in progress (epoch), left
    python -m neurodyn_lab run protocol --lanes a b # both queues, one process each (1 torch thread), until done
    python -m neurodyn_lab run protocol --lanes b   # one queue
    python -m neurodyn_lab run protocol --report    # every experiment's report.md (tables, plots) from its records

Each experiment is one invocation of its driver (below), which skips recorded runs and resumes an interrupted
one from its ``last.pt`` in the untracked run folder (``lab/runs/<paper>/<claim>``); so the same command continues
after any interruption on a machine that keeps that folder. On another machine the records (committed as each run
ends) are all that travels: a recorded run is never trained again and an unfinished one starts over. Checkpoints
never enter a commit. Every run trains with a validation split that alone selects its ``best.pt``; the test split
is evaluated once, at the end of the run.

Lane ``a``: the CHONN order family at the paper's protocol, then ST-SSM-VM of Table 5 at 32 x 32. Lane ``b``:
Transolver's learning rate and slice count tuned on the Darcy validation split, the chosen setting's other two
seeds, the chosen Transolver and an FNO of its size for 50 epochs, the Navier-Stokes comparison at
nu = 1e-4, ST-SSM's Table 1 (KS nu = 0.1) at 50 epochs, then Table 5's other three models. Lane ``c``: the papers'
open claims (LaMO's paper configuration, the 2.37 M FNO at 50 epochs, the paper's GeoMaNO on NS, CHONN's Fig. 3c);
lane ``d``: CHONN's Fig. 3a off-diagonal, beside lane ``c`` on the second core. The protocols,
estimates, records and verdicts are in ``lab/pages/protocol.md``; each experiment's records and report are in
its claim's folder, ``lab/records/<paper>/<claim>/`` (:data:`CLAIMS`; the layout of ``lab/README.md``).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import yaml

from neurodyn.train.runs import read_history, read_test_metrics
from neurodyn_lab.paths import child_env, module_command, records, relative, runs_for
from neurodyn_lab.records import load_results, read_run_records, write_text

#: protocol experiment -> the claim its records belong to (``lab/records/<claim>``)
CLAIMS = {
    "chonn_order": "chonn/order_protocol",
    "chonn_fig3a": "chonn/fig3a_protocol",
    "chonn_fig3c": "chonn/fig3c_protocol",
    "stssm_ks": "stssm/table1_protocol",
    "stssm_table5_32": "stssm/table5_protocol",
    "transolver_tuning": "operators/transolver_tuning_protocol",
    "darcy_50": "operators/darcy_50ep_protocol",
    "ns4": "operators/ns4_protocol",
    "ns4_paper_configs": "operators/ns4_paper_configs_protocol",
    "lamo_config_darcy": "lamo/darcy_config_protocol",
    "geomano_lamo_equal": "geomano/lamo_equal_protocol",
}


def folder(name: str) -> Path:
    """The records folder of protocol experiment ``name``: ``lab/records/<CLAIMS[name]>``."""
    return records(CLAIMS[name])


TRANSOLVER_GRID = [(lr, m) for lr in ("5e-4", "1e-3", "2e-3", "4e-3", "8e-3") for m in (16, 32, 64)]
TRANSOLVER_TAG = CLAIMS["transolver_tuning"]
DARCY50_TAG = CLAIMS["darcy_50"]
# ST-SSM's Table 5 on the Navier-Stokes nu = 1e-4 trajectories of the "ns4" comparison (the same file): 32 x 32
# stored from a 64 x 64 solve; 250 train / 50 validation / 200 test; frames 7..10 given, 11..20 predicted
TABLE5_32 = [
    "data.nu=1e-4",
    "data.sim_resolution=64",
    "data.resolution=32",
    "data.dt=2e-3",
    "data.n_train=250",
    "data.n_val=50",
    "data.n_test=200",
    "train.eval_every=1",
]
TABLE5_EPOCHS = 8  # the most that fits about 6 CPU hours (protocol.md, 4b)
NS4_EPOCHS = 30


class Experiment(NamedTuple):
    lane: str
    module: str  # the driver, a lab module (``neurodyn_lab.operators.darcy``)
    argv: Callable[[], list[str]]  # the driver's arguments (built when the experiment starts)
    records: Callable[[], list[dict]]  # the records of the runs finished so far
    total: int  # runs in the experiment
    runs_dir: Path  # where its run folders are (untracked)
    runs: tuple[str, ...] = ("*",)  # the names of its run folders there (globs)


DARCY_DRIVER = "neurodyn_lab.operators.darcy"
STSSM_DRIVER = "neurodyn_lab.stssm.tables"
COMPARE_DRIVER = "neurodyn_lab.geomano.table1"
CHONN_DRIVER = "neurodyn_lab.chonn.experiments"


def _store_records(experiment: Path) -> list[dict]:
    """The records of a ``run_jobs`` store folder."""
    return load_results(experiment) if experiment.exists() else []


def transolver_choice() -> tuple[str, str, int]:
    """``(label, lr, slices)`` of the tuning run with the lowest best validation rel. L2 (seed 0)."""
    recs = read_run_records(records(TRANSOLVER_TAG), "*-s0")
    if len(recs) < len(TRANSOLVER_GRID):
        raise SystemExit(f"the Transolver tuning has {len(recs)} of {len(TRANSOLVER_GRID)} runs recorded")
    best = min(recs, key=lambda r: r["best_val_rel_l2"])
    lr, m = best["label"].removeprefix("transolver-lr").split("-m")
    return best["label"], lr, int(m)


def _transolver_runs(grid) -> list[str]:
    return [f"transolver-lr{lr}-m{m}=transolver/darcy;train.lr={lr};model.n_slices={m}" for lr, m in grid]


def _operators_darcy(seeds: list[int], grid) -> list[str]:
    return [
        "--seeds",
        *map(str, seeds),
        "--epochs",
        "10",
        "--threads",
        "1",
        "--tag",
        TRANSOLVER_TAG,
        "--runs",
        *_transolver_runs(grid),
    ]


def _chosen_seeds() -> list[str]:
    _, lr, m = transolver_choice()
    return _operators_darcy([1, 2], [(lr, m)])


def _darcy_50() -> list[str]:
    """The chosen Transolver and the FNO of its size (0.12 M) for 50 epochs (seeds 0, 1, 2): is Transolver's gap to
    the FNO at 10 epochs a matter of the budget?"""
    _, lr, m = transolver_choice()
    return [
        "--seeds",
        "0",
        "1",
        "2",
        "--epochs",
        "50",
        "--threads",
        "1",
        "--tag",
        DARCY50_TAG,
        "--runs",
        *_transolver_runs([(lr, m)]),
        "fno-small=fno/darcy;model.width=14;model.modes=[6,6]",
    ]


def _stssm(table: str, tag: str, only: list[str], common: list[str], seeds: tuple[int, ...] = (0, 1, 2)) -> list[str]:
    return [
        "--table",
        table,
        *(["--only", *only] if only else []),
        "--seeds",
        *map(str, seeds),
        "--threads",
        "1",
        "--common",
        *common,
        "--tag",
        CLAIMS[tag],
    ]


def _table5_32(lane: str, labels: tuple[str, ...]) -> Experiment:
    """ST-SSM's Table 5 at 32 x 32 for the models ``labels`` (seeds 0, 1, 2): their records and run folders only."""
    return Experiment(
        lane,
        STSSM_DRIVER,
        lambda: _stssm("5", "stssm_table5_32", list(labels), [*TABLE5_32, f"train.epochs={TABLE5_EPOCHS}"]),
        lambda: [r for r in read_run_records(folder("stssm_table5_32")) if r["label"] in labels],
        3 * len(labels),
        runs_for(folder("stssm_table5_32")),
        tuple(f"{label}-s?" for label in labels),
    )


def _compare(lane: str, name: str, bench: str, models: tuple[str, ...], epochs: int, reuse: str) -> Experiment:
    """``models`` of geomano/table1's ``bench`` for ``epochs`` (seeds 0, 1, 2) into the claim of ``name``, beside the
    runs of the same bench already recorded in the claim of ``reuse`` (read, not trained again)."""
    return Experiment(
        lane,
        COMPARE_DRIVER,
        lambda: [
            "--bench",
            bench,
            "--models",
            *models,
            "--epochs",
            str(epochs),
            "--seeds",
            "0",
            "1",
            "2",
            "--threads",
            "1",
            "--jobs",
            "1",
            "--out",
            CLAIMS[name],
            "--runs-dir",
            str(runs_for(folder(name))),
            "--reuse",
            CLAIMS[reuse],
        ],
        lambda: [r for r in _store_records(folder(name)) if r.get("label") in models],
        3 * len(models),
        runs_for(folder(name)),
    )


CHONN_SEEDS = (42, 43, 44)
CHONN_FIG3C = ("4:2x3", "4:3x2")
CHONN_FIG3A = tuple(f"{t}:o{n}" for t in (1, 2, 3, 4) for n in (1, 2, 3, 4) if n != t)


def _chonn_order(lane: str, name: str, only: tuple[str, ...], seeds: tuple[int, ...]) -> Experiment:
    """The (target, model) pairs ``only`` (``TARGET:MODEL``) of the CHONN order benchmark at the paper's protocol,
    for ``seeds``, into ``protocol_<name>``, queued in ``lane``."""
    return Experiment(
        lane,
        CHONN_DRIVER,
        lambda: [
            "order",
            "--scale",
            "paper",
            "--seeds",
            *map(str, seeds),
            "--only",
            *only,
            "--out",
            CLAIMS[name],
            "--threads",
            "1",
        ],
        lambda: _store_records(folder(name)),
        len(only) * len(seeds),
        runs_for(folder(name)),
    )


EXPERIMENTS: dict[str, Experiment] = {
    "chonn-order": Experiment(
        "a",
        CHONN_DRIVER,
        lambda: [
            "order",
            "--scale",
            "paper",
            "--seeds",
            "42",
            "43",
            "44",
            "--out",
            CLAIMS["chonn_order"],
            "--threads",
            "1",
        ],
        lambda: _store_records(folder("chonn_order")),
        24,
        runs_for(folder("chonn_order")),
    ),
    # Table 5's zigzag ST-SSM-VM (half its CPU hours) in lane a, its other three models in lane b: the two
    # lanes' queues then take about equally long
    "stssm-table5-32-vm": _table5_32("a", ("stssm-vm",)),
    "transolver-tuning": Experiment(
        "b",
        DARCY_DRIVER,
        lambda: _operators_darcy([0], TRANSOLVER_GRID),
        lambda: [r for r in read_run_records(records(TRANSOLVER_TAG)) if r["seed"] == 0],
        len(TRANSOLVER_GRID),
        runs_for(records(TRANSOLVER_TAG)),
        ("*-s0",),
    ),
    "transolver-seeds": Experiment(
        "b",
        DARCY_DRIVER,
        _chosen_seeds,
        lambda: [r for r in read_run_records(records(TRANSOLVER_TAG)) if r["seed"] != 0],
        2,
        runs_for(records(TRANSOLVER_TAG)),
        ("*-s[12]",),
    ),
    "darcy-50": Experiment(
        "b",
        DARCY_DRIVER,
        _darcy_50,
        lambda: [r for r in read_run_records(records(DARCY50_TAG)) if r["label"] != "fno"],
        6,
        runs_for(records(DARCY50_TAG)),
        ("transolver-*", "fno-small-*"),
    ),
    "ns4": Experiment(
        "b",
        COMPARE_DRIVER,
        lambda: [
            "--bench",
            "ns4",
            "--models",
            "lamo",
            "geomano-eqp",
            "transolver",
            "fno",
            "fno-small",
            "--epochs",
            str(NS4_EPOCHS),
            "--seeds",
            "0",
            "1",
            "2",
            "--threads",
            "1",
            "--jobs",
            "1",
            "--out",
            CLAIMS["ns4"],
            "--runs-dir",
            str(runs_for(folder("ns4"))),
            "--plot-curves",
            str(folder("ns4") / "curves.png"),
        ],
        lambda: _store_records(folder("ns4")),
        15,
        runs_for(folder("ns4")),
    ),
    "stssm-ks": Experiment(
        "b",
        STSSM_DRIVER,
        lambda: _stssm(
            "1", "stssm_ks", ["mi-ffno-r64", "s4ffno-r64", "stssm-r64"], ["train.epochs=50", "train.eval_every=1"]
        ),
        lambda: read_run_records(folder("stssm_ks")),
        9,
        runs_for(folder("stssm_ks")),
    ),
    "stssm-table5-32": _table5_32("b", ("stssm", "stssm-ff", "fno2d-r")),
    # the papers' open claims (lane c): LaMO's paper configuration against the code's (its heads re-selected on
    # validation), at the budgets of the rows they extend; the 2.37 M FNO at Darcy's 50 epochs; the paper's GeoMaNO
    # on NS nu = 1e-4 at LaMO's size
    "lamo-config-darcy": _compare(
        "c", "lamo_config_darcy", "darcy", ("lamo-h1", "lamo-paper"), 50, "geomano_lamo_equal"
    ),
    "fno-darcy-50": Experiment(
        "c",
        DARCY_DRIVER,
        lambda: [
            "--seeds",
            "0",
            "1",
            "2",
            "--epochs",
            "50",
            "--threads",
            "1",
            "--tag",
            DARCY50_TAG,
            "--runs",
            "fno=fno/darcy",
        ],
        lambda: read_run_records(records(DARCY50_TAG), "fno-s[0-9]"),
        3,
        runs_for(records(DARCY50_TAG)),
        ("fno-s[0-9]",),
    ),
    "ns4-paper-configs": _compare(
        "c", "ns4_paper_configs", "ns4", ("lamo-h4", "lamo-paper", "geomano-paper-eqp"), NS4_EPOCHS, "ns4"
    ),
    # CHONN's Fig. 3c on T4 (the highest-order target, where the paper says the effect is strongest): the composites
    # 2x3 (parameter-matched to depth 4, whose runs chonn-order holds) and 3x2, the three seeds of chonn-order
    "chonn-fig3c": _chonn_order("c", "chonn_fig3c", CHONN_FIG3C, CHONN_SEEDS),
    # Fig. 3a's off-diagonal: CHONN orders 1-4 on every target T1-T4 (the diagonal is chonn-order's), seed 42 as the
    # paper's single training seed; its own lane d, so that it runs beside lane c on the second core
    "chonn-fig3a": _chonn_order("d", "chonn_fig3a", CHONN_FIG3A, CHONN_SEEDS[:1]),
}


#: experiment -> (driver, its report arguments, the file its printed report is written to)
REPORTS: dict[str, tuple[str, Callable[[], list[str]], Path]] = {
    "chonn-order": (
        CHONN_DRIVER,
        lambda: ["order", "--scale", "paper", "--seeds", "42", "43", "44", "--out", CLAIMS["chonn_order"], "--report"],
        folder("chonn_order") / "report.md",
    ),
    "transolver-tuning": (
        DARCY_DRIVER,
        lambda: ["--report", "--tag", TRANSOLVER_TAG],
        records(TRANSOLVER_TAG) / "report.md",
    ),
    "darcy-50": (DARCY_DRIVER, lambda: ["--report", "--tag", DARCY50_TAG], records(DARCY50_TAG) / "report.md"),
    "ns4": (
        COMPARE_DRIVER,
        lambda: [
            "--report",
            "--bench",
            "ns4",
            "--models",
            "lamo",
            "geomano-eqp",
            "transolver",
            "fno",
            "fno-small",
            "--epochs",
            str(NS4_EPOCHS),
            "--out",
            CLAIMS["ns4"],
            "--plot-curves",
            str(folder("ns4") / "curves.png"),
        ],
        folder("ns4") / "report.md",
    ),
    "stssm-ks": (
        STSSM_DRIVER,
        lambda: ["--table", "1", "--report", "--tag", CLAIMS["stssm_ks"]],
        folder("stssm_ks") / "report.md",
    ),
    "stssm-table5-32": (
        STSSM_DRIVER,
        lambda: ["--table", "5", "--report", "--tag", CLAIMS["stssm_table5_32"], "--common", *TABLE5_32],
        folder("stssm_table5_32") / "report.md",
    ),
}


def report() -> None:
    """Every experiment's tables from its records (its driver's ``--report``), written to its ``report.md``, and the
    CHONN order family's validation curves (mean over seeds per target and model)."""
    env = child_env(OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    for name, (module, argv, path) in REPORTS.items():
        if not EXPERIMENTS[name].records():
            continue
        done = subprocess.run([*module_command(module), *argv()], env=env, capture_output=True, text=True)
        if done.returncode:
            print(f"{name}: the report failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        text = done.stdout.replace(f"{path.parent}/", "")  # links from beside it; write_text drops the rest
        write_text(
            path,
            f"<!-- made by `python -m neurodyn_lab run protocol --report` from the records beside it -->\n\n{text}",
        )
        print(f"{name}: {relative(path)}")
    for name in SELECTIONS:
        text = selection_report(name)
        if text:
            path = folder(name) / "report.md"
            write_text(
                path,
                f"<!-- made by `python -m neurodyn_lab run protocol --report` from the records beside "
                f"it -->\n\n{text}\n\n![validation curves](curves.png)\n",
            )
            print(f"{name}: {relative(path)}")
    from neurodyn.plots import plot_seed_mean_curves

    chonn = sorted(load_results(folder("chonn_order")), key=lambda r: (r["target"], r["model"]))
    ks, table5 = read_run_records(folder("stssm_ks")), read_run_records(folder("stssm_table5_32"))
    curves = {  # experiment -> (label -> validation curves of its seeds, title)
        "chonn_order": (_group(chonn, lambda r: f"T{r['target']} {r['model']}"), "CHONN order family (paper protocol)"),
        "darcy_50": (_group(read_run_records(folder("darcy_50")), lambda r: r["label"]), "Darcy, 50 epochs"),
        "stssm_ks": (_group(ks, lambda r: r["label"]), f"KS nu = 0.1, 64 points, {_rollout_steps(ks)} rollout"),
        **{
            name: (_group(_selection_records(name), lambda r: r["label"]), title.split(" (")[0])
            for name, (_, _, title) in SELECTIONS.items()
        },
        "stssm_table5_32": (
            _group(table5, lambda r: r["label"]),
            f"Table 5 at 32 x 32 (NS nu = 1e-4), {_rollout_steps(table5)} rollout",
        ),
    }
    # Fig. 3c against experiment 1's depth 4 (3 seeds); Fig. 3a per target, orders 1-4 at seed 42 (the diagonal from
    # experiment 1)
    fig3c = load_results(folder("chonn_fig3c")) + [r for r in chonn if r["target"] == 4 and r["model"] == "d4"]
    curves["chonn_fig3c"] = (_group(fig3c, lambda r: r["model"]), "CHONN Fig. 3c on T4 (paper protocol)")
    fig3a = load_results(folder("chonn_fig3a")) + [r for r in chonn if r["seed"] == 42 and r["model"][0] == "o"]
    files = {name: folder(name) / "curves.png" for name in curves}
    for t in (1, 2, 3, 4):
        name = f"chonn_fig3a T{t}"
        curves[name] = (
            _group(
                sorted((r for r in fig3a if r["target"] == t), key=lambda r: r["model"]),
                lambda r: f"order {r['model'][1:]}",
            ),
            f"CHONN Fig. 3a, T{t}, seed 42 (paper protocol)",
        )
        files[name] = folder("chonn_fig3a") / f"T{t}_curves.png"
    for name, (groups, title) in curves.items():
        if groups:
            plot_seed_mean_curves(groups, files[name], "validation rel. L2", title, log=True)
            print(f"curves: {relative(files[name])}")


#: lane c's comparisons: experiment -> (the reused experiment, its labels that join the comparison, title)
SELECTIONS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "lamo_config_darcy": (
        "geomano_lamo_equal",
        ("lamo",),
        "LaMO's configurations on Darcy, 50 epochs (`lamo` is the code's: 4 heads)",
    ),
    "ns4_paper_configs": (
        "ns4",
        ("lamo", "geomano-eqp"),
        "LaMO's configurations and the paper's GeoMaNO on Navier-Stokes nu = 1e-4, 30 epochs "
        "(`lamo` is the code's: 16 heads; `geomano-eqp` ours)",
    ),
}


def selection_table(records: list[dict], title: str) -> str:
    """Markdown: per label, parameters, seeds, the best validation rel. L2 (what selects), the test rel. L2 of that
    ``best.pt`` and of the final model (mean +- std over seeds), training CPU hours; then the label validation
    chooses among LaMO's configurations (``lamo*``; lowest mean best validation rel. L2), among those with all the
    seeds of the most complete one."""
    groups: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: (r["label"], r["seed"])):
        groups.setdefault(r["label"], []).append(r)

    def ms(values: list[float]) -> str:
        mean = sum(values) / len(values)
        if len(values) < 2:
            return f"{mean:.4f} (1 seed)"
        std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
        return f"{mean:.4f} ± {std:.4f}"

    lines = [
        f"### {title}",
        "",
        "| model | params | seeds | best validation rel. L2 | test rel. L2 at best "
        "validation | test rel. L2, final model | training CPU hours |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for label, rs in groups.items():
        at_best = [r.get("test_rel_l2_at_best_val") or r["final_rel_l2"] for r in rs]
        lines.append(
            f"| {label} | {rs[0]['params']:,} | {' '.join(str(r['seed']) for r in rs)} | "
            f"{ms([r['best_val_rel_l2'] for r in rs])} | {ms(at_best)} | "
            f"{ms([r['final_rel_l2'] for r in rs])} | {sum(r['train_seconds'] for r in rs) / 3600:.2f} |"
        )
    lamo = {k: rs for k, rs in groups.items() if k.startswith("lamo")}
    most = max(len(rs) for rs in lamo.values())
    full = {k: rs for k, rs in lamo.items() if len(rs) == most}
    pick = min(full, key=lambda k: sum(r["best_val_rel_l2"] for r in full[k]) / most)
    lines += [
        "",
        f"LaMO's configuration chosen on validation (lowest mean best validation rel. L2 over {most} "
        f"seed(s), among {', '.join(sorted(full))}): **{pick}**.",
    ]
    return "\n".join(lines)


def selection_report(name: str) -> str | None:
    """The :func:`selection_table` of lane c's comparison ``name`` (its records and the reused labels), or None
    before its first record."""
    if not _store_records(folder(name)):
        return None
    return selection_table(_selection_records(name), SELECTIONS[name][2])


def _selection_records(name: str) -> list[dict]:
    """The records of lane c's comparison ``name`` and the labels it reuses from another experiment."""
    reuse, labels, _ = SELECTIONS[name]
    return _store_records(folder(name)) + [r for r in _store_records(folder(reuse)) if r["label"] in labels]


def _rollout_steps(records: list[dict]) -> str:
    """``"22-step"``: the rollout length the records' per-step errors were measured over (the data's, not a literal)."""
    steps = sorted({len(r["rel_l2_per_step"]) for r in records if r.get("rel_l2_per_step")})
    return "/".join(map(str, steps)) + "-step" if steps else "multi-step"


def _group(records: list[dict], label: Callable[[dict], str]) -> dict[str, list[list[float]]]:
    """label -> the validation curves of the records that have one (runs with a validation split)."""
    groups: dict[str, list[list[float]]] = {}
    for r in records:
        if r.get("curve"):
            groups.setdefault(label(r), []).append(r["curve"])
    return groups


def in_progress(runs_dir: Path, runs: tuple[str, ...] = ("*",)) -> list[str]:
    """``name epoch/epochs`` of every run folder under ``runs_dir`` named like one of the globs ``runs`` that has
    started and not finished."""
    out = []
    for metrics in sorted(runs_dir.rglob("metrics.jsonl")) if runs_dir.exists() else []:
        if not any(fnmatch.fnmatch(metrics.parent.name, glob) for glob in runs):
            continue
        if read_test_metrics(metrics.parent) or not (metrics.parent / "config.yaml").exists():
            continue  # finished (every protocol run has test data), or not started
        epochs = yaml.safe_load((metrics.parent / "config.yaml").read_text())["train"]["epochs"]
        done = len(read_history(metrics.parent))
        has_ckpt = (metrics.parent / "checkpoints" / "last.pt").exists()
        out.append(f"{metrics.parent.name} {done}/{epochs}{'' if has_ckpt else ' (no last.pt: starts over)'}")
    return out


def status() -> str:
    """Per experiment: runs recorded, the training CPU hours they took, the runs in progress, and a rough guess of
    the hours left (the recorded runs' mean per run, times the runs not yet recorded; "?" before the first)."""
    lines = [
        "| lane | experiment | recorded | training CPU hours (recorded runs) | left, CPU hours (guess) | in progress |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name, e in EXPERIMENTS.items():
        running = ", ".join(in_progress(e.runs_dir, e.runs))
        recs = e.records()
        spent = [r.get("train_seconds") or 0.0 for r in recs]  # every epoch, over all sittings
        left = f"{sum(spent) / len(spent) * (e.total - len(recs)) / 3600:.1f}" if spent else "?"
        lines.append(f"| {e.lane} | {name} | {len(recs)} / {e.total} | {sum(spent) / 3600:.2f} | {left} | {running} |")
    return "\n".join(lines)


def run_lane(lane: str) -> int:
    """The first unfinished experiment of ``lane``, its driver in a child process with 1 torch thread; then this
    script starts over (re-read, so that an edit to the queue takes effect at the next experiment)."""
    env = child_env(OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    todo = [(name, e) for name, e in EXPERIMENTS.items() if e.lane == lane and len(e.records()) < e.total]
    if not todo:
        print(f"[lane {lane}] done", flush=True)
        return 0
    name, e = todo[0]
    cmd = [*module_command(e.module), *e.argv()]
    print(f"[lane {lane}] {name}: {' '.join(cmd)}", flush=True)
    code = subprocess.call(cmd, env=env)
    if code or len(e.records()) < e.total:
        print(
            f"[lane {lane}] {name} exited with {code} and {len(e.records())} of {e.total} runs recorded; the lane "
            "stops here",
            flush=True,
        )
        return code or 1
    os.execve(sys.executable, [*module_command("neurodyn_lab.protocol"), "--lanes", lane], env)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--status", action="store_true", help="print what is recorded, running and left")
    ap.add_argument("--report", action="store_true", help="write every experiment's report.md from its records")
    ap.add_argument(
        "--lanes",
        nargs="*",
        default=[],
        choices=sorted({e.lane for e in EXPERIMENTS.values()}),
        help="run these lanes, each in its own process",
    )
    args = ap.parse_args(argv)
    if args.report:
        report()
        return 0
    if args.status or not args.lanes:
        print(status())
        return 0
    if len(args.lanes) == 1:
        return run_lane(args.lanes[0])
    procs = [
        subprocess.Popen([*module_command("neurodyn_lab.protocol"), "--lanes", lane], env=child_env())
        for lane in args.lanes
    ]
    return max(p.wait() for p in procs)


def run(scale: str, argv: list[str]) -> int:
    """``python -m neurodyn_lab run protocol`` entry point (the experiments fix their own scales)."""
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
