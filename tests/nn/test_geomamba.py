"""GeoMamba kernel (nn/geomamba.py): against references built from the ops' oracles, and the paper's claims.

* R = 0, 1-D: equals a plain four-direction Mamba kernel written here from ``ops.selective_scan_ref``
  (direction by direction, no folding into channels).
* 1-D with R: the closed-form correction equals the 2-D oracle on a 1 x L grid (a 2-D scan of one row
  is the 1-D scan), for the three correction forms.
* 2-D: the fused path equals the ``selective_scan_2d_ref`` double loop.
* Self-term count 4 / 3 / 2 / 1 for R = 0000 / 0001 / 0011 / 0111 through the kernel's scan (its own
  projections, pattern mapping and merge), in 1-D and 2-D; which directions a pattern corrects under the
  paper and VMamba digit orders.
* Closed forms: constant coefficients give Abar^(Manhattan distance) in 2-D (paper Eq. 23, 26) and
  Abar^(raster distance) in 1-D (Eq. 24, 25).
* Receptive field through the whole kernel (autograd): the paper's four traversals with the 2-D SSM miss
  the upper-right and lower-left quadrants; "corners" reaches all four; 1-D reaches all.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from neurodyn.errors import ConfigError
from neurodyn.nn.geomamba import GeoMambaKernel, pattern_vector
from neurodyn.ops import PAPER_ORDER, VMAMBA_ORDER, cross_scan, cross_unscan, selective_scan_2d_ref, selective_scan_ref

DT = torch.float64


def _kernel(**kw):
    kw.setdefault("d_model", 6)
    kw.setdefault("d_state", 3)
    m = GeoMambaKernel(**kw).to(DT)
    with torch.no_grad():  # move away from the symmetric initialisation
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def _plain_mamba_reference(m, z):
    """Four-direction Mamba (VMamba SS2D) kernel: per direction traverse, project, selective_scan_ref, un-traverse."""
    di, N, r = m.d_inner, m.d_state, m.dt_rank
    x, g = F.linear(z, m.in_proj.weight, m.in_proj.bias).split([di, di], -1)
    x = F.conv2d(x.permute(0, 3, 1, 2), m.conv.weight, m.conv.bias, padding=1, groups=di).permute(0, 2, 3, 1)
    x = F.silu(x)
    b, H, W, _ = x.shape
    outs = []
    for k, d in enumerate(m.directions):
        seq = cross_scan(x, (d,))[:, 0]  # (b, L, di)
        dt, Bm, Cm = (seq @ m.x_proj_weight[k].T).split([r, N, N], -1)
        delta = dt @ m.dt_proj_weight[k].T  # (b, L, di)
        y = selective_scan_ref(
            seq.transpose(1, 2),
            delta.transpose(1, 2),
            -torch.exp(m.A_log[k]),
            Bm.transpose(1, 2),
            Cm.transpose(1, 2),
            D=m.D[k],
            delta_bias=m.dt_proj_bias[k],
            delta_softplus=True,
        )
        outs.append(cross_unscan(y.transpose(1, 2)[:, None], H, W, (d,))[:, 0])
    y = sum(outs)
    y = F.silu(F.layer_norm(y, (di,), m.out_norm.weight, m.out_norm.bias))
    return F.linear(y * F.silu(g), m.out_proj.weight, m.out_proj.bias)


def test_1d_without_correction_is_a_plain_four_direction_mamba_kernel():
    m = _kernel(ssm="1d", correction="none")
    z = torch.randn(2, 3, 4, 6, dtype=DT, requires_grad=True)
    y = m(z)
    ref = _plain_mamba_reference(m, z)
    assert torch.allclose(y, ref, atol=1e-10, rtol=1e-9)
    (g1,) = torch.autograd.grad((y * torch.cos(y)).sum(), z)
    (g2,) = torch.autograd.grad((ref * torch.cos(ref)).sum(), z)
    assert torch.allclose(g1, g2, atol=1e-9)
    # and R = 0000 (fixed) is the same function
    m2 = _kernel(ssm="1d", correction="fixed", r_pattern="0000")
    m2.load_state_dict(m.state_dict())
    assert torch.allclose(m2(z), y, atol=1e-12)


@pytest.mark.parametrize("form", ["cbx", "eq9", "alg2"])
def test_1d_correction_equals_the_2d_oracle_on_one_row(form):
    """A 2-D scan over a 1 x L grid is the 1-D scan; ops.selective_scan_2d_ref applies R by brute force."""
    m = _kernel(
        ssm="1d", correction="learnable", correction_form=form, directions=("row",), r_order="directions", r_pattern="1"
    )
    with torch.no_grad():
        m.R.uniform_(-1, 1.5)
    xs = torch.randn(2, 1, 7, m.d_inner, dtype=DT)
    delta, Bm, Cm = m.coefficients(xs)
    y = m.scan(xs, (delta, Bm, Cm))
    ref = selective_scan_2d_ref(
        xs.permute(0, 3, 1, 2),
        delta,
        m.A(),
        Bm,
        Cm,
        m.D,
        m.R,
        delta_bias=m.dt_proj_bias,
        delta_softplus=True,
        directions=("row",),
        correction_form=form,
    )
    assert torch.allclose(y, ref.permute(0, 2, 3, 1), atol=1e-11)


@pytest.mark.parametrize("directions", ["paper", "corners"])
def test_2d_kernel_matches_the_double_loop_oracle(directions):
    kw = dict(ssm="2d", correction="learnable", directions=directions, r_init="pattern", r_pattern="0110")
    m, m_ref = _kernel(**kw), _kernel(scan_backend="ref", **kw)
    m_ref.load_state_dict(m.state_dict())
    z = torch.randn(2, 3, 4, 6, dtype=DT, requires_grad=True)
    y, ref = m(z), m_ref(z)
    assert torch.allclose(y, ref, atol=1e-10)
    g1 = torch.autograd.grad(y.pow(2).sum(), [z, m.R, m.A_log])
    g2 = torch.autograd.grad(ref.pow(2).sum(), [z, m_ref.R, m_ref.A_log])
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-9)


def _tie_directions(m):
    """Give every direction the parameters of direction 0 (so every direction sees the same dt, B, C)."""
    with torch.no_grad():
        for name in ("x_proj_weight", "dt_proj_weight", "dt_proj_bias", "A_log"):
            p = getattr(m, name)
            p.copy_(p[:1].expand_as(p))


def _diag(m, xs, coeffs, merge=True):
    """Coefficient of xs[b, i, j, c] in scan(xs)[b, i, j, c] with the coefficients held fixed (y is linear in xs)."""
    b, H, W, di = xs.shape
    n = H * W * di
    eye = torch.eye(n, dtype=DT).reshape(n, H, W, di)
    rep = [c[:1].expand(n, *c.shape[1:]) for c in coeffs]
    y = m.scan(eye, rep, merge=merge)
    if merge:
        return y.reshape(n, n).diagonal().reshape(H, W, di)
    return torch.stack([y[:, k].reshape(n, n).diagonal().reshape(H, W, di) for k in range(m.K)])


@pytest.mark.parametrize("ssm", ["1d", "2d"])
def test_self_term_is_counted_4_3_2_1_times(ssm):
    xs = torch.randn(1, 3, 3, 4, dtype=DT)
    for pattern, count in (("0000", 4), ("0001", 3), ("0011", 2), ("0111", 1), ("1111", 0)):
        m = _kernel(ssm=ssm, correction="fixed", r_pattern=pattern, d_mode="none", d_model=4, expand=1.0)
        _tie_directions(m)
        coeffs = [c.detach() for c in m.coefficients(xs)]
        delta, Bm, Cm = coeffs
        dt = F.softplus(delta[0, 0] + m.dt_proj_bias[0][:, None, None])  # (di, H, W)
        single = (dt * (Bm[0, 0] * Cm[0, 0]).sum(0)).permute(1, 2, 0)  # dt sum_s B_s C_s: (H, W, di)
        got = _diag(m, xs, coeffs)
        assert torch.allclose(got, count * single, atol=1e-12), (ssm, pattern)


@pytest.mark.parametrize("ssm", ["1d", "2d"])
def test_pattern_digit_order_through_the_kernel(ssm):
    assert pattern_vector("0011", PAPER_ORDER, "paper") == [0, 0, 1, 1]  # the two column-major scans
    assert pattern_vector("0011", PAPER_ORDER, "vmamba") == [0, 1, 0, 1]  # the two reversed scans
    assert pattern_vector("0011", VMAMBA_ORDER, "vmamba") == [0, 0, 1, 1]
    assert pattern_vector("0001", ("tl", "tr", "bl", "br"), "paper") == [0, 0, 0, 1]
    xs = torch.randn(1, 3, 3, 4, dtype=DT)
    for order, corrected in (("paper", {"col", "col_rev"}), ("vmamba", {"row_rev", "col_rev"})):
        m = _kernel(ssm=ssm, correction="fixed", r_pattern="0011", r_order=order, d_mode="none", d_model=4)
        diag = _diag(m, xs, [c.detach() for c in m.coefficients(xs)], merge=False)
        for k, d in enumerate(m.directions):
            zero = diag[k].abs().max().item() < 1e-12
            assert zero == (d in corrected), (order, d)


def _constant_kernel(ssm, a_bar, dt0=0.3):
    m = _kernel(ssm=ssm, correction="none", d_mode="none", directions=("row",), d_state=1, d_model=1, d_conv=1)
    with torch.no_grad():
        m.dt_proj_bias.fill_(math.log(math.expm1(dt0)))
        m.A_log.fill_(math.log(-math.log(a_bar) / dt0))  # exp(dt0 * A) = a_bar
    return m


@pytest.mark.parametrize("ssm", ["1d", "2d"])
def test_closed_forms_manhattan_vs_raster(ssm):
    H, W, a, dt0 = 3, 3, 0.7, 0.3
    m = _constant_kernel(ssm, a, dt0)
    n = H * W
    eye = torch.eye(n, dtype=DT).reshape(n, H, W, 1)
    coeffs = (
        torch.zeros(n, 1, 1, H, W, dtype=DT),
        torch.ones(n, 1, 1, H, W, dtype=DT),
        torch.ones(n, 1, 1, H, W, dtype=DT),
    )
    y = m.scan(eye, coeffs).reshape(n, H, W)  # y[source, i, j]
    for i in range(H):
        for j in range(W):
            for i2 in range(H):
                for j2 in range(W):
                    if ssm == "2d":
                        expo = (i - i2) + (j - j2) if (i2 <= i and j2 <= j) else None  # Eq. 23
                    else:
                        dist = (i * W + j) - (i2 * W + j2)
                        expo = dist if dist >= 0 else None  # Eq. 24
                    want = 0.0 if expo is None else dt0 * a**expo
                    assert abs(y[i2 * W + j2, i, j].item() - want) < 1e-12
    # the paper's 3 x 3 example (Eqs. 25 / 26): weight of x_11 in h_33 is A^8 (1-D) vs A^4 (2-D)
    w11 = y[0, 2, 2].item() / dt0
    assert abs(w11 - a ** (4 if ssm == "2d" else 8)) < 1e-12


def _receptive_field(m, H=7, W=7):
    z = torch.randn(1, H, W, m.d_model, dtype=DT, requires_grad=True)
    ci, cj = H // 2, W // 2
    m(z)[0, ci, cj].sum().backward()
    return z.grad[0].abs().sum(-1), ci, cj


def test_corner_scans_cover_all_four_quadrants():
    # paper directions + 2-D SSM: nothing from beyond the conv's reach in the upper-right / lower-left quadrants
    rf, ci, cj = _receptive_field(_kernel(ssm="2d", directions="paper"))
    assert rf[: ci - 1, cj + 2 :].abs().max() == 0 and rf[ci + 2 :, : cj - 1].abs().max() == 0
    assert rf[0, 0] > 0 and rf[-1, -1] > 0
    # corners: every cell of the grid reaches the centre
    rf, _, _ = _receptive_field(_kernel(ssm="2d", directions="corners"))
    assert (rf > 0).all()
    # 1-D traversals (raster scan and its reverse) reach every cell too
    rf, _, _ = _receptive_field(_kernel(ssm="1d", directions="paper"))
    assert (rf > 0).all()


def test_learnable_R_starts_as_configured_and_trains():
    z = torch.randn(2, 3, 3, 6, dtype=DT)
    plain = _kernel(ssm="2d", correction="none")
    zeros = _kernel(ssm="2d", correction="learnable")
    sd = plain.state_dict()
    sd["R"] = torch.zeros_like(zeros.R)
    zeros.load_state_dict(sd)
    assert torch.allclose(zeros(z), plain(z), atol=1e-12)  # r_init zeros = the plain kernel
    fixed = _kernel(ssm="2d", correction="fixed", r_pattern="0111")
    fixed.load_state_dict(plain.state_dict())
    pat = GeoMambaKernel(6, d_state=3, ssm="2d", correction="learnable", r_init="pattern", r_pattern="0111").to(DT)
    sd["R"] = pat.R.detach().clone()
    assert sd["R"][0].abs().max() == 0 and (sd["R"][1:] == 1).all()  # paper order: row uncorrected
    pat.load_state_dict(sd)
    assert torch.allclose(pat(z), fixed(z), atol=1e-12)
    pat(z).pow(2).sum().backward()
    assert pat.R.grad is not None and pat.R.grad.abs().sum() > 0


def test_d_modes_and_mean_merge():
    xs = torch.randn(2, 3, 3, 4, dtype=DT)
    ch = _kernel(ssm="1d", d_mode="channel", d_model=4)
    st = _kernel(ssm="1d", d_mode="state", d_model=4)
    no = _kernel(ssm="1d", d_mode="none", d_model=4)
    sd = {k: v for k, v in ch.state_dict().items() if k != "D"}
    no.load_state_dict(sd)
    with torch.no_grad():
        ch.D.fill_(0.8)
        st.load_state_dict({**sd, "D": torch.full_like(st.D, 0.8 / st.d_state)})
    coeffs = ch.coefficients(xs)
    base = no.scan(xs, coeffs)
    assert torch.allclose(ch.scan(xs, coeffs) - base, 4 * 0.8 * xs, atol=1e-12)  # K = 4 directions add D x
    assert torch.allclose(st.scan(xs, coeffs), ch.scan(xs, coeffs), atol=1e-12)
    mean = _kernel(ssm="1d", d_mode="none", d_model=4, merge="mean")
    mean.load_state_dict(sd)
    assert torch.allclose(mean.scan(xs, coeffs), base / 4, atol=1e-12)


def test_float32_fast_paths_and_shared_gate():
    """The float32 fast paths compute the float64 kernel to float32 rounding (output and input gradient), and the
    shared gate is one Z = Linear(z) feeding both branches: the split-gate kernel whose in_proj stacks the same
    matrix twice ([W; W]) is the same function."""
    for ssm in ("1d", "2d"):
        torch.manual_seed(0)
        m = GeoMambaKernel(8, d_state=4, ssm=ssm, gate="shared", norm_act=False, correction="learnable")
        with torch.no_grad():
            for p in m.parameters():  # R away from 0, D from 1, ...
                p.add_(0.1 * torch.randn_like(p))
        z = torch.randn(2, 5, 4, 8, requires_grad=True)
        y = m(z)
        assert y.shape == z.shape and y.dtype == torch.float32
        y.sum().backward()
        assert m.in_proj.out_features == 8  # one Z for both branches
        m64 = GeoMambaKernel(8, d_state=4, ssm=ssm, gate="shared", norm_act=False, correction="learnable").to(DT)
        m64.load_state_dict(m.state_dict())
        z64 = z.detach().to(DT).requires_grad_(True)
        y64 = m64(z64)
        y64.sum().backward()
        torch.testing.assert_close(y.double(), y64, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(z.grad.double(), z64.grad, rtol=1e-4, atol=1e-5)
        split = GeoMambaKernel(8, d_state=4, ssm=ssm, gate="split", norm_act=False, correction="learnable").to(DT)
        state = m64.state_dict()
        state["in_proj.weight"] = torch.cat([state["in_proj.weight"]] * 2)
        split.load_state_dict(state)
        with torch.no_grad():
            torch.testing.assert_close(split(z64), y64, rtol=1e-12, atol=1e-12)


def test_config_errors():
    with pytest.raises(ConfigError, match="only for ssm='2d'"):
        GeoMambaKernel(4, ssm="1d", directions="corners")
    with pytest.raises(ConfigError, match="digits"):
        GeoMambaKernel(4, correction="fixed", r_pattern="011")
    with pytest.raises(ConfigError, match="0/1"):
        GeoMambaKernel(4, correction="fixed", r_pattern="0021")
    with pytest.raises(ConfigError, match="octal"):
        GeoMambaKernel(4, correction="fixed", r_pattern=9)  # what an unquoted 0011 becomes in YAML
    with pytest.raises(ConfigError, match="ssm"):
        GeoMambaKernel(4, ssm="3d")
    with pytest.raises(ValueError, match="token grid"):
        GeoMambaKernel(4)(torch.randn(2, 9, 4))
