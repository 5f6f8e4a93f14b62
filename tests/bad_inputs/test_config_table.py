"""Bad config values through ``neurodyn train --fresh``: each case -> the one sentence expected, and nothing touched.

The last rows are checks beyond the config's own values (the model's size against the memory, the data file, the
split sizes, a Triton scan backend against the device, YAML tags): all made before ``--fresh`` removes the run.

``CASES``: a preset, one bad ``model.*`` or ``train.*`` override and the words the error must hold (the field and
the value, and what is expected). The configs validate themselves when they are made, and ``train`` makes them
before anything else, so each case must leave the world as it was: the run folder that ``--fresh`` would remove
(a real one: a run's config.yaml and metrics.jsonl) still holds its files byte for byte, no data set was
generated or loaded into the data folder, and nothing else was written. The whole table runs in seconds (no data,
no model is allocated).
"""

import dataclasses
import re

import pytest
import torch

from neurodyn import models
from neurodyn.cli import main
from neurodyn.errors import ConfigError
from neurodyn.files import write_run_marker
from neurodyn.train.run_folder import why_not_a_run_folder

CASES = [
    # (case, preset, override, words of the error)
    (
        "lamo_mesh-geometry",
        "lamo/pipe",
        "model.geometry=bogus",
        "lamo_mesh geometry must be one of 'structured_mesh', 'point_cloud'; got 'bogus'",
    ),
    ("lamo-width", "lamo/darcy", "model.width=-3", "lamo config field width must be >= 1; got -3"),
    ("lamo-ssm-d_state", "lamo/darcy", "model.ssm.d_state=0", "ssm.d_state must be >= 1, got 0"),
    ("lamo-ssm-layout", "lamo/darcy", "model.ssm.layout=fast", "ssm.layout must be one of"),
    ("fno-skip", "fno/darcy", "model.skip=dense", "FNO skip must be one of 'linear', 'identity', 'none'; got 'dense'"),
    ("fno-padding", "fno/darcy", "model.padding=2.0", "FNO padding is a fraction of the grid size in [0, 1]; got 2.0"),
    ("ffno-activation", "ffno/ks-nu0.1", "model.activation=swish", "FFNO activation must be one of"),
    ("s4ffno-memory-after", "s4ffno/ks-nu0.1", "model.memory_after=99", "S4FFNO memory_after must be in 0..n_layers"),
    (
        "geomano-ssm-kind",
        "geomano/darcy",
        "model.ssm.kind=3d",
        "ssm.kind ('1d': vanilla GeoMamba-SSM, '2d': 2DGeoMamba-SSM) must be one of '1d', '2d'; got '3d'",
    ),
    ("geomano-decoder", "geomano/darcy", "model.decoder=none", "geomano decoder must be one of"),
    (
        "transolver-variant",
        "transolver/darcy",
        "model.variant=grid",
        "transolver variant ('structured_mesh' also for "
        "regular grids) must be one of 'structured_mesh', 'point_cloud'; got 'grid'",
    ),
    ("stssm-factorization", "stssm/burgers", "model.factorization=bogus", "STSSM factorization must be one of"),
    ("unet-pad-mode", "unet/darcy", "model.pad_mode=mirror", "UNet pad_mode must be one of"),
    ("chonn-unet-scan", "chonn_unet/darcy", "model.scan=diagonal", "chonn scan must be one of"),
    (
        "chonn1d-ssm-combine",
        "chonn1d/order1d",
        "model.ssm.combine=max",
        "ssm.combine (how each cell's scan directions are merged) must be one of 'mean', 'sum', 'norm'; got 'max'",
    ),
    ("nac-option-eps", "nac/sequence", "model.options.eps=0", "NAC option eps=0 must be > 0.0"),
    ("nac-option-pair-time", "nac/sequence", "model.options.pair_time=now", "NAC pair_time must be one of"),
    ("nac-mode", "nac/sequence", "model.mode=rk4", "NAC mode must be one of 'exact', 'euler', 'steady'; got 'rk4'"),
    ("gru-pool", "gru/sequence", "model.pool=max", "pool must be one of 'last', 'mean'; got 'max'"),
    # mha's alone of the config the sequence baselines share: checked by train's build of it on the meta device
    ("mha-heads", "mha/sequence", "model.n_heads=3", "mha hidden 8 must be divisible by n_heads 3"),
    ("knn-distance", "knn/sequence", "model.distance=cosine", "model.distance must be one of 'euclidean', 'dtw'"),
    (
        "minirocket-features",
        "minirocket/sequence",
        "model.n_features=10",
        "minirocket config field n_features must be >= 84; got 10",
    ),
    ("train-lr", "fno/darcy", "train.lr=-1", "train.lr must be > 0, got -1"),
    ("train-epochs", "fno/darcy", "train.epochs=0", "train.epochs must be >= 1, got 0"),
    ("train-batch-size", "lamo/darcy", "train.batch_size=0", "train.batch_size must be >= 1, got 0"),
    ("train-loss", "fno/darcy", "train.loss=l7", "train.loss must be one of"),
    ("train-mode", "fno/navier_stokes_rollout", "train.rollout.mode=replay", "train.rollout.mode must be one of"),
    (
        "train-flat-key",
        "fno/darcy",
        "train.scheduler=cosine",
        "train.scheduler (the train options that belong together are sections now: spell it train.schedule.name)",
    ),
    ("train-eval-every", "nac/sequence", "train.eval_every=0", "train.eval_every must be >= 1, got 0"),
    # checks that need more than the config's own values, still made before --fresh removes anything
    ("memory-model-too-large", "fno/darcy", "model.width=30000", "does not fit in memory"),
    ("data-path-missing", "fno/darcy", "data.path=/nonexistent/train.h5", "/nonexistent/train.h5 does not exist"),
    ("data-path-a-folder", "fno/darcy", "data.path=/", "dataset file / is a directory"),
    ("n-train-zero", "fno/darcy", "data.n_train=0", "data.n_train=0 leaves no training sample"),
    ("data-normalize-input", "fno/darcy", "data.normalize_input=zscore", "data.normalize_input must be one of"),
    ("data-missing", "nac/event_digits", "data.missing=zero", "data.missing must be one of 'ffill', 'mean', 'drop'"),
    ("data-t-in", "fno/navier_stokes_rollout", "data.t_in=0", "data.t_in=0 must be a whole number >= 1"),
    (
        "triton-backend-on-cpu",
        "lamo/darcy",
        "model.ssm.backend=triton",
        "model.ssm.backend=triton runs the Triton kernels, which need a CUDA device",
    ),
    ("yaml-int-tag-not-an-int", "fno/darcy", "model.width=!!int 12abc", "the value is not plain YAML"),
    ("yaml-binary-tag", "fno/darcy", "data.path=!!binary aGVsbG8=", "the value is not plain YAML (it holds a bytes)"),
    ("yaml-timestamp-tag", "fno/darcy", "train.loss=!!timestamp 2001-12-14", "the value is not plain YAML"),
]


@pytest.mark.parametrize("case, preset, override, words", CASES, ids=[c[0] for c in CASES])
def test_bad_value_is_refused_before_anything_is_touched(case, preset, override, words, tmp_path, monkeypatch, capsys):
    if case == "triton-backend-on-cpu" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    data = tmp_path / "data"
    monkeypatch.setenv("NEURODYN_DATA", str(data))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"preset: {preset}\nmodel: {{name: fno}}\ntrain: {{epochs: 1}}\n")
    (run / "metrics.jsonl").write_text('{"epoch": 0, "marker": "kept"}\n')
    write_run_marker(run)
    assert why_not_a_run_folder(run) is None  # a run folder: --fresh would remove it
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    code = main(
        [
            "train",
            preset,
            "--scale",
            "tiny",
            "--no-progress",
            "--fresh",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--run-name",
            "r",
            override,
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("neurodyn train: error: ") and "\n" not in err, err
    assert words in err, err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # --fresh removed nothing
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "runs",
        "runs/r",
        "runs/r/.neurodyn-run",
        "runs/r/config.yaml",
        "runs/r/metrics.jsonl",
    ]  # nothing written


def test_every_kind_of_config_is_in_the_table():
    """At least six models, model and train values alike, several enum fields."""
    models = {preset.split("/")[0] for _, preset, override, _ in CASES if override.startswith("model.")}
    assert len(models) >= 6
    assert any(o.startswith("train.") for _, _, o, _ in CASES)


# every registered model: one bad value -> make_config (no module built) refuses it with these words
MAKE = [
    ("fno", dict(activation="swish"), "FNO activation must be one of"),
    ("ffno", dict(width=0), "FFNO config field width must be >= 1; got 0"),
    ("s4_ffno", dict(init="zoh"), "S4FFNO init must be one of 'legs', 'lin', 'inv'; got 'zoh'"),
    ("fno2d_time", dict(n_layers=0), "FNO2DTime config field n_layers must be >= 1; got 0"),
    ("fno2d_r", dict(projection_channels=-1), "FNO2DR config field projection_channels must be >= 1; got -1"),
    ("unet", dict(dims=3), "UNet dims must be one of 1, 2; got 3"),
    ("chonn_unet", dict(ckb_stages=("enc9",)), "chonn_unet ckb_stages must be distinct names from"),
    ("chonn_fno", dict(ckb_layers=(7,)), "chonn_fno ckb_layers must be distinct layer indices in [0, 4); got (7,)"),
    ("chonn1d", dict(orders=()), "chonn1d orders must be a non-empty list of block orders >= 1; got ()"),
    ("chonn_vision", dict(patch_size=3), "chonn_vision patch_size must be one of 1, 2, 4; got 3"),
    ("geomano", dict(latent_grid=(0, 4)), "geomano latent_grid must be (h, w) with h, w >= 1, got (0, 4)"),
    ("lamo", dict(grid_transfer="bogus", width=-3), "lamo config field width must be >= 1; got -3"),
    ("lamo_mesh", dict(geometry="bogus", width=-3), "lamo_mesh geometry must be one of"),
    ("transolver", dict(width=10, n_heads=4), "transolver width (10) must be divisible by n_heads (4)"),
    ("stssm", dict(dims=1, factorization="parallel"), "STSSM factorization='parallel' (ST-SSM-FF / -VM) is a 2-D"),
    ("nac", dict(options={"backbone_unfolds": 0}), "NAC option backbone_unfolds=0 must be a whole number >= 1"),
    ("gru", dict(hidden=0), "sequence models need in_channels, out_channels and hidden >= 1"),
    ("lstm", dict(pool="first"), "pool must be one of 'last', 'mean'; got 'first'"),
    ("cfc", dict(out_channels=0), "sequence models need in_channels, out_channels and hidden >= 1"),
    ("ltc", dict(ode_unfolds=0), "sequence model config field ode_unfolds must be >= 1; got 0"),
    ("odernn", dict(in_channels=0), "sequence models need in_channels, out_channels and hidden >= 1"),
    ("mha", dict(n_heads=0), "sequence model config field n_heads must be >= 1; got 0"),
    ("majority", dict(per_step=True), "the majority baseline predicts one output per sequence"),
    ("knn", dict(window=1.5), "model.window is a fraction of the length in [0, 1], got 1.5"),
    ("minirocket", dict(alpha_min=0.0), "model.alpha_min and alpha_max must satisfy 0 < alpha_min <= alpha_max"),
    ("multirocket", dict(n_features=671), "multirocket config field n_features must be >= 672; got 671"),
    ("hydra", dict(n_groups=3), "model.n_groups must be even"),
]


def test_every_registered_model_is_in_the_make_table():
    assert sorted(name for name, _, _ in MAKE) == models.available()


@pytest.mark.parametrize("name, values, words", MAKE, ids=[c[0] for c in MAKE])
def test_a_config_refuses_a_bad_value_when_it_is_made(name, values, words):
    with pytest.raises(ConfigError) as info:
        models.make_config(name, **values)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
    with pytest.raises(ConfigError, match=re.escape(words)):  # the dataclass itself, made by hand
        _by_hand(models.registry.entry(name)[1], values)


def _by_hand(config_cls: type, values: dict):
    """``config_cls(**values)`` without the registry; a mapping becomes its section's dataclass."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    return config_cls(
        **{k: type(fields[k].default_factory())(**v) if isinstance(v, dict) else v for k, v in values.items()}
    )
