"""MultiRocket and Hydra against aeon's implementations (``pip install -e '.[compare]'``; skipped without aeon).

The features: given aeon's fitted parameters (MultiRocket: dilations, features per dilation, biases; Hydra: the
kernels and channel draws), ours equal aeon's on archive series. Hydra's equal aeon's to float tolerance. MultiRocket's
series representation: PPV and MIPV equal; aeon's MPV is the mean of ``C + b`` over the positive positions where the
paper's (ours) is the mean of ``C - b`` (so they differ by ``2 b``); aeon's LSPV counts a stretch between two
non-positive values as its length + 1 (ours: the length), so they differ by at most 1. Its difference representation
is not compared: aeon 1.6.0 shifts the left half of each kernel's taps by one step on the differenced series (the
slices of its convolution use the series' length, not the difference's), so its kernels there are not MiniRocket's.

The accuracies (slow): ours and aeon's ``MultiRocketClassifier`` / ``HydraClassifier`` fitted on the same training file
and scored on the same test file (the archive's default split; the files aeon ships) agree within ``TOLERANCE``: the
random draws differ (numpy's generator against torch's), so one test case of a small file can go either way.
"""

import os

import numpy as np
import pytest
import torch

aeon = pytest.importorskip("aeon")

import neurodyn  # noqa: E402
from neurodyn.baselines import hydra_transform as hy  # noqa: E402
from neurodyn.baselines import multirocket_transform as mr  # noqa: E402

DATA = os.path.join(os.path.dirname(aeon.__file__), "datasets", "data")
#: files aeon ships, none of the protocol's confirmation files (PickupGestureWiimoteZ, UnitTest, CardanoSentiment)
FILES = ("GunPoint", "ItalyPowerDemand", "ArrowHead", "BasicMotions")
#: ours and aeon's test accuracies agree within this (3 points: 5 test cases of ArrowHead)
TOLERANCE = 0.03


def load(name, split):
    from aeon.datasets import load_from_ts_file

    x, y = load_from_ts_file(os.path.join(DATA, name, f"{name}_{split}.ts"))
    return np.asarray(x, dtype=np.float32), np.asarray(y)


def channels_last(x):
    return torch.as_tensor(x).transpose(1, 2).contiguous()


def test_hydra_features_equal_aeons_given_its_kernels():
    from aeon.transformations.collection.convolution_based import HydraTransformer

    for name, n in (("GunPoint", 20), ("BasicMotions", 12)):
        x, _ = load(name, "TRAIN")
        xt, _ = load(name, "TEST")
        x, xt = x[:n], xt[:n]
        theirs = HydraTransformer(random_state=0).fit(x)
        internal = theirs._hydra
        D, C = internal.W.shape[0], x.shape[1]
        half, k = internal.h, internal.k
        channels = (
            torch.ones(D, 2, half, 1)
            if C == 1
            else torch.stack([torch.nn.functional.one_hot(idx.long(), C).sum(-2) for idx in internal.idx]).float()
        )
        params = {
            "dilations": internal.dilations.long(),
            "channels": channels,
            "weights": internal.W.reshape(D, 2, half, k, hy.KERNEL_LENGTH).float(),
        }
        assert params["dilations"].tolist() == hy.hydra_dilations(x.shape[2])
        ours = hy.hydra_transform(channels_last(xt), params).numpy()
        np.testing.assert_allclose(ours, np.asarray(theirs.transform(xt)), rtol=1e-4, atol=1e-4)


def test_multirocket_series_features_equal_aeons_given_its_parameters():
    from aeon.transformations.collection.convolution_based import MultiRocket

    x, _ = load("GunPoint", "TRAIN")
    xt, _ = load("GunPoint", "TEST")
    theirs = MultiRocket(n_kernels=84 * 3, random_state=0).fit(x[:20])

    def params(p):
        dilations, per_dilation, biases = p
        return {
            "dilations": torch.as_tensor(dilations),
            "per_dilation": torch.as_tensor(per_dilation),
            "channels": torch.ones(len(dilations), 84, 1),
            "biases": torch.as_tensor(biases),
        }

    both = {**params(theirs.parameter), **{f"diff_{k}": v for k, v in params(theirs.parameter1).items()}}
    ours = mr.multirocket_transform(channels_last(xt[:10]), both).numpy().reshape(10, 2, 4, -1)[:, 0]
    ppv, lspv, mpv, mipv = np.asarray(theirs.transform(xt[:10])).reshape(10, 2, 4, -1)[:, 0].transpose(1, 0, 2)
    bias = theirs.parameter[2]
    np.testing.assert_allclose(ours[:, 0], ppv, atol=1e-6)
    np.testing.assert_allclose(ours[:, 1], np.where(ppv > 0, mpv - 2 * bias, mpv), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours[:, 2], mipv, atol=1e-4)
    assert np.abs(ours[:, 3] - lspv).max() <= 1 and (ours[:, 3] == lspv).mean() > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("model", ["multirocket", "hydra"])
def test_accuracy_within_tolerance_of_aeons(name, model):
    from aeon.classification.convolution_based import HydraClassifier, MultiRocketClassifier

    x, y = load(name, "TRAIN")
    xt, yt = load(name, "TEST")
    theirs = {"multirocket": MultiRocketClassifier, "hydra": HydraClassifier}[model](random_state=0).fit(x, y)
    acc_theirs = float(np.mean(theirs.predict(xt) == yt))
    ours = neurodyn.SequenceClassifier(f"{model}/sequence", overrides=["data.n_val=0", "data.max_steps=0"])
    acc_ours = ours.fit(x.transpose(0, 2, 1), y).score(xt.transpose(0, 2, 1), yt)
    print(f"{name} {model}: ours {acc_ours:.4f}, aeon {acc_theirs:.4f}")
    assert abs(acc_ours - acc_theirs) <= TOLERANCE, (name, model, acc_ours, acc_theirs)
