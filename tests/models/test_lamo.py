"""LaMO: parameter counts against the paper (Table 6 configs, Table 9 range), the two models (``lamo`` on grids,
``lamo_mesh`` on structured meshes and point clouds), errors.

Parameter counts. The paper gives LaMO's counts only as a range over the six benchmarks, "1.1-4.0" M
(Table 9; its Table 6 lists the architecture per benchmark). Counts are computed here by independent
formulas (below, from the module structure) and compared with the models the presets build. The paper
prints one decimal, so a count "reproduces" a published number when it rounds to it (tolerance +-0.05 M).

* Which reading reproduces the published numbers: the authors' released modules (code readings, pinned
  exactly below; they are also the analytic counts in docs/papers/notes-lamo.md 2.9). The grid model with
  the code's SS2D mixer (x_proj per direction, 3x3 depthwise conv2d, LayerNorm before the gate,
  D per channel) gives 1,145,984 for Darcy -> 1.1 (the low end); the structured-mesh model with the
  code's bi-Mamba2 mixer (B, C, dt from the shared in_proj, per-direction causal conv) and unshared
  encoders gives 4,020,545 for Pipe -> 4.0 (the high end); Airfoil with the code's Hydra mixer
  (d_state 1, expand 1) gives 1,139,577 -> 1.1.
* Our paper-scale presets (Table 6 values: heads 1 / 4, d_state 64 everywhere; on grids Algorithm 1's block
  without a norm and Remark 3.2's corner scans; on meshes the code's mixer per benchmark) round to 1.1
  (Darcy: 1,131,456) and 4.0 (Pipe), and Elasticity / Airfoil lie inside the range. A step per channel (S6,
  ``ssm.dt_mode="channel"``) would give Darcy 1.2 M: Table 9 rules it out, so the presets keep the code's step
  per head.
* Not reproducible: Navier-Stokes. Table 6's NS architecture (width 256, 1024 tokens, MLP ratio 4) has
  9.86 M parameters (9,855,744 with Table 6's 4 heads and no norm, the paper preset; 10,061,312 with the
  code's 16 heads and LayerNorm): outside 1.1-4.0 under any reading (the paper's "3x fewer parameters than
  Transolver" on NS is not supported either: Transolver's NS model has 11.23 M). Pinned as what we have.
* Algorithm 1's own block (Delta, B, C projected from the convolved branch, per direction) would give
  Pipe 4.42 M, which does not round to 4.0: the published maximum comes from the code's bi-Mamba2.
"""

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment

DT = torch.float64


def lamo(**kw):
    """LaMO from keyword options: with ``geometry`` the mesh model ``lamo_mesh``, else the grid model ``lamo``."""
    return ndm.build("lamo_mesh" if "geometry" in kw else "lamo", **kw)


# ------------------------------------------------------------------------------------------------
# independent parameter-count formulas


def lin(a, b, bias=True):
    return a * b + (b if bias else 0)


def ln(d):
    return 2 * d


def mlp(a, h, b):
    return lin(a, h) + lin(h, b)


def ssm_x_proj(D, N, H, K, expand=2, k=3, conv2d=False, norm="layernorm", G=1, dt="head"):
    """Algorithm 1 / code SS2D: in_proj (no bias), depthwise conv, per-direction x_proj, D per channel.
    dt="channel": x_proj emits R = ceil(D / 16) dt values, dt_proj (di x R) and dt_bias per channel."""
    di = int(expand * D)
    conv = (di * k * k + di) if conv2d else K * (di * k + di)
    if dt == "channel":
        R = -(-D // 16)
        dt_params = K * R * di + K * di * R + K * di + K * H  # x_proj dt rows, dt_proj, dt_bias, A_log
    else:
        dt_params = K * H * di + 2 * K * H  # x_proj dt rows, dt_bias, A_log
    return (
        lin(D, 2 * di, False)
        + conv
        + K * 2 * G * N * di
        + dt_params
        + K * di
        + {"layernorm": 2 * di, "rmsnorm": di, "none": 0}[norm]
        + lin(di, D, False)
    )


def ssm_bimamba2(D, N, H, K=2, expand=2, k=3, G=1):
    di = int(expand * D)
    c = di + 2 * G * N
    return lin(D, 2 * di + 2 * G * N + H, False) + K * (c * k + c) + 3 * K * H + di + lin(di, D, False)


def ssm_hydra(D, N, H, expand=2, k=3, G=1):
    di = int(expand * D)
    c = di + 4 * G * N
    return lin(D, 2 * di + 4 * G * N + 2 * H, False) + (c * k + c) + 3 * H + di * H + di + lin(di, D, False)


def grid_lamo(c_in, c_out, D, L, ratio, p, tokens, ssm):
    block = ln(D) + ssm + ln(D) + mlp(D, ratio * D, D)
    return L * block + (lin(p * p * c_in, D) + ln(D)) + tokens * D + (ln(D) + D + D * p * p * c_out)


def slice_encoder(D, He, M, conv):
    proj = lin(D * 9, D) if conv else lin(D, D)
    return 2 * proj + lin(D // He, M) + He


def mesh_lamo(c_in, c_out, D, L, ratio, M, He, ssm, shared, conv, time=False):
    block = ln(D) + ssm + lin(D, D) + ln(D) + mlp(D, int(ratio * D), D)
    enc = slice_encoder(D, He, M, conv) * (1 if shared else L)
    return mlp(c_in, 2 * D, D) + D + (2 * lin(D, D) if time else 0) + L * block + enc + ln(D) + lin(D, c_out)


# ------------------------------------------------------------------------------------------------
# the authors' scripts (code readings), pinned exactly

CODE = {
    # Darcy: LaMO_Regular_Grid, width 64, depth 8, patch 2, 88x88 padded, SS2D d_state 64, ceil(64/16)=4 heads
    "darcy": (
        dict(
            in_channels=1,
            width=64,
            n_layers=8,
            mlp_ratio=4,
            ssm=dict(d_state=64, heads=4, norm="layernorm", act="gelu"),
            grid_size=(85, 85),
            pad_multiple=8,
        ),
        grid_lamo(3, 1, 64, 8, 4, 2, 44 * 44, ssm_x_proj(64, 64, 4, 4, conv2d=True)),
        1_145_984,
    ),
    "ns": (
        dict(
            in_channels=10,
            width=256,
            n_layers=8,
            mlp_ratio=4,
            ssm=dict(d_state=64, heads=16, norm="layernorm", act="gelu"),
            grid_size=(64, 64),
        ),
        grid_lamo(12, 1, 256, 8, 4, 2, 32 * 32, ssm_x_proj(256, 64, 16, 4, conv2d=True)),
        10_061_312,
    ),
    # Pipe: Structured_Mesh_2D_unshared, bi-Mamba2 headdim 32 (8 heads), MLP ratio 2
    "pipe": (
        dict(
            geometry="structured_mesh",
            in_channels=2,
            positional_grid=False,
            width=128,
            mlp_ratio=2,
            ssm=dict(heads=8, layout="fused", combine="mean"),
            share_encoder=False,
        ),
        mesh_lamo(2, 1, 128, 8, 2, 64, 8, ssm_bimamba2(128, 64, 8), False, True),
        4_020_545,
    ),
    # Airfoil: Structured_Mesh_2D_shared, Hydra d_state 1 expand 1 headdim 64 (2 heads)
    "airfoil": (
        dict(
            geometry="structured_mesh",
            in_channels=2,
            positional_grid=False,
            width=128,
            mlp_ratio=1,
            ssm=dict(d_state=1, expand=1, heads=2, layout="hydra"),
            share_encoder=True,
        ),
        mesh_lamo(2, 1, 128, 8, 1, 64, 8, ssm_hydra(128, 1, 2, expand=1), True, True),
        1_139_577,
    ),
    # Plasticity: unshared structured mesh with the time embedding, MLP ratio 1, 4 output channels... as
    # in the notes' analytic count (one output channel per time-conditioned call of the released script)
    "plasticity": (
        dict(
            geometry="structured_mesh",
            in_channels=1,
            width=128,
            mlp_ratio=1,
            ssm=dict(heads=8, layout="fused", combine="mean"),
            share_encoder=False,
            ctx_channels=1,
            time_embedding=True,
        ),
        mesh_lamo(3, 1, 128, 8, 1, 64, 8, ssm_bimamba2(128, 64, 8), False, True, time=True),
        3_790_657,
    ),
}


@pytest.mark.parametrize("bench", sorted(CODE))
def test_code_readings_match_formula_and_pins(bench):
    kw, formula, pinned = CODE[bench]
    n = ndm.count_parameters(lamo(**kw))
    assert n == formula == pinned


def test_code_readings_reproduce_table9_endpoints():
    counts = {b: CODE[b][2] for b in CODE}
    assert round(counts["darcy"] / 1e6, 1) == 1.1 and round(counts["airfoil"] / 1e6, 1) == 1.1
    assert round(counts["pipe"] / 1e6, 1) == 4.0
    assert max(v for b, v in counts.items() if b != "ns") == counts["pipe"]


# ------------------------------------------------------------------------------------------------
# the presets (Table 6 values), printed and compared with Table 9

PRESETS = {"darcy": 1, "ns": 10, "elasticity": 2, "pipe": 2}
PAPER_RANGE = (1.1, 4.0)


GRIDS = {"darcy": [85, 85], "ns": [64, 64]}  # the paper-scale data grids (the trainer sets grid_size from the data)


def preset_model(bench, in_channels, **overrides):
    cfg = dict(load_experiment(f"lamo/{bench}", "paper")["model"])
    name = cfg.pop("name")
    assert name == ("lamo" if bench in GRIDS else "lamo_mesh"), (bench, name)  # Darcy, NS: grids; the rest meshes
    extra = {"grid_size": GRIDS[bench]} if bench in GRIDS else {}
    return ndm.build(name, cfg, in_channels=in_channels, out_channels=1, **extra, **overrides)


def test_table6_presets_against_table9(capsys):
    counts = {b: ndm.count_parameters(preset_model(b, c)) for b, c in PRESETS.items()}
    counts["airfoil"] = ndm.count_parameters(preset_model("airfoil_geofno", 2))
    with capsys.disabled():
        print("\nLaMO parameters (Table 6 presets) vs the paper's Table 9 range 1.1-4.0 M:")
        for b, n in sorted(counts.items()):
            print(f"  {b:>10s}: {n:>10,d}  ({n / 1e6:.2f} M)")
    lo, hi = PAPER_RANGE
    inside = {b: n for b, n in counts.items() if b != "ns"}
    assert all((lo - 0.05) * 1e6 <= n < (hi + 0.05) * 1e6 for n in inside.values()), inside
    assert round(counts["darcy"] / 1e6, 1) == lo and round(counts["pipe"] / 1e6, 1) == hi
    # formulas for the Table 6 readings
    # darcy: Table 6's 1 SSM head, Algorithm 1's block (no norm before the gate)
    assert (
        counts["darcy"]
        == grid_lamo(3, 1, 64, 8, 4, 2, 1936, ssm_x_proj(64, 64, 1, 4, conv2d=True, norm="none"))
        == 1_131_456
    )
    # a step per channel (S6) would not round to Table 9's 1.1 M
    s6 = ndm.count_parameters(preset_model("darcy", 1, ssm=dict(dt_mode="channel")))
    assert s6 == grid_lamo(3, 1, 64, 8, 4, 2, 1936, ssm_x_proj(64, 64, 1, 4, conv2d=True, norm="none", dt="channel"))
    assert round(s6 / 1e6, 1) == 1.2
    assert counts["pipe"] == mesh_lamo(2, 1, 128, 8, 2, 64, 8, ssm_bimamba2(128, 64, 4), False, True)
    assert counts["elasticity"] == mesh_lamo(2, 1, 128, 8, 1, 64, 8, ssm_hydra(128, 64, 4), True, False)
    # Navier-Stokes is outside the published range under every reading (notes-lamo.md, "LaMO model: paper vs code")
    # ns: Table 6's 4 SSM heads, no norm (the code's 16 heads with LayerNorm: 10,061,312)
    assert (
        counts["ns"]
        == grid_lamo(12, 1, 256, 8, 4, 2, 1024, ssm_x_proj(256, 64, 4, 4, conv2d=True, norm="none"))
        == 9_855_744
    )
    code = ndm.count_parameters(preset_model("ns", 10, ssm=dict(heads=16, norm="layernorm")))
    assert code == grid_lamo(12, 1, 256, 8, 4, 2, 1024, ssm_x_proj(256, 64, 16, 4, conv2d=True)) == 10_061_312
    assert counts["ns"] > (hi + 0.05) * 1e6


def test_algorithm1_block_does_not_reproduce_the_published_maximum():
    kw = dict(CODE["pipe"][0], ssm=dict(layout="x_proj", combine="sum", norm="rmsnorm", heads=4))
    n = ndm.count_parameters(lamo(**kw))
    assert n == mesh_lamo(2, 1, 128, 8, 2, 64, 8, ssm_x_proj(128, 64, 4, 2, norm="rmsnorm"), False, True)
    assert round(n / 1e6, 1) == 4.4


def test_darcy_and_ns_token_counts_match_table6():
    assert preset_model("darcy", 1).token_grid == (44, 44)  # 1936 latent tokens (85 padded to 88, patch 2)
    assert preset_model("ns", 10).token_grid == (32, 32)  # 1024


# ------------------------------------------------------------------------------------------------
# behaviour

SMALL = dict(width=16, n_layers=2, ssm=dict(d_state=4, heads=2), mlp_ratio=2)
MESH = dict(SMALL, n_slices=6, slice_heads=4)


def test_point_cloud_is_permutation_equivariant():
    for layout in ("x_proj", "hydra", "fused"):
        kw = dict(MESH, ssm=dict(MESH["ssm"], layout=layout))
        m = ndm.build("lamo_mesh", geometry="point_cloud", in_channels=1, pos_channels=2, **kw).to(DT)
        x, pos = torch.randn(2, 40, 1, dtype=DT), torch.rand(2, 40, 2, dtype=DT)
        perm = torch.randperm(40)
        torch.testing.assert_close(m(x, pos=pos)[:, perm], m(x[:, perm], pos=pos[:, perm]), rtol=1e-10, atol=1e-12)


def test_pos_is_ignored_without_pos_channels():
    """Datasets pass pos also when it is the input itself (Elasticity); pos_channels=0 ignores it."""
    m = ndm.build("lamo_mesh", geometry="point_cloud", in_channels=2, **MESH)
    x = torch.rand(2, 30, 2)
    torch.testing.assert_close(m(x), m(x, pos=x))
    with pytest.raises(ValueError, match=r"\(2, 30, 3\)"):
        ndm.build("lamo_mesh", geometry="point_cloud", in_channels=2, pos_channels=3, **MESH)(x, pos=x)


def test_point_cloud_runs_on_any_number_of_points():
    """The latent tokens are weighted means over the points (slice_normalize), so the operator is defined for any
    N and does not depend on how densely the same cloud is sampled: every point taken k times (N -> k N) gives every
    copy the output of the original point, exactly once the slice totals' eps (1e-5, which would otherwise dominate
    a slice that holds almost no weight) is 0. One point is a cloud too, and a sample's output does not depend on
    the other samples of the batch. Weights moved away from the near-zero initialisation, so that points matter."""
    from neurodyn.nn.slice import SliceEncoder

    torch.manual_seed(0)
    m = ndm.build("lamo_mesh", geometry="point_cloud", in_channels=2, **MESH).to(DT)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() >= 2:
                p.add_(0.3 * torch.randn_like(p))
    for enc in m.modules():
        if isinstance(enc, SliceEncoder):
            enc.eps = 0.0
    x = torch.rand(3, 37, 2, dtype=DT)
    with torch.no_grad():
        y = m(x)
        assert y.shape == (3, 37, 1)
        for k in (2, 5):  # 74 and 185 points
            torch.testing.assert_close(m(x.repeat(1, k, 1)), y.repeat(1, k, 1), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(m(x[1:2]), y[1:2], rtol=1e-12, atol=1e-12)
        one = m(x[:, :1])
        assert one.shape == (3, 1, 1)
        torch.testing.assert_close(m(x[:, :1].repeat(1, 4, 1)), one.repeat(1, 4, 1), rtol=1e-10, atol=1e-12)
        assert (m(x[:, :20]) - y[:, :20]).abs().max() > 1e-2 * y.abs().max()  # not vacuous: other points matter


def test_grid_resolution_handling():
    m = ndm.build("lamo", in_channels=1, grid_size=(12, 12), **SMALL).to(DT)
    with torch.no_grad():
        m.pos_embed.normal_()
    assert m.token_grid == (6, 6)
    assert m._grid_pos_embed((6, 6)) is m.pos_embed  # nominal resolution: the embedding as learned
    for shape in ((12, 12), (13, 9), (20, 16)):  # odd sizes are padded and cropped back
        assert m(torch.randn(2, *shape, 1, dtype=DT)).shape == (2, *shape, 1)
    with torch.no_grad():
        m.pos_embed.fill_(0.7)  # bilinear resizing keeps a constant embedding
    torch.testing.assert_close(m._grid_pos_embed((10, 8)), torch.full((1, 10, 8, 16), 0.7, dtype=DT))
    fixed = ndm.build(
        "lamo", in_channels=1, grid_size=(12, 12), pos_embed_interp=False, grid_transfer="tokens", **SMALL
    )
    with pytest.raises(ValueError, match="token grid"):
        fixed(torch.randn(1, 16, 16, 1))


def smooth_field(n: int, batch: int = 2) -> torch.Tensor:
    """(batch, n, n, 1) samples of smooth fields on the vertex grid x_i = i / (n - 1)."""
    x = torch.linspace(0, 1, n, dtype=DT)
    X, Y = torch.meshgrid(x, x, indexing="ij")
    k = torch.arange(1, batch + 1, dtype=DT)[:, None, None]
    return (torch.sin(torch.pi * k * X) * torch.cos(2 * Y) + X * Y)[..., None]


def test_grid_transfer_resample_agrees_with_the_training_grid_at_shared_points():
    """Zero-shot at 2x resolution (17 points vs 9, the same domain): with grid_transfer='resample' the output
    at the points both grids share equals the output at the training resolution; with 'tokens' it does not
    (each token covers a quarter of the area it was trained on)."""
    torch.manual_seed(0)
    kw = dict(in_channels=1, grid_size=(9, 9), pad_multiple=2, **SMALL)
    resample = ndm.build("lamo", grid_transfer="resample", **kw).to(DT).eval()
    tokens = ndm.build("lamo", grid_transfer="tokens", **kw).to(DT).eval()
    tokens.load_state_dict(resample.state_dict())
    with torch.no_grad():
        resample.pos_embed.normal_()
        tokens.pos_embed.copy_(resample.pos_embed)
        coarse, fine = smooth_field(9), smooth_field(17)
        torch.testing.assert_close(fine[:, ::2, ::2], coarse)
        y9 = resample(coarse)
        torch.testing.assert_close(tokens(coarse), y9)  # the same model at the training grid
        y17 = resample(fine)
        assert y17.shape == (2, 17, 17, 1)
        torch.testing.assert_close(y17[:, ::2, ::2], y9)
        gap = (tokens(fine)[:, ::2, ::2] - y9).abs().max() / y9.abs().max()
        assert gap > 0.05


def test_grid_padding_does_not_leak_into_the_crop():
    """A 6 x 6 grid padded to 8 x 8 (pad_multiple 4): the output is the top-left 6 x 6 crop of the same weights run on
    the input zero-padded at the bottom / right by hand, coordinate channels included (those of the real 6 x 6 grid,
    padded with zeros, not of an 8 x 8 grid). Oracle: a model built for 8 x 8 (no padding of its own) whose
    in_channels take the coordinates as data. The latent scans mix all tokens, so what the padding holds does reach
    the real points: the oracle is not met by any padding (non-zero padding gives another crop)."""
    torch.manual_seed(0)
    m = ndm.build("lamo", in_channels=1, grid_size=(6, 6), pad_multiple=4, **SMALL).to(DT).eval()
    oracle = (
        ndm.build("lamo", in_channels=3, grid_size=(8, 8), pad_multiple=4, positional_grid=False, **SMALL).to(DT).eval()
    )
    assert m.token_grid == oracle.token_grid == (4, 4)
    oracle.load_state_dict(m.state_dict())
    x = torch.randn(2, 6, 6, 1, dtype=DT)
    g = torch.linspace(0, 1, 6, dtype=DT)
    coords = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).expand(2, 6, 6, 2)
    padded = torch.nn.functional.pad(torch.cat([x, coords], -1), (0, 0, 0, 2, 0, 2))  # zeros below and right
    with torch.no_grad():
        m.pos_embed.normal_()
        oracle.pos_embed.copy_(m.pos_embed)
        y = m(x)
        assert y.shape == (2, 6, 6, 1)
        torch.testing.assert_close(y, oracle(padded)[:, :6, :6], rtol=1e-12, atol=1e-12)
        other = padded.clone()
        other[:, 6:], other[:, :, 6:] = 1.0, 1.0
        assert (oracle(other)[:, :6, :6] - y).abs().max() > 1e-3 * y.abs().max()


def test_structured_mesh_and_shared_encoder():
    shared = ndm.build("lamo_mesh", geometry="structured_mesh", in_channels=2, share_encoder=True, **MESH)
    unshared = ndm.build("lamo_mesh", geometry="structured_mesh", in_channels=2, share_encoder=False, **MESH)
    assert shared.blocks[0].mixer.encoder is shared.blocks[1].mixer.encoder is shared.encoder
    enc = sum(p.numel() for p in shared.encoder.parameters())
    assert ndm.count_parameters(unshared) - ndm.count_parameters(shared) == enc * (MESH["n_layers"] - 1)
    x = torch.randn(2, 7, 5, 2)
    assert shared(x).shape == unshared(x).shape == (2, 7, 5, 1)


@pytest.mark.parametrize(
    "kw, x",
    [
        (dict(SMALL, grid_size=(8, 8)), (2, 8, 8, 1)),
        (dict(MESH, geometry="structured_mesh"), (2, 5, 4, 1)),
        (dict(MESH, geometry="point_cloud"), (2, 20, 1)),
    ],
)
def test_float64_and_gradients(kw, x):
    """float64 end to end: autograd's input gradient equals central finite differences (gradcheck, which a float32
    step anywhere inside would fail), the float32 model with the same weights computes the same function to float32
    rounding, and every parameter gets a non-zero gradient."""
    torch.manual_seed(0)
    m32 = lamo(in_channels=1, **kw)
    m = lamo(in_channels=1, **kw).to(DT)
    m.load_state_dict(m32.state_dict())
    with torch.no_grad():
        for p in m.parameters():  # away from the zero / tiny initialisations, so that every term matters
            p.add_(0.05 * torch.randn_like(p))
    m32.load_state_dict(m.state_dict())
    inp = torch.randn(*x, dtype=DT)
    y = m(inp)
    assert y.dtype == DT and y.shape == x[:-1] + (1,)
    torch.testing.assert_close(m32(inp.float()).double(), y, rtol=1e-4, atol=1e-5 * y.abs().max().item())
    assert torch.autograd.gradcheck(
        m, (inp[:1].clone().requires_grad_(True),), eps=1e-6, atol=1e-7, rtol=1e-5, fast_mode=True
    )
    y.square().sum().backward()
    zero = [n for n, p in m.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not zero, f"no gradient reaches {zero}"


def test_time_embedding_reads_ctx():
    m = ndm.build("lamo_mesh", geometry="structured_mesh", in_channels=1, ctx_channels=1, time_embedding=True, **MESH)
    x = torch.randn(1, 5, 4, 1)
    assert not torch.allclose(m(x, ctx=torch.tensor([[0.1]])), m(x, ctx=torch.tensor([[0.9]])))


def _first_direction_only(multi, uni):
    """Silence every scan direction of ``multi`` after the first (C = 0 and D = 0: that direction outputs zero) and
    give ``uni`` (the same model with one direction) the first direction's weights."""
    from neurodyn.nn.mamba import LatentSSM

    with torch.no_grad():
        for ssm in (s for s in multi.modules() if isinstance(s, LatentSSM)):
            ssm.x_proj_weight[1:, ssm.dt_rank + ssm.n_groups * ssm.d_state :] = 0
            ssm.D[1:] = 0
    want = uni.state_dict()
    uni.load_state_dict(
        {k: v[: want[k].shape[0]] if v.shape != want[k].shape else v for k, v in multi.state_dict().items()}
    )


def test_options_build_and_run():
    """Each option builds and runs, and does what it says. Point clouds: every option keeps the model permutation
    equivariant except Eq. 14's literal decoder (a softmax over a fixed list of N points); the separate decoder with
    the encoder's assignment weights copied in is the shared decoder. Directions (point cloud and grid): a preset
    is the sum of its named scans, the first of them row-major / forward: with every later direction silenced,
    "bi", "cross" and "corners" are the "uni" model with the first direction's weights (and not before)."""
    from neurodyn.nn.slice import SliceEncoder

    torch.manual_seed(0)
    x, perm = torch.randn(2, 20, 1, dtype=DT), torch.randperm(20)
    for kw in (
        dict(decoder="separate"),
        dict(decoder="literal", n_points=20),
        dict(ssm=dict(MESH["ssm"], discretization="zoh")),
        dict(ssm=dict(MESH["ssm"], a_mode="diag")),
        dict(directions="uni"),
        dict(slice_normalize=False, slice_value_projection=False),
    ):
        m = ndm.build("lamo_mesh", geometry="point_cloud", in_channels=1, init="torch", **dict(MESH, **kw)).to(DT)
        with torch.no_grad():
            y = m(x)
            assert y.shape == (2, 20, 1)
            equivariant = torch.allclose(m(x[:, perm]), y[:, perm], rtol=1e-10, atol=1e-12)
        assert equivariant == (kw.get("decoder") != "literal"), kw
    shared = ndm.build("lamo_mesh", geometry="point_cloud", in_channels=1, init="torch", **MESH).to(DT)
    separate = ndm.build("lamo_mesh", geometry="point_cloud", in_channels=1, decoder="separate", **MESH).to(DT)
    separate.load_state_dict(shared.state_dict(), strict=False)
    with torch.no_grad():
        assert not torch.allclose(separate(x), shared(x))
        for blk in separate.blocks:
            own = {k: v for k, v in shared.encoder.state_dict().items() if k in blk.mixer.decoder.assign.state_dict()}
            blk.mixer.decoder.assign.load_state_dict(own)
            assert isinstance(blk.mixer.decoder.assign, SliceEncoder)
        torch.testing.assert_close(separate(x), shared(x), rtol=1e-12, atol=1e-12)

    cases = [("point_cloud", "bi", dict(MESH, geometry="point_cloud"), (2, 20, 1))]
    cases += [("grid", d, dict(SMALL, grid_size=(8, 6)), (2, 8, 6, 1)) for d in ("bi", "cross", "corners")]
    for geometry, d, kw, shape in cases:
        torch.manual_seed(1)
        multi = lamo(in_channels=1, directions=d, init="torch", **kw).to(DT)
        uni = lamo(in_channels=1, directions="uni", init="torch", **kw).to(DT)
        inp = torch.randn(*shape, dtype=DT)
        with torch.no_grad():
            if geometry == "grid":
                multi.pos_embed.normal_()
            before = multi(inp)
            _first_direction_only(multi, uni)
            assert not torch.allclose(uni(inp), before, rtol=1e-6), (geometry, d)
            torch.testing.assert_close(multi(inp), uni(inp), rtol=1e-10, atol=1e-12, msg=f"{geometry} {d}")


@pytest.mark.parametrize(
    "kw, call, err, needle",
    [
        (dict(SMALL, grid_size=(8, 8)), dict(x=(2, 8, 8, 3)), ValueError, r"\(batch, H, W, 1\)"),
        (dict(SMALL, grid_size=(8, 8)), dict(x=(2, 8, 8, 1), pos=(2, 64, 2)), ValueError, "lamo_mesh"),
        (dict(SMALL, grid_size=(8, 8)), dict(x=(2, 8, 8, 1), mask=(2, 64)), ValueError, "takes no point mask"),
        (dict(MESH, geometry="point_cloud", pos_channels=2), dict(x=(2, 10, 1)), ValueError, "pos=None"),
        (dict(MESH, geometry="point_cloud", ctx_channels=2), dict(x=(2, 10, 1)), ValueError, "ctx"),
        (dict(MESH, geometry="structured_mesh"), dict(x=(2, 10, 1)), ValueError, "index grid"),
    ],
)
def test_bad_inputs_get_one_clear_sentence(kw, call, err, needle):
    m = lamo(in_channels=1, **kw)
    args = {k: torch.randn(*v) for k, v in call.items()}
    with pytest.raises(err, match=needle):
        m(args.pop("x"), **args)


@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(MESH, geometry="point_cloud", directions="cross"), "grids only"),
        (dict(MESH, geometry="mesh"), "lamo_mesh geometry must be one of 'structured_mesh', 'point_cloud'"),
        (dict(MESH, geometry="point_cloud", slice_heads=3), "slice_heads"),
        (dict(MESH, geometry="point_cloud", time_embedding=True), "ctx_channels"),
        (dict(SMALL, patch_size=0), "patch_size"),
        (dict(SMALL, n_slices=8), "no config field 'n_slices'"),  # a mesh option on the grid model
        (dict(MESH, geometry="point_cloud", grid_size=(8, 8)), "no config field 'grid_size'"),  # and the other way
    ],
)
def test_bad_configs(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        lamo(**kw)


def test_the_two_models_share_one_config_section_and_document_every_field():
    """One shared section (LatentSSMOperatorConfig: width, layers, ssm, directions, ...) under both models; each
    config's docstring names every field once, with its default."""
    import dataclasses

    from neurodyn.models.lamo import LaMOConfig, LaMOMeshConfig, LatentSSMOperatorConfig

    shared = {f.name for f in dataclasses.fields(LatentSSMOperatorConfig)}
    assert {"ssm", "directions", "width", "n_layers"} <= shared
    for name, cls in (("lamo", LaMOConfig), ("lamo_mesh", LaMOMeshConfig)):
        assert ndm.entry(name)[1] is cls and issubclass(cls, LatentSSMOperatorConfig)
        assert ndm.make_config(name, {}).ssm == LatentSSMOperatorConfig().ssm
        for f in dataclasses.fields(cls):
            lines = [line.strip() for line in cls.__doc__.splitlines() if line.strip().startswith(f"{f.name} (")]
            assert len(lines) == 1, f"{cls.__name__}.{f.name} is not documented in one line"
            if f.default is not dataclasses.MISSING:
                assert f", {f.default!r})" in lines[0].replace('"', "'"), (cls.__name__, f.name)
    assert not {f.name for f in dataclasses.fields(LaMOConfig)} & {"geometry", "n_slices", "pos_channels"}


@pytest.mark.slow
def test_tiny_presets_train_through_the_experiment_api(tmp_path, data_dir, tiny_run):
    """lamo/darcy (grid) and lamo/elasticity (point cloud) at tiny scale: data, normalisers, trainer, eval."""
    pytest.importorskip("skfem")
    for preset in ("lamo/darcy", "lamo/elasticity"):
        run = tiny_run(load_experiment(preset, "tiny", ["train.epochs=2"]), tmp_path / preset.replace("/", "-"))
        # the reported test error is the saved model's, in physical units: mean_i |pred_i - y_i| / |y_i| by hand
        assert run.final["rel_l2"] == pytest.approx(run.test_rel_l2_by_hand(), rel=1e-5)
        # training lowered the error on the training samples below that of the initial weights
        before, after = run.train_errors()
        assert after < 0.995 * before, (preset, before, after)
