"""cross_scan / cross_unscan / cross_merge: traversal orders, exact inverses, adjointness."""

import pytest
import torch

from neurodyn.ops import PAPER_ORDER, VMAMBA_ORDER, cross_merge, cross_scan, cross_scan_indices, cross_unscan


def test_paper_three_by_three_example():
    x = torch.arange(9.0).view(1, 3, 3, 1)  # x0..x8 row-major
    seqs = cross_scan(x)[0, :, :, 0]
    assert seqs[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert seqs[1].tolist() == [8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert seqs[2].tolist() == [0, 3, 6, 1, 4, 7, 2, 5, 8]  # "x0, x3, x6, x1, x4, ..."
    assert seqs[3].tolist() == [8, 5, 2, 7, 4, 1, 6, 3, 0]  # "x8, x5, x2, x7, x4, ..."


@pytest.mark.parametrize("order", [PAPER_ORDER, VMAMBA_ORDER, ("col",), ("row_rev", "row")])
@pytest.mark.parametrize("H,W", [(1, 1), (3, 5), (4, 4), (7, 2)])
def test_matches_index_permutations_and_inverts(order, H, W):
    x = torch.randn(2, H, W, 3)
    seqs = cross_scan(x, order)
    idx = cross_scan_indices(H, W, order)
    flat = x.reshape(2, H * W, 3)
    for k in range(len(order)):
        assert torch.equal(seqs[:, k], flat[:, idx[k]])
        inv = torch.argsort(idx[k])
        assert torch.equal(idx[k][inv], torch.arange(H * W))  # a permutation
    back = cross_unscan(seqs, H, W, order)
    assert torch.equal(back, x.unsqueeze(1).expand_as(back))
    assert torch.allclose(cross_merge(seqs, H, W, order), len(order) * x)


def test_merge_is_adjoint_of_scan():
    x = torch.randn(2, 4, 6, 3, dtype=torch.float64)
    y = torch.randn(2, 4, 24, 3, dtype=torch.float64)
    lhs = (cross_scan(x) * y).sum()
    rhs = (x * cross_merge(y, 4, 6)).sum()
    assert torch.allclose(lhs, rhs)


def test_errors():
    with pytest.raises(ValueError, match=r"x has shape \(2, 3, 4\), expected a channels-last grid"):
        cross_scan(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="directions must be"):
        cross_scan(torch.zeros(1, 2, 2, 1), ("diag",))
    with pytest.raises(ValueError, match=r"y has shape \(1, 4, 5, 1\), expected \(batch, K, H\*W, c\)"):
        cross_merge(torch.zeros(1, 4, 5, 1), 2, 2)
