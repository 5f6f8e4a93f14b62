"""The shared SSM section of the model configs (``model.ssm``): nested building, the moved flat keys, presets,
checkpoints (plain dicts, ``weights_only=True``) and parameter counts that do not depend on the layout."""
import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.models.registry import make_config, upgrade_config
from neurodyn.nn.ssm_config import SSMConfig

SSM_MODELS = ("lamo", "geomano", "chonn1d", "chonn_unet", "chonn_fno", "chonn_vision")


@pytest.mark.parametrize("name", SSM_MODELS)
def test_nested_mapping_updates_the_models_own_defaults(name):
    default = make_config(name).ssm
    cfg = make_config(name, {"ssm": {"d_state": 3}})
    assert isinstance(cfg.ssm, SSMConfig) and cfg.ssm.d_state == 3
    assert (cfg.ssm.expand, cfg.ssm.d_conv) == (default.expand, default.d_conv)
    assert make_config(name, cfg, ssm={"expand": 2}).ssm == SSMConfig(3, 2, default.d_conv)


@pytest.mark.parametrize("name", SSM_MODELS)
def test_a_flat_key_gets_one_error_naming_where_it_moved(name):
    with pytest.raises(ConfigError, match=r"model.d_state -> model.ssm.d_state"):
        make_config(name, {"d_state": 4})
    with pytest.raises(ConfigError, match=r"section 'ssm' has no config field 'd_stat' \(did you mean 'd_state'"):
        make_config(name, {"ssm": {"d_stat": 4}})


def test_geomano_kind_moved_to_ssm_kind():
    with pytest.raises(ConfigError, match=r"belongs in the field 'ssm_kind' \(model.ssm_kind=1d\)"):
        make_config("geomano", {"ssm": "1d"})
    assert make_config("geomano", {"ssm_kind": "1d"}).ssm_kind == "1d"


def test_preset_overrides_address_the_section():
    cfg = load_experiment("lamo/darcy", "tiny", ["model.ssm.d_conv=5"])
    assert cfg["model"]["ssm"] == {"d_state": 4, "expand": 2, "d_conv": 5}
    m = dict(cfg["model"])
    assert ndm.build(m.pop("name"), m).config.ssm == SSMConfig(4, 2, 5)
    bad = load_experiment("lamo/darcy", "tiny", ["model.d_state=8"])
    with pytest.raises(ConfigError, match=r"model.d_state -> model.ssm.d_state"):
        ndm.build("lamo", {k: v for k, v in bad["model"].items() if k != "name"})


def test_checkpoint_roundtrip_and_old_flat_checkpoints(tmp_path):
    torch.manual_seed(0)
    m = ndm.build("chonn1d", orders=(2,), width=8, ssm={"d_state": 3})
    ndm.save(m, tmp_path / "m.pt")
    raw = torch.load(tmp_path / "m.pt", weights_only=True)
    assert raw["model"]["config"]["ssm"] == {"d_state": 3, "expand": 1.0, "d_conv": 3}
    back = ndm.load(tmp_path / "m.pt")
    assert back.config == m.config and ndm.count_parameters(back) == ndm.count_parameters(m)
    old = {k: v for k, v in raw["model"]["config"].items() if k != "ssm"}
    old.update(d_state=3, expand=1.0, d_conv=3)
    assert upgrade_config("chonn1d", old) == raw["model"]["config"] | {"orders": [2]}   # merge was saved
    # (a GeoMaNO config that does not name correction_form / gate predates their paper defaults: the old values)
    assert upgrade_config("geomano", {"ssm": "1d", "d_state": 4}) == {"ssm_kind": "1d", "ssm": {"d_state": 4},
                                                                      "correction_form": "cbx", "gate": "split"}


def test_chonn_checkpoint_saved_before_the_merge_option_loads_with_summed_directions(tmp_path):
    """A config saved before ``merge`` existed meant summed directions; today's default (mean) would rebuild a
    different function from the same weights."""
    torch.manual_seed(0)
    old_model = ndm.build("chonn1d", orders=(3,), width=8, scan="bi", merge="sum")
    ndm.save(old_model, tmp_path / "old.pt")
    raw = torch.load(tmp_path / "old.pt", weights_only=True)
    del raw["model"]["config"]["merge"]                      # as written before merge existed
    torch.save(raw, tmp_path / "old.pt")
    back = ndm.load(tmp_path / "old.pt")
    assert back.config.merge == "sum"
    x = torch.randn(2, 32, 1)
    torch.testing.assert_close(back(x), old_model(x))
    assert ndm.build("chonn1d", orders=(3,), width=8, scan="bi").config.merge == "mean"   # new models: mean
