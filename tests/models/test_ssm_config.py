"""The SSM section of the model configs (``model.ssm``): nested building, the moved flat keys (refused in a new
config with the key they moved to; moved on load in a checkpoint or a run folder), presets, checkpoints (plain
dicts, ``weights_only=True``) and parameter counts that do not depend on the layout."""
import dataclasses
import json
import shutil

import pytest
import torch
import yaml

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
    assert make_config(name, cfg, ssm={"expand": 2}).ssm == dataclasses.replace(default, d_state=3, expand=2)


@pytest.mark.parametrize("name", SSM_MODELS)
def test_a_flat_key_gets_one_error_naming_where_it_moved(name):
    with pytest.raises(ConfigError, match=r"model.d_state -> model.ssm.d_state"):
        make_config(name, {"d_state": 4})
    with pytest.raises(ConfigError, match=r"section 'ssm' has no config field 'd_stat' \(did you mean 'd_state'"):
        make_config(name, {"ssm": {"d_stat": 4}})


def test_geomano_kind_moved_to_ssm_kind():
    with pytest.raises(ConfigError, match=r"belongs in the field 'ssm.kind' \(model.ssm.kind=1d\)"):
        make_config("geomano", {"ssm": "1d"})
    with pytest.raises(ConfigError, match=r"model.ssm_kind -> model.ssm.kind"):
        make_config("geomano", {"ssm_kind": "1d"})
    assert make_config("geomano", {"ssm": {"kind": "1d"}}).ssm.kind == "1d"


def test_preset_overrides_address_the_section():
    cfg = load_experiment("lamo/darcy", "tiny", ["model.ssm.d_conv=5"])
    assert {k: cfg["model"]["ssm"][k] for k in ("d_state", "expand", "d_conv")} == {"d_state": 4, "expand": 2,
                                                                                     "d_conv": 5}
    m = dict(cfg["model"])
    ssm = ndm.build(m.pop("name"), m).config.ssm
    assert (ssm.d_state, ssm.expand, ssm.d_conv, ssm.heads, ssm.norm) == (4, 2, 5, 1, "none")
    bad = load_experiment("lamo/darcy", "tiny", ["model.d_state=8"])
    with pytest.raises(ConfigError, match=r"model.d_state -> model.ssm.d_state"):
        ndm.build("lamo", {k: v for k, v in bad["model"].items() if k != "name"})


def test_checkpoint_roundtrip_and_old_flat_checkpoints(tmp_path):
    torch.manual_seed(0)
    m = ndm.build("chonn1d", orders=(2,), width=8, ssm={"d_state": 3})
    ndm.save(m, tmp_path / "m.pt")
    raw = torch.load(tmp_path / "m.pt", weights_only=True)
    assert raw["model"]["config"]["ssm"] == {"d_state": 3, "expand": 1.0, "d_conv": 3, "discretization": "zoh",
                                             "dt_rank": "auto", "combine": "mean", "selective": True,
                                             "coef_norm": "none", "backend": "auto"}
    back = ndm.load(tmp_path / "m.pt")
    assert back.config == m.config and ndm.count_parameters(back) == ndm.count_parameters(m)
    # the flat layout of before the section: every cell option at the top level, the merge under its old name
    old = {k: v for k, v in raw["model"]["config"].items() if k != "ssm"}
    old.update(d_state=3, expand=1.0, d_conv=3, discretization="zoh", dt_rank="auto", merge="mean", selective=True,
               coef_norm="none")
    # (the cells' backend came later than the flat layout: an old config leaves it to its default)
    saved = raw["model"]["config"] | {"orders": [2]}
    saved["ssm"] = {k: v for k, v in saved["ssm"].items() if k != "backend"}
    assert upgrade_config("chonn1d", old) == saved   # merge was saved
    # (a GeoMaNO config that does not name correction_form / gate predates their paper defaults: the old values)
    assert upgrade_config("geomano", {"ssm": "1d", "d_state": 4}) == {
        "ssm": {"kind": "1d", "d_state": 4, "correction_form": "cbx", "gate": "split"}}


def test_chonn_checkpoint_saved_before_the_merge_option_loads_with_summed_directions(tmp_path):
    """A config saved before ``merge`` existed meant summed directions; today's default (mean) would rebuild a
    different function from the same weights."""
    torch.manual_seed(0)
    old_model = ndm.build("chonn1d", orders=(3,), width=8, scan="bi", ssm={"combine": "sum"})
    ndm.save(old_model, tmp_path / "old.pt")
    raw = torch.load(tmp_path / "old.pt", weights_only=True)
    del raw["model"]["config"]["ssm"]["combine"]              # as written before merge existed
    torch.save(raw, tmp_path / "old.pt")
    back = ndm.load(tmp_path / "old.pt")
    assert back.config.ssm.combine == "sum"
    x = torch.randn(2, 32, 1)
    torch.testing.assert_close(back(x), old_model(x))
    assert ndm.build("chonn1d", orders=(3,), width=8, scan="bi").config.ssm.combine == "mean"   # new models: mean


# ------------------------------------------------------------------------------------------------
# every scan option in the section: the flat keys of before are refused in a new config (with the key they moved
# to) and moved on load in a checkpoint or a run folder


@pytest.mark.parametrize("name, old, value, new", [
    ("lamo", "ssm_heads", 4, "ssm.heads"), ("lamo", "scan_backend", "torch", "ssm.backend"),
    ("lamo", "dt_mode", "channel", "ssm.dt_mode"), ("lamo", "ssm_norm", "none", "ssm.norm"),
    ("geomano", "merge", "mean", "ssm.combine"), ("geomano", "kernel_act", "gelu", "ssm.act"),
    ("geomano", "correction", "learnable", "ssm.correction"), ("chonn1d", "merge", "sum", "ssm.combine"),
    ("chonn_fno", "discretization", "euler", "ssm.discretization"), ("chonn_unet", "coef_norm", "rms", "ssm.coef_norm"),
])
def test_a_moved_scan_option_gets_one_error_naming_its_new_key(name, old, value, new):
    with pytest.raises(ConfigError, match=rf"model.{old} -> model.{new}\b"):
        make_config(name, {old: value})
    assert make_config(name, {"ssm": {new.split(".")[1]: value}}) is not None   # the new spelling builds


def test_moved_keys_in_an_override_or_a_config_file_are_refused_before_any_data(tmp_path):
    from neurodyn.train.experiment import check_config

    cfg = load_experiment("lamo/darcy", "tiny", ["model.ssm_heads=4"])
    with pytest.raises(ConfigError,
                       match=r"model.ssm_heads -> model.ssm.heads \(in a preset: 'ssm: \{heads: \.\.\.\}'\)"):
        check_config(cfg)
    # a config file (YAML) written in the old layout
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({**load_experiment("lamo/darcy", "tiny"), "model": {"name": "lamo",
                                                                                    "scan_backend": "auto"}}))
    with pytest.raises(ConfigError, match=r"model.scan_backend -> model.ssm.backend"):
        check_config(yaml.safe_load(path.read_text()))
    assert check_config(load_experiment("lamo/darcy", "tiny", ["model.ssm.heads=4"])) is not None


def test_the_section_validates_every_scan_option():
    for name, ssm, needle in (("lamo", {"layout": "mamba3"}, "ssm.layout"), ("lamo", {"heads": 3, "groups": 2},
                              "divisible by ssm.groups"), ("lamo", {"backend": "gpu"}, "ssm.backend"),
                              ("lamo", {"dt_range": [0.1, 0.01]}, "ssm.dt_range"),
                              ("geomano", {"combine": "max"}, "ssm.combine"), ("geomano", {"dt_rank": -1}, "dt_rank"),
                              ("chonn1d", {"coef_norm": "l2"}, "ssm.coef_norm")):
        with pytest.raises(ConfigError, match=needle):
            make_config(name, {"ssm": ssm})


# model sections as the protocol run folders under benchmarks/results/protocol store them (written before the
# section held every scan option), and the preset + overrides that make the same run today
FLAT_RUNS = {
    "lamo": ({"name": "lamo", "variant": "grid", "width": 32, "n_layers": 4, "mlp_ratio": 4,
              "ssm": {"d_state": 16, "expand": 2, "d_conv": 3}, "ssm_heads": 4, "dt_mode": "head",
              "directions": "cross", "ssm_layout": "x_proj", "ssm_norm": "layernorm", "ssm_act": "silu",
              "a_init_range": [1.0, 16.0], "dt_range": [0.001, 0.1], "patch_size": 2, "pad_multiple": 2,
              "positional_grid": True}, "lamo/darcy", "cpu", []),
    "geomano": ({"name": "geomano", "width": 53, "n_layers": 4, "ssm": {"d_state": 16, "expand": 1}, "mlp_ratio": 1,
                 "ssm_kind": "2d", "directions": "paper", "correction": "fixed", "r_pattern": "0011",
                 "r_order": "paper", "correction_form": "eq9", "gate": "shared", "d_mode": "channel",
                 "pos_embed": False, "latent_grid": [8, 8], "assign_prior": 0.0, "positional_grid": True},
                "geomano/darcy", "cpu", ["model.assign_prior=0.0", "model.ssm.correction_form=eq9",
                                         "model.ssm.gate=shared", "model.width=53"]),
    "chonn1d": ({"name": "chonn1d", "width": 16, "orders": [1, 1, 1], "ssm": {"d_state": 8, "expand": 1.0, "d_conv": 3},
                 "scan": "bi", "discretization": "zoh", "merge": "sum"}, "chonn1d/order1d", "paper",
                ["model.orders=[1,1,1]"]),
}


@pytest.mark.parametrize("name", sorted(FLAT_RUNS))
def test_a_run_folder_written_before_the_move_resumes_and_rebuilds_the_same_model(tmp_path, name):
    """The stored config.yaml of a run folder in the old flat layout compares equal to today's spelling of the same
    run (the resume check moves its keys first), and a change is still refused; its checkpoint's flat config
    rebuilds the model it trained (same state_dict keys, same outputs)."""
    from neurodyn.train.checkpoint import check_resume_config

    flat, preset, scale, overrides = FLAT_RUNS[name]
    today = load_experiment(preset, scale, overrides)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(b"")
    (run / "config.yaml").write_text(yaml.safe_dump({**today, "model": flat}, sort_keys=False))
    check_resume_config(json.loads(json.dumps(today)), run)                       # resumes: no error
    changed = load_experiment(preset, scale, [*overrides, "model.ssm.d_state=2"])
    with pytest.raises(ConfigError, match=r"model.ssm.d_state"):
        check_resume_config(changed, run)

    # the checkpoint: every field saved, flat (today's model, its section spread out under the old names)
    torch.manual_seed(0)
    model_cfg = {k: v for k, v in today["model"].items() if k != "name"}
    model = ndm.build(name, model_cfg)
    full = json.loads(json.dumps(dataclasses.asdict(model.config)))
    section = full.pop("ssm")
    flat_name = {new[4:]: old for old, new in type(model.config).FIELD_MOVES.items() if old != "ssm"}
    old_cfg = {**full, "ssm": {k: section.pop(k) for k in ("d_state", "expand", "d_conv")},
               **{flat_name[k]: v for k, v in section.items() if k in flat_name}}  # (later fields: not flat)
    torch.save({"model": {"name": name, "config": old_cfg}, "model_state": model.state_dict()}, tmp_path / "old.pt")
    back = ndm.load(tmp_path / "old.pt")
    assert back.config == model.config
    assert list(back.state_dict()) == list(model.state_dict())
    x = torch.randn(2, 16, 16, 1) if name != "chonn1d" else torch.randn(2, 32, 1)
    with torch.no_grad():
        torch.testing.assert_close(back(x), model(x), rtol=0, atol=0)


def test_a_tiny_lamo_run_written_in_the_old_layout_resumes(tmp_path, data_dir, test_split_rel_l2):
    """End to end: a run folder whose config.yaml and checkpoints name the flat keys continues (more epochs)
    instead of being refused as "trained with another config"."""
    pytest.importorskip("skfem")
    from neurodyn.train.experiment import run_experiment

    cfg = load_experiment("lamo/darcy", "tiny", ["train.epochs=1"])
    run = tmp_path / "run"
    run_experiment(cfg, run, progress=False)
    stored = yaml.safe_load((run / "config.yaml").read_text())
    ssm = stored["model"]["ssm"]
    stored["model"].update(ssm_heads=ssm.pop("heads"), ssm_layout=ssm.pop("layout"), ssm_norm=ssm.pop("norm"),
                           ssm_act=ssm.pop("act"), dt_mode=ssm.pop("dt_mode"),
                           a_init_range=ssm.pop("a_init_range"), dt_range=ssm.pop("dt_range"))
    (run / "config.yaml").write_text(yaml.safe_dump(stored, sort_keys=False))
    shutil.copy(run / "checkpoints" / "last.pt", tmp_path / "epoch1.pt")
    final = run_experiment(load_experiment("lamo/darcy", "tiny", ["train.epochs=2"]), run, progress=False)
    assert final["rel_l2"] == pytest.approx(test_split_rel_l2(run), rel=1e-4)  # the resumed model's own score
    assert final["rel_l2"] != pytest.approx(test_split_rel_l2(tmp_path / "epoch1.pt"), rel=1e-4)  # trained on
    assert torch.load(run / "checkpoints" / "last.pt", weights_only=True)["position"]["epoch"] == 2


@pytest.mark.parametrize("name", SSM_MODELS)
def test_the_shared_sizes_as_a_dataclass_update_the_models_own_section(name):
    default = make_config(name).ssm
    cfg = make_config(name, ssm=SSMConfig(d_state=3, expand=default.expand, d_conv=default.d_conv))
    assert cfg.ssm == dataclasses.replace(default, d_state=3)
