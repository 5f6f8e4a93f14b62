"""Point clouds from your own file: convert per-sample point sets and train LaMO on them (model lamo_mesh,
geometry point_cloud).

A torch ``.pt`` holding a list of per-sample dicts (as neuraloperator's car files: ``vertices (P, 3)``, one value
per point ``press``) or an ``.npz`` with ``x (N, P, d)``, ``y (N, P, c)`` and an optional ``mask (N, P)`` converts
with ``neurodyn convert FILE``; clouds of different sizes are padded and masked (losses, metrics and models skip the
padding). This script writes such a ``.pt`` file itself (a smooth field sampled at random points of a sphere),
converts it and trains ``lamo/elasticity_geofno`` on it.

    python examples/point_cloud_from_file.py            # 200 clouds, 20 epochs (minutes on a CPU)
    python examples/point_cloud_from_file.py --tiny     # seconds: what the library's tests run
"""

import argparse
from pathlib import Path

import torch

from neurodyn.cli import main as neurodyn_cli

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--tiny", action="store_true", help="24 small clouds, one epoch at the tiny scale")
parser.add_argument("--folder", default="runs/example-clouds", help="where the files and the run go")
args = parser.parse_args()
folder = Path(args.folder)
folder.mkdir(parents=True, exist_ok=True)
n, points = (24, 64) if args.tiny else (200, 512)

# 1. the user's file: a list of dicts, one per sample, clouds of different sizes
g = torch.Generator().manual_seed(0)
samples = []
for _ in range(n):
    p = points - int(torch.randint(0, points // 4, (1,), generator=g))
    v = torch.randn(p, 3, generator=g)
    v = v / v.norm(dim=1, keepdim=True)  # points on the unit sphere
    k = torch.randn(3, generator=g)
    samples.append({"vertices": v, "press": torch.sin(3 * v @ k)})  # one value per point: (P,)
torch.save(samples, folder / "clouds.pt")

# 2. convert (points=KEY target=KEY name other keys; these are the car files' names)
store = folder / "clouds.h5"
assert neurodyn_cli(["convert", str(folder / "clouds.pt"), "--out", str(store), "--no-progress"]) == 0

# 3. train the point-cloud preset on it (data.path: the store; the splits from its samples)
n_train, n_test = n - n // 5, n // 5
extra = ["train.epochs=1"] if args.tiny else ["train.epochs=20"]
assert (
    neurodyn_cli(
        [
            "train",
            "lamo/elasticity_geofno",
            "--scale",
            "tiny" if args.tiny else "cpu",
            "--runs-dir",
            str(folder),
            "--run-name",
            "lamo",
            "--no-progress",
            f"data.path={store}",
            f"data.n_train={n_train}",
            f"data.n_test={n_test}",
            *extra,
        ]
    )
    == 0
)
