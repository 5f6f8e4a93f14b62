"""FFNO, Multi-Input FFNO, S4-FFNO and FNO2D-R / Multi-Input FNO2D: the parameter counts of the ST-SSM paper's
Tables 1, 2 and 5, periodicity, the reduced spectral weights, and S4-FFNO's causal memory window."""

import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.models import build, count_parameters
from neurodyn.models.fno2d_time import ReducedSpectralConv2d
from neurodyn.nn.spectral import SpectralConv


@pytest.mark.parametrize(
    "res, ffno, multi, s4",
    [
        (128, 2_239_618, 2_239_810, 2_260_354),  # Table 1, res 128
        (64, 1_191_042, 1_191_234, 1_211_778),  # res 64
        (32, 666_754, 666_946, 687_490),  # res 32
    ],
)
def test_table1_counts(res, ffno, multi, s4):
    kw = dict(modes=(0,), grid_size=(res,))  # all modes: k_max = res // 2
    assert count_parameters(build("ffno", **kw)) == ffno
    assert count_parameters(build("ffno", in_channels=4, **kw)) == multi  # last K = 4 frames as channels
    assert count_parameters(build("s4_ffno", **kw)) == s4
    assert s4 - ffno == 20_736  # one S4D block


def test_table2_and_table5_counts():
    kw = dict(modes=(0, 0), grid_size=(64, 64))
    assert count_parameters(build("ffno", **kw)) == 2_239_682
    assert count_parameters(build("s4_ffno", **kw)) == 2_260_418
    assert count_parameters(build("fno2d_r", in_channels=4, grid_size=(64, 64))) == 1_115_841
    with torch.device("meta"):  # 67M parameters: count without allocating them
        full = build("fno2d_time", in_channels=4, grid_size=(64, 64))
    assert count_parameters(full) == 67_176_129


def test_modes_zero_means_all_and_needs_the_grid():
    m = build("ffno", modes=(0, 0), grid_size=(32, 16), width=8, projection_channels=8)
    assert m.modes == (16, 8)
    with pytest.raises(ConfigError, match="grid_size"):
        build("ffno", modes=(0,))
    with pytest.warns(UserWarning, match=r"modes=\(40,\) do not fit the \(32,\) grid; using modes=\(17,\)"):
        assert build("ffno", modes=(40,), width=8)(torch.randn(1, 32, 1)).shape == (1, 32, 1)


@pytest.mark.parametrize(
    "name, shape", [("ffno", (2, 16, 12, 3)), ("fno2d_r", (2, 16, 12, 3)), ("fno2d_time", (2, 16, 12, 3))]
)
def test_periodic_shift_equivariance_without_coordinates(name, shape):
    """Fourier layers are circular convolutions: without the coordinate channels a periodic shift of the
    input shifts the output (ST-SSM's zero-padded S4D sweeps are not periodic)."""
    kw = dict(in_channels=3, modes=(4, 3), width=8, projection_channels=8, positional_grid=False)
    m = build(name, **kw).double()
    x = torch.randn(*shape, dtype=torch.float64)
    shifted = m(torch.roll(x, shifts=(5, 2), dims=(1, 2)))
    assert torch.allclose(shifted, torch.roll(m(x), shifts=(5, 2), dims=(1, 2)), atol=1e-10)


def test_reduced_spectral_conv_is_the_full_one_with_diagonal_weights():
    torch.manual_seed(2)
    C, modes = 3, (3, 4)
    red = ReducedSpectralConv2d(C, modes).double()
    full = SpectralConv(C, C, modes, bias=False).double()
    with torch.no_grad():
        red.weight.normal_()
        full.weight.zero_()
        w = torch.view_as_complex(red.weight)  # (corner, C, m1, m2)
        # SpectralConv keeps x-frequencies 0..m1-1 then -m1..-1, y-frequencies 0..m2-1: flat index (kx, ky)
        both = torch.cat([w[0], w[1]], dim=1).reshape(C, -1)  # (C, 2 m1 * m2)
        for c in range(C):
            full.weight[:, c, 0, c] = both[c].real
            full.weight[:, c, 1, c] = both[c].imag
    x = torch.randn(2, C, 10, 9, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(red(x), full(x), atol=1e-12)


def test_s4ffno_memory_is_causal_with_window_k():
    K, T, t = 3, 7, 5
    m = build(
        "s4_ffno", modes=(4,), width=8, projection_channels=8, d_state=8, memory_window=K, dt_min=0.05, dt_max=0.5
    ).double()
    x = torch.randn(2, T, 16, 1, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(m.forward_sequence(x)[0, t].sum(), x)
    g = g[0].abs().flatten(1).sum(-1)
    assert (g > 1e-12 * g.max()).tolist() == [t - K < s <= t for s in range(T)]
    y = m(x)
    assert y.shape == (2, 1, 16, 1)
    assert torch.allclose(y[:, 0], m.forward_sequence(x)[:, -1], atol=1e-12)
    with pytest.raises(ValueError, match="frames_as_channels"):
        m(torch.randn(2, 16, 1, dtype=torch.float64))


def test_ffno_is_fourierflow_shaped():
    m = build("ffno", modes=(8,), width=16, projection_channels=32)
    names = dict(m.named_parameters())
    # weight-normalised linear maps (g and v), feed-forward 16 -> 64 -> 16, projection 16 -> 32 -> 1
    assert names["ff.0.0.parametrizations.weight.original1"].shape == (64, 16)
    assert names["ff.0.2.parametrizations.weight.original1"].shape == (16, 64)
    assert names["projection.2.parametrizations.weight.original0"].shape == (1, 1)
    y = m(torch.randn(3, 32, 1), ctx=None)
    assert y.shape == (3, 32, 1)
    # every Linear is weight-normalised: W = g v / |v| per output row, so rescaling v's rows leaves the model as it is
    # and rescaling g does not; the projection Q is affine (no activation between its two maps), FF is not
    m = m.double()
    x = torch.randn(3, 32, 1, dtype=torch.float64)
    wn = [mod for mod in m.modules() if isinstance(mod, torch.nn.Linear)]
    assert len(wn) == 1 + 2 * 4 + 2 and all(torch.nn.utils.parametrize.is_parametrized(mod, "weight") for mod in wn)
    with torch.no_grad():
        y = m(x)
        for mod in wn:
            g, v = mod.parametrizations.weight.original0, mod.parametrizations.weight.original1
            torch.testing.assert_close(mod.weight, g * v / v.norm(dim=1, keepdim=True), rtol=1e-12, atol=0)
            v.mul_(torch.rand(v.shape[0], 1, dtype=v.dtype) + 0.5)
        torch.testing.assert_close(m(x), y, rtol=1e-10, atol=1e-12)
        wn[-1].parametrizations.weight.original0.mul_(2)
        assert not torch.allclose(m(x), y)
        u, w = torch.randn(2, 5, 16, dtype=torch.float64)
        torch.testing.assert_close(m.projection(0.3 * u + 0.7 * w), 0.3 * m.projection(u) + 0.7 * m.projection(w))
        ff = m.ff[0]
        assert not torch.allclose(ff(0.3 * u + 0.7 * w), 0.3 * ff(u) + 0.7 * ff(w))
