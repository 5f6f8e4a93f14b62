"""The checkpoint format is versioned: every writer saves ``format_version``, every reader checks it.

One test per readable format (:data:`neurodyn.checkpoint_io.READABLE_FORMATS`): format 1 (written now) and format 0
(the same dict without the key, as neurodyn 0.1 wrote it) restore the same model, predictions and resume; a newer
format and a format-0 checkpoint that does not hold its task are refused in one sentence.
"""
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
        assert main(["train", "fno/darcy", "--scale", "tiny", "--no-progress", "--quiet", "train.epochs=1",
                     "--runs-dir", str(root / "runs"), "--run-name", "r"]) == 0
    finally:
        os.environ.pop("NEURODYN_DATA") if old is None else os.environ.__setitem__("NEURODYN_DATA", old)
    return root / "runs" / "r"


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
    path = _rewrite(run / "checkpoints" / "last.pt", tmp_path / f"v{version}.pt",
                    lambda c: c.update(format_version=version) if version else c.pop("format_version"))
    a = torch.rand(3, 16, 16, 1)
    want = neurodyn.load_run(run).predict(a)
    torch.testing.assert_close(neurodyn.load_run(path).predict(a), want, rtol=0, atol=0)
    model = ndm.load(path)
    assert model.config == neurodyn.load_run(run).model.config


def test_a_newer_format_is_refused_naming_the_versions(run, tmp_path):
    path = _rewrite(run / "checkpoints" / "last.pt", tmp_path / "new.pt",
                    lambda c: c.update(format_version=CHECKPOINT_FORMAT + 1))
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
