"""Predict with a trained run in physical units: ``neurodyn.load_run(RUN).predict(x)``.

``load_run`` rebuilds the model from its checkpoint with the normalizers it was trained with (no dataset needed):
raw inputs go in, outputs in the data's units come out. This script trains the demo's FNO on Darcy first if the run
folder does not exist (the same command as ``make demo``), then predicts fresh samples and compares them with the
solver.

    python examples/predict_physical_units.py           # trains runs/demo if needed (minutes), then predicts
    python examples/predict_physical_units.py --tiny    # seconds: what the library's tests run
"""

import argparse
from pathlib import Path

import torch

import neurodyn
from neurodyn.cli import main as neurodyn_cli
from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoredDataset

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--tiny", action="store_true", help="train the tiny preset for one epoch")
parser.add_argument("--run", default=None, help="a trained run folder (default: runs/demo, or runs/example-tiny)")
args = parser.parse_args()
run = Path(args.run or ("runs/example-tiny" if args.tiny else "runs/demo"))
scale, res = ("tiny", 16) if args.tiny else ("cpu", 32)

if not (run / "checkpoints" / "last.pt").exists():
    extra = ["train.epochs=1"] if args.tiny else ["model.width=24", "model.modes=[8,8]", "train.epochs=20"]
    assert (
        neurodyn_cli(
            [
                "train",
                "fno/darcy",
                "--scale",
                scale,
                "--runs-dir",
                str(run.parent),
                "--run-name",
                run.name,
                "--no-progress",
                *extra,
            ]
        )
        == 0
    )

trained = neurodyn.load_run(run)  # checkpoints/last.pt; which="best" for the best validation epoch
darcy = get_generator("darcy")
fresh = StoredDataset(darcy.run(darcy.make_config(resolution=res), 4, seed=123, progress=False))
a = torch.as_tensor(fresh.read("fields/a"))  # raw permeability, (4, res, res, 1)
u = torch.as_tensor(fresh.read("fields/u"))  # the solver's pressure
pred = trained.predict(a)  # pressure in the data's units, (4, res, res, 1)
rel = (pred - u).flatten(1).norm(dim=1) / u.flatten(1).norm(dim=1)
print(
    f"pressure range {float(pred.min()):.4g} .. {float(pred.max()):.4g} (solver {float(u.min()):.4g} .. "
    f"{float(u.max()):.4g}); rel. L2 per sample: {', '.join(f'{v:.3f}' for v in rel.tolist())}"
)
