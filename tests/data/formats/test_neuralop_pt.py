import numpy as np
import pytest
import torch

from neurodyn.data.formats import read_public, sniff
from neurodyn.errors import DataError


class Unsafe:
    """Any class outside torch's allow-list: weights_only=True must refuse to unpickle it."""


def test_darcy_dict_with_squeezed_channels(make):
    x, y = torch.rand(5, 16, 16), torch.randn(5, 16, 16)
    path = make.pt({"x": x, "y": y, "nu": torch.arange(5.0), "note": torch.zeros(2, 2, 2)})
    assert sniff(path) == ("neuralop-pt", None)
    d = read_public(path)
    assert (d.kind, d.inputs, d.targets) == ("steady", ("a",), ("u",))
    assert d["a"].shape == d["u"].shape == (5, 16, 16, 1)
    assert d["a"][3, 4, 11, 0] == x[3, 4, 11].item() and d["u"][0, 15, 2, 0] == y[0, 15, 2].item()
    np.testing.assert_array_equal(d.params["nu"], np.arange(5.0))
    assert d.info["ignored"] == ["note"]
    s = read_public(path, stride=4, max_samples=2)
    assert s["a"].shape == (2, 4, 4, 1) and s["a"][1, 3, 2, 0] == x[1, 12, 8].item()
    assert s.params["nu"].shape == (2,)


def test_burgers_space_time_file_puts_time_first(make):
    x, y = torch.randn(4, 16), torch.randn(4, 17, 16)
    path = make.pt({"x": x, "y": y}, name="burgers_train_16.pt")
    d = read_public(path)
    assert d.kind == "space-time"
    assert d["a"].shape == (4, 16, 1) and d["u"].shape == (4, 17, 16, 1)
    assert d["u"][2, 9, 5, 0] == y[2, 9, 5].item()
    assert read_public(path, time_stride=4)["u"].shape == (4, 5, 16, 1)


def test_channel_axis_is_moved_last(make):
    x, y = torch.randn(3, 2, 8, 8), torch.randn(3, 1, 8, 8)
    path = make.pt({"x": x, "y": y}, name="ns_train_8.pt")
    d = read_public(path, channel_dim=1)
    assert d["a"].shape == (3, 8, 8, 2) and d["a"][2, 5, 6, 1] == x[2, 1, 5, 6].item()
    assert d["u"].shape == (3, 8, 8, 1)


def test_bad_content_is_refused_with_one_sentence(make, cut):
    with pytest.raises(DataError, match=r"holds a list; expected a dict with tensors 'x' and 'y'"):
        read_public(make.pt([torch.zeros(2)], name="list.pt"))
    with pytest.raises(DataError, match=r"has no 'y' \(the output tensor\); it holds \['x'\]"):
        read_public(make.pt({"x": torch.zeros(2, 4)}, name="noy.pt"))
    with pytest.raises(DataError, match=r"tensor 'y' of mism.pt has spatial shape \(5,\), expected \(4,\) like 'x'"):
        read_public(make.pt({"x": torch.zeros(2, 4), "y": torch.zeros(2, 5)}, name="mism.pt"))
    # weights_only=True: an arbitrary Python object is not unpickled (nor executed)
    evil = make.pt({"x": torch.zeros(2, 4), "y": torch.zeros(2, 4), "obj": Unsafe()}, name="evil.pt")
    with pytest.raises(
        DataError, match=r"holds objects other than tensors .* weights_only=True refused the global \S*Unsafe"
    ):
        read_public(evil)
    y = torch.zeros(3, 4)
    y[1, 2] = float("nan")
    with pytest.raises(DataError, match=r"tensor 'y' of nan.pt holds NaN or Inf in sample 1"):
        read_public(make.pt({"x": torch.zeros(3, 4), "y": y}, name="nan.pt"))["u"]
    trunc = cut(make.pt({"x": torch.randn(50, 32), "y": torch.randn(50, 32)}, name="trunc.pt"), 0.5)
    with pytest.raises(DataError, match=r"\(torch file\) .*trunc.pt could not be read; it is truncated"):
        read_public(trunc)
