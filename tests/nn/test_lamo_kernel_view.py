"""LaMO's kernel-integral view of the latent SSM (Theorem 3.4, Eq. 20), checked on ``nn.mamba.LatentSSM``.

Theorem 3.4 (Tiwari et al., ICML 2025; proof in App. B, Lemma B.10 and Eqs. 56 and 68-69) says that a
latent-SSM layer is a kernel integral ``G(a)(x) = int kappa(x, y) a(y) dy`` (Eq. 18). On the M latent
tokens this is a matrix product, and the kernel has the SSM form of Eq. 20,
``kappa(x, y) = C(x) Diag(prod A) B(y)``. For one scan path, one channel and the recurrence the layer
runs::

    h_t = Abar_t h_{t-1} + Bbar_t x_t,    y_t = C_t . h_t + D x_t

this is ``y = M x``, with

    M_ij = C_i . (prod_{k=j+1..i} Abar_k) Bbar_j  +  D [i == j]   for j <= i along the path, 0 otherwise.

The forward path gives a lower-triangular M. The reversed path gives an upper-triangular M in the tokens'
own order. The layer sums the paths (or takes their mean): ``Y = sum_k M_k X_k``. Here ``X_k`` is direction
k's convolved and activated branch. It is the same for every k only without the per-direction causal conv.

What the tests do:

1. Spy on the scan that ``LatentSSM`` calls (``head_scan`` or ``selective_scan``, patched in
   ``neurodyn.nn.mamba``). They record its arguments and output, then check that those arguments are the
   layer's own projections: ``Delta = softplus(x_proj(x) + dt_bias)``, ``a = -exp(A_log)``, and B, C.
2. Build M with plain Python loops over (i, j) and ``torch.prod`` over the decays. The scan is never
   called for this. The loops are vectorised only over the batch, channel and state axes.
3. Check ``M x`` against the recorded scan output (scan order). Check each direction separately in the
   tokens' order: forward is lower-triangular and backward is upper-triangular. Check the merge over paths
   (the input of the layer's norm), and the whole layer, ``out_proj(norm(sum_k M_k X_k) * act(z))``.
4. Show that the check can tell a right kernel from a wrong one. Plausible wrong kernels must miss by a
   wide margin:
   - the product over k = j..i;
   - Eq. 56 read literally, with the product over every k <= i;
   - no D;
   - the other discretisation;
   - the backward path read forwards.

Discretisation (``Abar = exp(Delta a)`` in both cases): Euler ``Bbar = Delta B`` (the default; every Mamba
kernel) or exact ZOH ``Bbar = (exp(Delta a) - 1) / a * B`` (paper Eq. 4-5 / Prop. 3.3, Eq. 17 with its
missing Delta restored; see docs/papers/notes-lamo.md 2.5).
"""

import inspect

import pytest
import torch
import torch.nn.functional as F

from neurodyn.nn import mamba
from neurodyn.nn.mamba import GRID_DIRECTIONS, LatentSSM
from neurodyn.nn.ssm_config import LatentSSMConfig

DT = torch.float64
ATOL = 1e-10  # a correct kernel matches to float64 round-off
WRONG = 1e-3  # a wrong kernel misses by at least this relative error (observed: 3e-2 .. 1.2)

# Layer options (all x_proj layout, LaMO's Algorithm 1). "grid": a (3, 4) token grid with the four
# cross-scan paths; otherwise a sequence of 9 tokens with the forward and backward paths.
CASES = {
    "head-euler": dict(),  # the default: a and Delta per head
    "head-zoh": dict(discretization="zoh"),  # paper Eq. 4-5 (exact ZOH)
    "diag-channel-euler": dict(a_mode="diag", dt_mode="channel"),  # paper's S6: Delta per channel, diag A
    "head-channel-zoh-mean": dict(dt_mode="channel", discretization="zoh", combine="mean"),
    "diag-head-noconv-nonorm": dict(a_mode="diag", conv="none", norm="none"),  # one X shared by the paths
    "head-euler-grid": dict(directions=GRID_DIRECTIONS),  # regular grid: 4 paths, 3x3 conv
}
GRID_SHAPE = (3, 4)
SEQ_LEN = 9


# ----------------------------------------------------------------------------------------------
# the layer and a spy on its scan


def make_layer(name):
    """A small float64 LatentSSM with fixed random weights: d_model 16, d_inner 32, 4 heads of 8 channels
    (8 = the fused float64 head kernel's lane count, so head mode runs that kernel), 2 groups, d_state 3.
    Non-trivial steps: softplus(dt_bias) in [0.05, 0.5], head decays a in [-2, -0.5], x_proj scaled up so
    Delta, B and C vary strongly from token to token; D random instead of 1."""
    torch.manual_seed(1234)
    options = dict(CASES[name])
    directions = options.pop("directions", ("forward", "backward"))
    m = LatentSSM(
        LatentSSMConfig(
            d_state=3, expand=2, heads=4, groups=2, d_conv=3, dt_range=(0.05, 0.5), a_init_range=(0.5, 2.0), **options
        ),
        16,
        directions,
    ).to(DT)
    with torch.no_grad():
        m.x_proj_weight.mul_(3.0)
        m.D.normal_()
        if hasattr(m, "dt_proj_weight"):
            m.dt_proj_weight.mul_(3.0)
    shape = GRID_SHAPE if m.grid else (SEQ_LEN,)
    u = torch.randn(2, *shape, 16, dtype=DT)
    return m, u


def run_with_spy(m, u, monkeypatch):
    """Run ``m(u)`` with the scan entry points of ``nn.mamba`` wrapped. Returns ``(out, calls, y_merged)``.
    ``calls`` is a list of ``(name, bound arguments, output)``. ``y_merged`` is the input of ``m.norm``:
    the merged scan outputs, before the norm, the gate and out_proj."""
    calls = []
    for name in ("head_scan", "selective_scan"):
        real = getattr(mamba, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            out = _real(*args, **kwargs)
            bound = inspect.signature(_real).bind(*args, **kwargs)
            bound.apply_defaults()
            calls.append((_name, dict(bound.arguments), out))
            return out

        monkeypatch.setattr(mamba, name, spy)
    merged = []
    hook = m.norm.register_forward_pre_hook(lambda mod, args: merged.append(args[0]))
    try:
        out = m(u)
    finally:
        hook.remove()
    assert len(calls) == 1 and len(merged) == 1, "expected one scan call and one norm call per forward"
    return out, calls, merged[0]


def recorded_channel_form(name, args, out):
    """The recorded scan call as per-channel sequences in scan order (channel = direction * d_inner + c):
    u, step, y ``(b, C, L)``; A ``(C, N)``; B, Cm ``(b, C, L, N)``; D ``(C,)`` or None."""
    if name == "head_scan":
        u, dt, A, B, Cm, D = (args[k] for k in ("u", "dt", "A", "B", "C", "D"))
        b, S, L, HP = u.shape  # u (b, S, L, H*P)
        H, G, N = dt.shape[3], B.shape[3], B.shape[4]  # dt (b, S, L, H); B, C (b, S, L, G, N)
        P = HP // H

        def chan(t):  # (b, S, L, HP) -> (b, S*HP, L)
            return t.permute(0, 1, 3, 2).reshape(b, S * HP, L)

        def coef(t):  # (b, S, L, G, N) -> (b, S*HP, L, N): channel c of a set uses group c // (HP / G)
            return t.repeat_interleave(HP // G, dim=3).permute(0, 1, 3, 2, 4).reshape(b, S * HP, L, N)

        return dict(
            u=chan(u),
            step=chan(dt.repeat_interleave(P, dim=3)),
            A=A.repeat_interleave(P, dim=1).reshape(S * HP, 1).expand(S * HP, N),
            B=coef(B),
            Cm=coef(Cm),
            D=None if D is None else D.reshape(S * HP),
            y=chan(out),
        )
    assert name == "selective_scan"
    assert args["z"] is None and not args["reverse"] and args["initial_state"] is None
    u, step, A, B, Cm = (args[k] for k in ("u", "delta", "A", "B", "C"))  # u, delta (b, C, L); A (C, N)
    if args["delta_bias"] is not None:
        step = step + args["delta_bias"][:, None]
    if args["delta_softplus"]:
        step = F.softplus(step)
    b, C, L = u.shape

    def coef(t):  # (b, G, N, L) -> (b, C, L, N): channel c uses group c // (C / G)
        return t.repeat_interleave(C // t.shape[1], dim=1).permute(0, 1, 3, 2)

    return dict(u=u, step=step, A=A, B=coef(B), Cm=coef(Cm), D=args["D"], y=out)


# ----------------------------------------------------------------------------------------------
# the kernel matrix (independent of the scan)


def kernel_matrix(abar, bbar, c, path, prod_from="j+1"):
    """The SSM kernel along a scan path, with plain loops over (i, j).

    abar, bbar, c: ``(..., L, N)`` per token (indexed by token, not by scan step). path: the tokens in scan
    order. Returns ``M (..., L, L)`` with ``M[..., i, j] = c_i . (prod_k abar_k) bbar_j`` when token j comes
    at or before token i on the path, else 0. The product runs over the path steps from ``j+1`` to i
    (Theorem 3.4). ``prod_from="j"`` (also Abar_j) and ``"start"`` (every k <= i, Eq. 56 read literally)
    are the wrong variants for the discrimination test.
    """
    L = abar.shape[-2]
    M = abar.new_zeros(*abar.shape[:-2], L, L)
    for ti, i in enumerate(path):
        for tj in range(ti + 1):
            j = path[tj]
            first = {"j+1": tj + 1, "j": tj, "start": 0}[prod_from]
            decay = torch.prod(abar[..., list(path[first : ti + 1]), :], dim=-2)  # (..., N); empty product = 1
            M[..., i, j] = (c[..., i, :] * decay * bbar[..., j, :]).sum(-1)
    return M


def apply_kernel(M, x):
    """``(..., L, L) @ (..., L)`` -> ``(..., L)``."""
    return torch.einsum("...ij,...j->...i", M, x)


def discretise(step, a, B, how):
    """Abar = exp(Delta a); Bbar = Delta B (euler) or (exp(Delta a) - 1) / a * B (zoh).
    ``"zoh_eq17_printed"`` is Eq. 17 as printed, ``(Delta a)^-1 (exp(Delta a) - 1) B``, without the Delta."""
    abar = torch.exp(step * a)
    bbar = {
        "euler": step * B,
        "zoh": torch.expm1(step * a) / a * B,
        "zoh_eq17_printed": torch.expm1(step * a) / (step * a) * B,
    }[how]
    return abar, bbar


def scan_paths(m, u):
    """The scan paths as lists of token indices (row-major on grids). They are written out here, not taken
    from ``ops.cross_scan``."""
    if m.grid:
        Hh, Ww = u.shape[1:3]
        row = [r * Ww + c for r in range(Hh) for c in range(Ww)]
        col = [r * Ww + c for c in range(Ww) for r in range(Hh)]
        table = {"row": row, "row_rev": row[::-1], "col": col, "col_rev": col[::-1]}
    else:
        L = u.shape[1]
        table = {"forward": list(range(L)), "backward": list(range(L))[::-1]}
    return [table[d] for d in m.directions]


def to_tokens(t_scan, path):
    """``(b, L, ...)`` in scan order -> token order."""
    out = torch.empty_like(t_scan)
    out[:, path] = t_scan
    return out


def layer_quantities(m, u):
    """The layer's per-direction quantities from its own parameters and sub-modules (x_proj layout). The
    convolutions and the ordering along the paths are written out here.

    Returns ``z (b, L, di)`` and, for each direction k, a dict with path, step, a, B, Cm, x, D.
    Everything is per channel and indexed by token (not by scan step): step ``(b, L, di, 1)`` (a head's
    step copied to its channels); a ``(di, N)``; B, Cm ``(b, L, di, N)``; x ``(b, L, di)`` (the branch
    after conv and act); D ``(di,)``.
    """
    b, d = u.shape[0], u.shape[-1]
    flat = u.reshape(b, -1, d)  # (b, L, d_model), row-major
    di, H, G, N, kc = m.d_inner, m.n_heads, m.n_groups, m.d_state, m.d_conv
    x, z = m.in_proj(flat).split([di, di], dim=-1)
    if m.conv_mode == "same":  # grid: one shared depthwise 3x3 conv
        Hh, Ww = u.shape[1:3]
        g = x.transpose(1, 2).reshape(b, di, Hh, Ww)
        x = F.conv2d(g, m.conv.weight, m.conv.bias, padding=kc // 2, groups=di).reshape(b, di, -1).transpose(1, 2)
    a_all = -torch.exp(m.A_log)  # (K, H) or (K, di, N)
    dirs = []
    for k, path in enumerate(scan_paths(m, u)):
        seq = x[:, path]  # (b, L, di) scan order
        if m.conv_mode == "causal":  # this direction's causal kernel, along its path
            w, bias = m.conv.weight[k * di : (k + 1) * di], m.conv.bias[k * di : (k + 1) * di]
            seq = F.conv1d(F.pad(seq.transpose(1, 2), (kc - 1, 0)), w, bias, groups=di).transpose(1, 2)
        seq = m.act(seq)
        dt, Bm, Cm = (seq @ m.x_proj_weight[k].T).split([m.dt_rank, G * N, G * N], dim=-1)
        if m.dt_mode == "channel":
            dt = dt @ m.dt_proj_weight[k].T  # (b, L, di)
        step = F.softplus(dt + m.dt_bias[k])  # (b, L, H or di)
        step = step.repeat_interleave(di // step.shape[-1], dim=-1)[..., None]  # (b, L, di, 1)
        Bm, Cm = (t.reshape(*t.shape[:2], G, N).repeat_interleave(di // G, dim=2) for t in (Bm, Cm))  # (b, L, di, N)
        a = a_all[k].repeat_interleave(di // H)[:, None].expand(di, N) if m.a_mode == "head" else a_all[k]
        dirs.append(
            dict(
                path=path,
                step=to_tokens(step, path),
                a=a,
                B=to_tokens(Bm, path),
                Cm=to_tokens(Cm, path),
                x=to_tokens(seq, path),
                D=m.D[k],
            )
        )
    return z, dirs


def direction_kernel(m, q, how=None, prod_from="j+1", path=None):
    """``M_k (b, di, L, L)`` of one direction in token order, without D."""
    abar, bbar = discretise(q["step"], q["a"], q["B"], how or m.discretization)
    abar, bbar, c = (v.transpose(1, 2) for v in (abar, bbar, q["Cm"]))  # (b, di, L, N)
    return kernel_matrix(abar, bbar, c, q["path"] if path is None else path, prod_from)


def merged_from_kernels(m, dirs, kernels, with_D=True):
    """``sum_k (M_k X_k + D_k X_k)`` (divided by K for combine="mean"): ``(b, L, di)``."""
    y = 0
    for q, M in zip(dirs, kernels):
        xk = q["x"].transpose(1, 2)  # (b, di, L)
        y = y + apply_kernel(M, xk) + (q["D"][:, None] * xk if with_D else 0)
    y = y / len(dirs) if m.combine == "mean" else y
    return y.transpose(1, 2)


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


# ----------------------------------------------------------------------------------------------
# tests


@pytest.mark.parametrize("name", list(CASES))
def test_scan_output_is_a_lower_triangular_kernel_in_scan_order(name, monkeypatch):
    """The recorded scan call is y = M u + D u with M_ij = C_i (prod_{k=j+1..i} exp(Delta_k a)) Delta_j B_j.
    Its arguments are the layer's own projections (the ZOH factor is folded into u by the layer)."""
    m, u = make_layer(name)
    _, calls, _ = run_with_spy(m, u, monkeypatch)
    ((scan_name, args, out),) = calls
    assert scan_name == ("head_scan" if (m.a_mode, m.dt_mode) == ("head", "head") else "selective_scan")
    rec = recorded_channel_form(scan_name, args, out)
    L = rec["u"].shape[-1]

    # 1. the captured quantities are the layer's: Delta, a, B, C per direction and channel (scan order)
    _, dirs = layer_quantities(m, u)

    def scan_order(key):  # token order, per direction -> scan order, directions folded into channels
        return torch.cat([q[key][:, q["path"]].transpose(1, 2) for q in dirs], dim=1)

    torch.testing.assert_close(rec["step"], scan_order("step")[..., 0], rtol=0, atol=ATOL)  # (b, K di, L)
    torch.testing.assert_close(rec["B"], scan_order("B"), rtol=0, atol=ATOL)  # (b, K di, L, N)
    torch.testing.assert_close(rec["Cm"], scan_order("Cm"), rtol=0, atol=ATOL)
    torch.testing.assert_close(rec["A"], torch.cat([q["a"] for q in dirs]), rtol=0, atol=ATOL)  # (K di, N)
    assert rec["step"].std(dim=-1).mean() > 2e-2, "Delta should vary along the sequence (data-dependent)"
    abar = torch.exp(rec["step"][..., None] * rec["A"][:, None])  # (b, K di, L, N)
    assert abar.min() < 0.5 and abar.max() < 1, "Abar should be well inside (0, 1)"

    # 2. the kernel from the recorded arguments, with loops; 3. M u (+ D u) is the scan's output
    bbar = rec["step"][..., None] * rec["B"]  # Euler input of the scan
    M = kernel_matrix(abar, bbar, rec["Cm"], list(range(L)))  # (b, C, L, L)
    assert torch.equal(M, M.tril()) and (M.tril(-1).abs() > 0).any()
    y = apply_kernel(M, rec["u"])
    if rec["D"] is not None:
        y = y + rec["D"][:, None] * rec["u"]
    torch.testing.assert_close(rec["y"], y, rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", list(CASES))
def test_each_direction_is_the_kernel_of_its_path(name, monkeypatch):
    """Per direction, in token order: the scan output (its D term removed) is M_k x_k, with M_k built from
    the layer's continuous quantities with its discretisation. Forward: lower-triangular. Backward: upper.
    Every path: triangular after permuting to its own order."""
    m, u = make_layer(name)
    _, calls, _ = run_with_spy(m, u, monkeypatch)
    rec = recorded_channel_form(*calls[0])
    _, dirs = layer_quantities(m, u)
    di = m.d_inner
    for k, q in enumerate(dirs):
        sl = slice(k * di, (k + 1) * di)
        y_scan = rec["y"][:, sl]  # (b, di, L) scan order
        if rec["D"] is not None:
            y_scan = y_scan - rec["D"][sl, None] * rec["u"][:, sl]
        y_tok = to_tokens(y_scan.transpose(1, 2), q["path"]).transpose(1, 2)  # (b, di, L) token order
        M = direction_kernel(m, q)  # (b, di, L, L)
        torch.testing.assert_close(y_tok, apply_kernel(M, q["x"].transpose(1, 2)), rtol=0, atol=ATOL)
        p = q["path"]
        assert torch.equal(M[..., p, :][..., p], M[..., p, :][..., p].tril())  # causal along its own path
        name_k = m.directions[k]
        if name_k in ("forward", "row"):
            assert torch.equal(M, M.tril()) and (M.tril(-1).abs() > 0).any()
        if name_k in ("backward", "row_rev"):
            assert torch.equal(M, M.triu()) and (M.triu(1).abs() > 0).any()  # the reversed path


@pytest.mark.parametrize("name", list(CASES))
def test_layer_is_the_sum_over_paths_of_kernel_integrals(name, monkeypatch):
    """merge = sum_k (M_k + D_k) X_k (or the mean) equals the input of the layer's norm. The whole output
    is out_proj(norm(merge) * act(z)). Without the conv, all paths share X, and one dense,
    non-causal M = sum_k (M_k + diag D_k) gives Y = M X."""
    m, u = make_layer(name)
    out, _, y_merged = run_with_spy(m, u, monkeypatch)
    z, dirs = layer_quantities(m, u)
    kernels = [direction_kernel(m, q) for q in dirs]
    y = merged_from_kernels(m, dirs, kernels)  # (b, L, di)
    torch.testing.assert_close(y_merged, y, rtol=0, atol=ATOL)
    full = m.out_proj(m.norm(y) * m.act(z)).reshape(out.shape)
    torch.testing.assert_close(out, full, rtol=0, atol=ATOL)

    if m.conv_mode == "none":
        X = dirs[0]["x"].transpose(1, 2)  # (b, di, L)
        assert all(torch.equal(q["x"], dirs[0]["x"]) for q in dirs)
        M = sum(Mk + torch.diag_embed(q["D"][:, None].expand_as(X)) for q, Mk in zip(dirs, kernels))
        M = M / len(dirs) if m.combine == "mean" else M
        assert (M.tril(-1).abs() > 0).any() and (M.triu(1).abs() > 0).any()  # a non-causal kernel
        torch.testing.assert_close(y_merged, apply_kernel(M, X).transpose(1, 2), rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", ["head-euler", "head-zoh", "diag-channel-euler"])
def test_wrong_kernels_do_not_match(name, monkeypatch):
    """The comparison can tell kernels apart. Each plausible wrong kernel misses the layer's merged output
    by a relative error > WRONG. The right one matches to ATOL (as checked above)."""
    m, u = make_layer(name)
    _, _, y_merged = run_with_spy(m, u, monkeypatch)
    _, dirs = layer_quantities(m, u)
    right = [direction_kernel(m, q) for q in dirs]
    assert rel_err(merged_from_kernels(m, dirs, right), y_merged) < ATOL

    other = "zoh" if m.discretization == "euler" else "euler"
    wrong = {
        "prod over k = j..i": [direction_kernel(m, q, prod_from="j") for q in dirs],
        "prod over all k <= i (Eq. 56 literally)": [direction_kernel(m, q, prod_from="start") for q in dirs],
        f"{other} instead of {m.discretization}": [direction_kernel(m, q, how=other) for q in dirs],
        "backward path read forwards": [direction_kernel(m, q, path=sorted(q["path"])) for q in dirs],
    }
    if m.discretization == "zoh":
        wrong["Eq. 17 as printed (no Delta in Bbar)"] = [direction_kernel(m, q, how="zoh_eq17_printed") for q in dirs]
    errors = {label: rel_err(merged_from_kernels(m, dirs, Ms), y_merged) for label, Ms in wrong.items()}
    errors["no D skip"] = rel_err(merged_from_kernels(m, dirs, right, with_D=False), y_merged)
    missed = {label: e for label, e in errors.items() if not e > WRONG}
    assert not missed, f"wrong kernels that still match the layer: {missed} (all: {errors})"
