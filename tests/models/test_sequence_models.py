"""Sequence models (NAC and the baselines): shapes, masks, timestamps, registry round trip."""
import pytest
import torch

from neurodyn.models import build, load, save

NAMES = ["nac", "gru", "lstm", "cfc", "ltc", "mha", "odernn"]
CT = ["nac", "cfc", "ltc", "odernn", "mha"]  # models whose output depends on the timestamps


def _build(name, **kw):
    torch.manual_seed(0)
    size = {"d_model": 8, "n_heads": 2} if name == "nac" else {"hidden": 8, "n_heads": 2}
    args = dict(in_channels=3, out_channels=4, conv_channels=(6,), dense=(8,), **size)
    args.update(kw)
    return build(name, **args)


def _batch(B=2, T=9):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, 3, generator=g)
    t = torch.rand(B, T, generator=g).cumsum(1)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[-1, 6:] = False
    return x, t, mask


@pytest.mark.parametrize("name", NAMES)
def test_shapes_padding_and_time(name):
    model = _build(name).eval()
    x, t, mask = _batch()
    with torch.no_grad():
        y = model(x, t, mask)
        assert y.shape == (2, 4) and torch.isfinite(y).all()
        # appending padded garbage does not change a sequence's output ("last" pooling)
        xp = torch.cat([x, 50 * torch.randn(2, 4, 3)], 1)
        tp = torch.cat([t, t[:, -1:] + torch.arange(1, 5)], 1)
        mp = torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], 1)
        yp = model(xp, tp, mp)
        kw = {"topk_method": "exact"} if name == "nac" else {}
        if name == "nac":  # Algorithm 2's block size depends on the padded length: compare exact Top-K
            model = _build(name, **kw).eval()
            y, yp = model(x, t, mask), model(xp, tp, mp)
        assert torch.allclose(y, yp, atol=1e-4), (y - yp).abs().max()
        y2 = model(x, 2 * t, mask)
    if name in CT:
        assert not torch.allclose(y, y2, atol=1e-6)
    else:
        assert torch.allclose(y, y2)
    per_step = _build(name, per_step=True)
    assert per_step(x, t, mask).shape == (2, 9, 4)


@pytest.mark.parametrize("name", NAMES)
def test_bad_shapes_get_one_clear_sentence(name):
    model = _build(name)
    x, t, mask = _batch()
    with pytest.raises(ValueError, match=r"\(B, T, 3\)"):
        model(x[..., :2], t, mask)
    with pytest.raises(ValueError, match="timestamps"):
        model(x, t[:, :3], mask)
    with pytest.raises(ValueError, match="mask"):
        model(x, t, mask[:, :3])


def test_nac_save_load_round_trip_with_released_compat(tmp_path):
    model = _build("nac", compat="released", mode="euler", topk=None)
    assert model.nac.opt.tied_heads and model.nac.opt.euler_dt == 0.5
    save(model, tmp_path / "m.pt")
    again = load(tmp_path / "m.pt")
    x, t, mask = _batch()
    assert torch.allclose(model(x, t, mask), again(x, t, mask))
    assert again.config.compat == "released" and again.config.topk is None


def test_nac_per_step_tokens_are_length_one_sequences():
    model = _build("nac", token_mode="per_step", per_step=True, conv_channels=()).eval()
    x, t, mask = _batch(B=1, T=5)
    with torch.no_grad():
        y = model(x, t, mask)
        alone = torch.cat([model(x[:, i:i + 1], t[:, i:i + 1]) for i in range(5)], 1)
    assert torch.allclose(y, alone, atol=1e-5)


def test_nac_explicit_options_override_compat():
    m = _build("nac", compat="released", tied_heads=False, backbone_unfolds=3)
    assert not m.nac.opt.tied_heads and m.nac.opt.backbone_unfolds == 3 and m.nac.opt.dense_sensory
