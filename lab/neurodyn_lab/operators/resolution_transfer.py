"""Zero-shot resolution transfer on Darcy: train at 17x17, test at 17x17 and 33x33 (the same samples).

Our own Darcy data (``neurodyn.data.generators.darcy``) solved once on a 129x129 vertex grid and subsampled,
so the 17- and 33-point test files hold the same solutions (h = 1/16 and 1/32; the vertex-grid equivalent of
the field's 16 -> 32 study). FNO, LaMO and GeoMaNO at their cpu presets train on the same 500 samples with
FNO's data protocol (pointwise Gaussian normalizers; resampled onto the 33-point grid for the test), equal
epochs, several seeds, through ``neurodyn.compare``; LaMO also with ``grid_transfer=tokens`` (the token grid
grows with the input) to show what the resampling buys.

    python -m neurodyn_lab run operators/resolution_transfer [--scale cpu] [--seeds 0 1 2] [--epochs 10] [--threads 1]

Records ``lab/records/operators/resolution_transfer/{compare.md,results.json}`` (and ``<out>_tokens/`` for the
second LaMO mode); the runs and ``error_vs_time.png`` stay in ``lab/runs/operators/...`` (untracked).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from neurodyn.data.generators import get_generator
from neurodyn.data.store import data_root
from neurodyn_lab.cli import script_main
from neurodyn_lab.comparisons import compare_recorded
from neurodyn_lab.paths import records

OUT = "operators/resolution_transfer"
PRESETS = ("fno/darcy", "lamo/darcy", "geomano/darcy")


def darcy_file(resolution: int, n: int, seed: int, solve: int = 129) -> Path:
    gen = get_generator("darcy")
    cfg = gen.make_config(resolution=resolution, solve_resolution=solve)
    path = gen.default_path(cfg, n, seed)
    if not path.exists():
        gen.run(cfg, n, seed=seed, path=path, progress=False)
    return path


def run(scale: str, argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m neurodyn_lab run operators/resolution_transfer")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--n-train", type=int, default=500)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=OUT, help="the claim the records go to (lab/records/<out>), or a folder")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    train = darcy_file(17, args.n_train, seed=0)
    tests = {"test17": darcy_file(17, 100, seed=1), "test33": darcy_file(33, 100, seed=1)}
    common = [
        f"data.path={train}",
        f"data.n_train={args.n_train}",
        "data.n_test=0",
        "data.test_path={" + ", ".join(f"{k}: {v}" for k, v in tests.items()) + "}",
    ]
    fno_modes = {"fno/darcy": ["model.modes=[8,8]"]}  # 17 points hold 9 rfft modes
    data = {data_root(): "<data>"}  # generated files outside the repository are named from $NEURODYN_DATA
    out = records(args.out)
    compare_recorded(
        PRESETS,
        out,
        scale,
        placeholders=data,
        seeds=args.seeds,
        epochs=args.epochs,
        data_from="fno/darcy",
        overrides=common,
        preset_overrides=fno_modes,
    )
    compare_recorded(
        ["lamo/darcy"],
        out.with_name(f"{out.name}_tokens"),
        scale,
        placeholders=data,
        seeds=args.seeds,
        epochs=args.epochs,
        data_from="fno/darcy",
        overrides=common,
        preset_overrides={"lamo/darcy": ["model.grid_transfer=tokens"]},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(script_main(run))
