"""selective_scan_2d against its double loop, GeoMaNO's closed form and the self-term counts."""

import pytest
import torch

from neurodyn.ops import linear_scan, selective_scan_2d, selective_scan_2d_ref

from .helpers import rel_err

CPP = pytest.mark.needs_kernel
BACKENDS_2D = ["torch", "scan", pytest.param("cpp", marks=CPP)]

F64 = torch.float64


def _inputs(b=2, d=3, H=4, W=5, n=3, K=4, per_dir=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=F64)  # noqa: E731
    kd = (b, K) if per_dir else (b,)
    return dict(
        x=r(b, d, H, W),
        delta=torch.rand(*kd, d, H, W, generator=g, dtype=F64),
        A=-torch.rand(*((K,) if per_dir else ()), d, n, generator=g, dtype=F64) - 0.1,
        B=r(*kd, n, H, W),
        C=r(*kd, n, H, W),
        D=r(*((K,) if per_dir else ()), d),
        R=torch.rand(K, d, n, generator=g, dtype=F64),
        delta_bias=r(*((K,) if per_dir else ()), d) * 0.1,
    )


@pytest.mark.parametrize("backend", BACKENDS_2D)
@pytest.mark.parametrize("directions", ["paper", "corners"])
@pytest.mark.parametrize("form", ["cbx", "eq9", "alg2"])
def test_matches_double_loop(backend, directions, form):
    kw = _inputs(per_dir=form != "eq9")  # eq9 case uses inputs shared by all directions
    leaves = [v.requires_grad_(True) for v in kw.values()]
    opts = dict(directions=directions, correction_form=form, delta_softplus=True, merge=False)
    ref = selective_scan_2d_ref(**kw, **opts)
    out = selective_scan_2d(**kw, **opts, backend=backend)
    assert ref.shape == (2, 4, 3, 4, 5)
    assert rel_err(out, ref) < 1e-10
    g = torch.randn_like(ref)
    for gf, gr in zip(torch.autograd.grad((out * g).sum(), leaves), torch.autograd.grad((ref * g).sum(), leaves)):
        assert rel_err(gf, gr) < 1e-10


@CPP
@pytest.mark.parametrize("H,W,n,form", [(19, 6, 17, "cbx"), (9, 8, 8, "alg2"), (16, 3, 32, "eq9"), (8, 5, 3, None)])
def test_fused_kernel_on_larger_grids(H, W, n, form):
    """Row blocks of 8 with checkpoints, every state-size specialisation, against the torch path."""
    kw = _inputs(b=2, d=3, H=H, W=W, n=n)
    if form is None:
        kw["R"] = None
    leaves = [v.requires_grad_(True) for v in kw.values() if v is not None]
    opts = dict(delta_softplus=True, correction_form=form or "cbx", merge=False)
    want = selective_scan_2d(**kw, **opts, backend="torch")
    got = selective_scan_2d(**kw, **opts, backend="cpp")
    assert rel_err(got, want) < 1e-12
    g = torch.randn_like(want)
    for gf, gr in zip(torch.autograd.grad((got * g).sum(), leaves), torch.autograd.grad((want * g).sum(), leaves)):
        assert rel_err(gf, gr) < 1e-12


@pytest.mark.parametrize("backend", BACKENDS_2D)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_low_precision(backend, dtype, tol):
    kw = _inputs(b=1, d=2, H=10, W=7, n=16)
    want = selective_scan_2d(**kw, delta_softplus=True, backend="torch")
    low = {k: v.to(dtype) for k, v in kw.items()}
    got = selective_scan_2d(**low, delta_softplus=True, backend=backend)
    assert got.dtype == dtype
    assert (
        rel_err(
            got,
            selective_scan_2d(**{k: v.to(dtype).double() for k, v in kw.items()}, delta_softplus=True, backend="torch"),
        )
        < tol
    )
    assert rel_err(got, want) < max(tol, 1e-2 if dtype == torch.bfloat16 else tol)


@pytest.mark.parametrize("backend", BACKENDS_2D)
@pytest.mark.slow
def test_gradcheck_small(backend):
    kw = _inputs(b=1, d=1, H=3, W=2, n=2)
    names = list(kw)
    leaves = [kw[k].requires_grad_(True) for k in names]
    f = lambda *xs: selective_scan_2d(**dict(zip(names, xs)), delta_softplus=True, backend=backend)  # noqa: E731
    assert torch.autograd.gradcheck(f, leaves)


def test_closed_form_manhattan_path_product():
    """h[i,j] = sum_{i'<=i, j'<=j} prod_{k=j'+1..j} a[i',k] * prod_{k=i'+1..i} a[k,j] * bx[i',j']."""
    H, W = 4, 5
    a = torch.rand(H, W, dtype=F64)
    bx = torch.randn(H, W, dtype=F64)
    h = linear_scan(a, linear_scan(a, bx, dim=1), dim=0)
    for i in range(H):
        for j in range(W):
            want = sum(
                a[ip, jp + 1 : j + 1].prod() * a[ip + 1 : i + 1, j].prod() * bx[ip, jp]
                for ip in range(i + 1)
                for jp in range(j + 1)
            )
            assert torch.allclose(h[i, j], want)
    # constant decay: the weight is a ** (Manhattan distance) (GeoMaNO Eq. 23)
    c = 0.7
    h = linear_scan(
        torch.full((3, 3), c, dtype=F64), linear_scan(torch.full((3, 3), c, dtype=F64), bx[:3, :3], dim=1), dim=0
    )
    want = sum(c ** ((2 - ip) + (2 - jp)) * bx[ip, jp] for ip in range(3) for jp in range(3))
    assert torch.allclose(h[2, 2], want)


@pytest.mark.parametrize("pattern,count", [("0000", 4), ("0001", 3), ("0011", 2), ("0111", 1)])
def test_self_term_count_after_merge(pattern, count):
    """d y[t] / d x[t] = (number of uncorrected directions) * sum_s C_s dt B_s (cbx form, D = 0)."""
    kw = _inputs(b=1, d=1, H=3, W=3, n=2, per_dir=False)
    kw.pop("D"), kw.pop("R"), kw.pop("delta_bias")
    x = kw.pop("x")
    jac = torch.autograd.functional.jacobian(lambda x: selective_scan_2d(x, **kw, R=pattern, correction_form="cbx"), x)
    diag = jac.reshape(9, 9).diagonal()
    self_term = (kw["C"] * kw["delta"] * kw["B"]).sum(1).reshape(9)  # sum_s C_s dt B_s per cell
    assert torch.allclose(diag, count * self_term)


def test_full_correction_is_exclusive_scan():
    """R = 1 (cbx): y = sum_s C_s a (h[i-1, j] + g[i, j-1]), i.e. the cell's own input is removed."""
    kw = _inputs(b=1, d=2, H=3, W=4, n=2, K=1, per_dir=False)
    kw.pop("D"), kw.pop("delta_bias"), kw.pop("R")
    y = selective_scan_2d(**kw, R=1.0, directions=("tl",))
    x, dt, A, B, C = kw["x"], kw["delta"], kw["A"], kw["B"], kw["C"]
    a = torch.exp(dt.unsqueeze(-1) * A[:, None, None, :])
    bx = (dt * x).unsqueeze(-1) * B.permute(0, 2, 3, 1).unsqueeze(1)
    g = linear_scan(a, bx, dim=-2)
    h = linear_scan(a, g, dim=-3)
    g_left = torch.nn.functional.pad(g, (0, 0, 1, 0))[..., :-1, :]
    h_up = torch.nn.functional.pad(h, (0, 0, 0, 0, 1, 0))[..., :-1, :, :]
    want = (a * (h_up + g_left) * C.permute(0, 2, 3, 1).unsqueeze(1)).sum(-1)
    assert torch.allclose(y, want)


def test_receptive_fields():
    """'paper' directions reach the upper-left and lower-right quadrants only; 'corners' reach all."""
    kw = _inputs(b=1, d=1, H=5, W=5, n=2, per_dir=False)
    kw.pop("R")
    x = kw.pop("x")

    def reach(directions):
        jac = torch.autograd.functional.jacobian(lambda x: selective_scan_2d(x, **kw, directions=directions), x)
        return jac[0, 0, 2, 2, 0, 0].abs() > 0  # which inputs the centre output depends on

    paper, corners = reach("paper"), reach("corners")
    assert corners.all()
    assert paper[:3, :3].all() and paper[2:, 2:].all()
    assert not paper[0, 4] and not paper[4, 0]


def test_errors():
    kw = _inputs()
    with pytest.raises(ValueError, match=r"delta has shape \(2, 3, 4\), expected"):
        selective_scan_2d(**{**kw, "delta": kw["delta"][:, 0, :, :, 0]})
    with pytest.raises(ValueError, match=r"B has shape \(2, 3, 4, 4\)"):
        selective_scan_2d(**{**kw, "B": kw["B"][:, 0, :, :, :4]})
    with pytest.raises(ValueError, match="R pattern '001' must be 4 digits"):
        selective_scan_2d(**{**kw, "R": "001"})
    with pytest.raises(ValueError, match="correction_form must be one of"):
        selective_scan_2d(**kw, correction_form="cb")
    with pytest.raises(ValueError, match="directions must be"):
        selective_scan_2d(**kw, directions="diagonal")
