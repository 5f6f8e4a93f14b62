"""Point clouds from a user's files (torch lists of per-sample dicts as neuraloperator's car files, and .npz),
padded with a mask that the loss, the metrics and the point-cloud models honour, trained end to end."""

import json
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
import torch
from PIL import Image

from neurodyn.cli import main
from neurodyn.data.datasets import SteadyDataset
from neurodyn.data.formats import read_public
from neurodyn.data.normalize import Normalizer
from neurodyn.data.store import StoredDataset
from neurodyn.errors import DataError
from neurodyn.models import build
from neurodyn.train.losses import build_loss, masked_loss
from neurodyn.train.metrics import MetricAccumulator
from neurodyn.train.tasks import SteadyTask


def car_samples(n: int = 14, seed: int = 0, lo: int = 20, hi: int = 40, target: str = "press", flat: bool = False):
    """Per-sample dicts: ``vertices (P, 3)``, the pressure at them ``(P,)`` (``flat``) or ``(P, 1)``, ragged P."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        P = int(torch.randint(lo, hi, (1,), generator=g))
        v = torch.rand(P, 3, generator=g)
        p = v[:, 0] * 2 + v[:, 1] ** 2 - v[:, 2]
        out.append({"vertices": v, target: p if flat else p[:, None], "index": torch.tensor(i)})
    return out


def neuralop_car_samples(n: int = 14, seed: int = 0, lo: int = 20, hi: int = 40):
    """Per-sample dicts laid out as neuraloperator's car files (``mini_car.pt``) hold them: ``vertices (P, 3)``,
    ``press (1, P)`` (a leading axis of length 1), beside keys that are neither points nor target."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        P = int(torch.randint(lo, hi, (1,), generator=g))
        v = torch.rand(P, 3, generator=g)
        press = (v[:, 0] * 2 + v[:, 1] ** 2 - v[:, 2]).reshape(1, P)
        out.append(
            {
                "vertices": v,
                "press": press,
                "query_points": torch.rand(4, 4, 4, 3, generator=g),
                "distance": torch.rand(1, 4, 4, 4, generator=g),
            }
        )
    return out


def test_neuraloperator_car_file_reads_press_of_shape_1_by_P(tmp_path):
    samples = neuralop_car_samples(4)
    torch.save(samples, tmp_path / "mini_car.pt")
    data = read_public(tmp_path / "mini_car.pt")
    sizes = [s["vertices"].shape[0] for s in samples]
    assert data.shapes["fields/u"] == (4, max(sizes), 1)
    for i, s in enumerate(samples):
        np.testing.assert_allclose(data["u"][i, : sizes[i], 0], s["press"][0].numpy(), rtol=1e-6)
        np.testing.assert_allclose(data["pos"][i, : sizes[i]], s["vertices"].numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape", ["P", "1P", "P1", "1P1", "11P"])
def test_one_value_per_point_in_any_singleton_layout(tmp_path, shape):
    """Oracle: the values written, index by index; every layout with axes of length 1 reads the same."""
    P = 7
    v = torch.rand(P, 3, generator=torch.Generator().manual_seed(1))
    values = torch.arange(P, dtype=torch.float32) * 0.5 - 1
    sizes = {"P": (P,), "1P": (1, P), "P1": (P, 1), "1P1": (1, P, 1), "11P": (1, 1, P)}[shape]
    torch.save([{"vertices": v, "press": values.reshape(sizes)}], tmp_path / "one.pt")
    data = read_public(tmp_path / "one.pt")
    assert data.shapes["fields/u"] == (1, P, 1)
    np.testing.assert_array_equal(data["u"][0, :, 0], values.numpy())


def test_vectors_per_point_either_way_round_when_unambiguous(tmp_path):
    P, c = 6, 2
    v = torch.rand(P, 3, generator=torch.Generator().manual_seed(2))
    w = torch.arange(P * c, dtype=torch.float32).reshape(P, c)  # w[p, k] = 2 p + k
    torch.save([{"vertices": v, "u": w}, {"vertices": v, "u": w.T.contiguous()}], tmp_path / "vec.pt")
    data = read_public(tmp_path / "vec.pt")
    assert data.shapes["fields/u"] == (2, P, c)
    want = np.array([[2 * p + k for k in range(c)] for p in range(P)], dtype=np.float32)
    np.testing.assert_array_equal(data["u"][0], want)
    np.testing.assert_array_equal(data["u"][1], want)


def test_shapes_that_cannot_be_read_are_one_sentence_naming_found_and_expected(tmp_path):
    v = torch.rand(5, 3)
    torch.save([{"vertices": v, "press": torch.rand(2, 4)}], tmp_path / "short.pt")
    with pytest.raises(
        DataError,
        match=r"'press' of sample 0 of \S+short.pt has shape \(2, 4\) where 'vertices' "
        r"\(5, 3\) holds 5 points; expected one value per point, shape \(5,\) or "
        r"the same with axes of length 1 such as \(1, 5\), or vectors \(5, c\) / "
        r"\(c, 5\)$",
    ):
        read_public(tmp_path / "short.pt")
    torch.save([{"vertices": v, "press": torch.rand(5, 5)}], tmp_path / "square.pt")  # (P, P): which axis?
    with pytest.raises(DataError, match=r"has shape \(5, 5\) where 'vertices' \(5, 3\) holds 5 points"):
        read_public(tmp_path / "square.pt")
    # a later sample must have the first sample's channel count
    torch.save(
        [{"vertices": v, "press": torch.rand(1, 5)}, {"vertices": v, "press": torch.rand(2, 5)}], tmp_path / "widths.pt"
    )
    with pytest.raises(
        DataError,
        match=r"'press' of sample 1 .* has shape \(2, 5\) .* expected one value per "
        r"point, shape \(5,\) or the same with axes of length 1 such as \(1, 5\) "
        r"as the first sample$",
    ):
        read_public(tmp_path / "widths.pt")
    torch.save([{"vertices": v, "press": torch.rand(1, 5, 2, 3)}], tmp_path / "four.pt")
    with pytest.raises(DataError, match=r"has shape \(1, 5, 2, 3\) where"):
        read_public(tmp_path / "four.pt")


def test_torch_list_is_padded_with_a_mask(tmp_path):
    samples = car_samples(5, flat=True)
    torch.save(samples, tmp_path / "mini_car.pt")
    data = read_public(tmp_path / "mini_car.pt")
    sizes = [len(s["vertices"]) for s in samples]
    P = max(sizes)
    assert data.format == "point-cloud" and data.shapes["fields/pos"] == (5, P, 3)
    assert data.shapes["fields/u"] == (5, P, 1) and data.shapes["fields/mask"] == (5, P, 1)
    pos, u, mask = data["pos"], data["u"], data["mask"][..., 0]
    for i, s in enumerate(samples):
        k = sizes[i]
        assert mask[i].sum() == k and mask[i, :k].all()
        np.testing.assert_allclose(pos[i, :k], s["vertices"].numpy(), rtol=1e-6)
        np.testing.assert_allclose(u[i, :k, 0], s["press"].numpy(), rtol=1e-6)
        assert not pos[i, k:].any() and not u[i, k:].any()


def test_keys_are_chosen_by_option_when_ambiguous(tmp_path):
    samples = car_samples(3)
    for s in samples:
        s["pressure"] = s["press"] * 2
    torch.save(samples, tmp_path / "two.pt")
    with pytest.raises(
        DataError,
        match=r"several candidates \(press, pressure\).*\['index', 'press', 'pressure', "
        r"'vertices'\].*target=KEY",
    ):
        read_public(tmp_path / "two.pt")
    data = read_public(tmp_path / "two.pt", target="pressure")
    np.testing.assert_allclose(
        data["u"][0, : len(samples[0]["vertices"]), 0], samples[0]["pressure"][:, 0].numpy(), rtol=1e-6
    )
    torch.save([{"xyz": torch.rand(4, 3), "p": torch.rand(4)}], tmp_path / "odd.pt")
    with pytest.raises(DataError, match=r"none of vertices, points, pos, coords; it holds \['p', 'xyz'\]"):
        read_public(tmp_path / "odd.pt")
    assert read_public(tmp_path / "odd.pt", points="xyz", target="p").shapes["fields/pos"] == (1, 4, 3)


def test_npz_with_mask(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((4, 9, 2)), rng.random((4, 9, 3))
    mask = np.ones((4, 9), dtype=int)
    mask[1, 6:] = 0
    np.savez(tmp_path / "clouds.npz", x=x, y=y, mask=mask)
    data = read_public(tmp_path / "clouds.npz")
    assert data.format == "point-cloud" and data.shapes["fields/u"] == (4, 9, 3)
    assert data["mask"][..., 0].sum(1).tolist() == [9, 6, 9, 9]
    assert not data["u"][1, 6:].any()
    np.savez(tmp_path / "full.npz", x=x, y=y[..., 0])  # y (N, P) reads as a sequence file unless named
    assert read_public(tmp_path / "full.npz").format == "sequence-npz"
    full = read_public(tmp_path / "full.npz", kind="point-cloud")
    assert full.shapes["fields/u"] == (4, 9, 1) and "fields/mask" not in full.shapes  # same sizes: no mask
    np.savez(tmp_path / "bad.npz", x=x, y=y, mask=np.zeros((4, 9)))
    with pytest.raises(DataError, match="sample 0: the mask marks no point as real"):
        read_public(tmp_path / "bad.npz")


def test_npz_target_with_the_channels_first_or_a_singleton_axis(tmp_path):
    rng = np.random.default_rng(3)
    x, y = rng.random((3, 8, 2)), rng.random((3, 8, 2))
    np.savez(tmp_path / "cf.npz", x=x, y=y.transpose(0, 2, 1))  # (N, c, P)
    data = read_public(tmp_path / "cf.npz")
    assert data.format == "point-cloud"
    np.testing.assert_allclose(data["u"], y, rtol=1e-6)
    np.savez(tmp_path / "one.npz", x=x, y=y[:, None, :, 0])  # (N, 1, P)
    data = read_public(tmp_path / "one.npz")
    assert data.format == "point-cloud" and data.shapes["fields/u"] == (3, 8, 1)
    np.testing.assert_allclose(data["u"][..., 0], y[..., 0], rtol=1e-6)
    np.savez(tmp_path / "bad.npz", x=x, y=rng.random((3, 8, 8)))  # (N, P, P): which axis holds the points?
    with pytest.raises(DataError, match=r"y has shape \(3, 8, 8\) where x \(3, 8, 2\) holds 8 points per sample"):
        read_public(tmp_path / "bad.npz", kind="point-cloud")


@pytest.mark.parametrize("name", ["lamo_mesh", "transolver"])
def test_padded_batch_scores_as_its_samples_unpadded(name):
    """Oracle: each sample alone, without padding. The padded batch's loss is the mean of those losses, and its
    metrics equal the metrics accumulated sample by sample."""
    torch.manual_seed(0)
    cfg = {"in_channels": 3, "out_channels": 1, "width": 16, "n_layers": 2, "n_slices": 4}
    cfg.update(
        {"geometry": "point_cloud", "ssm": {"d_state": 4, "heads": 2}, "slice_heads": 4}
        if name == "lamo_mesh"
        else {"variant": "point_cloud", "n_heads": 4}
    )
    model = build(name, cfg).double().eval()
    samples = car_samples(4, lo=5, hi=12)
    sizes = [len(s["vertices"]) for s in samples]
    P = max(sizes)
    x = torch.zeros(4, P, 3, dtype=torch.float64)
    y = torch.zeros(4, P, 1, dtype=torch.float64)
    mask = torch.zeros(4, P, dtype=torch.bool)
    for i, s in enumerate(samples):
        x[i, : sizes[i]], y[i, : sizes[i]], mask[i, : sizes[i]] = s["vertices"], s["press"], True
        x[i, sizes[i] :] = 7.0  # padding values that would show if anything read them
    norm = Normalizer("gaussian", "channel").fit(y[mask])
    task = SteadyTask(build_loss("rel_l2"), Normalizer("none", "channel").fit(x[mask]), norm, grid=False)
    padded = task.training_loss(model, {"x": x, "y": y, "pos": x, "mask": mask})
    alone = [
        task.training_loss(
            model,
            {"x": s["vertices"][None].double(), "y": s["press"][None].double(), "pos": s["vertices"][None].double()},
        )
        for s in samples
    ]
    assert padded.item() == pytest.approx(torch.stack(alone).mean().item(), rel=1e-10)
    batch = [{"x": x, "y": y, "pos": x, "mask": mask}]
    metrics = task.evaluate(model, batch)
    one_by_one = MetricAccumulator(grid=False)
    for s in samples:
        v = s["vertices"][None].double()
        one_by_one.update(task.predict(model, {"x": v, "pos": v}), s["press"][None].double())
    want = one_by_one.compute()
    assert set(metrics) == set(want) == {"rel_l2", "rmse", "nrmse", "max_err", "crmse"}
    for k in want:
        assert metrics[k] == pytest.approx(want[k], rel=1e-10), k


def test_masked_mse_is_the_unpadded_mse():
    pred, true = torch.randn(2, 5, 2), torch.randn(2, 5, 2)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    want = ((pred[0, :3] - true[0, :3]).pow(2).mean() + (pred[1] - true[1]).pow(2).mean()) / 2
    assert masked_loss(build_loss("mse"), pred, true, mask).item() == pytest.approx(want.item(), rel=1e-6)


@pytest.mark.parametrize("preset", ["lamo/elasticity_geofno", "transolver/elasticity_geofno"])
def test_convert_and_train_point_clouds_with_the_cli(tmp_path, data_dir, capsys, preset):
    samples = neuralop_car_samples(14)  # press (1, P), as neuraloperator's mini_car.pt holds it
    torch.save(samples, tmp_path / "mini_car.pt")
    store = tmp_path / "car.h5"
    assert main(["convert", str(tmp_path / "mini_car.pt"), "--out", str(store), "--no-progress"]) == 0
    sizes = [len(s["vertices"]) for s in samples]
    line = capsys.readouterr().out.strip()
    assert line == (
        f"{store}: 14 point clouds, {min(sizes)}..{max(sizes)} points (padded, with fields/mask), "
        "3-d coordinates, 1 output channel (point-cloud)"
    )
    run = tmp_path / "runs" / "car"
    assert (
        main(
            [
                "train",
                preset,
                "--scale",
                "tiny",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--run-name",
                "car",
                "--no-progress",
                f"data.path={store}",
                "data.n_train=10",
                "data.n_test=4",
            ]
        )
        == 0
    )
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    test = next(r["test"]["test"]["last"] for r in records if "test" in r and "train_loss" not in r)
    assert set(test) == {"rel_l2", "rmse", "nrmse", "max_err", "crmse"} and np.isfinite(test["rel_l2"])
    summary = (run / "summary.md").read_text()
    assert "brmse" not in summary and "frmse" not in summary
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", summary):
        pixels = matplotlib.image.imread(run / image)
        assert pixels.std() > 0
        with Image.open(run / image) as im:  # the title names the model, the run and the data file
            model = "lamo_mesh" if preset.startswith("lamo") else preset.split("/")[0]
            assert im.text["Title"].startswith(f"{model} ({preset}), run car: ")
            assert "car.h5" in im.text["Title"]
    with Image.open(run / "predictions.png") as im:  # the panels name the field and its source array
        assert "target u (press in mini_car.pt)" in im.text["Description"]
    # the test split (the last 4 samples) with their masks, as the dataset serves it
    ds = SteadyDataset(StoredDataset(store), np.arange(10, 14))
    assert [int(ds[i]["mask"].sum()) for i in range(4)] == sizes[10:]


def test_ragged_clouds_need_channel_statistics(tmp_path, data_dir, capsys):
    torch.save(car_samples(14), tmp_path / "mini_car.pt")
    store = tmp_path / "car.h5"
    assert main(["convert", str(tmp_path / "mini_car.pt"), "--out", str(store), "--no-progress"]) == 0
    assert (
        main(
            [
                "train",
                "lamo/elasticity_geofno",
                "--scale",
                "tiny",
                "--runs-dir",
                str(tmp_path / "runs"),
                f"data.path={store}",
                "data.n_train=10",
                "data.n_test=4",
                "data.normalize_reduce=pointwise",
            ]
        )
        == 2
    )
    assert "set data.normalize_reduce=channel" in capsys.readouterr().err
    assert not Path(tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.pt"))
