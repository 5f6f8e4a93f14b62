"""GeoMaNO's 2-D selective scan is an explicit kernel matrix ``y = K(x) x`` with input-dependent coefficients.

Oracle: the paper's own equations (paper 003), not the code under test. Eq. 22 (App. C.1, the 2DMamba-SSM
recurrence GeoMaNO uses for 2-D problems, per dstate ``s``)::

    g[i, j] = A[i, j] g[i, j-1] + B[i, j] x[i, j]          A = exp(Delta A_s), B = Delta B_s  (Eq. 3)
    h[i, j] = A[i, j] h[i-1, j] + g[i, j]
    y[i, j] = sum_s C_s[i, j] h_s[i, j]

unrolled, ``h[i, j] = sum_{i' <= i, j' <= j} (decays along the path from (i', j') that "goes right
horizontally and then down vertically") B[i', j'] x[i', j']`` (Eq. 23 and the sentence after it; Eq. 23
writes the decay as ``A^(Manhattan distance)`` for constant coefficients, the path product is the same
statement for per-cell ``A[i, j]``): the decay of a path is the product of ``A`` over the cells it enters,
the source cell excluded, the target included. GeoMaNO's Eq. 9 adds, per direction ``d``, the geometric
correction ``- R_s B_s x`` at the cell itself (a diagonal term; the code's three readings ``cbx``, ``eq9``,
``alg2`` of it, see ``neurodyn.ops.scan_2d``), Remark 4.1 the skip ``D x``, and CrossMerge sums the
four directions of Sec. 4.2: (1) top-left to bottom-right row-major, (2) bottom-right to top-left
row-major, (3) top-left to bottom-right column-major, (4) bottom-right to top-left column-major (the
``"paper"`` preset); the ``"corners"`` preset is row-major from each of the four corners.

The test builds, per batch element and channel, the ``HW x HW`` matrix ``K`` entry by entry from these path
products (Delta, B, C are linear maps of x itself, as Alg. 1 line 10 makes them) and asserts that every
backend's output equals ``K x`` to float64 round-off, on odd grids, for every direction option and
correction form. It can fail: the same construction with the path taken in the other order (down, then
right) or with the Manhattan-power kernel of Eq. 23 (only right for constant coefficients) is measurably
different from the op's output.
"""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from neurodyn.ops import selective_scan_2d, selective_scan_2d_ref

F64 = torch.float64
BACKENDS = ["ref", "torch", "scan", pytest.param("cpp", marks=pytest.mark.needs_kernel)]

# direction -> (starting corner, the axis the first scan runs along), from the paper's Sec. 4.2 wording and
# the ``corners`` preset (row-major from each corner); "row" = along a row (j), "col" = down a column (i)
TRAVERSALS = {
    "row": ("tl", "row"),
    "row_rev": ("br", "row"),
    "col": ("tl", "col"),
    "col_rev": ("br", "col"),
    "tl": ("tl", "row"),
    "tr": ("tr", "row"),
    "bl": ("bl", "row"),
    "br": ("br", "row"),
}
PRESETS = {"paper": ("row", "row_rev", "col", "col_rev"), "corners": ("tl", "tr", "bl", "br")}


def _steps(a: int, b: int) -> list[int]:
    """The indices entered when walking from a to b (a excluded, b included)."""
    step = 1 if b >= a else -1
    return list(range(a + step, b + step, step))


def path_cells(src, dst, first: str, order_first: bool = True):
    """Cells a path from ``src`` to ``dst`` enters: along the first scan's axis, then the second's.
    ``order_first=False`` takes the other order (the deliberately wrong kernel)."""
    (i0, j0), (i1, j1) = src, dst
    row_first = (first == "row") == order_first
    if row_first:  # along the source row to the target column, then along that column
        return [(i0, m) for m in _steps(j0, j1)] + [(l, j1) for l in _steps(i0, i1)]
    return [(l, j0) for l in _steps(i0, i1)] + [(i1, m) for m in _steps(j0, j1)]


def reaches(src, dst, corner: str) -> bool:
    """Whether ``src`` lies in the quadrant the scan from ``corner`` has visited when it reaches ``dst``."""
    si = 1 if corner[0] == "t" else -1
    sj = 1 if corner[1] == "l" else -1
    return si * (dst[0] - src[0]) >= 0 and sj * (dst[1] - src[1]) >= 0


def kernel_matrix(names, dt, A, B, C, D, R, form, path="paper"):
    """``K (batch, d, HW, HW)`` (row-major cells) of the merged directions, from the equations above.

    ``dt (b, K, d, H, W)`` the final step sizes; ``A (K, d, n)``; ``B, C (b, K, n, H, W)``; ``D (K, d)`` or None;
    ``R (K, d, n)`` or None. ``path``: "paper" | "swapped" (other order) | "manhattan" (Eq. 23's power of the
    target cell's decay, exact only for constant coefficients)."""
    b, _, d, H, W = dt.shape
    cells = list(itertools.product(range(H), range(W)))
    K = np.zeros((b, d, H * W, H * W))
    for k, name in enumerate(names):
        corner, first = TRAVERSALS[name]
        abar = np.exp(dt[:, k, :, :, :, None] * A[k][None, :, None, None, :])  # (b, d, H, W, n): per-cell decay
        bbar = dt[:, k, :, :, :, None] * np.moveaxis(B[:, k], 1, -1)[:, None]  # (b, d, H, W, n): Delta B
        for (t, dst), (s, src) in itertools.product(enumerate(cells), enumerate(cells)):
            if not reaches(src, dst, corner):
                continue
            if path == "manhattan":
                dist = abs(dst[0] - src[0]) + abs(dst[1] - src[1])
                decay = abar[:, :, dst[0], dst[1]] ** dist
            else:
                decay = np.ones((b, d, A.shape[-1]))
                for cell in path_cells(src, dst, first, order_first=path == "paper"):
                    decay = decay * abar[:, :, cell[0], cell[1]]
            c = C[:, k, :, dst[0], dst[1]][:, None]  # (b, 1, n)
            K[:, :, t, s] += (c * decay * bbar[:, :, src[0], src[1]]).sum(-1)
        for t, (i, j) in enumerate(cells):  # the diagonal: Eq. 9's correction and the skip D
            c = C[:, k, :, i, j][:, None]
            if R is not None:
                if form == "cbx":
                    K[:, :, t, t] -= (c * R[k][None] * bbar[:, :, i, j]).sum(-1)
                elif form == "eq9":
                    K[:, :, t, t] -= (R[k][None] * bbar[:, :, i, j]).sum(-1)
                else:  # alg2
                    K[:, :, t, t] -= (c * R[k][None]).sum(-1)
            if D is not None:
                K[:, :, t, t] += D[k][None]
    return K


def _case(H, W, names, per_dir, softplus, with_bias, R_kind, seed, b=2, d=2, n=3, constant_delta=False):
    """x and coefficients that are linear maps of x (Alg. 1 line 10), in the op's argument layout, plus the
    numpy arrays the matrix construction takes."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=F64)  # noqa: E731
    Kd = len(names)
    x = r(b, d, H, W)
    kd = Kd if per_dir else 1
    w_delta, w_B, w_C = r(kd, d, d) * 0.5, r(kd, n, d), r(kd, n, d)
    delta = torch.einsum("kcd,bdhw->bkchw", w_delta, x)
    if constant_delta:
        delta = torch.zeros_like(delta) + r(1, kd, d, 1, 1)
    if not softplus:
        delta = delta.abs() + 0.05  # a positive step without the softplus
    Bx = torch.einsum("knd,bdhw->bknhw", w_B, x)
    Cx = torch.einsum("knd,bdhw->bknhw", w_C, x)
    A = -(torch.rand(kd, d, n, generator=g, dtype=F64) * 1.5 + 0.1)
    D = r(kd, d)
    bias = r(kd, d) * 0.3 if with_bias else None
    if R_kind == "none":
        R = None
    elif R_kind == "pattern":
        R = "".join("01"[(seed + k) % 2] for k in range(Kd))
    elif R_kind == "number":
        R = 0.7
    else:
        R = torch.rand(Kd, d, n, generator=g, dtype=F64)
    sq = (lambda t: t[:, 0]) if not per_dir else (lambda t: t)
    sq0 = (lambda t: t[0]) if not per_dir else (lambda t: t)
    args = dict(
        x=x,
        delta=sq(delta),
        A=sq0(A),
        B=sq(Bx),
        C=sq(Cx),
        D=sq0(D),
        R=R,
        delta_bias=None if bias is None else sq0(bias),
        delta_softplus=softplus,
    )
    # the matrix side, every per-direction quantity expanded to K directions
    raw = delta + (0 if bias is None else bias[None, :, :, None, None])
    dt = F.softplus(raw) if softplus else raw
    rep = lambda t, dim: t.expand(*[Kd if i == dim else -1 for i in range(t.dim())]).numpy()  # noqa: E731
    if R is None:
        Rm = None
    elif isinstance(R, str):
        Rm = np.array([float(ch) for ch in R])[:, None, None] * np.ones((Kd, d, n))
    elif isinstance(R, float):
        Rm = np.full((Kd, d, n), R)
    else:
        Rm = R.numpy()
    mats = dict(dt=rep(dt, 1), A=rep(A, 0), B=rep(Bx, 1), C=rep(Cx, 1), D=rep(D, 0), R=Rm)
    return args, mats


def _direction(mats, k):
    """The matrix inputs of direction ``k`` alone."""
    batch_first = ("dt", "B", "C")
    return {
        key: None if v is None else v[:, k : k + 1] if key in batch_first else v[k : k + 1] for key, v in mats.items()
    }


def _run(backend, args, directions, form):
    if backend == "ref":
        return selective_scan_2d_ref(**args, directions=directions, correction_form=form)
    return selective_scan_2d(**args, directions=directions, correction_form=form, backend=backend)


def _apply(K, x):
    b, d, H, W = x.shape
    return np.einsum("bdts,bds->bdt", K, x.reshape(b, d, H * W).numpy()).reshape(b, d, H, W)


CASES = [  # (H, W, directions, form, coefficients per direction, softplus, delta_bias, R)
    (3, 4, "paper", "cbx", True, True, True, "tensor"),
    (5, 3, "paper", "eq9", False, True, False, "pattern"),
    (3, 4, "corners", "alg2", True, False, True, "number"),
    (5, 3, "corners", "cbx", True, True, False, "none"),
    (3, 5, ("row", "col_rev"), "cbx", True, True, True, "tensor"),
    (1, 5, ("tr", "bl"), "alg2", True, True, True, "tensor"),
    (5, 1, "paper", "eq9", True, False, True, "tensor"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_scan_2d_equals_the_explicit_kernel_matrix(backend, case):
    """Eqs. 22-23 (path products of per-cell decays), Eq. 9 (the correction R) and Remark 4.1 (D), summed over
    the directions: ``y = K(x) x`` for every cell, batch element and channel."""
    H, W, directions, form, per_dir, softplus, with_bias, R_kind = CASES[case]
    names = PRESETS.get(directions, directions)
    if form == "eq9":
        per_dir = False  # the code's eq9 form is checked with inputs shared by the directions, as its own tests
    args, mats = _case(H, W, names, per_dir, softplus, with_bias, R_kind, seed=case)
    y = _run(backend, args, directions, form)
    K = kernel_matrix(names, form=form, **mats)
    want = _apply(K, args["x"])
    err = np.abs(y.detach().numpy() - want).max() / np.abs(want).max()
    assert err < 1e-12, f"{backend} {CASES[case]}: max relative deviation from K x is {err:.2e}"
    # per direction too (merge=False): each direction alone is its own kernel
    if backend == "ref":
        ys = selective_scan_2d_ref(**args, directions=directions, correction_form=form, merge=False)
        for k, name in enumerate(names):
            Kk = kernel_matrix((name,), form=form, **_direction(mats, k))
            assert np.abs(ys[:, k].numpy() - _apply(Kk, args["x"])).max() < 1e-12 * np.abs(want).max()


def test_the_kernel_check_has_teeth():
    """The construction is sensitive: with input-dependent Delta the path taken down-then-right instead of
    right-then-down, or Eq. 23's Manhattan power of one cell's decay, is visibly not the op; with a Delta
    that is constant over the grid all three coincide (Eq. 23 is the constant-coefficient case)."""
    names = PRESETS["paper"]
    args, mats = _case(5, 3, names, True, True, True, "tensor", seed=11)
    y = selective_scan_2d_ref(**args, directions="paper").numpy()
    scale = np.abs(y).max()
    for wrong in ("swapped", "manhattan"):
        bad = _apply(kernel_matrix(names, form="cbx", path=wrong, **mats), args["x"])
        assert np.abs(bad - y).max() > 1e-3 * scale, wrong
    # constant Delta per channel and direction: the decay along any monotone path is A^(Manhattan distance)
    args, mats = _case(5, 3, names, True, True, True, "tensor", seed=12, constant_delta=True)
    y = selective_scan_2d_ref(**args, directions="paper").numpy()
    for path in ("paper", "swapped", "manhattan"):
        good = _apply(kernel_matrix(names, form="cbx", path=path, **mats), args["x"])
        assert np.abs(good - y).max() < 1e-12 * np.abs(y).max(), path
