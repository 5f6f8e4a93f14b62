"""Vectorised DTW and Euclidean distances against the textbook double loop and a NumPy brute force."""

import numpy as np
import pytest
import torch

from neurodyn.baselines.dtw import dtw_distance_ref, dtw_distances, euclidean_distances


def _pairs(seed, n=3, m=4, L=7, K=5, C=2):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, L, C, generator=g, dtype=torch.float64),
        torch.randn(m, K, C, generator=g, dtype=torch.float64),
    )


@pytest.mark.parametrize("window", [None, 0, 2, 3])
@pytest.mark.parametrize("lengths", [(7, 7), (7, 5), (4, 6)])
def test_dtw_equals_the_double_loop(window, lengths):
    a, b = _pairs(sum(lengths) + (window or 0), L=lengths[0], K=lengths[1])
    if window is not None and abs(lengths[0] - lengths[1]) > window:
        with pytest.raises(ValueError, match="Sakoe-Chiba window"):
            dtw_distances(a, b, window)
        return
    want = torch.tensor([[dtw_distance_ref(x.tolist(), y.tolist(), window) for y in b] for x in a], dtype=torch.float64)
    torch.testing.assert_close(dtw_distances(a, b, window), want, rtol=1e-12, atol=1e-12)
    # chunked over pairs: the same values
    torch.testing.assert_close(dtw_distances(a, b, window, chunk_elements=1), want, rtol=1e-12, atol=1e-12)


def test_dtw_bounds():
    a, b = _pairs(5, L=6, K=6)
    ed = euclidean_distances(a, b)
    # the band of width 0 is the Euclidean alignment; any wider band can only lower the cost
    torch.testing.assert_close(dtw_distances(a, b, 0), ed)
    assert (dtw_distances(a, b, 2) <= ed + 1e-12).all()
    assert (dtw_distances(a, b) <= dtw_distances(a, b, 2) + 1e-12).all()
    assert torch.all(dtw_distances(a, a).diagonal() == 0)


def test_euclidean_equals_numpy_brute_force():
    a, b = _pairs(9, n=5, m=6, L=8, K=8, C=3)
    A, B = a.numpy(), b.numpy()
    want = np.array([[((A[i] - B[j]) ** 2).sum() for j in range(len(B))] for i in range(len(A))])
    np.testing.assert_allclose(euclidean_distances(a, b).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(euclidean_distances(a, b, chunk_elements=1).numpy(), want, rtol=1e-12)
    with pytest.raises(ValueError, match="one length"):
        euclidean_distances(a, b[:, :5])
