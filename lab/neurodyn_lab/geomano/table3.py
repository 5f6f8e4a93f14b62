"""GeoMaNO ablation (paper Table 3) as one command: ``python -m neurodyn_lab run geomano/table3 --scale cpu``.

Trains the ``geomano/darcy`` (and with ``--bench ns`` the ``geomano/navier_stokes``) preset at a scale under
every variant of Table 3 -- SSM (vanilla 1-D / 2-D) x positional embedding x geometric correction (None =
Mamba's D only, fixed 0001 / 0011 / 0111, learnable) -- plus rows the paper does not have: neither D nor R,
R in VMamba's digit order, the four-corner 2-D scan. Every run is one training of the preset with
overrides (:func:`neurodyn_lab.queue.run_jobs`), in its own subprocess (``OMP_WAIT_POLICY=PASSIVE``,
``torch.set_num_threads(threads)``), its record kept in ``<out_dir>/runs/<run>/result.json`` (older one-file
records, ``<out_dir>/<run>.json``, are read too; recorded runs are skipped, ``--force`` redoes them).
The table gives mean +- std over seeds of the final-epoch test relative L2 beside the paper's number.

    python -m neurodyn_lab run geomano/table3 --scale cpu                 # Darcy, seeds 0 1, all variants
    python -m neurodyn_lab run geomano/table3 --scale cpu --seeds 0 1 2 --jobs 3
    python -m neurodyn_lab run geomano/table3 --scale cpu --bench ns --variants 1d-pe-none 1d-pe-learnable 2d-none
    python -m neurodyn_lab run geomano/table3 --report                    # the table of what is recorded
    python -m neurodyn_lab.geomano.table3 --scale cpu                     # the same, this module alone

Python: ``run_ablation(scale, seeds, out_dir, ...)`` returns the records; ``ablation_table(out_dir)`` the
markdown table.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from neurodyn_lab.paths import records, runs_for
from neurodyn_lab.queue import Job, run_jobs
from neurodyn_lab.records import load_results

DEFAULT_OUT = "geomano/table3"
PRESETS = {"darcy": "geomano/darcy", "ns": "geomano/navier_stokes"}
_CORR = {"none": ["model.ssm.correction=none"], "learnable": ["model.ssm.correction=learnable"]}
for _p in ("0001", "0011", "0111"):
    _CORR[_p] = ["model.ssm.correction=fixed", f"model.ssm.r_pattern='{_p}'"]


def _variant(ssm: str, pe: bool, corr: str, *extra: str) -> list[str]:
    return [f"model.ssm.kind={ssm}", f"model.pos_embed={str(pe).lower()}", *_CORR[corr], *extra]


def _said(overrides: list[str], key: str, value: str | None = None) -> str | None:
    """The value a record's overrides give the GeoMaNO kernel option ``key`` (``model.ssm.<key>``)."""
    for o in overrides:
        name, _, v = o.partition("=")
        if name == f"model.ssm.{key}" and (value is None or v == value):
            return v
    return None


#: label -> (overrides, (ssm, pos. emb., coefficient) row of the paper's Table 3 or None)
VARIANTS: dict[str, dict[str, tuple[list[str], tuple | None]]] = {"darcy": {}, "ns": {}}
for _b, _pes in (("darcy", (False,)), ("ns", (False, True))):
    for _ssm in ("1d", "2d"):
        for _pe in _pes:
            for _c in ("none", "0001", "0011", "0111", "learnable"):
                if _b == "ns" and _ssm == "2d" and _c != "none":
                    continue  # Table 3b has only the None rows for the 2-D SSM
                VARIANTS[_b][f"{_ssm}{'-pe' if _pe else ''}-{_c}"] = (_variant(_ssm, _pe, _c), (_ssm, _pe, _c))
    for _ssm in ("1d", "2d"):
        if _b == "darcy":  # Table 3a's positional-embedding rows
            VARIANTS[_b][f"{_ssm}-pe-none"] = (_variant(_ssm, True, "none"), (_ssm, True, "none"))
VARIANTS["darcy"].update(
    {
        "2d-noD-none": (_variant("2d", False, "none", "model.ssm.d_mode=none"), None),
        "1d-noD-none": (_variant("1d", False, "none", "model.ssm.d_mode=none"), None),
        "2d-0011-vmamba-order": (_variant("2d", False, "0011", "model.ssm.r_order=vmamba"), None),
        "2d-corners-0011": (_variant("2d", False, "0011", "model.directions=corners"), None),
    }
)
VARIANTS["ns"].update(
    {
        "1d-pe-noD-none": (_variant("1d", True, "none", "model.ssm.d_mode=none"), None),
    }
)

#: paper Table 3 (relative L2): (bench, ssm, pos. emb., coefficient) -> value
PAPER = {
    ("darcy", "1d", True, "none"): 0.00389,
    ("darcy", "1d", False, "none"): 0.00381,
    ("darcy", "1d", False, "0001"): 0.00385,
    ("darcy", "1d", False, "0011"): 0.00376,
    ("darcy", "1d", False, "0111"): 0.00387,
    ("darcy", "1d", False, "learnable"): 0.00386,
    ("darcy", "2d", True, "none"): 0.00428,
    ("darcy", "2d", False, "none"): 0.00380,
    ("darcy", "2d", False, "0001"): 0.00387,
    ("darcy", "2d", False, "0011"): 0.00362,
    ("darcy", "2d", False, "0111"): 0.00383,
    ("darcy", "2d", False, "learnable"): 0.00372,
    ("ns", "1d", False, "none"): 0.04190,
    ("ns", "1d", False, "0001"): 0.04212,
    ("ns", "1d", False, "0011"): 0.04062,
    ("ns", "1d", False, "0111"): 0.04153,
    ("ns", "1d", False, "learnable"): 0.04190,
    ("ns", "1d", True, "none"): 0.03938,
    ("ns", "1d", True, "0001"): 0.03795,
    ("ns", "1d", True, "0011"): 0.03783,
    ("ns", "1d", True, "0111"): 0.03709,
    ("ns", "1d", True, "learnable"): 0.03701,
    ("ns", "2d", False, "none"): 0.13554,
    ("ns", "2d", True, "none"): 0.18287,
}


def model_job(
    name: str, preset: str, overrides: Sequence[str], seed: int, keys: dict, model_from: str | None = None
) -> Job:
    """A :class:`Job` whose ``model.`` overrides apply after the model section (of ``model_from`` when given)."""
    return Job(
        name,
        preset,
        seed,
        [o for o in overrides if not o.startswith("model.")],
        keys,
        keys.get("label", ""),
        model_from,
        [o for o in overrides if o.startswith("model.")],
    )


# ----------------------------------------------------------------------------------------------------
# the ablation


def ablation_jobs(
    scale: str,
    seeds: Sequence[int],
    benches: Sequence[str] = ("darcy",),
    variants: Sequence[str] | None = None,
    epochs: int = 0,
    threads: int = 2,
    common: Sequence[str] = (),
) -> list[Job]:
    """One job ``<bench>-<variant>-s<seed>`` per bench, variant and seed."""
    jobs = []
    for bench in benches:
        table = VARIANTS[bench]
        names = list(table) if not variants else [v for v in variants if v in table]
        unknown = [v for v in (variants or []) if not any(v in VARIANTS[b] for b in benches)]
        if unknown:
            raise SystemExit(
                f"unknown variant(s) {unknown}; known for {list(benches)}: "
                f"{sorted({v for b in benches for v in VARIANTS[b]})}"
            )
        for seed in seeds:
            for name in names:
                overrides, paper_row = table[name]
                ov = list(common) + list(overrides) + ([f"train.epochs={epochs}"] if epochs else [])
                jobs.append(
                    model_job(
                        f"{bench}-{name}-s{seed}",
                        PRESETS[bench],
                        ov,
                        seed,
                        {"label": name, "bench": bench, "paper_row": list(paper_row) if paper_row else None},
                    )
                )
    return jobs


def run_ablation(
    scale: str = "cpu",
    seeds: Sequence[int] = (0, 1),
    out_dir: str | Path = DEFAULT_OUT,
    benches: Sequence[str] = ("darcy",),
    variants: Sequence[str] | None = None,
    jobs: int = 1,
    epochs: int = 0,
    threads: int = 2,
    runs_dir: str | Path | None = None,
    force: bool = False,
    common: Sequence[str] = (),
) -> list[dict]:
    """Train every (variant, seed) not yet recorded under ``out_dir``, ``jobs`` processes at a time; return
    all records there."""
    todo = ablation_jobs(scale, seeds, benches, variants, epochs, threads, common)
    out_dir = records(out_dir)
    run_jobs(
        todo,
        out_dir,
        scale,
        tag="geomano-ablation",
        retrain=force,
        resume=not force,
        runs_dir=Path(runs_dir) if runs_dir else runs_for(out_dir) / scale,
        workers=max(1, jobs),
        threads=threads,
        summary=lambda r: f"test rel. L2 {r['final_rel_l2']:.5f}, {r['train_seconds']:.0f} s",
    )
    return load_records(out_dir)


def load_records(out_dir: str | Path) -> list[dict]:
    """Every run recorded under ``out_dir`` (a claim or a folder; the one-file-per-run records of older runs too)."""
    return load_results(records(out_dir))


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    m = statistics.mean(values)
    return f"{m:.4f} +- {statistics.stdev(values):.4f}" if len(values) > 1 else f"{m:.4f}"


def ablation_table(out_dir: str | Path = DEFAULT_OUT, scale: str | None = None) -> str:
    """Markdown table: one row per (bench, variant), ours (mean +- std over seeds) beside Table 3."""
    recs = [r for r in load_records(out_dir) if scale is None or r["scale"] == scale]
    if not recs:
        return f"no ablation runs recorded under {out_dir}"
    lines = [
        "| bench | SSM | Pos. Emb. | Geo. Coeff. | variant | params | seeds | epochs | test rel. L2 (ours) | "
        "paper (Table 3) | ours / best of ours in bench | s/epoch |",
        "|---|---|---|---|---|---:|---|---:|---|---:|---:|---:|",
    ]
    for bench in ("darcy", "ns"):
        rows = {}
        for r in recs:
            if r.get("bench") == bench:
                rows.setdefault(r["label"], []).append(r)
        if not rows:
            continue
        means = {k: statistics.mean(x["final_rel_l2"] for x in v) for k, v in rows.items()}
        best = min(means.values())
        for label in [k for k in VARIANTS[bench] if k in rows] + sorted(set(rows) - set(VARIANTS[bench])):
            rs = sorted(rows[label], key=lambda r: r["seed"])
            row = tuple(rs[0]["paper_row"]) if rs[0].get("paper_row") else None
            paper = PAPER.get((bench,) + row) if row else None
            ov = rs[0]["overrides"]
            ssm = "2D" if _said(ov, "kind") == "2d" else "Vanilla"
            pe = "✓" if "model.pos_embed=true" in ov else "–"
            corr = _said(ov, "correction")
            coeff = (
                "Learnable"
                if corr == "learnable"
                else "None"
                if corr == "none"
                else (_said(ov, "r_pattern") or "").strip("'")
            )
            if _said(ov, "d_mode") == "none":
                coeff += " (no D)"
            finals = [r["final_rel_l2"] for r in rs]
            lines.append(
                f"| {bench} | {ssm} | {pe} | {coeff} | {label} | {rs[0]['params']:,} | "
                f"{','.join(str(r['seed']) for r in rs)} | {rs[0]['epochs']} | {_fmt(finals)} | "
                f"{paper if paper is not None else '-'} | {means[label] / best:.3f} | "
                f"{statistics.mean(r['train_seconds'] / r['epochs'] for r in rs):.0f} |"
            )
    return "\n".join(lines)


def run(scale: str = "cpu", argv: Sequence[str] = ()) -> int:
    ap = argparse.ArgumentParser(prog="python -m neurodyn_lab run geomano/table3", description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default=scale, choices=["tiny", "cpu", "paper"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1])
    ap.add_argument("--bench", nargs="*", default=["darcy"], choices=sorted(PRESETS))
    ap.add_argument("--variants", nargs="*", default=None, help="subset of variant labels (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (each its own process)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per run")
    ap.add_argument("--epochs", type=int, default=0, help="train.epochs for every run (0: the preset's)")
    ap.add_argument("--common", nargs="*", default=[], help="overrides applied to every run")
    ap.add_argument("--out", default=DEFAULT_OUT, help="the claim the records go to (lab/records/<out>), or a folder")
    ap.add_argument(
        "--runs-dir", default=None, help="where the run folders train (default lab/runs/<out>/<scale>, untracked)"
    )
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--report", action="store_true", help="only print the table of recorded runs")
    ap.add_argument("--list", action="store_true", help="list the variants and their overrides")
    args = ap.parse_args(list(argv))
    scale = args.scale
    if args.list:
        for b in args.bench:
            for k, (ov, row) in VARIANTS[b].items():
                print(f"{b:6s} {k:24s} {' '.join(ov)}" + (f"   [Table 3: {PAPER.get((b,) + row)}]" if row else ""))
        return 0
    if not args.report:
        run_ablation(
            scale,
            args.seeds,
            args.out,
            args.bench,
            args.variants,
            args.jobs,
            args.epochs,
            args.threads,
            args.runs_dir,
            args.force,
            args.common,
        )
    print(ablation_table(args.out, None if args.report else scale))
    return 0


if __name__ == "__main__":
    from neurodyn_lab.cli import script_main

    sys.exit(script_main(run))
