"""NAC layer against independent oracles: fine Euler integration, the steady limit, Theorem 1's bounds on the
layer, the ncps wiring (the ODE-logit and Top-K kernels themselves: tests/ops/test_nac_kernels.py)."""

import numpy as np
import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.nn.nac import PAPER, RELEASED, TUNED, NACAttention, NACOptions, resolve_options
from neurodyn.nn.ncp import NCPCell, build_autoncp, units_backbone, units_sensory, wiring_groups
from neurodyn.ops.nac_logits import exact_logits, steady_logits
from tests.ops.helpers import nac_gates as _gates


def _layer(**kw):
    torch.manual_seed(0)
    args = dict(in_features=3, d_model=16, n_heads=4, topk=4)
    args.update(kw)
    return NACAttention(**args)


def _inputs(B=2, T=12, C=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, generator=g)
    t = torch.rand(B, T, generator=g).cumsum(1) / T
    return x, t


# ---------------------------------------------------------------------------------------- the ODE
def test_layer_euler_mode_converges_to_exact_mode():
    x, t = _inputs()
    exact = _layer(mode="exact")
    euler = _layer(mode="euler", euler_steps=4000)
    euler.load_state_dict(exact.state_dict())
    with torch.no_grad():
        _, de = exact(x, t, return_details=True)
        _, du = euler(x, t, return_details=True)
    assert (de["logits"] - du["logits"]).abs().max() < 1e-3
    coarse = _layer(mode="euler", euler_steps=1)
    coarse.load_state_dict(exact.state_dict())
    with torch.no_grad():
        _, dc = coarse(x, t, return_details=True)
    assert (de["logits"] - dc["logits"]).abs().max() > 1e-3  # the comparison can fail


def test_steady_is_the_limit_of_exact_as_t_grows():
    phi, omega, _, a0 = _gates(signed=True)
    for t in (1.0, 10.0, 100.0):
        gap = (exact_logits(phi, omega, t, a0) - steady_logits(phi, omega)).abs()
        assert torch.all(gap <= (a0 - phi / omega).abs() * torch.exp(-omega * t) + 1e-12)  # Corollary 1
    assert (exact_logits(phi, omega, 200.0, a0) - steady_logits(phi, omega)).abs().max() < 1e-3
    # the layer: a long time horizon makes exact-mode logits the steady ones (same t in the quadrature)
    x, t = _inputs()
    steady = _layer(mode="steady", time_horizon=1e4)
    exact = _layer(mode="exact", time_horizon=1e4)
    exact.load_state_dict(steady.state_dict())
    with torch.no_grad():
        ys, ds = steady(x, t, return_details=True)
        ye, de = exact(x, t, return_details=True)
    assert (ds["logits"] - de["logits"]).abs().max() < 1e-4 and (ys - ye).abs().max() < 1e-3
    short = _layer(mode="exact")
    short.load_state_dict(steady.state_dict())
    with torch.no_grad():
        _, d1 = short(x, t, return_details=True)
    assert (d1["logits"] - ds["logits"]).abs().max() > 0.05


@pytest.mark.parametrize("mode", ["exact", "euler", "steady"])
@pytest.mark.parametrize("phi_activation", ["sigmoid", "tanh"])
def test_layer_logits_inside_theorem_1_bounds(mode, phi_activation):
    x, t = _inputs(B=3, T=16)
    layer = _layer(mode=mode, phi_activation=phi_activation)
    with torch.no_grad():
        _, d = layer(x, t, return_details=True)
    A = d["phi"] / d["omega"]  # per-pair equilibrium (M = 1)
    lo, hi = torch.minimum(torch.zeros_like(A), A), torch.maximum(torch.zeros_like(A), A)
    a = d["logits"]
    assert torch.all(a >= lo - 1e-6) and torch.all(a <= hi + 1e-6)
    if phi_activation == "tanh":
        assert (A < 0).any() and (A > 0).any()  # both signs exercised


# ---------------------------------------------------------------------------------------- gates
def test_phi_and_omega_depend_on_the_pair_in_paper_mode_and_not_in_released_mode():
    x, t = _inputs(B=2, T=10)
    paper = _layer(compat="paper")
    _, d = paper(x, t, return_details=True)
    assert d["phi"].std() > 1e-3 and d["omega"].std() > 1e-3
    grad = torch.autograd.grad(d["phi"].sum() + d["omega"].sum(), paper.gates["q"].W_in, allow_unused=True)[0]
    assert grad is not None and grad.abs().sum() > 0  # d phi / d u != 0
    released = _layer(compat="released")
    with torch.no_grad():
        _, d = released(x, t, return_details=True)
    assert d["phi"].std() < 1e-6 and d["omega"].std() < 1e-6  # the released code's constant gates
    with torch.no_grad():
        _, ds = _layer(compat="released", mode="steady")(x, t, return_details=True)
    assert ds["logits"].max() < 1.0


def test_sizing_rules_match_the_paper_and_give_d_model_sensory_neurons():
    assert [units_sensory(d) for d in (16, 32, 64, 100)] == [26, 53, 106, 166]
    assert [units_backbone(d) for d in (16, 32, 64, 100)] == [42, 85, 170, 266]
    for d in (2, 3, 7, 16, 33, 64):
        w = build_autoncp(units_sensory(d), 0, 5, 0.5)
        assert len(wiring_groups(w)["inter"]) == d


@pytest.mark.parametrize("dense", [False, True])
def test_masks_follow_the_ncps_wiring(dense):
    w = build_autoncp(units_backbone(16), 2, 8, 0.5, seed=7)
    cell = NCPCell(
        w, input_group="inter", output_group="motor", disabled=("command",), activation="tanh", dense_input=dense
    )
    groups = wiring_groups(w)
    assert torch.equal(cell.mask_rec, torch.as_tensor(np.abs(w.adjacency_matrix), dtype=torch.float32))
    if dense:
        want = torch.zeros(8, w.units)
        want[:, groups["inter"]] = 1
    else:
        want = torch.as_tensor(np.abs(w.sensory_adjacency_matrix), dtype=torch.float32)
        assert want[:, groups["command"] + groups["motor"]].sum() == 0  # ncps feeds inputs to inter only
    assert torch.equal(cell.mask_in, want)
    # masked weights get zero gradient and cannot influence the output
    u = torch.randn(32, 8)
    cell.forward_unpruned(u, unfolds=3).sum().backward()
    if cell.feedforward_only:  # no active neuron feeds an active one: W_rec is a buffer, not a parameter
        assert "W_rec" not in dict(cell.named_parameters()) and "W_rec" in cell.state_dict()
    else:
        assert torch.all(cell.W_rec.grad[0][cell.mask_rec == 0] == 0)
    assert torch.all(cell.W_in.grad[0][cell.mask_in == 0] == 0)
    # disabled neurons hold zero state
    state = cell.step(cell.input_drive(u), None)
    assert torch.all(state[:, groups["command"]] == 0)


def test_pruned_and_fast_paths_equal_the_step_by_step_reference():
    w = build_autoncp(units_backbone(16), 2, 8, 0.5)
    for cells in (1, 3):
        cell = NCPCell(w, activation="tanh", n_cells=cells)
        u = torch.randn(*((cells,) if cells > 1 else ()), 20, 8)
        for unfolds in (1, 2, 3, 5):
            assert torch.allclose(cell(u, unfolds), cell.forward_unpruned(u, unfolds), atol=1e-6)
    gate_w = build_autoncp(units_sensory(16), 0, 5, 0.5)
    gate = NCPCell(gate_w, "inter", "inter", ("command", "motor"))
    assert gate.feedforward_only
    x = torch.randn(2, 9, 5)
    assert torch.allclose(gate.scan(x), gate.scan_stepwise(x), atol=1e-6)


# ---------------------------------------------------------------------------------------- Top-K
# ---------------------------------------------------------------------------------------- the layer
@pytest.mark.parametrize("topk", [3, None])
def test_padding_does_not_change_valid_outputs(topk):
    # exact Top-K / all pairs: (Algorithm 2's block size floor(sqrt(T_k)) depends on the padded length,
    # so the block method may pick other keys when padding is appended)
    layer = _layer(mode="exact", topk=topk, topk_method="exact")
    x, t = _inputs(B=1, T=10)
    mask = torch.ones(1, 10, dtype=torch.bool)
    xp = torch.cat([x, 100 * torch.randn(1, 6, 3)], 1)
    tp = torch.cat([t, t[:, -1:].expand(1, 6)], 1)
    mp = torch.cat([mask, torch.zeros(1, 6, dtype=torch.bool)], 1)
    with torch.no_grad():
        y = layer(x, t, mask)
        yp, d = layer(xp, tp, mp, return_details=True)
    assert torch.allclose(y, yp[:, :10], atol=1e-5)
    assert not (d["attn"] * (~d["valid"])).any()


def test_shapes_edge_cases_and_multi_head():
    for topk, T in ((8, 1), (8, 5), (None, 6), (2, 9)):
        layer = _layer(topk=topk)
        x, t = _inputs(B=2, T=T)
        y, d = layer(x, t, return_details=True)
        ke = T if topk is None or topk >= T else topk
        assert y.shape == (2, T, 16) and d["attn"].shape == (2, 4, T, ke)
        assert torch.allclose(d["attn"].sum(-1), torch.ones(2, 4, T), atol=1e-5)
    # per-head parameters: heads differ even for identical q/k halves
    layer = _layer()
    assert layer.backbone.n_cells == 4 and _layer(shared_backbone=True).backbone.n_cells == 1
    # a sequence whose keys are all masked outputs zeros from attention (then the output bias)
    x, t = _inputs(B=1, T=4)
    with torch.no_grad():
        y = layer(x, t, torch.zeros(1, 4, dtype=torch.bool))
    assert torch.allclose(y, layer.out.bias.expand_as(y))


def test_timestamps_enter_through_the_time_gate():
    layer = _layer(mode="exact")
    x, t = _inputs()
    with torch.no_grad():
        y1 = layer(x, t)
        y2 = layer(x, 3 * t)
        y0 = layer(x, None)
        y_delta = _layer(mode="exact", pair_time="delta")(x, t)
    assert not torch.allclose(y1, y2) and not torch.allclose(y1, y0)
    assert y_delta.shape == y1.shape


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(mode="rk4"), "mode"),
        (dict(d_model=10, n_heads=4), "divisible"),
        (dict(sparsity=0.05), "sparsity"),
        (dict(compat="tf"), "compat"),
        (dict(topk=0), "topk"),
        (dict(topk_method="approx"), "topk_method"),
        (dict(unknown_option=1), "unknown NAC option"),
        (dict(eps=0.0), r"eps=0.0 must be > 0"),
        (dict(euler_dt=-1.0), r"euler_dt=-1.0 must be >= 0"),
        (dict(backbone_unfolds=0), r"backbone_unfolds=0 must be a whole number >= 1"),
        (dict(tied_heads=1), "tied_heads=1 is not true or false"),
        (dict(pair_time="now"), "pair_time"),
    ],
)
def test_bad_configuration_gets_one_clear_sentence(kwargs, needle):
    with pytest.raises(ConfigError, match=needle) as e:
        _layer(**kwargs)
    assert "\n" not in str(e.value)


def test_bad_inputs_get_one_clear_sentence():
    layer = _layer()
    x, t = _inputs(B=2, T=5)
    for args, needle in (
        ((x[..., :2], t), r"\(B, T, 3\)"),
        ((x, t[:, :4]), "timestamps"),
        ((x, t, torch.ones(2, 6, dtype=torch.bool)), "mask"),
    ):
        with pytest.raises(ValueError, match=needle):
            layer(*args)


# ---------------------------------------------------------------------------------------- the profiles
def test_paper_profile_is_what_the_paper_prints_and_else_the_released_code():
    """compat="paper": each value with the place of paper 002 it comes from; where the paper is silent, the
    released code (RELEASED); where its literal text cannot work, the reading it forces (tested below)."""
    opt = resolve_options("paper")
    assert opt == PAPER and not opt.unset()
    # printed by the paper
    assert opt.tied_heads is False  # §2.2: a backbone "with two heads", "separate head layers"
    assert opt.dense_sensory is False  # Algorithm 1: M_in <- |A_in|
    assert opt.shared_backbone is False  # §2.2.1: each head has "its own parameterization of phi and omega"
    assert opt.topk_method == "block"  # Algorithm 2: block centroids, B_s = floor(sqrt(T_k))
    assert opt.topk_spare_blocks == 0  # Algorithm 2: top_k(S_coarse, ceil(K / B_s)) blocks, no more
    assert opt.quadrature == "time"  # §2.2, eq. 19: sum_i alpha^(i) v^(i) t^(i)
    assert opt.time_horizon == 1.0  # §2.2: t = sigma(t_a t_sample + t_b), "t in [0, 1]"
    assert opt.learn_horizon is False  # §2.2: no scale of t to learn
    # readings the paper forces
    assert opt.backbone_unfolds == 3  # Alg. 1 + eq. 14: the input reaches the motor neurons on update 3
    assert opt.backbone_activation == "tanh"  # Thm. 2 needs "nonlinear activations" (tanh: our pick)
    assert opt.euler_dt == 0.0  # eq. 2 steps over [0, T] (§2.1): dt = t / euler_steps
    # silent: the released code
    assert (opt.eps, opt.ncp_init, opt.front_init) == (RELEASED.eps, RELEASED.ncp_init, RELEASED.front_init)
    assert opt.pair_time == RELEASED.pair_time == "query"  # §2.2 "the sample's timestamp"; the code: t per query
    assert opt.euler_steps == 6  # the released experiment scripts (layer default 5)


def test_released_and_tuned_profiles():
    # the authors' released code (docs/papers/notes-nac.md §2.14-2.15)
    assert resolve_options("released") == NACOptions(
        tied_heads=True,
        backbone_unfolds=1,
        backbone_activation="linear",
        dense_sensory=True,
        shared_backbone=True,
        topk_method="exact",
        topk_spare_blocks=0,
        euler_steps=5,
        euler_dt=0.5,
        quadrature="none",
        eps=1e-6,
        ncp_init="glorot",
        front_init="glorot",
        time_horizon=1.0,
        learn_horizon=False,
        pair_time="query",
    )
    # our measured choices (the NAC results page): the paper profile but for these, i.e. what compat="paper"
    # meant before
    tuned = resolve_options("tuned")
    assert tuned == TUNED
    differ = {f for f in NACOptions.__dataclass_fields__ if getattr(tuned, f) != getattr(PAPER, f)}
    assert differ == {"topk_spare_blocks", "eps", "ncp_init", "front_init", "time_horizon", "pair_time"}
    assert (
        tuned.topk_spare_blocks,
        tuned.eps,
        tuned.ncp_init,
        tuned.front_init,
        tuned.time_horizon,
        tuned.pair_time,
    ) == (1, 1e-5, "fan_in", "he", 10.0, "delta")


def test_an_option_given_wins_over_every_profile():
    for compat in ("paper", "released", "tuned"):
        opt = resolve_options(compat, {"time_horizon": 5, "tied_heads": None}, pair_time="key")
        assert (opt.time_horizon, opt.pair_time) == (5.0, "key")
        assert opt.tied_heads == resolve_options(compat).tied_heads  # None: the profile's
    # a value that happens to be another profile's default is still the user's
    assert resolve_options("tuned", NACOptions(time_horizon=1.0)).time_horizon == 1.0
    layer = _layer(compat="released", options={"backbone_unfolds": 3}, tied_heads=False)
    assert layer.opt.backbone_unfolds == 3 and not layer.opt.tied_heads and layer.opt.dense_sensory


@pytest.mark.parametrize("unfolds", [1, 2, 3])
def test_the_input_reaches_phi_and_omega_on_the_third_backbone_update(unfolds):
    """The forced reading of Algorithm 1: from the zero state the input enters the inter neurons, the command
    neurons see it one update later and the motor neurons (phi, omega; eq. 14) on the third."""
    x, t = _inputs(B=2, T=10)
    with torch.no_grad():
        _, d = _layer(backbone_unfolds=unfolds)(x, t, return_details=True)
    spread = lambda a: a.transpose(0, 1).flatten(1).std(1).min()  # per head, over every pair of the batch
    varies = spread(d["phi"]) > 1e-4 and spread(d["omega"]) > 1e-4
    assert varies == (unfolds >= 3)


# -------------------------------------- the tuned profile's choices: init, time horizon, pair time
def test_phi_and_omega_vary_with_the_input_at_initialisation():
    """The sparse NCP masks keep a few synapses per neuron; with dense (Glorot / orthogonal) scaling the
    three-layer backbone (and PyTorch's default conv front end) shrank the signal ~10x, so phi ~ 0.50 +- 0.005
    and omega ~ 0.69 +- 0.01 whatever the input. The tuned profile's fan-in init on the sparse graph (and He conv
    init) keeps them input-dependent; the released code's Glorot init (also the paper profile's, the paper giving
    none) stays input-blind at step 0."""
    from neurodyn.models import build

    torch.manual_seed(0)
    B, T = 64, 32
    x, t = torch.randn(B, T, 2), torch.sort(torch.rand(B, T), 1).values
    model = build(
        "nac", dict(in_channels=2, out_channels=10, d_model=32, n_heads=4, conv_channels=(32, 32), compat="tuned")
    )
    layer = NACAttention(8, d_model=32, n_heads=4, compat="tuned")
    with torch.no_grad():
        dm = model.details(x, t)
        _, dl = layer(torch.randn(B, T, 8), t, return_details=True)
    for d in (dm, dl):  # std across inputs (the batch), averaged over heads, queries and slots
        assert d["phi"].std(0).mean() > 0.03 and d["omega"].std(0).mean() > 0.06
    for compat in ("paper", "released"):
        torch.manual_seed(0)
        old = NACAttention(8, d_model=32, n_heads=4, compat=compat)
        assert old.opt.ncp_init == "glorot"
        with torch.no_grad():
            _, do = old(torch.randn(B, T, 8), t, return_details=True)
        assert do["phi"].std(0).mean() < 0.02


def test_fan_in_init_preserves_the_variance_through_the_sparse_backbone():
    wiring = build_autoncp(units_backbone(16), 2, 8, 0.5, 22222)
    torch.manual_seed(0)
    u = torch.randn(4096, 8)
    cell = NCPCell(wiring, "inter", "motor", activation="linear", init="fan_in")
    with torch.no_grad():
        y = cell(u, unfolds=3)
    assert 0.3 < y.std() < 3.0  # glorot: ~0.1


def test_learned_time_horizon_is_a_parameter_per_head_and_scales_the_pair_time():
    x, t = _inputs()
    fixed = _layer(time_horizon=10.0)
    learned = _layer(time_horizon=10.0, learn_horizon=True)
    assert "log_horizon" not in dict(fixed.named_parameters()) and "log_horizon" not in fixed.state_dict()
    assert learned.log_horizon.shape == (4,) and learned.log_horizon.requires_grad
    learned.load_state_dict(fixed.state_dict(), strict=False)
    _, d_fixed = fixed(x, t, return_details=True)
    y, d_learned = learned(x, t, return_details=True)
    assert torch.allclose(d_fixed["t"], d_learned["t"], atol=1e-6) and d_fixed["t"].max() > 1.0
    y.square().sum().backward()
    assert learned.log_horizon.grad is not None and learned.log_horizon.grad.abs().sum() > 0
    _, d1 = _layer(time_horizon=1.0)(x, t, return_details=True)
    assert d1["t"].max() < 1.0 and d_fixed["t"].max() <= 10.0


def test_time_horizon_bounds_the_logits_and_the_tuned_profile_widens_it():
    """Eq. 17 gives a <= phi t <= T: with T = 1 (the paper's t = sigma(.)) two softmax weights differ by at most a
    factor e and NAC nearly mean-pools its K keys; the tuned profile's T = 10 lets them separate."""
    x, t = _inputs(B=4, T=16)
    paper, released, tuned = _layer(), _layer(compat="released"), _layer(compat="tuned")
    assert (paper.time_horizon, released.time_horizon, tuned.time_horizon) == (1.0, 1.0, 10.0)
    with torch.no_grad():
        _, d1 = paper(x, t, return_details=True)
        _, d10 = tuned(x, t, return_details=True)
    assert d1["t"].max() <= 1.0 and (d1["logits"] <= d1["phi"].clamp_min(0) + 1e-6).all()
    assert d10["t"].max() > 1.0 and (d10["logits"] <= 10.0 * d10["phi"].clamp_min(0) + 1e-6).all()
    assert _layer(time_horizon=2.5).time_horizon == 2.5


def test_delta_pair_time_sees_only_the_query_key_gap():
    """pair_time='delta' (tuned): t_sample = |t_q - t_k|, so shifting every timestamp leaves the layer unchanged,
    while 'query' (paper, released: t_sample = t_q) changes; a gap between two keys changes 'delta' outputs."""
    x, t = _inputs(B=2, T=12)
    delta, query = _layer(pair_time="delta"), _layer(pair_time="query")
    assert _layer().pair_time == "query" and _layer(compat="tuned").pair_time == "delta"
    with torch.no_grad():
        torch.testing.assert_close(delta(x, t), delta(x, t + 0.7))
        assert not torch.allclose(query(x, t), query(x, t + 0.7))
        t2 = t.clone()
        t2[:, 6:] += 0.5
        assert not torch.allclose(delta(x, t), delta(x, t2))


def test_masked_softmax_matches_torch_and_empty_rows_give_zero_without_nan_gradients():
    from neurodyn.nn.nac import _masked_softmax

    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 5, 8, generator=g, dtype=torch.float64) * 4).requires_grad_(True)
    ok = torch.rand(3, 5, 8, generator=g) > 0.4
    ok[0, 0] = False  # a query with no valid key
    ok[1, 1] = True
    attn = _masked_softmax(logits, ok)
    ref = torch.softmax(logits.masked_fill(~ok, float("-inf")), -1)
    rows = ok.any(-1)
    assert torch.allclose(attn[rows], ref[rows]) and torch.equal(attn[~rows], torch.zeros_like(attn[~rows]))
    (grad,) = torch.autograd.grad((attn * torch.randn(attn.shape, generator=g, dtype=attn.dtype)).sum(), logits)
    assert torch.isfinite(grad).all() and torch.equal(grad[0, 0], torch.zeros(8, dtype=grad.dtype))
    assert torch.autograd.gradcheck(
        lambda a: _masked_softmax(a, ok[:1, 1:3]), (logits[:1, 1:3].detach().clone().requires_grad_(True),)
    )


def test_feedforward_cells_do_not_depend_on_w_rec_and_every_nac_parameter_gets_a_gradient():
    """The sensory gates are feed-forward (no active neuron feeds an active one), so W_rec cannot act: it is held as
    a buffer; DistributedDataParallel then finds no parameter without a gradient."""
    from neurodyn.models import build

    w = build_autoncp(units_backbone(16), 2, 8, 0.5, seed=7)
    cell = NCPCell(w, input_group="inter", output_group="motor", disabled=("command",), activation="tanh")
    assert cell.feedforward_only
    u = torch.randn(4, 6, 8)
    before = cell.scan(u)
    with torch.no_grad():
        cell.W_rec.normal_()
    assert torch.equal(cell.scan(u), before) and torch.equal(cell.scan_stepwise(u), before)
    model = build("nac", in_channels=3, out_channels=4, d_model=8, n_heads=2, dense=(8,))
    x, t = torch.randn(2, 7, 3), torch.linspace(0, 1, 7).expand(2, 7)
    model(x, t=t).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing
