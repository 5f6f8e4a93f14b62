"""Your own time series: convert a UEA/UCR ``.ts`` file and classify with ``neurodyn.SequenceClassifier``.

The archive's ``.ts`` format (header lines, then one case per line: comma-separated values per dimension, ``:``
between dimensions, the label last) is converted into a sequence store by ``neurodyn convert``; the estimator
takes arrays directly (``fit(X, y)`` with ``X (N, T, C)``, NaN for a missing value). This script writes a small
two-class ``.ts`` file itself (sines against squares), converts it, and trains 1-NN and NAC on it.

    python examples/time_series_classifier.py           # NAC for 30 epochs (a minute or two)
    python examples/time_series_classifier.py --tiny    # seconds: what the library's tests run
"""

import argparse
from pathlib import Path

import numpy as np

import neurodyn
from neurodyn.cli import main as neurodyn_cli
from neurodyn.data.store import StoredDataset

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--tiny", action="store_true", help="one NAC epoch at the tiny scale")
parser.add_argument("--folder", default="runs/example-ts", help="where the .ts file and its store go")
args = parser.parse_args()
folder = Path(args.folder)
folder.mkdir(parents=True, exist_ok=True)

# 1. a .ts file as the archive writes them: 60 cases of length 40, labels sine / square
rng = np.random.default_rng(0)
t = np.linspace(0, 1, 40)
lines = ["@problemName Waves", "@timeStamps false", "@univariate true", "@classLabel true sine square", "@data"]
for i in range(60):
    label = ("sine", "square")[i % 2]
    s = np.sin(2 * np.pi * 3 * t + rng.uniform(0, 2 * np.pi))
    x = (s if label == "sine" else np.sign(s)) + 0.2 * rng.normal(size=t.size)
    lines.append(",".join(f"{v:.4f}" for v in x) + f":{label}")
(folder / "waves.ts").write_text("\n".join(lines) + "\n")

# 2. convert (what `neurodyn convert waves.ts --out waves.h5` does) and read the arrays back
assert neurodyn_cli(["convert", str(folder / "waves.ts"), "--out", str(folder / "waves.h5"), "--no-progress"]) == 0
store = StoredDataset(folder / "waves.h5")
X, mask = store.read("fields/x"), store.read("fields/mask")  # (N, T, C), (N, T)
classes = store.config["info"]["classes"]
y = np.asarray(classes)[store.read("fields/y")]  # the labels as the file names them
train, test = slice(0, 40), slice(40, 60)

# 3. classify: the 1-NN baseline, then NAC (any sequence preset: gru/sequence, minirocket/sequence, ...)
knn = neurodyn.SequenceClassifier("knn/sequence", scale="tiny").fit(X[train], y[train], mask=mask[train])
print(f"1-NN accuracy: {knn.score(X[test], y[test], mask=mask[test]):.3f}")
epochs = 1 if args.tiny else 30
nac = neurodyn.SequenceClassifier("nac/sequence", scale="tiny" if args.tiny else "cpu", epochs=epochs)
nac.fit(X[train], y[train], mask=mask[train])
print(
    f"NAC accuracy after {epochs} epoch(s): {nac.score(X[test], y[test], mask=mask[test]):.3f}; "
    f"first predictions: {nac.predict(X[test][:4], mask=mask[test][:4]).tolist()}"
)
