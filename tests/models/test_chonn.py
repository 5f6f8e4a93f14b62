"""CHONN backbones: parameter counts by formula, order 0 = the U-Net, the FNO branch reducing to FNO, shapes,
checkpoint round trip, and the vision backbone learning sklearn's digits."""

import time

import pytest
import torch

import neurodyn.models as ndm
from neurodyn.errors import ConfigError
from neurodyn.nn.kirchhoff import ckb_parameter_count


def test_chonn1d_parameter_count_and_matched_budgets():
    for orders in [(1,), (3,), (1, 1, 1), (2, 2), (3, 3)]:
        m = ndm.build("chonn1d", orders=orders, width=16, ssm=dict(d_state=8))
        want = 1 * 16 + 16 + sum(ckb_parameter_count(16, o, d_state=8) for o in orders) + 16 * 1 + 1
        assert ndm.count_parameters(m) == want
    # the paper's parameter-matched comparison: 2x2 vs depth 3 differ by < 1 %
    p22 = ndm.count_parameters(ndm.build("chonn1d", orders=(2, 2)))
    p3 = ndm.count_parameters(ndm.build("chonn1d", orders=(1, 1, 1)))
    assert abs(p22 - p3) / p3 < 0.01


def test_chonn1d_shapes_and_circular_padding(device):
    m = ndm.build("chonn1d", orders=(2,), circular_pad=8).to(device)
    x = torch.randn(3, 40, 1, device=device)
    assert m(x).shape == (3, 40, 1)
    # with circular padding the model is equivariant to circular shifts far from... the padded border only
    # approximately; exactly: padding p then cropping equals running on the explicitly padded signal
    m0 = ndm.build("chonn1d", orders=(2,), circular_pad=0).to(device)
    m0.load_state_dict(m.state_dict())
    xp = torch.cat([x[:, -8:], x, x[:, :8]], dim=1)
    torch.testing.assert_close(m(x), m0(xp)[:, 8:48])
    with pytest.raises(ConfigError, match="orders"):
        ndm.build("chonn1d", orders=())


def test_chonn_unet_order0_is_the_unet_and_ckbs_add_their_count():
    torch.manual_seed(0)
    unet = ndm.build("unet", init_features=4)
    torch.manual_seed(0)
    same = ndm.build("chonn_unet", init_features=4, order=0)
    x = torch.randn(2, 20, 20, 1)
    unet.eval(), same.eval()
    assert ndm.count_parameters(same) == ndm.count_parameters(unet)
    torch.testing.assert_close(same(x), unet(x), rtol=0, atol=0)
    for order in (1, 3):
        m = ndm.build(
            "chonn_unet",
            init_features=4,
            order=order,
            ssm=dict(d_state=4),
            ckb_stages=("enc4", "bottleneck", "dec4", "dec1"),
            ckb_blocks=2,
        )
        widths = {"enc4": 32, "bottleneck": 64, "dec4": 32, "dec1": 4}
        extra = sum(2 * ckb_parameter_count(w, order, d_state=4, dims=2, scan="cross") for w in widths.values())
        assert ndm.count_parameters(m) == ndm.count_parameters(unet) + extra
        assert m(x).shape == (2, 20, 20, 1)
        assert m.to(torch.float64)(x.double()).dtype == torch.float64  # nn.Module._apply is not shadowed
    with pytest.raises(ConfigError, match="ckb_stages"):
        ndm.build("chonn_unet", ckb_stages=("middle",))


def test_chonn_fno_replace_skip_reduces_to_fno_with_identity_skip_when_the_gate_is_closed():
    cfg = dict(
        in_channels=3, out_channels=1, modes=(4, 4), width=8, n_layers=3, lifting_channels=0, projection_channels=16
    )
    torch.manual_seed(0)
    fno = ndm.build("fno", **cfg)
    model = ndm.build("chonn_fno", **cfg, order=2, ssm=dict(d_state=4), ckb_layers=(0, 2))
    w = 8
    want = ndm.count_parameters(fno) - 2 * w * w + 2 * ckb_parameter_count(w, 2, d_state=4, dims=2, scan="cross")
    assert ndm.count_parameters(model) == want
    # copy the shared weights, set W_0 = W_2 = I in the FNO and close the CKB gates (W_g = 0 -> g = 0)
    state = {k: v for k, v in fno.state_dict().items() if not k.startswith("skips.")}
    model.load_state_dict(state, strict=False)
    with torch.no_grad():
        for l in (0, 2):
            fno.skips[l].weight.copy_(torch.eye(w))
            model.skips[l].ckb.in_proj.weight[w:].zero_()
        model.skips[1].weight.copy_(fno.skips[1].weight)
    x = torch.randn(2, 12, 12, 3)
    torch.testing.assert_close(model(x), fno(x))


def test_chonn_fno_parallel_branch_with_downsampling():
    cfg = dict(in_channels=2, out_channels=2, modes=(4, 4), width=8, n_layers=2)
    fno = ndm.build("fno", **cfg)
    m = ndm.build("chonn_fno", **cfg, ckb_mode="parallel", ckb_downsample=2, order=2, ssm=dict(d_state=4), scan="bi")
    assert ndm.count_parameters(m) == ndm.count_parameters(fno) + ckb_parameter_count(
        8, 2, d_state=4, dims=2, scan="bi"
    )

    # parallel: K v + W v + branch(v), so with the FNO's weights and the branch's gate closed (W_g = 0 -> g = 0) it
    # is the FNO; the branch runs on the 2 x 2 average-pooled grid (odd sizes: floor) and is upsampled back
    def copy_fno(model, plain):  # the FNO's weights; a branch layer holds W_l as skips.l.linear
        sd = plain.state_dict()
        model.load_state_dict(
            {k: sd[k.replace(".linear.", ".")] for k in model.state_dict() if ".ckb." not in k}, strict=False
        )

    copy_fno(m, fno)
    seen = []
    m.skips[0].ckb.register_forward_hook(lambda mod, args, out: seen.append(tuple(args[0].shape[1:-1])))
    m1 = ndm.build("chonn_fno", modes=(6,), width=8, ckb_mode="parallel", ckb_downsample=2)  # 1-D FNO
    fno1 = ndm.build("fno", modes=(6,), width=8)
    copy_fno(m1, fno1)
    m1.skips[0].ckb.register_forward_hook(lambda mod, args, out: seen.append(tuple(args[0].shape[1:-1])))
    cases = [
        (m, fno, torch.randn(2, 16, 16, 2)),
        (m, fno, torch.randn(1, 15, 17, 2)),
        (m1, fno1, torch.randn(2, 32, 1)),
    ]
    with torch.no_grad():
        open_out = [model(x) for model, _, x in cases]
        for model in (m, m1):
            for skip in model.skips:
                if hasattr(skip, "ckb"):
                    skip.ckb.in_proj.weight[skip.ckb.in_proj.weight.shape[0] // 2 :].zero_()
        for (model, plain, x), y_open in zip(cases, open_out):
            assert y_open.shape == x.shape[:-1] + (model.config.out_channels,)
            torch.testing.assert_close(model(x), plain(x), rtol=1e-5, atol=1e-6)
            assert (y_open - plain(x)).abs().max() > 1e-3 * plain(x).abs().max()  # the open branch contributes
    assert seen[:3] == [(8, 8), (7, 8), (16,)]


def test_checkpoint_round_trip(tmp_path):
    m = ndm.build("chonn_fno", modes=(4, 4), width=8, order=3, ssm=dict(d_state=4))
    ndm.save(m, tmp_path / "m.pt")
    back = ndm.load(tmp_path / "m.pt")
    x = torch.randn(1, 8, 8, 1)
    torch.testing.assert_close(back(x), m(x))
    assert back.config.order == 3


@pytest.mark.slow
def test_vision_backbone_learns_sklearn_digits():
    datasets = pytest.importorskip("sklearn.datasets")
    torch.manual_seed(0)
    data = datasets.load_digits()
    x = torch.tensor(data.images, dtype=torch.float32)[..., None] / 16.0  # (1797, 8, 8, 1)
    y = torch.tensor(data.target)
    perm = torch.randperm(len(y))
    tr, te = perm[:1400], perm[1400:]
    model = ndm.build(
        "chonn_vision",
        in_channels=1,
        num_classes=10,
        patch_size=2,
        dims=(16, 24, 32, 48),
        depths=(1, 1, 1, 1),
        ssm=dict(d_state=2),
        drop_path=0.0,
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    t0 = time.time()
    model.train()
    for _ in range(2):
        for idx in tr[torch.randperm(len(tr))].split(64):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(x[te]).argmax(-1) == y[te]).float().mean().item()
    assert acc > 0.7, f"accuracy {acc:.3f} after {time.time() - t0:.1f} s (chance 0.1)"
    assert model(x[:2]).shape == (2, 10)
