import torch

from neurodyn.train.sampling import epoch_permutation, global_batches, rank_slice


def test_batches_cover_the_epoch_and_depend_only_on_seed_and_epoch():
    b = global_batches(23, 5, seed=3, epoch=2)
    assert [len(x) for x in b] == [5, 5, 5, 5, 3]
    assert sorted(torch.cat(b).tolist()) == list(range(23))
    assert torch.equal(torch.cat(b), epoch_permutation(23, 3, 2))
    assert not torch.equal(torch.cat(b), epoch_permutation(23, 3, 1))


def test_ranks_split_each_global_batch_without_gaps_and_never_empty():
    for n, world in ((7, 2), (2, 2), (5, 3), (9, 4)):
        batch = torch.arange(n)
        parts = [rank_slice(batch, r, world) for r in range(world)]
        assert torch.equal(torch.cat(parts), batch) and min(len(p) for p in parts) >= 1
    # a tail batch smaller than the process count is dropped under DDP only
    assert [len(x) for x in global_batches(13, 6, 0, 0, world=2)] == [6, 6]
    assert [len(x) for x in global_batches(13, 6, 0, 0, world=1)] == [6, 6, 1]
