"""Tests of neurodyn.train.metrics against independent numpy oracles and analytic cases."""

import itertools
import json
import math
import re
import warnings

import numpy as np
import pytest
import torch

from neurodyn.train.losses import relative_lp
from neurodyn.train.metrics import (
    METRIC_DEFINITIONS,
    METRIC_NAMES,
    MetricAccumulator,
    band_modes,
    boundary_mask,
    evaluate_fields,
    fourier_band_rmse,
    order_metrics,
    poisson_metrics,
    sample_metrics,
    shown_metrics,
)

SHAPES = [(3, 21, 2), (2, 12, 9, 1), (2, 6, 7, 5, 2)]  # 1D odd, 2D even x odd, 3D


def _pair(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(shape, generator=g, dtype=torch.float64) + 0.5
    return target + 0.3 * torch.randn(shape, generator=g, dtype=torch.float64), target


# ------------------------------------------------------------------------------------------ oracles (numpy)


def _np_boundary_points(spatial):
    return [
        idx
        for idx in itertools.product(*(range(n) for n in spatial))
        if any(i in (0, n - 1) for i, n in zip(idx, spatial))
    ]


def _np_band_of_modes(spatial, lo=4, hi=12):
    """The band (0 low, 1 mid, 2 high) of every mode of the full DFT of a ``spatial`` grid, by an explicit loop."""
    out = {}
    for idx in itertools.product(*(range(n) for n in spatial)):
        k = math.sqrt(sum((i if i <= (n - 1) // 2 else i - n) ** 2 for i, n in zip(idx, spatial)))
        out[idx] = 0 if k < lo else (1 if k < hi else 2)
    return out


def _np_bands(err, lo=4, hi=12):
    """Band RMSEs of one (*spatial) error via the full complex FFT and an explicit loop over modes."""
    F = np.fft.fftn(err) / err.size
    out = np.zeros(3)
    for idx, band in _np_band_of_modes(err.shape, lo, hi).items():
        out[band] += abs(F[idx]) ** 2
    return np.sqrt(out)


BANDS = ("frmse_low", "frmse_mid", "frmse_high")


def _np_present_bands(spatial):
    """The band names a grid has at least one mode in (explicit loop over the full spectrum)."""
    return {BANDS[b] for b in _np_band_of_modes(spatial).values()}


@pytest.mark.parametrize("shape", SHAPES)
def test_per_sample_values_match_numpy(shape):
    pred, target = _pair(shape)
    got = sample_metrics(pred, target)
    P, T = pred.numpy(), target.numpy()
    B, C, spatial = shape[0], shape[-1], shape[1:-1]
    bpts = _np_boundary_points(spatial)
    for b, c in itertools.product(range(B), range(C)):
        e, t = P[b, ..., c] - T[b, ..., c], T[b, ..., c]
        assert float(got["rmse"][b, c]) == pytest.approx(np.sqrt(np.mean(e**2)), rel=1e-12)
        assert float(got["nrmse"][b, c]) == pytest.approx(np.linalg.norm(e) / np.linalg.norm(t), rel=1e-12)
        assert float(got["max_err"][b, c]) == pytest.approx(np.abs(e).max(), rel=1e-15)
        assert float(got["crmse"][b, c]) == pytest.approx(abs(P[b, ..., c].mean() - t.mean()), rel=1e-10)
        assert float(got["brmse"][b, c]) == pytest.approx(np.sqrt(np.mean([e[i] ** 2 for i in bpts])), rel=1e-12)
        bands = _np_bands(e)
        for j, name in enumerate(BANDS):
            if name not in _np_present_bands(spatial):  # no mode in the band: no value, never a 0
                assert name not in got
                continue
            assert float(got[name][b, c]) == pytest.approx(bands[j], rel=1e-9, abs=1e-14)
    want_rel = np.linalg.norm((P - T).reshape(B, -1), axis=1) / np.linalg.norm(T.reshape(B, -1), axis=1)
    np.testing.assert_allclose(got["rel_l2"][:, 0].numpy(), want_rel, rtol=1e-12)


def test_evaluate_fields_aggregation():
    pred, target = _pair((5, 10, 8, 3), seed=1)
    per = sample_metrics(pred, target)
    res = evaluate_fields(pred, target)
    assert set(res) == set(METRIC_NAMES) - set(BANDS) | _np_present_bands((10, 8))
    assert "frmse_high" not in res  # |k| <= sqrt(5^2 + 4^2) = 6.4 on a 10 x 8 grid
    assert res["rmse"] == pytest.approx(float(per["rmse"].mean()), rel=1e-12)
    assert res["max_err"] == float((pred - target).abs().max())
    # crmse: RMS over samples per channel, then mean over channels (PDEBench)
    d = (pred.mean(dim=(1, 2)) - target.mean(dim=(1, 2))).numpy()  # (B, C)
    assert res["crmse"] == pytest.approx(np.sqrt((d**2).mean(axis=0)).mean(), rel=1e-12)
    assert res["rel_l2"] == pytest.approx(float(relative_lp(pred, target)), rel=1e-12)


# ------------------------------------------------------------------------------------------ Fourier bands


@pytest.mark.parametrize("shape", SHAPES + [(2, 64, 3), (1, 32, 32, 1)])
def test_parseval_bands_sum_to_mse(shape):
    pred, target = _pair(shape, seed=2)
    m = sample_metrics(pred, target)
    total = sum(m[name] ** 2 for name in BANDS if name in m)  # the bands a grid lacks hold no error
    assert torch.allclose(total, m["rmse"] ** 2, rtol=1e-12, atol=0)


@pytest.mark.parametrize("k, band", [(2, 0), (3, 0), (4, 1), (8, 1), (11, 1), (12, 2), (20, 2), (32, 2)])
def test_single_wavenumber_1d_lands_in_one_band(k, band):
    n, a = 64, 0.7
    x = torch.arange(n, dtype=torch.float64) / n
    wave = torch.cos(2 * math.pi * k * x + 0.3) if k != n // 2 else torch.cos(math.pi * n * x)
    amp = a / math.sqrt(2) if k != n // 2 else a  # the Nyquist mode cos(pi n x) = (-1)^i has RMS 1
    err = (a * wave)[None, :, None]
    f = fourier_band_rmse(err)[0, 0]
    want = torch.zeros(3, dtype=torch.float64)
    want[band] = amp
    assert torch.allclose(f, want, atol=1e-12), (k, f)


@pytest.mark.parametrize(
    "kx, ky, band",
    [(2, 3, 0), (3, 3, 1), (3, -3, 1), (0, 4, 1), (-8, 0, 1), (7, 9, 1), (9, 9, 2), (12, 0, 2), (11, 0, 1)],
)
def test_single_wavenumber_2d_uses_radial_wavenumber(kx, ky, band):
    # |k| = sqrt(kx^2 + ky^2): (3, 3) has both components < 4 but |k| = 4.24 -> mid; (9, 9): 12.7 -> high
    n = 32
    x = torch.arange(n, dtype=torch.float64) / n
    Y, X = torch.meshgrid(x, x, indexing="ij")
    err = torch.sin(2 * math.pi * (kx * X + ky * Y))[None, ..., None]
    f = fourier_band_rmse(err)[0, 0]
    want = torch.zeros(3, dtype=torch.float64)
    want[band] = 1 / math.sqrt(2)
    assert torch.allclose(f, want, atol=1e-12), f


def test_custom_band_edges():
    n = 64
    x = torch.arange(n, dtype=torch.float64) / n
    err = torch.sin(2 * math.pi * 5 * x)[None, :, None]
    assert float(fourier_band_rmse(err, bands=(6, 10))[0, 0, 0]) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="bands"):
        fourier_band_rmse(err, bands=(12, 4))


@pytest.mark.parametrize("spatial", [(16, 16), (8,), (30,), (16, 24), (5, 6, 7), (32, 32)])
def test_band_modes_count_the_full_spectrum(spatial):
    """Oracle: an explicit loop over every mode of the full DFT; the three counts add up to the grid's points."""
    bands = list(_np_band_of_modes(spatial).values())
    want = tuple(bands.count(b) for b in range(3))
    assert band_modes(spatial) == want and sum(want) == math.prod(spatial)


def test_a_16_by_16_grid_has_no_high_band_and_reports_none():
    """|k| <= sqrt(8^2 + 8^2) = 11.3 < 12 on a 16 x 16 grid: no high band, so no frmse_high (it was a fake 0)."""
    pred, target = _pair((3, 16, 16, 1), seed=5)
    assert "frmse_high" not in sample_metrics(pred, target)
    res = evaluate_fields(pred, target)
    assert {"frmse_low", "frmse_mid"} <= set(res) and "frmse_high" not in res
    assert "frmse_high" in evaluate_fields(*_pair((3, 32, 32, 1), seed=5))  # 32 x 32 reaches |k| = 22.6


def test_accumulator_over_two_grids_averages_a_band_over_the_samples_that_have_it():
    small, big = _pair((3, 16, 16, 1), seed=6), _pair((2, 32, 32, 1), seed=7)
    acc = MetricAccumulator()
    acc.update(*small)
    acc.update(*big)
    got = acc.compute()
    high = sample_metrics(*big)["frmse_high"]  # the 32 x 32 samples alone
    assert got["frmse_high"] == pytest.approx(float(high.mean()), rel=1e-12)
    rmse = torch.cat([sample_metrics(*small)["rmse"], sample_metrics(*big)["rmse"]])
    assert got["rmse"] == pytest.approx(float(rmse.mean()), rel=1e-12)


def test_nrmse_is_rel_l2_for_one_channel_and_differs_for_several():
    """By definition: for one channel both are ||e_b|| / ||target_b||; with channels of different scales, rel_l2
    pools them and nrmse averages the per-channel ratios."""
    one = evaluate_fields(*_pair((4, 12, 12, 1), seed=8))
    assert one["nrmse"] == pytest.approx(one["rel_l2"], rel=1e-12)
    pred, target = _pair((4, 12, 12, 2), seed=8)
    target[..., 1] *= 100  # the second channel dominates the pooled norm
    two = evaluate_fields(pred, target)
    assert abs(two["nrmse"] - two["rel_l2"]) > 0.1 * two["rel_l2"]


def test_shown_metrics_drop_a_duplicate_and_say_which_bands_are_missing():
    res = evaluate_fields(*_pair((3, 16, 16, 1), seed=9))
    keys, notes = shown_metrics(res, channels=1)
    assert "nrmse" not in keys and "frmse_high" not in keys and "rel_l2" in keys and "frmse_mid" in keys
    assert any(n.startswith("nrmse is not shown: for a field of one channel it is rel_l2 by definition") for n in notes)
    assert "frmse_high: n/a, the grid has no Fourier mode with |k| >= 12" in notes
    assert "nrmse" in shown_metrics(res, channels=2)[0]  # several channels: two quantities
    assert "nrmse" not in shown_metrics(res)[0]  # unknown channels: equal to 1e-9, one quantity
    for name in METRIC_NAMES:  # every metric has a definition with its units
        assert re.search(r"target's units|dimensionless", METRIC_DEFINITIONS[name]), name


# ------------------------------------------------------------------------------------------ boundary


@pytest.mark.parametrize("spatial", [(9,), (7, 5), (4, 5, 6)])
def test_boundary_mask_counts(spatial):
    mask = boundary_mask(spatial)
    interior = math.prod(n - 2 for n in spatial)
    assert int(mask.sum()) == math.prod(spatial) - interior == len(_np_boundary_points(spatial))


def test_brmse_boundary_vs_interior_error():
    target = torch.ones(2, 10, 12, 1, dtype=torch.float64)
    mask = boundary_mask((10, 12))[None, ..., None]
    on_boundary = target + 0.5 * mask
    in_interior = target + 0.5 * ~mask
    res_b = evaluate_fields(on_boundary, target)
    res_i = evaluate_fields(in_interior, target)
    assert res_b["brmse"] == pytest.approx(0.5, rel=1e-12)
    n_b = 10 * 12 - 8 * 10
    assert res_b["rmse"] == pytest.approx(0.5 * math.sqrt(n_b / 120), rel=1e-12)
    assert res_i["brmse"] == 0.0 and res_i["rmse"] > 0.3
    # corners counted once: an error only at the 4 corners gives sqrt(4/n_boundary) * value
    corners = target.clone()
    corners[:, [0, 0, -1, -1], [0, -1, 0, -1], 0] += 1.0
    assert evaluate_fields(corners, target)["brmse"] == pytest.approx(math.sqrt(4 / n_b), rel=1e-12)


# ------------------------------------------------------------------------------------------ accumulation


def test_accumulator_over_unequal_batches_equals_whole_set():
    pred, target = _pair((10, 11, 8, 3), seed=3)
    pred[7, 3, 2, 1] += 5.0  # the max error sits in the last batch
    acc = MetricAccumulator()
    for sl in (slice(0, 3), slice(3, 8), slice(8, 10)):
        acc.update(pred[sl].float(), target[sl].float())
    whole = evaluate_fields(pred.float(), target.float())
    got = acc.compute()
    assert acc.count == 10 and set(got) == set(whole)
    for name in whole:
        assert got[name] == pytest.approx(whole[name], rel=1e-12), name
    # and the batched numbers are not the mean of per-batch means (unequal batches)
    per_batch = [evaluate_fields(pred[sl], target[sl])["rmse"] for sl in (slice(0, 3), slice(3, 8), slice(8, 10))]
    assert abs(np.mean(per_batch) - evaluate_fields(pred, target)["rmse"]) > 1e-4


def test_accumulator_reduce_is_noop_without_process_group():
    pred, target = _pair((4, 16, 1))
    acc = MetricAccumulator()
    acc.update(pred, target)
    before = acc.compute()
    assert acc.reduce_().compute() == before


def test_accumulator_errors():
    acc = MetricAccumulator()
    with pytest.raises(RuntimeError, match="no samples"):
        acc.compute()
    acc.update(*_pair((2, 8, 8, 2)))
    with pytest.raises(ValueError, match="channels"):
        acc.update(*_pair((2, 8, 8, 3)))


def test_grid_false_drops_grid_metrics():
    res = evaluate_fields(*_pair((3, 50, 2)), grid=False)
    assert set(res) == {"rel_l2", "rmse", "nrmse", "max_err", "crmse"}


def _dist_worker(rank, world, init_file, data_file, out_file):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        pred, target = torch.load(data_file)
        out = {}
        # (a) unequal shards, the NaN-free case
        acc = MetricAccumulator()
        for sl in [slice(0, 2), slice(2, 3)] if rank == 0 else [slice(3, 7)]:
            acc.update(pred[sl], target[sl])
        out["split"] = acc.reduce_().compute()
        # (b) rank 1 saw no data at all, rank 0 everything
        acc = MetricAccumulator()
        if rank == 0:
            acc.update(pred, target)
        out["empty_rank"] = acc.reduce_().compute()
        # (c) a NaN on rank 1 survives the MAX reduction
        acc = MetricAccumulator()
        p = pred[rank * 3 : rank * 3 + 3].clone()
        if rank == 1:
            p[0, 0, 0, 0] = float("nan")
        acc.update(p, target[rank * 3 : rank * 3 + 3])
        out["nan"] = acc.reduce_().compute()
        out["count"] = acc.count
        # (d) an all-zero target on rank 1 is counted on every rank: one warning with the total
        acc = MetricAccumulator()
        t = target[rank * 3 : rank * 3 + 3].clone()
        if rank == 1:
            t[0] = 0.0
        acc.update(pred[rank * 3 : rank * 3 + 3], t)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            acc.reduce_().compute()
        out["zero"] = [str(w.message) for w in seen]
        if rank == 0:
            with open(out_file, "w") as fh:
                json.dump(out, fh)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_accumulator_reduce_across_two_processes(tmp_path):
    import torch.multiprocessing as mp

    pred, target = _pair((7, 26, 8, 2), seed=4)  # |k| up to sqrt(13^2 + 4^2) = 13.6: all three bands
    torch.save((pred, target), tmp_path / "data.pt")
    out_file = tmp_path / "out.json"
    mp.spawn(_dist_worker, args=(2, str(tmp_path / "init"), str(tmp_path / "data.pt"), str(out_file)), nprocs=2)
    out = json.loads(out_file.read_text())
    whole = evaluate_fields(pred, target)
    assert "frmse_high" in whole
    for case in ("split", "empty_rank"):
        assert set(out[case]) == set(whole), case
        for name in whole:
            assert out[case][name] == pytest.approx(whole[name], rel=1e-12), (case, name)
    assert out["count"] == 6
    assert all(math.isnan(v) for v in out["nan"].values()), out["nan"]
    assert len(out["zero"]) == 1 and "1 of 6 samples have an all-zero target" in out["zero"][0], out["zero"]


# ------------------------------------------------------------------------------------------ bad input


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 16, 16, 1\).*\(2, 16, 15, 1\)"):
        evaluate_fields(torch.randn(2, 16, 16, 1), torch.randn(2, 16, 15, 1))
    with pytest.raises(ValueError, match="spatial"):
        evaluate_fields(torch.randn(2, 3), torch.randn(2, 3))


def test_zero_targets_warn_once_and_change_no_value():
    pred, target = _pair((4, 8, 8, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ordinary targets: no warning
        evaluate_fields(pred, target)
    target[1] = 0.0
    with pytest.warns(
        UserWarning,
        match=r"^1 of 4 samples have an all-zero target \(norm <= 1e-12\), for which "
        r"relative L2 is undefined .*absolute metrics reported beside it "
        r"\(rmse, max_err\)\.$",
    ):
        got = evaluate_fields(pred, target)
    assert got["rel_l2"] == pytest.approx(float(relative_lp(pred, target, 2)), rel=1e-12)  # the value is unchanged


def test_nan_is_reported_not_hidden():
    pred, target = _pair((3, 12, 12, 1))
    pred[1, 0, 5, 0] = float("nan")  # a boundary point, so every metric sees it
    res = evaluate_fields(pred, target)
    assert all(math.isnan(v) for v in res.values()), res
    acc = MetricAccumulator()
    acc.update(pred, target)
    acc.update(*_pair((2, 12, 12, 1), seed=5))  # later clean batches do not wash it out
    assert all(math.isnan(v) for v in acc.compute().values())
    # a NaN in one sample only: that sample's values are NaN, the others stay finite
    per = sample_metrics(pred, target)
    assert torch.isnan(per["rmse"][1]).all() and torch.isfinite(per["rmse"][[0, 2]]).all()


def test_order_metrics_by_hand():
    L = 64
    s = torch.arange(L, dtype=torch.float64) / L
    true = torch.stack([torch.sin(2 * math.pi * s), torch.cos(4 * math.pi * s)])[..., None]  # (2, L, 1)
    pred = true.clone()
    pred[0] += 0.1  # a constant offset: no derivative error
    pred[1] *= 1.5  # a 50 % amplitude error everywhere
    m = order_metrics(pred, true)
    e0 = 0.1 * math.sqrt(L) / true[0].norm().item()
    assert m["rel_l2_point"] == pytest.approx((e0 + 0.5) / 2, rel=1e-10)
    assert m["rel_l2_der"] == pytest.approx((0.0 + 0.5) / 2, rel=1e-10)
    # one-sided spectrum: the offset sits in the DC bin (counted once), the sine's energy in bin 1 (once
    # instead of twice) -> sample 0's spectral error is sqrt(2) times its point error
    assert m["rel_l2_spec"] == pytest.approx((math.sqrt(2) * e0 + 0.5) / 2, rel=1e-10)


def test_poisson_metrics_by_hand():
    true = torch.zeros(2, 3, 3, 1)
    true[0, 1, 1] = 2.0
    true[1] = torch.arange(9.0).view(3, 3, 1)
    pred = true.clone()
    pred[0, 0, 0] += 1.0
    pred[1, 2, 2] -= 3.0
    m = poisson_metrics(pred, true)
    assert m["rel_l1_pct"] == pytest.approx((100 * 1 / 2 + 100 * 3 / 36) / 2)
    assert m["nrmse_range"] == pytest.approx((math.sqrt(1 / 9) / 2 + math.sqrt(9 / 9) / 8) / 2)
    assert m["max_mse"] == pytest.approx((1.0 + 9.0) / 2)
