"""The resolution check of the nu = 1e-4 data (neurodyn_lab.operators.ns_resolution): spectral padding is exact for a
band-limited field, and a coarse solve converges to a fine one under refinement on a short horizon."""

import math

import torch

from neurodyn_lab.operators import ns_resolution as ns_res


def _trig(n: int) -> torch.Tensor:
    x = torch.arange(n, dtype=torch.float64) / n
    X, Y = x[:, None], x[None, :]
    # includes the 16-point grid's Nyquist mode cos(2 pi 8 x), which padding splits between +8 and -8
    return (
        torch.sin(2 * math.pi * (3 * X + Y))
        + 0.5 * torch.cos(2 * math.pi * 8 * X)
        + 0.25 * torch.cos(2 * math.pi * (2 * X - 5 * Y))
    )[None]


def test_pad_spectrum_samples_the_same_trigonometric_polynomial_on_the_finer_grid():
    fine = ns_res.pad_spectrum(_trig(16), 64)
    assert torch.allclose(fine, _trig(64), atol=1e-12)
    assert torch.equal(ns_res.pad_spectrum(_trig(16), 16), _trig(16))


def test_rel_errors_are_per_trajectory_and_frame():
    ref = torch.ones(2, 3, 4, 4)
    w = ref.clone()
    w[1, 2] *= 1.1
    err = ns_res.rel_errors(w, ref)
    assert err.shape == (2, 3) and abs(err[1, 2].item() - 0.1) < 1e-6
    assert err.sum().item() == err[1, 2].item()
