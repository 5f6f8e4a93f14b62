"""PDEBench U-Net: parameter count from the architecture, odd grid sizes, context, errors."""

import numpy as np
import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError


def expected_unet_parameters(in_ch, out_ch, f, dims, ctx=0):
    """Count derived from PDEBench's UNet1d/UNet2d layout (see models/unet.py), independently of the code.

    block(a -> c): conv k (no bias) a->c, BatchNorm c (weight + bias), conv k c->c, BatchNorm c;
    4 encoder blocks f, 2f, 4f, 8f, bottleneck 16f; 4 transposed convs (kernel 2 per axis, with bias)
    2c -> c; 4 decoder blocks 2c -> c (upsampled + skip concatenated); 1x1 conv f -> out with bias.
    """
    k = 3**dims  # 3x3 (2D) or 3 (1D) kernels
    kt = 2**dims  # transposed-conv kernel
    block = lambda a, c: k * a * c + 2 * c + k * c * c + 2 * c  # noqa: E731
    widths = [f, 2 * f, 4 * f, 8 * f, 16 * f]
    total = block(in_ch + ctx, f) + block(f, 2 * f) + block(2 * f, 4 * f) + block(4 * f, 8 * f)
    total += block(8 * f, 16 * f)
    for c in reversed(widths[:-1]):
        total += kt * (2 * c) * c + c  # up-conv
        total += block(2 * c, c)  # decoder
    return total + f * out_ch + out_ch


def test_parameter_count_pdebench_unet2d():
    model = ndm.build("unet", in_channels=1, out_channels=1, dims=2, init_features=32)
    assert ndm.count_parameters(model) == expected_unet_parameters(1, 1, 32, 2) == 7_762_465


@pytest.mark.parametrize("in_ch,out_ch,f,dims,ctx", [(1, 1, 32, 1, 0), (3, 2, 16, 2, 2), (4, 4, 8, 1, 1)])
def test_parameter_count_formula(in_ch, out_ch, f, dims, ctx):
    model = ndm.build("unet", in_channels=in_ch, out_channels=out_ch, dims=dims, init_features=f, ctx_channels=ctx)
    assert ndm.count_parameters(model) == expected_unet_parameters(in_ch, out_ch, f, dims, ctx)


NUMPY_PAD = {"reflect": "reflect", "replicate": "edge", "zeros": "constant", "circular": "wrap"}


def explicit_pad(x: torch.Tensor, mode: str) -> tuple[torch.Tensor, list[slice]]:
    """The model's padding written with numpy: each spatial axis of ``(B, *spatial, C)`` up to a multiple of 16,
    split ``(total // 2, total - total // 2)``, reflect falling back to replicate on an axis shorter than its pad.
    Returns the padded array and the slices that crop it back."""
    a, crops = x.detach().numpy(), [slice(None)]
    widths = [(0, 0)]
    for n in x.shape[1:-1]:
        total = (-n) % 16
        lo, hi = total // 2, total - total // 2
        widths.append((lo, hi))
        crops.append(slice(lo, lo + n))
    widths.append((0, 0))
    for axis, (lo, hi) in enumerate(widths):
        m = NUMPY_PAD[mode]
        if m == "reflect" and max(lo, hi) >= a.shape[axis]:
            m = "edge"
        w = [(0, 0)] * a.ndim
        w[axis] = (lo, hi)
        a = np.pad(a, w, mode=m)
    return torch.from_numpy(a.copy()), crops


@pytest.mark.parametrize("size", [(85, 85), (64, 64), (33, 20), (5, 37)])
def test_2d_shapes_for_any_grid_size(size):
    """Any grid size: the output is the centre crop of the same network run on the input padded by hand (numpy) to
    the next multiple of 16 with reflect (5 < 11: replicate on that axis), whose size needs no padding."""
    model = ndm.build("unet", in_channels=2, out_channels=3, init_features=8).double().eval()
    x = torch.randn(2, *size, 2, dtype=torch.float64)
    with torch.no_grad():
        y = model(x)
        assert y.shape == (2, *size, 3) and y.dtype == torch.float64
        padded, crop = explicit_pad(x, "reflect")
        assert all(n % 16 == 0 for n in padded.shape[1:3])
        torch.testing.assert_close(y, model(padded)[tuple(crop)], rtol=1e-12, atol=1e-12)


def test_full_size_forward_85():
    """PDEBench's UNet2d (f = 32, 7.8 M parameters) on Darcy's 85 x 85 grid: reflect-padded by 5 / 6 to 96 x 96
    (four poolings down to 6 x 6) and cropped back, as the same network run on the 96 x 96 grid padded by hand."""
    model = ndm.build("unet", in_channels=1, out_channels=1, init_features=32).eval()
    x = torch.randn(1, 85, 85, 1)
    with torch.no_grad():
        y = model(x)
        assert y.shape == (1, 85, 85, 1)
        padded, crop = explicit_pad(x, "reflect")
        assert padded.shape == (1, 96, 96, 1) and crop[1] == slice(5, 90)
        torch.testing.assert_close(y, model(padded)[tuple(crop)], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [33, 128, 3])
@pytest.mark.parametrize("pad_mode", ["reflect", "replicate", "zeros", "circular"])
def test_1d_shapes_and_pad_modes(n, pad_mode):
    """Each pad mode is the numpy padding of that name (reflect, edge, constant, wrap) to the next multiple of 16,
    then cropped; the modes differ from each other near the ends."""
    if pad_mode == "circular" and n == 3:
        pytest.skip("circular padding cannot wrap more than the input length")
    torch.manual_seed(0)
    model = ndm.build("unet", dims=1, in_channels=1, out_channels=2, init_features=4, pad_mode=pad_mode).double()
    model.eval()
    x = torch.randn(2, n, 1, dtype=torch.float64) + 1.0
    with torch.no_grad():
        y = model(x)
        assert y.shape == (2, n, 2)
        padded, crop = explicit_pad(x, pad_mode)
        torch.testing.assert_close(y, model(padded)[tuple(crop)], rtol=1e-12, atol=1e-12)
        if n % 16:
            other = "zeros" if pad_mode != "zeros" else "replicate"
            model.config.pad_mode = other
            assert not torch.allclose(model(x), y, rtol=1e-6)


def test_padding_is_cropped_where_the_input_was():
    """With reflect padding, an input that is symmetric about its centre gives a symmetric output in eval mode
    (the network commutes with flips, and the padding splits evenly around the data)."""
    torch.manual_seed(0)
    model = ndm.build("unet", dims=1, init_features=4).double().eval()
    # make the network flip-equivariant: symmetric kernels (and the up-conv kernel [a, a])
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv1d, torch.nn.ConvTranspose1d)):
                m.weight.copy_((m.weight + m.weight.flip(-1)) / 2)
    half = torch.randn(1, 25, 1, dtype=torch.float64)
    x = torch.cat([half, half.flip(1)], dim=1)  # length 50 -> padded to 64 by 7 + 7
    y = model(x)
    torch.testing.assert_close(y, y.flip(1))


def test_context_and_gradients(device):
    model = ndm.build("unet", init_features=4, ctx_channels=2).to(device)
    x = torch.randn(2, 20, 20, 1, device=device)
    ctx = torch.tensor([[0.5, -1.0], [2.0, 0.0]], device=device)
    y = model(x, ctx=ctx)
    assert not torch.allclose(y, model(x, ctx=ctx + 1))
    y.square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    with pytest.raises(ValueError, match=r"ctx_channels=2 but got ctx=None"):
        model(x)


def test_eval_mode_batch_of_one():
    """In eval mode the batch norms use their running statistics, so a batch of one gives each sample the output it
    has in a larger batch; after a few training steps (running statistics away from 0 / 1) that differs from
    normalising with the batch's own statistics (training mode)."""
    torch.manual_seed(0)
    model = ndm.build("unet", init_features=4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _ in range(3):
        loss = model(torch.randn(4, 17, 17, 1) * 3 + 1).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    x = torch.randn(3, 17, 17, 1)
    with torch.no_grad():
        batch = model(x)
        for i in range(3):
            torch.testing.assert_close(model(x[i : i + 1]), batch[i : i + 1], rtol=1e-5, atol=1e-6)
        model.train()
        assert not torch.allclose(model(x), batch, rtol=1e-3)


def test_wrong_channels_is_a_clear_error():
    model = ndm.build("unet", in_channels=2, init_features=4)
    with pytest.raises(ValueError, match=r"UNet input x has shape \(1, 16, 16, 3\) with 3 channels.*in_channels=2"):
        model(torch.randn(1, 16, 16, 3))
    with pytest.raises(ValueError, match=r"expected \(batch, n1, n2, 2\)"):
        model(torch.randn(1, 16, 2))


@pytest.mark.parametrize("bad", [dict(dims=3), dict(init_features=0), dict(pad_mode="mirror"), dict(ctx_channels=-1)])
def test_impossible_configs_raise_config_error(bad):
    with pytest.raises(ConfigError):
        ndm.build("unet", **bad)
