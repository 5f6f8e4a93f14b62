"""Grid operators built for a grid smaller than their modes keep the modes that grid holds (as neuraloperator
does), say so once, and are then the very model built with those modes."""

import dataclasses
import re
import warnings

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.data.assembly import build_data
from neurodyn.experiments import load_experiment
from neurodyn.train.experiment import build_model


def held(m: int, n: int, half: bool) -> int:
    """Independently of the code: the largest kept count on an axis of n points. Both signs kept: 0..m-1 and
    -m..-1 must be 2m distinct frequencies of the n-point DFT; half spectrum: rfft's output length."""
    if half:
        return min(m, torch.fft.rfft(torch.zeros(n)).shape[-1])
    return max(k for k in range(1, m + 1) if len(set(range(k)) | {n - j for j in range(1, k + 1)}) == 2 * k)


def test_the_fno_darcy_preset_on_a_16x16_grid_keeps_the_modes_it_holds(data_dir):
    cfg = load_experiment("fno/darcy", "tiny", ["model.modes=[12, 12]"])
    data = build_data(cfg, progress=False)
    train = data["sets"]["train"]
    assert tuple(train.spatial_shape) == (16, 16)
    torch.manual_seed(3)
    with pytest.warns(UserWarning, match=r"modes=\(12, 12\) do not fit the \(16, 16\) grid; using modes=\(8, 9\)"):
        model = build_model(cfg, train)
    want = (held(12, 16, half=False), held(12, 16, half=True))
    assert model.modes == want == (8, 9)
    assert all(conv.modes == want for conv in model.spectral)
    # the same as an FNO built with those modes from the start, same seed
    explicit_cfg = dataclasses.replace(model.config, modes=want, grid_size=())
    torch.manual_seed(3)
    explicit = ndm.build("fno", explicit_cfg)
    x = torch.stack([train[i]["x"] for i in range(4)])
    assert x.shape == (4, 16, 16, 1)
    torch.testing.assert_close(model(x), explicit(x), rtol=0, atol=0)


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
def test_a_training_run_with_too_many_modes_runs_and_says_so_in_one_line(tmp_path, data_dir):
    """The command line, in a process of its own (Python's default warning filters: once per place and text)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "neurodyn",
            "train",
            "fno/darcy",
            "--scale",
            "tiny",
            "--runs-dir",
            str(tmp_path),
            "model.modes=[12,12]",
            "train.epochs=1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "do not fit" in line]
    assert said == [
        "neurodyn: warning: FNO: modes=(12, 12) do not fit the (16, 16) grid; using modes=(8, 9) (what "
        "the grid holds: n // 2 per axis, n // 2 + 1 on the real FFT's axis)"
    ]


def test_padding_counts_in_the_grid_the_layers_see():
    with pytest.warns(UserWarning, match=r"do not fit the \(20, 20\) grid; using modes=\(10, 11\)"):
        model = ndm.build("fno", modes=(12, 12), width=4, padding=0.25, grid_size=(16, 16))
    assert model.modes == (held(12, 20, False), held(12, 20, True))
    assert model(torch.randn(1, 16, 16, 1)).shape == (1, 16, 16, 1)


@pytest.mark.parametrize(
    "name, modes, grid, want",
    [
        ("ffno", (40, 3), (16, 16), (held(40, 16, True), 3)),
        ("fno2d_time", (12, 12), (16, 16), (held(12, 16, False), held(12, 16, True))),
        ("fno2d_r", (12, 12), (10, 16), (held(12, 10, False), held(12, 16, True))),
        ("chonn_fno", (12, 12), (16, 16), (8, 9)),
    ],
)
def test_other_grid_operators_clamp_too(name, modes, grid, want):
    with pytest.warns(UserWarning, match=re.escape(f"using modes={want}")):
        model = ndm.build(name, modes=modes, grid_size=grid, width=4)
    assert tuple(model.modes) == want
    x = torch.randn(1, *grid, model.config.in_channels)
    assert model(x).shape[1:3] == grid


def test_modes_the_grid_holds_are_kept_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ndm.build("fno", modes=(8, 9), width=4, grid_size=(16, 16)).modes == (8, 9)
        assert ndm.build("fno", modes=(12, 12), width=4).modes == (12, 12)  # no grid known: as given


def test_the_channelwise_layer_of_fno2d_r_cuts_its_weight_on_a_small_grid():
    from neurodyn.models.fno2d_time import ReducedSpectralConv2d

    big = ReducedSpectralConv2d(3, (12, 12)).double()
    x = torch.randn(2, 3, 10, 16, dtype=torch.float64)
    with pytest.warns(UserWarning, match=re.escape("using modes=(5, 9)")):
        y = big(x)
    small = ReducedSpectralConv2d(3, (5, 9)).double()
    with torch.no_grad():  # corner 0: frequencies 0..4 (rows 0..4); corner 1: -5..-1 (the last 5 of -12..-1)
        small.weight[0] = big.weight[0, :, :5, :9]
        small.weight[1] = big.weight[1, :, 12 - 5 :, :9]
    torch.testing.assert_close(y, small(x), atol=1e-12, rtol=0)
