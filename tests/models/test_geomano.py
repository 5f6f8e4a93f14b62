"""GeoMaNO (models/geomano.py, nn/geo_encoder.py): parameter counts, encoder/decoder, presets, experiment API.

Parameter counts. The paper gives none (no count in the text, tables or appendix; Table 5 lists only
depth 8, 16 states and width 64 / 256). The counts are therefore pinned against an independent formula
written here from the module structure, on the paper's Darcy and Navier-Stokes configurations as our
presets build them: Darcy 305,089 (2-D SSM, fixed R, 8 x 8 latent grid, no positional embedding) and NS
3,731,713 (1-D SSM, learnable R, 16 x 16 latent grid, positional embedding). For scale: Transolver's
Darcy model has 2,826,945 and its NS model 11,232,321 (tests/models/test_transolver.py), consistent with
the paper's claim of a smaller memory footprint than Transolver (Table 2).
"""
import math

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.experiments import load_experiment
from neurodyn.models.geomano import parameter_count
from neurodyn.nn.geo_encoder import GeoDecoder, GeoEncoder, latent_centres

DT = torch.float64


def lin(a, b, bias=True):
    return a * b + (b if bias else 0)


def kernel_count(D, N, K=4, learnable_r=False):
    di, r = D, math.ceil(D / 16)
    return (lin(D, 2 * di, False) + (di * 9 + di) + K * lin(di, r + 2 * N, False) + K * lin(r, di)
            + K * di * N + K * di + (K * di * N if learnable_r else 0) + 2 * di + lin(di, D, False))


def model_count(c_in, D, T, N, L, out=1, learnable_r=False, pos_embed=False):
    enc = lin(c_in, 2 * D) + lin(2 * D, D) + lin(D, L) + 2 * D + (L * D if pos_embed else 0)
    layer = 2 * D + kernel_count(D, N, learnable_r=learnable_r) + 2 * D + lin(D, D) + lin(D, D)
    return enc + T * layer + 2 * D + lin(D, out)


def _preset_model(preset, scale="paper"):
    cfg = load_experiment(preset, scale)
    m = dict(cfg["model"])
    m.pop("name")
    m["in_channels"] = cfg["data"].get("t_in", 1) if cfg["task"] == "autoregressive" else 1
    return ndm.build("geomano", **m)


def test_parameter_counts_of_the_paper_configurations():
    darcy = _preset_model("geomano/darcy")
    assert ndm.count_parameters(darcy) == model_count(1 + 2, 64, 8, 16, 64) == 305_089
    ns = _preset_model("geomano/navier_stokes")
    assert ndm.count_parameters(ns) == model_count(10 + 2, 256, 8, 16, 256, learnable_r=True, pos_embed=True) \
        == 3_731_713
    for m in (darcy, ns):  # the module's closed form agrees
        assert parameter_count(m.config) == ndm.count_parameters(m)
    # R fixed is a buffer, not a parameter; learnable R adds K * di * N per layer
    learn = ndm.build("geomano", correction="learnable")
    assert ndm.count_parameters(learn) - ndm.count_parameters(darcy) == 8 * 4 * 64 * 16


def test_shapes_resolution_independence_and_grads():
    m = ndm.build("geomano", width=16, n_layers=2, ssm=dict(d_state=4), latent_grid=(4, 4), in_channels=2,
                  out_channels=3)
    for hw in ((16, 16), (20, 12)):
        x = torch.randn(2, *hw, 2, requires_grad=True)
        y = m(x)
        assert y.shape == (2, *hw, 3)
        y.pow(2).mean().backward()
        assert torch.isfinite(x.grad).all()
    assert all(p.grad is not None for n, p in m.named_parameters()), "every parameter is used"
    lit = ndm.build("geomano", width=8, n_layers=1, ssm=dict(d_state=2), latent_grid=(2, 2), decoder="literal",
                    n_points=64)
    assert lit(torch.randn(1, 8, 8, 1)).shape == (1, 8, 8, 1)
    with pytest.raises(ValueError, match="resolution independent"):
        lit(torch.randn(1, 4, 4, 1))


def test_encoder_assignment_keeps_a_grid_and_sums_to_one():
    enc = GeoEncoder(3, 8, latent_grid=(3, 5)).to(DT)
    x = torch.randn(2, 40, 3, dtype=DT)
    z, w, y = enc(x)
    assert z.shape == (2, 3, 5, 8) and w.shape == (2, 40, 15) and y.shape == (2, 40, 8)
    assert torch.allclose(w.sum(-1), torch.ones(2, 40, dtype=DT))
    # Z = LayerNorm(W^T Y), row-major on the latent grid
    ref = torch.nn.functional.layer_norm(torch.einsum("bpl,bpd->bld", w, y), (8,), enc.norm.weight, enc.norm.bias)
    assert torch.allclose(z.reshape(2, 15, 8), ref)
    # shared decoder: Y[p] = sum_l W[p, l] Z[l], then Linear(LN(.))
    dec = GeoDecoder(8, 2, latent_grid=(3, 5)).to(DT)
    out = dec(z, w, y)
    back = torch.einsum("bpl,bld->bpd", w, z.reshape(2, 15, 8))
    assert torch.allclose(out, dec.proj(dec.norm(back)))


def test_locality_prior_assigns_points_to_their_cell():
    enc = GeoEncoder(3, 8, latent_grid=(4, 4), assign_prior=50.0).to(DT)
    g = torch.linspace(0, 1, 12, dtype=DT)
    coords = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(1, 144, 2)
    w = enc.weights(enc.lift(torch.randn(1, 144, 3, dtype=DT)), coords)
    nearest = torch.cdist(coords[0], latent_centres((4, 4), DT)).argmin(-1)
    assert (w[0].argmax(-1) == nearest).float().mean() > 0.95


def test_patch_encoder_and_positional_embedding():
    m = ndm.build("geomano", width=8, n_layers=1, ssm=dict(d_state=2), encoder="patch", patch_size=4,
                  latent_grid=(3, 3),
                  pos_embed=True, ssm_kind="1d", correction="learnable")
    assert m(torch.randn(2, 13, 10, 1)).shape == (2, 13, 10, 1)        # padded to 16 x 12 -> 4 x 3 tokens


def test_option_errors():
    with pytest.raises(ConfigError, match="only for ssm='2d'"):
        ndm.build("geomano", ssm_kind="1d", directions="corners")
    with pytest.raises(ConfigError, match="LayerNorm bias"):
        ndm.build("geomano", head="linear_ln")
    with pytest.raises(ConfigError, match="n_points"):
        ndm.build("geomano", decoder="literal")
    with pytest.raises(ValueError, match="regular grid"):
        ndm.build("geomano", width=8, n_layers=1)(torch.randn(2, 16, 1))


def test_checkpoint_round_trip(tmp_path):
    m = ndm.build("geomano", width=8, n_layers=1, ssm=dict(d_state=2), latent_grid=(2, 2), correction="learnable",
                  directions=["tl", "br"], r_order="directions", r_pattern="01")
    ndm.save(m, tmp_path / "m.pt")
    m2 = ndm.load(tmp_path / "m.pt")
    x = torch.randn(1, 6, 6, 1)
    assert torch.equal(m(x), m2(x))


def test_presets_load_and_tiny_scale_trains_through_the_experiment_api(tmp_path, data_dir):
    from neurodyn.train.experiment import run_experiment

    for preset in ("geomano/darcy", "geomano/navier_stokes"):
        for scale in ("tiny", "cpu", "paper"):
            cfg = load_experiment(preset, scale)
            assert cfg["model"]["name"] == "geomano"
            assert cfg["train"]["optimizer"] == "adamw" and cfg["train"]["scheduler"] == "onecycle"
        paper = load_experiment(preset, "paper")
        assert paper["model"]["n_layers"] == 8 and paper["model"]["ssm"]["d_state"] == 16
        assert paper["train"]["lr"] == 3e-4
    assert load_experiment("geomano/darcy", "paper")["train"]["loss"] == "rel_l2+grad"
    cfg = load_experiment("geomano/darcy", "tiny", ["train.epochs=1"])
    final = run_experiment(cfg, tmp_path / "darcy", progress=False)
    assert 0 < final["rel_l2"] < 10


def test_ablation_driver_covers_table_3_and_is_registered(tmp_path):
    import json

    from pathlib import Path

    from neurodyn import bench

    script = bench.load_script(Path(__file__).resolve().parents[2] / "benchmarks" / "geomano_ablation.py")
    PAPER, VARIANTS, ablation_table = script.PAPER, script.VARIANTS, script.ablation_table

    assert "geomano-ablation" in bench.available() and bench.BENCHMARKS["geomano-ablation"].script == "geomano_ablation.py"
    rows = {(b,) + tuple(row) for b in VARIANTS for _, row in VARIANTS[b].values() if row}
    assert rows == set(PAPER)                                   # every row of Table 3 has a variant, and no more
    for b in VARIANTS:
        for label, (ov, _) in VARIANTS[b].items():              # every variant builds
            cfg = load_experiment({"darcy": "geomano/darcy", "ns": "geomano/navier_stokes"}[b], "tiny", ov)
            m = dict(cfg["model"])
            m.pop("name")
            ndm.build("geomano", **m)
    for seed, val in ((0, 0.02), (1, 0.03)):
        rec = {"label": "2d-0011", "bench": "darcy", "seed": seed, "scale": "cpu", "params": 10, "epochs": 3,
               "final_rel_l2": val, "train_seconds": 30.0, "paper_row": ["2d", False, "0011"],
               "overrides": VARIANTS["darcy"]["2d-0011"][0]}
        (tmp_path / f"darcy-2d-0011-s{seed}.json").write_text(json.dumps(rec))
    table = ablation_table(tmp_path)
    assert "| darcy | 2D | – | 0011 | 2d-0011 | 10 | 0,1 | 3 | 0.0250 +- 0.0071 | 0.00362 |" in table
