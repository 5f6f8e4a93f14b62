"""Every task's training loss under an outer ``torch.autocast`` (bf16 on the CPU), as Lightning's bf16-mixed and
``train.precision=bf16`` run it: finite, computed in bfloat16 somewhere in the model, and close to the float32 loss
of the same model and batch."""

import pytest
import torch
from torch.utils.data import default_collate

from neurodyn.experiments import available_presets, load_experiment
from neurodyn.nn.mlp import ChannelMLP
from neurodyn.train.losses import available_losses, build_loss

# presets whose data a user supplies (a converted public file: no generator); their models train in other presets
USER_DATA = ("_geofno", "/sequence")
PRESETS = [p for p in available_presets() if not p.startswith("data/") and not p.endswith(USER_DATA)]
# the paper-scale Darcy models; ChannelMLPs this large take the fused path (ops.fused_mlp), which failed under autocast
PAPER_DARCY = ["fno/darcy", "geomano/darcy", "lamo/darcy", "transolver/darcy", "unet/darcy", "chonn_unet/darcy"]


@pytest.fixture(scope="module")
def shared_data(tmp_path_factory):
    """One $NEURODYN_DATA for the module: presets on the same data generate it once."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NEURODYN_DATA", str(tmp_path_factory.mktemp("data")))
    yield
    mp.undo()


def _losses(preset: str, scale: str, overrides=(), n: int = 4) -> tuple[float, float, set]:
    """(float32 loss, outer-autocast loss, dtypes of every module's output under autocast) on one training batch."""
    from neurodyn.data.assembly import build_data
    from neurodyn.train.experiment import build_model, build_task, train_config

    cfg = load_experiment(preset, scale, list(overrides))
    tcfg = train_config(cfg)
    data = build_data(cfg, "cpu", progress=False, train_window_steps=tcfg.window_steps)
    model = build_model(cfg, data["sets"]["train"])
    task = build_task(cfg, data, tcfg)
    train = data["sets"]["train"]
    batch = default_collate([train[i] for i in range(min(n, len(train)))])
    torch.manual_seed(1)  # the same noise / pushforward draws in both calls
    fp32 = task.training_loss(model, batch)
    dtypes = set()
    hooks = [
        m.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype) if torch.is_tensor(o) else None)
        for m in model.modules()
    ]
    torch.manual_seed(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = task.training_loss(model, batch)
    for h in hooks:
        h.remove()
    mixed.backward()  # the backward of the mixed graph runs too
    return fp32.item(), mixed.item(), dtypes


def _check(fp32: float, mixed: float, dtypes: set) -> None:
    assert torch.bfloat16 in dtypes  # autocast reached the model: the comparison below is not float32 twice
    assert mixed == mixed and abs(mixed) != float("inf")
    assert mixed == pytest.approx(fp32, rel=0.05, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_every_presets_loss_works_under_an_outer_autocast(preset, shared_data):
    _check(*_losses(preset, "tiny"))


@pytest.mark.slow
@pytest.mark.parametrize("preset", PAPER_DARCY)
def test_paper_scale_darcy_models_under_an_outer_autocast(preset, shared_data):
    """The paper-scale model of each Darcy preset on two samples at the paper's resolution (solved at it)."""
    res = load_experiment(preset, "paper")["data"]["resolution"]
    over = [f"data.solve_resolution={res}", "data.n_train=2", "data.n_test=1", "data.n_val=0"]
    _check(*_losses(preset, "paper", over, n=2))


def test_fused_channel_mlp_under_autocast_equals_the_plain_layers():
    """A ChannelMLP large enough for the fused path (its hidden layer >= 2^20 values) under autocast computes what
    its plain nn.Linear layers compute under autocast, forward and gradients."""
    mlp = ChannelMLP(3, 2, 128)
    x = torch.randn(2, 64, 64, 3)
    assert mlp.fused and x[..., 0].numel() * 128 >= 1 << 20
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = mlp(x)
        want = torch.nn.Sequential.forward(mlp, x)  # the reference: the plain layers
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    g = torch.randn_like(want, dtype=torch.float32)
    grads = [torch.autograd.grad((y.float() * g).sum(), mlp.parameters()) for y in (got, want)]
    for a, b in zip(*grads):
        assert a.dtype == torch.float32  # the master weights' gradients
        torch.testing.assert_close(a, b, rtol=3e-2, atol=3e-2 * b.abs().max().item())


@pytest.mark.parametrize("name", available_losses())
def test_every_loss_of_a_bfloat16_prediction_is_computed_in_float32_under_autocast(name):
    """A model under autocast hands the loss a bfloat16 prediction: every loss gives what it gives, without autocast,
    for that prediction's values in float32 (nothing inside it is cast down), and a finite float32 number."""
    torch.manual_seed(0)
    target = torch.randn(3, 16, 12, 2) + 2.0
    pred = (target + 0.1 * torch.randn_like(target)).bfloat16()
    loss = build_loss(name)
    want = loss(pred.float(), target)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss(pred, target)
    assert got.dtype == torch.float32 and torch.isfinite(got)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
