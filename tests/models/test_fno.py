"""FNO: parameter counts from the architecture, the model call convention, context, dtypes and errors."""

import dataclasses
import math

import numpy as np
import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.models.fno import FNOConfig


def linear(a, b):
    return a * b + b


def mlp(a, hidden, b):
    return linear(a, b) if hidden == 0 else linear(a, hidden) + linear(hidden, b)


def expected_fno_parameters(
    in_ch, out_ch, modes, width, n_layers, lifting, projection, grid=True, ctx=0, skip="linear"
):
    """Count derived from the architecture (see models/fno.py), independently of the code."""
    d = len(modes)
    kept = math.prod(2 * m for m in modes[:-1]) * modes[-1]  # both signs on non-last axes, half spectrum on the last
    spectral = 2 * width * width * kept + width  # complex weights as two reals, plus the layer bias
    skip_w = width * width if skip == "linear" else 0
    lift_in = in_ch + ctx + (d if grid else 0)
    return n_layers * (spectral + skip_w) + mlp(lift_in, lifting, width) + mlp(width, projection, out_ch)


def test_li_et_al_fourier_2d_parameter_count():
    # fourier_2d.py of Li et al.: fc0 3->32 (a + 2 grid channels), 4 x (SpectralConv2d 12x12 modes, two corners
    # + 1x1 conv with bias), fc1 32->128, fc2 128->1:
    # 4*(2*32*32*12*12*2) + 4*(32*32+32) + (3*32+32) + (32*128+128) + (128+1) = 2,368,001
    published = 4 * (2 * 32 * 32 * 12 * 12 * 2) + 4 * (32 * 32 + 32) + (3 * 32 + 32) + (32 * 128 + 128) + (128 + 1)
    assert published == 2_368_001
    model = ndm.build(
        "fno",
        in_channels=1,
        out_channels=1,
        modes=(12, 12),
        width=32,
        n_layers=4,
        lifting_channels=0,
        projection_channels=128,
        positional_grid=True,
    )
    assert ndm.count_parameters(model) == 2_368_001


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(in_channels=1, out_channels=1, modes=(12, 12), width=32, n_layers=4, lifting=128, projection=128),
        dict(in_channels=3, out_channels=2, modes=(16,), width=24, n_layers=3, lifting=0, projection=64),
        dict(
            in_channels=2,
            out_channels=1,
            modes=(5, 7),
            width=8,
            n_layers=2,
            lifting=16,
            projection=0,
            ctx=3,
            grid=False,
            skip="none",
        ),
    ],
)
def test_parameter_count_formula(kwargs):
    kw = dict(kwargs)
    cfg = dict(
        in_channels=kw["in_channels"],
        out_channels=kw["out_channels"],
        modes=kw["modes"],
        width=kw["width"],
        n_layers=kw["n_layers"],
        lifting_channels=kw["lifting"],
        projection_channels=kw["projection"],
        positional_grid=kw.get("grid", True),
        ctx_channels=kw.get("ctx", 0),
        skip=kw.get("skip", "linear"),
    )
    model = ndm.build("fno", **cfg)
    assert ndm.count_parameters(model) == expected_fno_parameters(
        kw["in_channels"],
        kw["out_channels"],
        kw["modes"],
        kw["width"],
        kw["n_layers"],
        kw["lifting"],
        kw["projection"],
        grid=kw.get("grid", True),
        ctx=kw.get("ctx", 0),
        skip=kw.get("skip", "linear"),
    )


def small(**kw):
    base = dict(modes=(4, 4), width=8, n_layers=2, lifting_channels=16, projection_channels=16)
    base.update(kw)
    return ndm.build("fno", **base)


def test_default_build_and_config_round_trip():
    model = ndm.build("fno", in_channels=1, out_channels=1, modes=(12, 12))
    assert isinstance(model.config, FNOConfig) and model.registry_name == "fno"
    as_yaml = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(model.config).items()}
    again = ndm.build("fno", as_yaml)  # lists from YAML/JSON become tuples again
    assert again.config == model.config
    assert ndm.count_parameters(again) == ndm.count_parameters(model)


def test_shapes_dtype_and_channels_last(device):
    model = small(in_channels=3, out_channels=2).to(device)
    x = torch.randn(2, 20, 24, 3, device=device)
    y = model(x)
    assert y.shape == (2, 20, 24, 2) and y.dtype == torch.float32 and y.device == x.device
    # 1D
    model1 = small(modes=(6,), in_channels=2, out_channels=5).to(device)
    assert model1(torch.randn(3, 40, 2, device=device)).shape == (3, 40, 5)
    # another resolution with the same weights
    assert model(torch.randn(1, 33, 17, 3, device=device)).shape == (1, 33, 17, 2)


def test_axes_are_spatial_then_channels():
    """Without grid channels and padding the FNO commutes with periodic shifts of the spatial axes (1, 2);
    that only holds if the layers treat axes 1..d as space and the last axis as channels."""
    model = small(in_channels=3, out_channels=2, positional_grid=False).double()
    x = torch.randn(2, 16, 12, 3, dtype=torch.float64)
    shifted = model(torch.roll(x, shifts=(5, -3), dims=(1, 2)))
    torch.testing.assert_close(shifted, torch.roll(model(x), shifts=(5, -3), dims=(1, 2)))
    # mixing channels of the input is *not* a symmetry, so the test above is not vacuous
    assert not torch.allclose(model(x.flip(-1)), model(x))


def test_context_channels_change_the_output():
    model = small(ctx_channels=2)
    x = torch.randn(2, 16, 16, 1)
    ctx = torch.tensor([[0.1, 1.0], [0.1, 1.0]])
    y1 = model(x, ctx=ctx)
    y2 = model(x, ctx=ctx * 3)
    assert not torch.allclose(y1, y2)
    # per sample: changing sample 1's context leaves sample 0 alone
    ctx3 = ctx.clone()
    ctx3[1] = 7.0
    y3 = model(x, ctx=ctx3)
    torch.testing.assert_close(y3[0], y1[0])
    assert not torch.allclose(y3[1], y1[1])
    with pytest.raises(ValueError, match=r"ctx_channels=2 but got ctx=None"):
        model(x)
    with pytest.raises(ValueError, match=r"ctx has shape \(2, 3\); expected \(2, 2\)"):
        model(x, ctx=torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"ctx_channels=0"):
        small()(x, ctx=ctx)


def test_gradients_flow_to_every_parameter(device):
    model = small(padding=0.25, ctx_channels=1).to(device)
    x = torch.randn(2, 12, 12, 1, device=device, requires_grad=True)
    loss = model(x, ctx=torch.ones(2, 1, device=device)).square().mean()
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    assert x.grad.abs().sum() > 0


def test_float64_matches_float32_and_spectral_methods_agree():
    model = small(in_channels=2)
    x = torch.randn(2, 20, 18, 2)
    y32 = model(x)
    model64 = small(in_channels=2)
    model64.load_state_dict(model.state_dict())
    model64.double()
    y64 = model64(x.double())
    assert y64.dtype == torch.float64
    assert (y32.double() - y64).abs().max() < 1e-4 * y64.abs().max()
    fft = small(in_channels=2, spectral_method="fft").double()
    fft.load_state_dict(model64.state_dict())
    torch.testing.assert_close(fft(x.double()), y64, atol=1e-12, rtol=1e-10)


def test_padding_keeps_the_shape_and_changes_the_function():
    plain = small()
    padded = small(padding=0.1)
    padded.load_state_dict(plain.state_dict())
    x = torch.randn(1, 85, 85, 1)
    yp = padded(x)
    assert yp.shape == (1, 85, 85, 1)
    assert not torch.allclose(yp, plain(x))


def test_wrong_input_is_a_clear_error():
    model = small(in_channels=3)
    with pytest.raises(ValueError, match=r"x has shape \(2, 16, 16, 1\) with 1 channels.*in_channels=3"):
        model(torch.randn(2, 16, 16, 1))
    with pytest.raises(ValueError, match=r"expected \(batch, n1, n2, 3\)"):
        model(torch.randn(16, 16, 3))
    with pytest.raises(ValueError, match=r"takes no pos"):
        model(torch.randn(2, 16, 16, 3), pos=torch.zeros(2, 256, 2))
    with pytest.warns(UserWarning, match=r"modes=\(4, 4\) do not fit the \(6, 16\) grid; using modes=\(3, 4\)"):
        assert model(torch.randn(2, 6, 16, 3)).shape == (2, 6, 16, 1)  # 2 * 4 > 6: the grid holds 3 there


@pytest.mark.parametrize(
    "bad",
    [
        dict(modes=(4, 4, 4)),
        dict(modes=()),
        dict(width=0),
        dict(skip="conv"),
        dict(activation="swish2"),
        dict(padding=-0.1),
        dict(modes=(0, 3)),
    ],
)
def test_impossible_configs_raise_config_error(bad):
    with pytest.raises(ConfigError):
        ndm.build("fno", **bad)


@pytest.mark.parametrize("act", ["gelu", "relu", "tanh", "silu"])
def test_fused_lifting_mlp_matches_plain_layers(act):
    """The tiled lifting/projection path (nn.mlp.fused_mlp) against the nn.Sequential it replaces."""
    from neurodyn.nn.mlp import ChannelMLP, fused_mlp

    mlp = ChannelMLP(5, 3, 16, act).double()
    x = torch.randn(2, 50, 31, 5, dtype=torch.float64, requires_grad=True)
    first, last = mlp[0], mlp[-1]
    y = fused_mlp(x, first.weight, first.bias, last.weight, last.bias, act, tile=128)  # 3100 rows: 25 tiles
    mlp.fused = False
    y_ref = mlp(x)
    torch.testing.assert_close(y, y_ref, atol=1e-12, rtol=0)
    g = torch.randn_like(y)
    params = [x, *mlp.parameters()]
    for a, b in zip(torch.autograd.grad(y, params, g), torch.autograd.grad(y_ref, params, g)):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=0)
    # the module switches to it on large inputs
    mlp.fused = True
    big = torch.randn(1, 128, 600, 5, dtype=torch.float64)
    out = mlp(big)
    assert "FusedMLP" in type(out.grad_fn.next_functions[0][0]).__name__
    mlp.fused = False
    torch.testing.assert_close(out, mlp(big), atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", ["dft", "fft"])
@pytest.mark.parametrize("modes, spatial", [((4,), (16,)), ((3, 2), (8, 6))])
def test_one_linear_fourier_layer_equals_an_explicit_dft(method, modes, spatial):
    """One Fourier layer between identity lifting and projection, without grid, skip or padding, is
    ``y = irfftn(R rfftn(x)) + bias``: checked against the DFT written out as sums over grid points and kept
    frequencies (numpy, no FFT), with hand-set complex weights R_{oi}(k) that mix the two channels."""
    c = 2
    model = ndm.build(
        "fno",
        in_channels=c,
        out_channels=c,
        modes=modes,
        width=c,
        n_layers=1,
        lifting_channels=0,
        projection_channels=0,
        positional_grid=False,
        skip="none",
        padding=0.0,
        spectral_method=method,
    ).double()
    conv = model.spectral[0]
    with torch.no_grad():
        for linear in (model.lifting[0], model.projection[0]):
            linear.weight.copy_(torch.eye(c)), linear.bias.zero_()
        conv.weight.copy_(
            torch.arange(conv.weight.numel(), dtype=torch.float64).reshape(conv.weight.shape).mul(0.37).sin()
        )
        conv.bias.copy_(torch.tensor([0.5, -0.25]))
    x = torch.randn(2, *spatial, c, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # kept frequencies per axis, in the weight's order: 0..m-1 then -m..-1 on non-last axes, 0..m-1 on the last
    freqs = [list(range(m)) + list(range(-m, 0)) for m in modes[:-1]] + [list(range(modes[-1]))]
    w = conv.weight.detach().numpy()
    R = (w[:, :, 0] + 1j * w[:, :, 1]).reshape(*[len(f) for f in freqs], c, c)  # (*kept, C_in, C_out)
    grids = np.meshgrid(*[np.arange(n) for n in spatial], indexing="ij")
    xn, want = x.numpy(), np.zeros((2, *spatial, c))
    for index in np.ndindex(*[len(f) for f in freqs]):
        k = [f[i] for f, i in zip(freqs, index)]
        phase = sum(kj * g / n for kj, g, n in zip(k, grids, spatial))  # (n_1, ..., n_d)
        xhat = (xn * np.exp(-2j * np.pi * phase)[..., None]).reshape(2, -1, c).sum(1)  # forward DFT at k
        yhat = xhat @ R[index]  # (B, C_out)
        weight = 1.0 if k[-1] == 0 else 2.0  # the half spectrum: k and -k on the last axis
        want += weight * np.real(yhat.reshape(2, *[1] * len(spatial), c) * np.exp(2j * np.pi * phase)[..., None])
    want = want / np.prod(spatial) + np.array([0.5, -0.25])
    np.testing.assert_allclose(model(x).detach().numpy(), want, rtol=1e-10, atol=1e-10)
