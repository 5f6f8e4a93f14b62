"""The SSM section of the model configs (``model.ssm``): nested building, a section's key given at the top level
(refused with the key it belongs under), presets, checkpoints (plain dicts, ``weights_only=True``) and parameter
counts that do not depend on the layout."""

import dataclasses

import pytest
import torch
import yaml

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.models.registry import make_config
from neurodyn.nn.ssm_config import SSMConfig

SSM_MODELS = ("lamo", "geomano", "chonn1d", "chonn_unet", "chonn_fno", "chonn_vision")


@pytest.mark.parametrize("name", SSM_MODELS)
def test_nested_mapping_updates_the_models_own_defaults(name):
    default = make_config(name).ssm
    cfg = make_config(name, {"ssm": {"d_state": 3}})
    assert isinstance(cfg.ssm, SSMConfig) and cfg.ssm.d_state == 3
    assert (cfg.ssm.expand, cfg.ssm.d_conv) == (default.expand, default.d_conv)
    assert make_config(name, cfg, ssm={"expand": 2}).ssm == dataclasses.replace(default, d_state=3, expand=2)


@pytest.mark.parametrize("name", SSM_MODELS)
def test_a_flat_key_gets_one_error_naming_where_it_moved(name):
    with pytest.raises(ConfigError, match=r"model.d_state -> model.ssm.d_state"):
        make_config(name, {"d_state": 4})
    with pytest.raises(ConfigError, match=r"section 'ssm' has no config field 'd_stat' \(did you mean 'd_state'"):
        make_config(name, {"ssm": {"d_stat": 4}})


def test_preset_overrides_address_the_section():
    cfg = load_experiment("lamo/darcy", "tiny", ["model.ssm.d_conv=5"])
    assert {k: cfg["model"]["ssm"][k] for k in ("d_state", "expand", "d_conv")} == {
        "d_state": 4,
        "expand": 2,
        "d_conv": 5,
    }
    m = dict(cfg["model"])
    ssm = ndm.build(m.pop("name"), m).config.ssm
    assert (ssm.d_state, ssm.expand, ssm.d_conv, ssm.heads, ssm.norm) == (4, 2, 5, 1, "none")
    bad = load_experiment("lamo/darcy", "tiny", ["model.d_state=8"])
    with pytest.raises(ConfigError, match=r"model.d_state -> model.ssm.d_state"):
        ndm.build("lamo", {k: v for k, v in bad["model"].items() if k != "name"})


def test_checkpoint_roundtrip(tmp_path):
    torch.manual_seed(0)
    m = ndm.build("chonn1d", orders=(2,), width=8, ssm={"d_state": 3})
    ndm.save(m, tmp_path / "m.pt")
    raw = torch.load(tmp_path / "m.pt", weights_only=True)
    assert raw["model"]["config"]["ssm"] == {
        "d_state": 3,
        "expand": 1.0,
        "d_conv": 3,
        "discretization": "zoh",
        "dt_rank": "auto",
        "combine": "mean",
        "selective": True,
        "coef_norm": "none",
        "backend": "auto",
    }
    back = ndm.load(tmp_path / "m.pt")
    assert back.config == m.config and ndm.count_parameters(back) == ndm.count_parameters(m)


# ------------------------------------------------------------------------------------------------
# every scan option in the section: the flat keys of before are refused in a new config (with the key they moved
# to) and moved on load in a checkpoint or a run folder


@pytest.mark.parametrize(
    "name, old, value, new",
    [
        ("lamo", "heads", 4, "ssm.heads"),
        ("lamo", "backend", "torch", "ssm.backend"),
        ("lamo", "dt_mode", "channel", "ssm.dt_mode"),
        ("geomano", "combine", "mean", "ssm.combine"),
        ("geomano", "correction", "learnable", "ssm.correction"),
        ("chonn1d", "combine", "sum", "ssm.combine"),
        ("chonn_fno", "discretization", "euler", "ssm.discretization"),
        ("chonn_unet", "coef_norm", "rms", "ssm.coef_norm"),
    ],
)
def test_a_moved_scan_option_gets_one_error_naming_its_new_key(name, old, value, new):
    with pytest.raises(ConfigError, match=rf"model.{old} -> model.{new}\b"):
        make_config(name, {old: value})
    assert make_config(name, {"ssm": {new.split(".")[1]: value}}) is not None  # the new spelling builds


def test_moved_keys_in_an_override_or_a_config_file_are_refused_before_any_data(tmp_path):
    from neurodyn.train.experiment import check_config

    cfg = load_experiment("lamo/darcy", "tiny", ["model.heads=4"])
    with pytest.raises(ConfigError, match=r"model.heads -> model.ssm.heads \(in a preset: 'ssm: \{heads: \.\.\.\}'\)"):
        check_config(cfg)
    # a config file (YAML) with a section's key at the top level
    path = tmp_path / "old.yaml"
    path.write_text(
        yaml.safe_dump({**load_experiment("lamo/darcy", "tiny"), "model": {"name": "lamo", "backend": "auto"}})
    )
    with pytest.raises(ConfigError, match=r"model.backend -> model.ssm.backend"):
        check_config(yaml.safe_load(path.read_text()))
    assert check_config(load_experiment("lamo/darcy", "tiny", ["model.ssm.heads=4"])) is not None


def test_the_section_validates_every_scan_option():
    for name, ssm, needle in (
        ("lamo", {"layout": "mamba3"}, "ssm.layout"),
        ("lamo", {"heads": 3, "groups": 2}, "divisible by ssm.groups"),
        ("lamo", {"backend": "gpu"}, "ssm.backend"),
        ("lamo", {"dt_range": [0.1, 0.01]}, "ssm.dt_range"),
        ("geomano", {"combine": "max"}, "ssm.combine"),
        ("geomano", {"dt_rank": -1}, "dt_rank"),
        ("chonn1d", {"coef_norm": "l2"}, "ssm.coef_norm"),
    ):
        with pytest.raises(ConfigError, match=needle):
            make_config(name, {"ssm": ssm})


# model sections as the protocol run folders of the protocol runs stored them (written before the
# section held every scan option), and the preset + overrides that make the same run today
FLAT_RUNS = {
    "lamo": (
        {
            "name": "lamo",
            "variant": "grid",
            "width": 32,
            "n_layers": 4,
            "mlp_ratio": 4,
            "ssm": {"d_state": 16, "expand": 2, "d_conv": 3},
            "ssm_heads": 4,
            "dt_mode": "head",
            "directions": "cross",
            "ssm_layout": "x_proj",
            "ssm_norm": "layernorm",
            "ssm_act": "silu",
            "a_init_range": [1.0, 16.0],
            "dt_range": [0.001, 0.1],
            "patch_size": 2,
            "pad_multiple": 2,
            "positional_grid": True,
        },
        "lamo/darcy",
        "cpu",
        [],
    ),
    "geomano": (
        {
            "name": "geomano",
            "width": 53,
            "n_layers": 4,
            "ssm": {"d_state": 16, "expand": 1},
            "mlp_ratio": 1,
            "ssm_kind": "2d",
            "directions": "paper",
            "correction": "fixed",
            "r_pattern": "0011",
            "r_order": "paper",
            "correction_form": "eq9",
            "gate": "shared",
            "d_mode": "channel",
            "pos_embed": False,
            "latent_grid": [8, 8],
            "assign_prior": 0.0,
            "positional_grid": True,
        },
        "geomano/darcy",
        "cpu",
        ["model.assign_prior=0.0", "model.ssm.correction_form=eq9", "model.ssm.gate=shared", "model.width=53"],
    ),
    "chonn1d": (
        {
            "name": "chonn1d",
            "width": 16,
            "orders": [1, 1, 1],
            "ssm": {"d_state": 8, "expand": 1.0, "d_conv": 3},
            "scan": "bi",
            "discretization": "zoh",
            "merge": "sum",
        },
        "chonn1d/order1d",
        "paper",
        ["model.orders=[1,1,1]"],
    ),
}


@pytest.mark.parametrize("name", SSM_MODELS)
def test_the_shared_sizes_as_a_dataclass_update_the_models_own_section(name):
    default = make_config(name).ssm
    cfg = make_config(name, ssm=SSMConfig(d_state=3, expand=default.expand, d_conv=default.d_conv))
    assert cfg.ssm == dataclasses.replace(default, d_state=3)
