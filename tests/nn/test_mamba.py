"""LatentSSM (nn/mamba.py) against per-direction, per-head references built from ops.selective_scan_ref.

The references loop over directions and heads explicitly (flip, causal conv with that direction's kernel,
scan with ``selective_scan_ref``, flip back) instead of folding them into channels as the module does.
"""

import pytest
import torch
import torch.nn.functional as F

from neurodyn.errors import ConfigError
from neurodyn.nn.mamba import LatentSSM, mixer_directions
from neurodyn.nn.ssm_config import LatentSSMConfig
from neurodyn.ops import cross_scan_indices, selective_scan_ref

DT = torch.float64


def _act(m):
    return m.act


def _scan_heads(m, k, seq, dt, Bm, Cm, D=None, a_set=None):
    """Scan one direction head by head. seq (b, L, di), dt (b, L, H), Bm/Cm (b, L, G*N) -> (b, L, di)."""
    b, L, di = seq.shape
    H, G, N, P = m.n_heads, m.n_groups, m.d_state, m.head_dim
    a_set = k if a_set is None else a_set
    ys = []
    for h in range(H):
        g = h // (H // G)
        u_h = seq[..., h * P : (h + 1) * P].transpose(1, 2)
        delta = dt[..., h][:, None, :].expand(b, P, L)
        A = -torch.exp(m.A_log[a_set, h]) * torch.ones(P, N, dtype=seq.dtype)
        Bh = Bm[..., g * N : (g + 1) * N].transpose(1, 2)
        Ch = Cm[..., g * N : (g + 1) * N].transpose(1, 2)
        Dh = None if D is None else D(h)
        bias = m.dt_bias[a_set, h].expand(P)
        ys.append(selective_scan_ref(u_h, delta, A, Bh, Ch, D=Dh, delta_bias=bias, delta_softplus=True))
    return torch.cat(ys, dim=1).transpose(1, 2)


def _causal_conv(m, k, seq, C):
    w, bias = m.conv.weight[k * C : (k + 1) * C], m.conv.bias[k * C : (k + 1) * C]
    kc = w.shape[-1]
    return F.conv1d(F.pad(seq.transpose(1, 2), (kc - 1, 0)), w, bias, groups=C).transpose(1, 2)


def reference_1d(m, u):
    """Forward scan + scan of the flipped sequence flipped back, summed (x_proj / fused / hydra layouts)."""
    di, H, G, N, P, K = m.d_inner, m.n_heads, m.n_groups, m.d_state, m.head_dim, m.K
    proj = F.linear(u, m.in_proj.weight, m.in_proj.bias)
    outs = []
    if m.layout == "x_proj":
        x, z = proj.split([di, di], -1)
        for k, d in enumerate(m.directions):
            seq = x.flip(1) if d == "backward" else x
            seq = _act(m)(_causal_conv(m, k, seq, di))
            dt, Bm, Cm = (seq @ m.x_proj_weight[k].T).split([H, G * N, G * N], -1)
            y = _scan_heads(m, k, seq, dt, Bm, Cm, D=lambda h, k=k: m.D[k, h * P : (h + 1) * P])
            outs.append(y.flip(1) if d == "backward" else y)
    elif m.layout == "fused":
        z, xbc, dt = proj.split([di, di + 2 * G * N, H], -1)
        for k, d in enumerate(m.directions):
            fl = (lambda t: t.flip(1)) if d == "backward" else (lambda t: t)
            seq = _act(m)(_causal_conv(m, k, fl(xbc), di + 2 * G * N))
            xs, Bm, Cm = seq.split([di, G * N, G * N], -1)
            y = _scan_heads(m, k, xs, fl(dt), Bm, Cm, D=lambda h, k=k: m.D[k, h].expand(P))
            outs.append(fl(y))
    else:  # hydra
        z, xbc, dt = proj.split([di, di + 2 * K * G * N, K * H], -1)
        kc = m.conv.weight.shape[-1]
        xbc = _act(m)(
            F.conv1d(xbc.transpose(1, 2), m.conv.weight, m.conv.bias, padding=kc // 2, groups=xbc.shape[-1]).transpose(
                1, 2
            )
        )
        x_og, bc = xbc.split([di, 2 * K * G * N], -1)
        for k, d in enumerate(m.directions):
            fl = (lambda t: t.flip(1)) if d == "backward" else (lambda t: t)
            blk = bc[..., 2 * k * G * N : 2 * (k + 1) * G * N]
            Bm, Cm = fl(blk).split([G * N, G * N], -1)
            y = _scan_heads(m, k, fl(x_og), fl(dt[..., k * H : (k + 1) * H]), Bm, Cm, a_set=0)
            y = torch.cat([torch.zeros_like(y[:, :1]), y[:, :-1]], dim=1)  # diagonal excluded
            outs.append(fl(y))
    y = sum(outs) if m.combine == "sum" else sum(outs) / len(outs)
    if m.layout == "hydra":
        y = y + x_og * (x_og @ m.fc_D.weight.T + m.D).repeat_interleave(P, -1)
        y = m.norm(y) * _act(m)(z)
    elif m.layout == "fused":
        y = m.norm(y * _act(m)(z))
    else:
        y = m.norm(y) * _act(m)(z)
    return F.linear(y, m.out_proj.weight, m.out_proj.bias)


def _randomise(m):
    """Non-trivial values for parameters that start as constants (D = 1, norm weight 1, zero conv bias...)."""
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))


@pytest.mark.parametrize(
    "kw",
    [
        dict(layout="x_proj"),
        dict(layout="x_proj", groups=2, combine="mean", norm="layernorm", act="gelu"),
        dict(layout="fused", combine="mean"),
        dict(layout="hydra"),
    ],
)
def test_bidirectional_block_equals_forward_plus_flipped_backward(kw):
    m = LatentSSM(LatentSSMConfig(d_state=3, expand=2, heads=4, d_conv=3, **kw), 6).to(DT)
    _randomise(m)
    u = torch.randn(2, 9, 6, dtype=DT)
    torch.testing.assert_close(m(u), reference_1d(m, u), rtol=1e-9, atol=1e-10)


def _corner_indices(Hh, Ww):
    """Row-major paths TL->BR, BR->TL, TR->BL, BL->TR as flat row-major indices (paper Remark 3.2)."""
    tl = [i * Ww + j for i in range(Hh) for j in range(Ww)]
    tr = [i * Ww + j for i in range(Hh) for j in reversed(range(Ww))]
    return torch.tensor([tl, tl[::-1], tr, tr[::-1]])


@pytest.mark.parametrize("which", ["cross", "corners"])
def test_grid_four_direction_block_matches_reference(which):
    """Four traversals of the token grid (explicit index permutations), shared 3x3 depthwise conv, summed."""
    m = LatentSSM(
        LatentSSMConfig(d_state=3, expand=2, heads=2, norm="layernorm", act="gelu"),
        4,
        mixer_directions(which, grid=True),
    ).to(DT)
    _randomise(m)
    b, Hh, Ww = 2, 3, 5
    u = torch.randn(b, Hh, Ww, 4, dtype=DT)
    di, H, N, P = m.d_inner, m.n_heads, m.d_state, m.head_dim
    x, z = F.linear(u, m.in_proj.weight).split([di, di], -1)
    x = F.conv2d(x.permute(0, 3, 1, 2), m.conv.weight, m.conv.bias, padding=1, groups=di).permute(0, 2, 3, 1)
    x = m.act(x).reshape(b, Hh * Ww, di)
    idx = cross_scan_indices(Hh, Ww, m.directions) if which == "cross" else _corner_indices(Hh, Ww)
    y = torch.zeros(b, Hh * Ww, di, dtype=DT)
    for k in range(4):
        seq = x[:, idx[k]]
        dt, Bm, Cm = (seq @ m.x_proj_weight[k].T).split([H, N, N], -1)
        yk = _scan_heads(m, k, seq, dt, Bm, Cm, D=lambda h, k=k: m.D[k, h * P : (h + 1) * P])
        y[:, idx[k]] += yk
    ref = F.linear(m.norm(y) * m.act(z.reshape(b, Hh * Ww, di)), m.out_proj.weight).reshape(b, Hh, Ww, 4)
    torch.testing.assert_close(m(u), ref, rtol=1e-9, atol=1e-10)


def _jacobian(m, L=7, d=3):
    u = torch.randn(1, L, d, dtype=DT)
    J = torch.autograd.functional.jacobian(lambda v: m(v), u)  # (1, L, d, 1, L, d)
    return J[0, :, :, 0].abs().sum(dim=(1, 3))  # (L_out, L_in)


def test_unidirectional_scan_is_causal_and_bidirectional_is_not():
    uni = LatentSSM(LatentSSMConfig(d_state=2, heads=2), 3, ("forward",)).to(DT)
    bi = LatentSSM(LatentSSMConfig(d_state=2, heads=2), 3, ("forward", "backward")).to(DT)
    Ju, Jb = _jacobian(uni), _jacobian(bi)
    upper = torch.triu(torch.ones_like(Ju, dtype=torch.bool), diagonal=1)
    assert Ju[upper].max() == 0 and Ju[~upper].min() > 0  # lower-triangular kernel (paper Eq. 80)
    assert Jb.min() > 0  # full, non-causal kernel


def test_zoh_discretisation_matches_exact_recurrence():
    """discretization='zoh': h_t = exp(Delta a) h_{t-1} + (exp(Delta a) - 1) / a * B_t x_t (paper Eq. 4-5)."""
    m = LatentSSM(
        LatentSSMConfig(
            d_state=2,
            expand=1,
            heads=1,
            d_conv=1,
            norm="none",
            discretization="zoh",
            dt_range=(0.3, 0.6),
            a_init_range=(1, 2),
        ),
        2,
        ("forward",),
    ).to(DT)
    _randomise(m)
    u = torch.randn(1, 6, 2, dtype=DT)
    x, z = F.linear(u, m.in_proj.weight).split([2, 2], -1)
    x = m.act(x)
    dt, Bm, Cm = (x @ m.x_proj_weight[0].T).split([1, 2, 2], -1)
    a = -torch.exp(m.A_log[0, 0])
    step = F.softplus(dt[..., 0] + m.dt_bias[0, 0])  # (1, L)
    h = torch.zeros(2, 2, dtype=DT)  # (channel, state)
    ys = []
    for t in range(6):
        e = torch.exp(step[0, t] * a)
        h = e * h + ((e - 1) / a) * x[0, t][:, None] * Bm[0, t][None, :]
        ys.append(h @ Cm[0, t] + m.D[0] * x[0, t])
    y = torch.stack(ys)[None]
    ref = F.linear(y * m.act(z), m.out_proj.weight)
    torch.testing.assert_close(m(u), ref, rtol=1e-9, atol=1e-11)
    # Euler (B^ = Delta B, the kernels' choice) is the first-order truncation: visibly different at Delta ~ 0.5
    m.discretization = "euler"
    assert (m(u) - ref).abs().max() > 1e-3 * ref.abs().max()


def test_float32_float64_and_gradients():
    """float32 and float64 compute the reference (per direction and head, ``selective_scan_ref``): float32 to its
    rounding, float64 to 1e-10; float32 gradients of the input and of every parameter match float64's, and the
    float64 input gradient matches finite differences (gradcheck)."""
    torch.manual_seed(0)
    m = LatentSSM(LatentSSMConfig(d_state=4, heads=2), 8)
    _randomise(m)
    u = torch.randn(2, 10, 8, requires_grad=True)
    y = m(u)
    assert y.dtype == torch.float32 and y.shape == u.shape
    gy = torch.randn_like(y)
    (y * gy).sum().backward()
    m64 = LatentSSM(LatentSSMConfig(d_state=4, heads=2), 8).to(DT)
    m64.load_state_dict(m.state_dict())
    u64 = u.detach().to(DT).requires_grad_(True)
    y64 = m64(u64)
    assert y64.dtype == DT
    torch.testing.assert_close(y64, reference_1d(m64, u64), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(y.double(), y64, rtol=1e-5, atol=1e-6)
    (y64 * gy.double()).sum().backward()
    torch.testing.assert_close(u.grad.double(), u64.grad, rtol=1e-4, atol=1e-5)
    for (name, p), p64 in zip(m.named_parameters(), m64.parameters()):
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        torch.testing.assert_close(
            p.grad.double(), p64.grad, rtol=1e-4, atol=1e-5 * p64.grad.abs().max().item(), msg=name
        )
    assert torch.autograd.gradcheck(m64, (u64[:1].detach().clone().requires_grad_(True),), fast_mode=True)


def test_parameter_count_formula_x_proj_layout():
    """d 2di + K(k di + di) + K(H + 2GN) di + K(2H + di) + norm(di) + di d, per the module docstring."""
    d, N, H, G, k, K = 16, 8, 4, 2, 3, 2
    di = 2 * d
    m = LatentSSM(LatentSSMConfig(d_state=N, heads=H, groups=G, d_conv=k), d)
    want = d * 2 * di + K * (k * di + di) + K * (H + 2 * G * N) * di + K * (2 * H + di) + di + di * d
    assert sum(p.numel() for p in m.parameters()) == want


@pytest.mark.parametrize(
    "kw, directions, needle",
    [
        ({}, ("forward", "cross"), "distinct names"),
        (dict(heads=3), ("forward",), "divisible by n_heads"),
        (dict(discretization="zoh", a_mode="diag"), ("forward",), "a_mode='head'"),
        (dict(layout="mamba3"), ("forward",), "layout"),
    ],
)
def test_bad_configs(kw, directions, needle):
    """The scan options are refused by the config (when it is made), the directions and the sizes that depend on
    d_model by the layer."""
    with pytest.raises(ConfigError, match=needle):
        LatentSSM(LatentSSMConfig(**kw), 8, directions)


def test_the_layer_is_built_from_its_config_section():
    """One constructor: the layer keeps the config it was given and reads every scan option from it."""
    cfg = LatentSSMConfig(d_state=5, heads=2, layout="fused", norm="layernorm", a_init_range=(2.0, 3.0))
    m = LatentSSM(cfg, 8, ("forward",))
    assert m.config is cfg and (m.layout, m.norm_kind, m.d_state, m.n_heads) == ("fused", "layernorm", 5, 2)
    assert isinstance(m.norm, torch.nn.LayerNorm) and bool(((-m._A() >= 2.0) & (-m._A() <= 3.0)).all())


def test_cross_directions_are_for_grids_only():
    with pytest.raises(ConfigError, match="grids only"):
        mixer_directions("cross", grid=False)


def test_wrong_input_shape_is_one_sentence():
    m = LatentSSM(LatentSSMConfig(d_state=4, heads=2), 8)
    with pytest.raises(ValueError, match=r"\(batch, L, 8\)"):
        m(torch.randn(2, 10, 7))
    g = LatentSSM(LatentSSMConfig(d_state=4, heads=2), 8, ("row", "col"))
    with pytest.raises(ValueError, match="token grid"):
        g(torch.randn(2, 10, 8))


# ------------------------------ LatentSSM: Mamba-1's diagonal A, a step per channel, the fused head kernel
def test_diag_a_initialises_as_mamba1_s4d_real():
    """a_mode='diag' (paper Remark 2.1, Mamba-1): A_n = -n for n = 1..N in every channel and direction."""
    N = 6
    m = LatentSSM(LatentSSMConfig(d_state=N, heads=2, a_mode="diag"), 8)
    A = m._A()
    assert A.shape == (2, 16, N)
    torch.testing.assert_close(A, -torch.arange(1, N + 1, dtype=torch.float32).expand(2, 16, N))
    # the previous uniform draw stays available; heads keep Mamba-2's U[1, 16]
    uni = LatentSSM(LatentSSMConfig(d_state=N, heads=2, a_mode="diag", a_init="uniform"), 8)
    assert not torch.allclose(uni._A(), A)
    with pytest.raises(ConfigError, match="a_mode='diag'"):
        LatentSSM(LatentSSMConfig(a_init="s4d_real"), 8)


def test_channel_delta_matches_a_per_channel_reference():
    """dt_mode='channel' (the paper's S6, Eq. 7): Delta = softplus(dt_proj(x_proj(x)) + dt_bias) per channel."""
    torch.manual_seed(0)
    d, N, H = 6, 3, 1
    m = LatentSSM(
        LatentSSMConfig(d_state=N, expand=2, heads=H, d_conv=3, dt_mode="channel", a_mode="diag"),
        d,
        ("forward", "backward"),
    ).to(DT)
    _randomise(m)
    assert m.dt_rank == 1 and m.dt_bias.shape == (2, 12) and m.dt_proj_weight.shape == (2, 12, 1)
    u = torch.randn(2, 9, d, dtype=DT)
    di, R = m.d_inner, m.dt_rank
    x, z = F.linear(u, m.in_proj.weight).split([di, di], -1)
    y = 0
    for k, direction in enumerate(m.directions):
        seq = x.flip(1) if direction == "backward" else x
        seq = m.act(_causal_conv(m, k, seq, di))
        dt, Bm, Cm = (seq @ m.x_proj_weight[k].T).split([R, N, N], -1)
        delta = dt @ m.dt_proj_weight[k].T  # (b, L, di): one step per channel
        yk = selective_scan_ref(
            seq.transpose(1, 2),
            delta.transpose(1, 2),
            -torch.exp(m.A_log[k]),
            Bm.transpose(1, 2),
            Cm.transpose(1, 2),
            D=m.D[k],
            delta_bias=m.dt_bias[k],
            delta_softplus=True,
        ).transpose(1, 2)
        y = y + (yk.flip(1) if direction == "backward" else yk)
    ref = F.linear(m.norm(y) * m.act(z), m.out_proj.weight)
    torch.testing.assert_close(m(u), ref, rtol=1e-9, atol=1e-10)
    # channels of one head get different steps (head mode: all equal)
    step = F.softplus(delta + m.dt_bias[1])
    assert step.std(-1).min() > 0
    with pytest.raises(ConfigError, match="layout='x_proj'"):
        LatentSSM(LatentSSMConfig(dt_mode="channel", layout="fused"), 8)


def test_channel_delta_with_zoh_and_grid_directions_runs():
    """A step per channel, exact ZOH and the four grid traversals together, against a loop written from the
    equations: per direction k the tokens in that order, Delta = softplus(dt_proj(x_proj(x)) + dt_bias) per channel,
    h_t = exp(Delta a) h_{t-1} + (exp(Delta a) - 1) / a * B_t x_t with a = -exp(A_log) per head, y = C h + D x,
    scattered back to the grid and summed over the four directions."""
    torch.manual_seed(0)
    m = LatentSSM(
        LatentSSMConfig(d_state=4, heads=2, dt_mode="channel", discretization="zoh"),
        8,
        mixer_directions("cross", grid=True),
    ).to(DT)
    _randomise(m)
    b, Hh, Ww = 2, 3, 4
    u = torch.randn(b, Hh, Ww, 8, dtype=DT)
    y = m(u)
    assert y.shape == (2, 3, 4, 8)
    di, N, P, R = m.d_inner, m.d_state, m.head_dim, m.dt_rank
    x, z = F.linear(u, m.in_proj.weight).split([di, di], -1)
    x = F.conv2d(x.permute(0, 3, 1, 2), m.conv.weight, m.conv.bias, padding=1, groups=di).permute(0, 2, 3, 1)
    x = m.act(x).reshape(b, Hh * Ww, di)
    idx = cross_scan_indices(Hh, Ww, m.directions)
    total = torch.zeros(b, Hh * Ww, di, dtype=DT)
    for k in range(4):
        seq = x[:, idx[k]]
        dt, Bm, Cm = (seq @ m.x_proj_weight[k].T).split([R, N, N], -1)
        step = F.softplus(dt @ m.dt_proj_weight[k].T + m.dt_bias[k])  # (b, L, di)
        a = (-torch.exp(m.A_log[k])).repeat_interleave(P)[:, None]  # (di, 1)
        h = torch.zeros(b, di, N, dtype=DT)
        for t in range(Hh * Ww):
            e = torch.exp(step[:, t, :, None] * a)
            h = e * h + (e - 1) / a * seq[:, t, :, None] * Bm[:, t, None, :]
            total[:, idx[k][t]] += (h * Cm[:, t, None, :]).sum(-1) + m.D[k] * seq[:, t]
    ref = F.linear(m.norm(total) * m.act(z.reshape(b, Hh * Ww, di)), m.out_proj.weight).reshape(b, Hh, Ww, 8)
    torch.testing.assert_close(y, ref, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    "kw",
    [
        dict(layout="x_proj"),
        dict(layout="fused", groups=2, combine="mean"),
        dict(layout="hydra"),
    ],
)
def test_fused_head_kernel_path_matches_reference_with_gradients(kw, monkeypatch):
    """16 channels per head (a multiple of the kernel's float64 lanes): the module runs ops.head_scan's fused
    kernel; output and every gradient equal the per-direction, per-head reference."""
    from neurodyn.ops import cpu_kernel
    from neurodyn.ops.head_scan import interface as head_scan_module

    if not cpu_kernel.available():
        pytest.skip("fused CPU kernel unavailable")
    calls = []
    real = head_scan_module.head_scan_cpu
    monkeypatch.setattr(head_scan_module, "head_scan_cpu", lambda *a: calls.append(1) or real(*a))
    m = LatentSSM(LatentSSMConfig(d_state=5, expand=2, heads=2, d_conv=3, **kw), 16).to(DT)
    _randomise(m)
    u = torch.randn(2, 9, 16, dtype=DT, requires_grad=True)
    y, ref = m(u), reference_1d(m, u)
    assert calls, "the fused head kernel was not used"
    torch.testing.assert_close(y, ref, rtol=1e-9, atol=1e-10)
    gy = torch.randn_like(y)
    leaves = [u, *m.parameters()]
    got = torch.autograd.grad((y * gy).sum(), leaves, allow_unused=True)
    want = torch.autograd.grad((ref * gy).sum(), leaves, allow_unused=True)
    for a, b in zip(got, want):
        if b is not None:
            torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
