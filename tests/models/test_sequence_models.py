"""Sequence models (NAC and the baselines): shapes, masks, timestamps, registry round trip; NAC's profiles and
options section, its old flat checkpoints, and the published protocol of the sequence presets' paper scales."""

import dataclasses
import math

import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.models import build, load, save
from neurodyn.models.nac import NACConfig
from neurodyn.models.registry import make_config
from neurodyn.nn import nac as nac_layer
from neurodyn.nn.nac import PAPER, RELEASED, TUNED, NACOptions

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
        kw = {"options": {"topk_method": "exact"}} if name == "nac" else {}
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
        alone = torch.cat([model(x[:, i : i + 1], t[:, i : i + 1]) for i in range(5)], 1)
    assert torch.allclose(y, alone, atol=1e-5)


def test_nac_explicit_options_override_compat():
    m = _build("nac", compat="released", options={"tied_heads": False, "backbone_unfolds": 3})
    assert not m.nac.opt.tied_heads and m.nac.opt.backbone_unfolds == 3 and m.nac.opt.dense_sensory
    assert m.config.options == m.nac.opt  # the config holds every resolved value


def test_nac_without_timestamps_ignores_them():
    """use_time=False: t_sample = 1, as the released scripts (which pass no timestamps) and the paper's "tasks
    without meaningful timing" (§2.2)."""
    model = _build("nac", use_time=False).eval()
    x, t, mask = _batch()
    with torch.no_grad():
        torch.testing.assert_close(model(x, t, mask), model(x, 3 * t, mask))
        torch.testing.assert_close(model(x, t, mask), model(x, None, mask))


# ---------------------------------------------------------------------------------------- NAC's config
def test_nac_options_section_takes_the_profile_and_an_override_wins():
    for compat, table in (("paper", PAPER), ("released", RELEASED), ("tuned", TUNED)):
        assert make_config("nac", compat=compat).options == table
        cfg = make_config("nac", {"compat": compat, "options": {"time_horizon": 5, "pair_time": "key"}})
        assert cfg.options == dataclasses.replace(table, time_horizon=5.0, pair_time="key")
    # an override equal to another profile's value stays (T = 1 is the paper's, not the tuned profile's)
    assert make_config("nac", compat="tuned", options={"time_horizon": 1.0}).options.time_horizon == 1.0
    # through a preset and the command line
    cfg = load_experiment("nac/event_digits", "tiny", ["model.compat=tuned", "model.options.time_horizon=5"])
    m = dict(cfg["model"])
    model = build(m.pop("name"), m, in_channels=2, out_channels=10)
    assert model.nac.time_horizon == 5.0 and model.nac.opt.ncp_init == "fan_in" and model.config.compat == "tuned"


def test_nac_flat_option_keys_get_the_key_they_moved_to():
    with pytest.raises(ConfigError, match=r"model.time_horizon -> model.options.time_horizon"):
        make_config("nac", {"time_horizon": 5})
    bad = load_experiment("nac/event_digits", "tiny", ["model.ncp_init=glorot"])
    with pytest.raises(ConfigError, match=r"model.ncp_init -> model.options.ncp_init"):
        build("nac", {k: v for k, v in bad["model"].items() if k != "name"})
    with pytest.raises(ConfigError, match=r"section 'options' has no config field 'time_horizn'"):
        make_config("nac", {"options": {"time_horizn": 5}})
    with pytest.raises(ConfigError, match=r"NAC option time_horizon='abc' is not a number"):
        make_config("nac", {"options": {"time_horizon": "abc"}})
    with pytest.raises(ConfigError, match="compat"):
        make_config("nac", compat="tf")


def test_nac_config_is_small_and_every_field_documented_in_one_line_with_its_default():
    top = dataclasses.fields(NACConfig)
    assert len(top) <= 25
    for cls in (NACConfig, NACOptions):
        doc = cls.__doc__
        for f in dataclasses.fields(cls):
            lines = [line.strip() for line in doc.splitlines() if line.strip().startswith(f"{f.name} (")]
            assert len(lines) == 1, f"{cls.__name__}.{f.name} is not documented in one line"
            if f.default is not dataclasses.MISSING:
                said = lines[0].replace('"', "'")
                assert f", {f.default!r})" in said, f"{cls.__name__}.{f.name}: default {f.default!r} not given"


def test_a_saved_nac_config_holds_every_option_so_later_profiles_do_not_change_it(tmp_path, monkeypatch):
    model = _build("nac")
    save(model, tmp_path / "m.pt")
    saved = torch.load(tmp_path / "m.pt", weights_only=True)["model"]["config"]
    assert None not in saved["options"].values()
    monkeypatch.setitem(nac_layer.PROFILE_OPTIONS, "paper", RELEASED)  # a later release changes the profile
    again = load(tmp_path / "m.pt")
    assert again.config.options == PAPER
    x, t, mask = _batch()
    torch.testing.assert_close(again(x, t, mask), model(x, t, mask))


# ---------------------------------------------------------------------------------------- presets
# NAC paper Table 4 (App. D.3), per task: NAC width / heads (baselines: RNN units = d_model, attention the same
# d_model and heads, "Baselines Hyperparameters Clarification"), conv widths, dense widths, optimizer, lr, batch,
# epochs.
TABLE4 = {
    "event_digits": dict(d_model=64, heads=8, conv=[64, 64], dense=[32], opt="adamw", lr=1e-3, batch=32, epochs=150),
    "activity": dict(d_model=32, heads=4, conv=[64, 64], dense=[32], opt="adamw", lr=1e-3, batch=20, epochs=500),
    "bearing": dict(d_model=16, heads=8, conv=[32, 16], dense=[], opt="adamw", lr=1e-3, batch=32, epochs=150),
}
# §3.1 / D.3: MNIST 60,000 / 10,000; PAR split 9:1; the bearing split by operating condition (§3.3)
SPLITS = {"event_digits": (60000, 10000), "activity": (2304, 256)}


@pytest.mark.parametrize("task", sorted(TABLE4))
@pytest.mark.parametrize("name", NAMES)
def test_paper_scale_of_the_sequence_presets_is_the_published_protocol(name, task):
    cfg = load_experiment(f"{name}/{task}", "paper")
    want, m, tr, d = TABLE4[task], cfg["model"], cfg["train"], cfg["data"]
    assert (tr["optimizer"], tr["lr"], tr["batch_size"], tr["epochs"]) == (
        want["opt"],
        want["lr"],
        want["batch"],
        want["epochs"],
    )
    assert tr.get("schedule", {}).get("name", "none") == "none" and not tr.get("grad_clip")
    assert list(m["conv_channels"]) == want["conv"] and list(m["dense"]) == want["dense"]
    if name == "nac":
        assert (m["d_model"], m["n_heads"], m["mode"], m["topk"], m["sparsity"]) == (
            want["d_model"],
            want["heads"],
            "exact",
            8,
            0.5,
        )  # NAC-Exact/05s/8k (Table 1, §3.5)
        assert m["compat"] == "paper" and not m.get("options")
    else:
        assert m["hidden"] == want["d_model"]
        if name == "mha":
            assert m["n_heads"] == want["heads"]
    assert d.get("n_val", "auto") == "auto"  # the paper states no validation split
    if task in SPLITS:
        assert (d["n_train"], d["n_test"]) == SPLITS[task]
    else:
        assert (d["split_param"], list(d["train_values"])) == ("condition", [0])


@pytest.mark.parametrize("norm", ["batch", "layer"])
@pytest.mark.parametrize("name", ["gru", "nac"])
def test_normalised_front_end_ignores_padding_in_training_and_in_eval(name, norm):
    model = _build(name, conv_channels=(6, 5), conv_norm=norm)
    x, t, mask = _batch()
    xp = torch.cat([x, 50 * torch.randn(2, 4, 3)], 1)
    tp = torch.cat([t, t[:, -1:] + torch.arange(1, 5)], 1)
    mp = torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], 1)
    kw = {"options": {"topk_method": "exact"}} if name == "nac" else {}
    for train in (True, False):  # batch statistics (training) and running statistics (eval)
        model = _build(name, conv_channels=(6, 5), conv_norm=norm, **kw).train(train)
        with torch.no_grad():
            torch.testing.assert_close(model(x, t, mask), model(xp, tp, mp), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["gru", "nac", "cfc", "mha", "odernn"])
def test_a_strided_front_end_ignores_padding_and_gives_the_core_the_steps_it_centres_on(name):
    """Convs of stride s: the core reads ceil(T / s) per conv, with the timestamps and mask of the steps its outputs
    are centred on; a sequence padded with more steps gives the same outputs (batch norm in eval)."""
    kw = {"options": {"topk_method": "exact"}} if name == "nac" else {}
    model = _build(name, conv_channels=(6, 5), conv_norm="batch", conv_stride=2, pool="mean", **kw).eval()
    x, t, mask = _batch(T=11)
    mask[-1, 7:] = False
    seen = {}
    model.core = (lambda core: lambda z, tt, mm: seen.update(z=z, t=tt, m=mm) or core(z, tt, mm))(model.core)
    with torch.no_grad():
        out = model(x, t, mask)
    assert seen["z"].shape[1] == 3  # 11 -> 6 -> 3
    torch.testing.assert_close(seen["t"], t[:, ::4])
    assert seen["m"].tolist() == [[True] * 3, [True, True, False]]  # 7 real steps -> 4 -> 2
    xp = torch.cat([x, 50 * torch.randn(2, 5, 3)], 1)
    tp = torch.cat([t, t[:, -1:] + torch.arange(1, 6)], 1)
    mp = torch.cat([mask, torch.zeros(2, 5, dtype=torch.bool)], 1)
    with torch.no_grad():
        torch.testing.assert_close(model(xp, tp, mp), out, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["gru", "nac"])
def test_series_input_norm_standardises_each_series_and_keeps_its_amplitude_as_a_channel(name):
    """input_norm=series: each series over its real steps to mean 0, sd 1, per channel, with log(sd) appended; a
    series scaled by 1000 differs in that channel alone (log 1000), and padding takes no part."""
    kw = {"options": {"topk_method": "exact"}} if name == "nac" else {}
    model = _build(name, conv_channels=(6,), conv_norm="batch", input_norm="series", pool="mean", **kw).eval()
    assert model.front[0].in_channels == 6  # 3 channels and their 3 log-amplitudes
    x, t, mask = _batch(T=12)
    z = model.per_series(x, mask)
    for b, n in enumerate(mask.sum(1).tolist()):
        real = z[b, :n, :3]
        torch.testing.assert_close(real.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
        torch.testing.assert_close(real.std(0, unbiased=False), torch.ones(3), atol=1e-4, rtol=0)
        torch.testing.assert_close(z[b, :n, 3:], x[b, :n].std(0, unbiased=False).log().expand(n, 3), atol=1e-4, rtol=0)
        assert (z[b, n:] == 0).all()
    big = model.per_series(1000 * x, mask)
    torch.testing.assert_close(big[..., :3], z[..., :3], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close((big - z)[..., 3:][mask], torch.full_like(z[..., 3:][mask], math.log(1000)))
    xp = torch.cat([x, 50 * torch.randn(2, 4, 3)], 1)
    tp = torch.cat([t, t[:, -1:] + torch.arange(1, 5)], 1)
    mp = torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], 1)
    with torch.no_grad():
        torch.testing.assert_close(model(xp, tp, mp), model(x, t, mask), atol=1e-4, rtol=1e-4)
    with pytest.raises(ConfigError, match="input_norm"):
        _build(name, input_norm="batch", **kw)


def test_conv_strides_one_per_conv_auto_and_refusals():
    from neurodyn.nn.sequence_host import auto_strides, describe_front_end, resolve_conv_stride

    model = _build("gru", conv_channels=(6, 5, 4), conv_stride=[4, 2, 1])
    assert [m.stride[0] for m in model.front if isinstance(m, torch.nn.Conv1d)] == [4, 2, 1]
    assert model(*_batch(T=17)).shape == (2, 4)
    assert describe_front_end(model.cfg, 1460) == "the front end's strides 4x2x1: the core reads 183 steps"
    assert describe_front_end(_build("gru").cfg, 1460) == ""
    # auto: none up to core_steps, else the smallest common stride that leaves at most core_steps
    assert auto_strides(3, 256) == (1, 1, 1) and auto_strides(3, 257) == (2, 2, 2)
    assert auto_strides(3, 1460) == (2, 2, 2) and auto_strides(3, 1460, 32) == (4, 4, 4)
    assert auto_strides(3, 427, 32) == (3, 3, 3) and auto_strides(0, 5000) == ()
    section = {"name": "gru", "conv_channels": [8, 8, 8], "conv_stride": "auto", "core_steps": 100}
    assert resolve_conv_stride(section, 1344)["conv_stride"] == [3, 3, 3]
    assert resolve_conv_stride({**section, "conv_stride": 2}, 1344)["conv_stride"] == 2
    assert _build("gru", conv_channels=(6,), conv_stride="auto").cfg.strides() == (1,)  # built without data
    with pytest.raises(ConfigError, match="one per conv"):
        _build("gru", conv_channels=(6, 5), conv_stride=[2])
    with pytest.raises(ConfigError, match="per-step targets"):
        _build("gru", conv_channels=(6,), conv_stride=2, per_step=True)
    for bad in (0, "fast", 1.5):
        with pytest.raises(ConfigError, match="conv_stride"):
            _build("gru", conv_channels=(6,), conv_stride=bad)
    with pytest.raises(ConfigError, match="core_steps"):
        _build("gru", core_steps=0)


def test_batch_norm_of_the_front_end_standardises_over_the_valid_steps_only():
    model = _build("gru", conv_channels=(6,), conv_norm="batch").train()
    x, _, mask = _batch()
    conv, norm = model.front[0], model.front[1].norm
    with torch.no_grad():
        z = model.front(x * mask[..., None], mask)  # (B, T, 6)
        raw = conv((x * mask[..., None]).transpose(1, 2)).transpose(1, 2)[mask]  # the valid steps, (N, 6)
        mu, var = raw.mean(0), raw.var(0, unbiased=False)
        want = torch.relu((raw - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias)
    torch.testing.assert_close(z[mask], want, atol=1e-5, rtol=1e-5)
    assert (z[~mask] == 0).all()
    torch.testing.assert_close(norm.running_mean, 0.1 * mu)  # momentum 0.1 from 0: the valid steps' mean


def test_conv_norm_none_keeps_the_front_end_layout_of_older_checkpoints():
    assert list(_build("gru", conv_channels=(6, 5)).state_dict()).count("front.2.weight") == 1
    assert "front.1.norm.weight" in _build("gru", conv_channels=(6, 5), conv_norm="layer").state_dict()
    with pytest.raises(ConfigError, match="conv_norm"):
        _build("gru", conv_norm="group")
