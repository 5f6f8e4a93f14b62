"""Slice encoder / decoder (nn/slice.py): softmax assignment, weighted means, deslicing, equivariance."""

import pytest
import torch
import torch.nn.functional as F

from neurodyn.errors import ConfigError
from neurodyn.nn.slice import PhysicsAttention, SliceDecoder, SliceEncoder, deslice, pool

DT = torch.float64


@pytest.mark.parametrize("projection, grid", [("linear", None), ("conv2d", (5, 4))])
def test_slice_weights_sum_to_one_over_latent_tokens(projection, grid):
    enc = SliceEncoder(16, n_heads=4, n_slices=6, projection=projection, clamp=(0.1, 5.0)).to(DT)
    x = torch.randn(3, 20, 16, dtype=DT)
    tokens, w = enc(x, grid)
    assert tokens.shape == (3, 4, 6, 4) and w.shape == (3, 4, 20, 6)
    assert (w > 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 20, dtype=DT))


def test_tokens_are_weighted_means_of_the_value_projection():
    enc = SliceEncoder(8, n_heads=2, n_slices=3).to(DT)
    x = torch.randn(2, 11, 8, dtype=DT)
    tokens, w = enc(x)
    v = enc.in_project_fx(x).reshape(2, 11, 2, 4).transpose(1, 2)  # (B, H, N, d_h)
    for b in range(2):
        for h in range(2):
            for m in range(3):
                want = (w[b, h, :, m, None] * v[b, h]).sum(0) / (w[b, h, :, m].sum() + enc.eps)
                torch.testing.assert_close(tokens[b, h, m], want)


def test_temperature_sharpens_and_is_clamped():
    enc = SliceEncoder(8, n_heads=2, n_slices=4, clamp=(0.1, 5.0)).to(DT)
    x = torch.randn(1, 30, 8, dtype=DT)
    with torch.no_grad():
        enc.temperature.fill_(1e-4)  # clamped to 0.1: still a soft assignment
        w_clamped = enc.weights(x)
        enc.clamp = None
        w_hard = enc.weights(x)  # unclamped tiny tau: one-hot
    assert w_clamped.max(-1).values.min() < 0.999
    assert (w_hard.max(-1).values > 0.999).double().mean() > 0.9  # (near-ties aside) one-hot assignment


def test_one_hot_patch_weights_give_patch_average_pooling():
    """Paper Remark 3.1: the patch tokens are slice tokens with W[i, j] = 1 iff point i lies in patch j."""
    b, c, H, W, p = 2, 3, 6, 4, 2
    img = torch.randn(b, H, W, c, dtype=DT)
    rows, cols = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    patch = (rows // p) * (W // p) + cols // p  # patch index per point
    w = F.one_hot(patch.reshape(-1), (H // p) * (W // p)).to(DT)[None, None].expand(b, 1, H * W, -1)
    tokens = pool(img.reshape(b, 1, H * W, c), w, eps=0.0)  # (b, 1, M, c)
    avg = F.avg_pool2d(img.permute(0, 3, 1, 2), p).permute(0, 2, 3, 1).reshape(b, -1, c)
    torch.testing.assert_close(tokens[:, 0], avg)
    # deslicing with the same weights broadcasts each patch mean back to its points
    back = deslice(tokens, w).reshape(b, H, W, c)
    torch.testing.assert_close(back, avg.reshape(b, H // p, W // p, c).repeat_interleave(p, 1).repeat_interleave(p, 2))


def test_decoder_of_encoder_shapes_and_modes():
    enc = SliceEncoder(12, n_heads=3, n_slices=5).to(DT)
    x = torch.randn(2, 17, 12, dtype=DT)
    tokens, w = enc(x)
    for dec in (
        SliceDecoder("shared"),
        SliceDecoder("separate", 12, 3, 5),
        SliceDecoder("literal", 12, 3, 5, n_points=17),
    ):
        y = dec.to(DT)(tokens, w, x)
        assert y.shape == (2, 17, 12)
    with pytest.raises(ValueError, match="not mesh-independent"):
        SliceDecoder("literal", 12, 3, 5, n_points=16).to(DT)(tokens, w, x)
    with pytest.raises(ConfigError, match="n_points"):
        SliceDecoder("literal", 12, 3, 5)


def test_permuting_points_permutes_weights_and_keeps_tokens():
    enc = SliceEncoder(8, n_heads=2, n_slices=4).to(DT)
    att = PhysicsAttention(8, 2, 4).to(DT)
    x = torch.randn(2, 25, 8, dtype=DT)
    perm = torch.randperm(25)
    t1, w1 = enc(x)
    t2, w2 = enc(x[:, perm])
    torch.testing.assert_close(t1, t2)
    torch.testing.assert_close(w1[:, :, perm], w2)
    torch.testing.assert_close(deslice(t1, w1)[:, perm], deslice(t2, w2))
    torch.testing.assert_close(att(x)[:, perm], att(x[:, perm]))


def test_conv2d_projection_needs_the_grid():
    enc = SliceEncoder(8, n_heads=2, n_slices=4, projection="conv2d")
    with pytest.raises(ValueError, match="index grid"):
        enc(torch.randn(1, 12, 8), grid=(3, 3))


def test_bad_configuration():
    with pytest.raises(ConfigError, match="divisible"):
        SliceEncoder(10, n_heads=4)
    with pytest.raises(ConfigError, match="projection"):
        SliceEncoder(8, projection="conv3d")


def test_physics_attention_matches_an_explicit_per_head_loop():
    """Transolver Eqs. 1-4 written out head by head: slice, softmax attention among slices, deslice."""
    D, H, M, N = 8, 2, 3, 10
    att = PhysicsAttention(D, H, M).to(DT)
    x = torch.randn(1, N, D, dtype=DT)
    enc = att.encoder
    xm = enc.in_project_x(x)[0].reshape(N, H, D // H)
    fm = enc.in_project_fx(x)[0].reshape(N, H, D // H)
    out = torch.zeros(N, H, D // H, dtype=DT)
    for h in range(H):
        w = torch.softmax(enc.in_project_slice(xm[:, h]) / enc.temperature[0, h, 0, 0], dim=-1)  # (N, M)
        z = (w.T @ fm[:, h]) / (w.sum(0)[:, None] + enc.eps)
        a = torch.softmax(att.to_q(z) @ att.to_k(z).T / (D // H) ** 0.5, dim=-1)
        out[:, h] = w @ (a @ att.to_v(z))
    torch.testing.assert_close(att(x)[0], att.to_out(out.reshape(N, D)), rtol=1e-12, atol=1e-12)


def test_conv2d_projection_convolves_the_row_major_index_grid():
    """Point n = i * W + j sits at row i, column j of the (H, W) index grid: the 3x3 projection of a point equals
    an explicit sum over its in-grid neighbours (zero padding), on a non-square grid, so a swapped H / W or a
    column-major reading fails."""
    torch.manual_seed(0)
    H, W, dim = 3, 5, 4
    enc = SliceEncoder(dim, n_heads=2, n_slices=3, projection="conv2d").double()
    conv = enc.in_project_x
    x = torch.randn(2, H * W, dim, dtype=DT)
    got = enc._project(conv, x, (H, W)).transpose(1, 2).reshape(2, H * W, dim)  # (B, N, dim)
    want = torch.zeros_like(got)
    for i in range(H):
        for j in range(W):
            acc = conv.bias.expand(2, dim).clone()
            for di in (-1, 0, 1):
                for dj in (-1, 0, 1):
                    if 0 <= i + di < H and 0 <= j + dj < W:
                        acc = acc + x[:, (i + di) * W + (j + dj)] @ conv.weight[:, :, di + 1, dj + 1].T
            want[:, i * W + j] = acc
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
