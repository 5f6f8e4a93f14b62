"""The checkpoint format is versioned: every writer saves ``format_version``, every reader checks it.

One test per readable format (:data:`neurodyn.checkpoint_io.READABLE_FORMATS`): format 2 (written now), format 1 (a
flat train config, one ``lamo`` model with a ``variant``) and format 0 (format 1 without the key, as neurodyn 0.1
wrote it) restore the same model and predictions, and resume to the same weights; a newer format and a format-0
checkpoint that does not hold its task are refused in one sentence.
"""

import os
import shutil

import pytest
import torch

import neurodyn
import neurodyn.models as ndm
from neurodyn.checkpoint_io import CHECKPOINT_FORMAT, READABLE_FORMATS
from neurodyn.cli import main
from neurodyn.errors import DataError


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("fmt")
    old = os.environ.get("NEURODYN_DATA")
    os.environ["NEURODYN_DATA"] = str(root / "data")
    try:
        assert (
            main(
                [
                    "train",
                    "fno/darcy",
                    "--scale",
                    "tiny",
                    "--no-progress",
                    "--quiet",
                    "train.epochs=1",
                    "--runs-dir",
                    str(root / "runs"),
                    "--run-name",
                    "r",
                ]
            )
            == 0
        )
    finally:
        os.environ.pop("NEURODYN_DATA") if old is None else os.environ.__setitem__("NEURODYN_DATA", old)
    return root / "runs" / "r"


# the flat names formats 0 and 1 gave the options that are sections now (written out here, not read from the reader)
FLAT_NAMES = {
    ("schedule", "name"): "scheduler",
    ("schedule", "pct_start"): "pct_start",
    ("schedule", "step_size"): "step_size",
    ("schedule", "gamma"): "gamma",
    ("rollout", "mode"): "train_mode",
    ("rollout", "steps"): "rollout_steps",
    ("rollout", "eval_mode"): "eval_mode",
    ("rollout", "pushforward"): "pushforward",
    ("rollout", "input_noise"): "input_noise",
    ("logging", "to"): "log",
    ("logging", "n_plot"): "n_plot",
}


def _flat_train(train: dict) -> dict:
    """A train section as formats 0 and 1 held it: every option at the top level."""
    out = {}
    for key, value in train.items():
        if isinstance(value, dict):
            out.update({FLAT_NAMES[key, k]: v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _as_format(version):
    """The change that makes a format-2 checkpoint dict the format ``version`` wrote."""

    def change(c):
        if version == 2:
            return
        c["train_config"] = _flat_train(c["train_config"])
        c["experiment"]["train"] = _flat_train(c["experiment"]["train"])
        if version:
            c["format_version"] = version
        else:
            c.pop("format_version")

    return change


def _rewrite(src, dst, change):
    ckpt = torch.load(src, weights_only=True)
    change(ckpt)
    torch.save(ckpt, dst)
    return dst


def test_writers_save_the_current_format(run, tmp_path):
    assert CHECKPOINT_FORMAT in READABLE_FORMATS
    assert torch.load(run / "checkpoints" / "last.pt", weights_only=True)["format_version"] == CHECKPOINT_FORMAT
    ndm.save(ndm.build("fno", width=4, modes=(2, 2)), tmp_path / "m.pt")
    assert torch.load(tmp_path / "m.pt", weights_only=True)["format_version"] == CHECKPOINT_FORMAT


@pytest.mark.parametrize("version", READABLE_FORMATS)
def test_every_readable_format_restores_the_same_model(run, tmp_path, version):
    path = _rewrite(run / "checkpoints" / "last.pt", tmp_path / f"v{version}.pt", _as_format(version))
    if version < 2:
        assert "scheduler" in torch.load(path, weights_only=True)["train_config"]  # the flat layout indeed
    a = torch.rand(3, 16, 16, 1)
    want = neurodyn.load_run(run)
    got = neurodyn.load_run(path)
    torch.testing.assert_close(got.predict(a), want.predict(a), rtol=0, atol=0)
    assert got.train_config == want.train_config and got.train_config.schedule.name == "step"  # fno/darcy's
    assert got.cfg["train"] == want.cfg["train"]
    model = ndm.load(path)
    assert model.config == want.model.config


def _resumed_weights(run, tmp_path, name, change):
    """Copy the run folder, rewrite its last.pt with ``change``, train it on to 2 epochs; the final weights."""
    folder = tmp_path / "runs" / name
    shutil.copytree(run, folder)
    _rewrite(run / "checkpoints" / "last.pt", folder / "checkpoints" / "last.pt", change)
    env = {"NEURODYN_DATA": str(run.parent.parent / "data")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert (
            main(
                [
                    "train",
                    "fno/darcy",
                    "--scale",
                    "tiny",
                    "--no-progress",
                    "--quiet",
                    "train.epochs=2",
                    "--runs-dir",
                    str(folder.parent),
                    "--run-name",
                    name,
                ]
            )
            == 0
        )
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    ckpt = torch.load(folder / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["position"]["epoch"] == 2 and ckpt["format_version"] == CHECKPOINT_FORMAT
    return ckpt["model_state"]


@pytest.mark.slow  # (about 3 s each on one core: make test runs them, make test-fast does not)
@pytest.mark.parametrize("version", READABLE_FORMATS)
def test_every_readable_format_resumes_to_the_same_weights(run, tmp_path, version):
    """A checkpoint of each readable format in a run folder (a format-1 one with a flat train_config) resumes: one
    more epoch gives the weights that resuming the checkpoint as written now gives."""
    want = _resumed_weights(run, tmp_path, "now", lambda c: None)
    got = _resumed_weights(run, tmp_path, f"v{version}", _as_format(version))
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k


def test_a_format_1_lamo_checkpoint_loads_as_the_model_of_its_variant(tmp_path):
    """Format 1 had one ``lamo`` model whose ``variant`` chose grid, structured mesh or point cloud (its config held
    every option of both); it loads as ``lamo`` (grid) or ``lamo_mesh`` with that geometry, with the same weights."""
    grid_only = dict(
        patch_size=2, pad_multiple=0, grid_size=(8, 8), grid_transfer="resample", pos_embed=True, pos_embed_interp=True
    )
    mesh_only = dict(
        n_slices=4,
        slice_heads=4,
        slice_temperature=0.5,
        slice_clamp=None,
        share_encoder=True,
        decoder="shared",
        n_points=0,
        slice_normalize=True,
        slice_value_projection=True,
        pos_channels=0,
        placeholder=True,
        time_embedding=False,
    )
    small = dict(in_channels=1, width=8, n_layers=1, mlp_ratio=2, ssm=dict(d_state=4, heads=2))
    for variant, name, x in (
        ("grid", "lamo", torch.rand(2, 8, 8, 1)),
        ("point_cloud", "lamo_mesh", torch.rand(2, 12, 1)),
        ("structured_mesh", "lamo_mesh", torch.rand(2, 5, 4, 1)),
    ):
        own = grid_only if name == "lamo" else dict(mesh_only, geometry=variant)
        model = ndm.build(name, **small, **own)
        ndm.save(model, tmp_path / "m.pt")
        ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
        saved = {k: v for k, v in ckpt["model"]["config"].items() if k != "geometry"}
        config = {**grid_only, **mesh_only, **saved, "variant": variant}  # format 1: every option of both
        ckpt.update(format_version=1, model={"name": "lamo", "config": config})
        torch.save(ckpt, tmp_path / "old.pt")
        again = ndm.load(tmp_path / "old.pt")
        assert type(again) is type(model) and again.config == model.config, variant
        with torch.no_grad():
            torch.testing.assert_close(again(x), model(x), rtol=0, atol=0)


def test_a_newer_format_is_refused_naming_the_versions(run, tmp_path):
    path = _rewrite(
        run / "checkpoints" / "last.pt", tmp_path / "new.pt", lambda c: c.update(format_version=CHECKPOINT_FORMAT + 1)
    )
    with pytest.raises(DataError) as info:
        neurodyn.load_run(path)
    text = str(info.value)
    assert f"format_version {CHECKPOINT_FORMAT + 1}" in text and "newer neurodyn" in text and "\n" not in text


def test_a_format_0_checkpoint_without_its_task_is_refused(run, tmp_path):
    def strip(c):
        c.pop("format_version")
        c.pop("task_spec")

    path = _rewrite(run / "checkpoints" / "last.pt", tmp_path / "old.pt", strip)
    with pytest.raises(DataError, match="does not hold its task"):
        neurodyn.load_run(path)
