"""Train a seed model (LaMO, the Latent Mamba Operator) on Darcy flow with ``neurodyn.train.fit``.

``fit`` trains any ``nn.Module`` on (x, y) tensors with the library's trainer: normalisation fitted on the training
data, a validation split choosing ``checkpoints/best.pt``, exact resume (run it again: it continues or says it is
done). The data comes from the ``darcy`` generator (offline, deterministic in its seed).

    python examples/train_seed_model.py                 # 200 samples at 32x32, 20 epochs (a few minutes on a CPU)
    python examples/train_seed_model.py --tiny          # seconds: what the library's tests run
"""

import argparse

import torch

import neurodyn.models as models
from neurodyn.data.generators import get_generator
from neurodyn.data.store import StoredDataset
from neurodyn.train import fit

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--tiny", action="store_true", help="a few samples at 16x16 and one epoch")
parser.add_argument("--out", default="runs/example-lamo", help="the run folder")
args = parser.parse_args()
n, res, epochs = (24, 16, 1) if args.tiny else (200, 32, 20)

# 1. data: permeability a(x) -> pressure u(x) of -div(a grad u) = 1 (neurodyn.data.generators.darcy)
darcy = get_generator("darcy")
path = darcy.run(darcy.make_config(resolution=res), n, seed=0, progress=False)
store = StoredDataset(path)
a = torch.as_tensor(store.read("fields/a"))  # (N, res, res, 1)
u = torch.as_tensor(store.read("fields/u"))  # (N, res, res, 1)
cut = n - n // 5  # the last fifth validates (selects best.pt)

# 2. model: LaMO on a grid, channels-last (B, H, W, C) -> (B, H, W, C)
model = models.build("lamo", in_channels=1, out_channels=1, width=16, n_layers=2, grid_size=(res, res), patch_size=4)
print(f"LaMO with {models.count_parameters(model):,} parameters")

# 3. train: any train.* option is a keyword (epochs, batch_size, lr, precision, early_stop, ...)
history = fit(
    model,
    (a[:cut], u[:cut]),
    (a[cut:], u[cut:]),
    run_dir=args.out,
    epochs=epochs,
    batch_size=8,
    init={"in_channels": 1, "out_channels": 1, "width": 16, "n_layers": 2, "grid_size": (res, res), "patch_size": 4},
)
print(f"validation rel. L2 after {len(history)} epochs: {history[-1]['val']['rel_l2']:.4f} (run folder {args.out})")
