"""GeoMaNO's 2-D scan on the fused Triton kernels (every direction in one launch) against the double-loop reference:
forward and every gradient, float32 and bfloat16 inputs, every correction form, directions shared or per-direction
coefficients, odd and non-square grids (transposed directions read a different frame shape), row blocks joined by
the carry pass, the model's permuted (non-contiguous) input, merged and per-direction
outputs. In Triton's interpreter on CPU tensors (small tiles); on CUDA too when there is one, at the small and the
production tiles."""

import pytest
import torch

from neurodyn.ops import selective_scan_2d, selective_scan_2d_ref, triton_loader
from neurodyn.ops.scan_2d import triton_op as s2_op

from .helpers import TRITON_DEVICES, rel_err, triton_device, triton_setup

pytestmark = pytest.mark.skipif(not triton_loader.triton_importable(), reason="triton is not installed")

# norm-wise relative error against float64: float32 kernels; bfloat16 inputs (rounded outputs and input gradients);
# on CUDA the fast exp2 adds a few float32 ulps
TOL = {torch.float32: 2e-5, torch.bfloat16: 2e-2}
SMALL = {
    s2_op: {
        "SCAN2D_TILE": 32,
        "SCAN2D_PROGRAMS": 1,
        "SCAN2D_FWD_COLS": 2,
        "SCAN2D_FWD_STATES": 2,
        "SCAN2D_BWD_COLS": 2,
        "SCAN2D_BWD_STATES": 2,
    }
}
PRODUCTION = {name: getattr(s2_op, name) for name in SMALL[s2_op]}


@pytest.fixture(autouse=True)
def _tiles(monkeypatch, request):
    triton_setup(monkeypatch, request, SMALL)


def _args(b, d, H, W, n, K, per_direction, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    lead = (b, K) if per_direction else (b,)
    kp = (K,) if per_direction else ()
    return dict(
        x=r(b, d, H, W),
        delta=torch.rand(*lead, d, H, W, generator=g, dtype=torch.float64) - 0.5,
        A=-0.1 - torch.rand(*kp, d, n, generator=g, dtype=torch.float64),
        B=r(*lead, n, H, W),
        C=r(*lead, n, H, W),
        D=r(*kp, d),
        delta_bias=0.2 * r(*kp, d),
    )


def _run(args, device, dtype, opts, count=None):
    """Output and gradients (a fixed random projection) of the Triton path and of the float64 reference."""
    leaves = {k: v.to(triton_device(device), dtype).requires_grad_() for k, v in args.items()}
    ref = {k: v.detach().clone().requires_grad_() for k, v in args.items()}
    y = selective_scan_2d(**leaves, **opts, backend="triton")
    want = selective_scan_2d_ref(**ref, **opts)
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    got = torch.autograd.grad((y * w.to(y)).sum(), list(leaves.values()))
    exp = torch.autograd.grad((want * w).sum(), list(ref.values()))
    return y, want, got, exp


def _check(y, want, got, exp, dtype):
    assert y.dtype == dtype and y.shape == want.shape
    assert rel_err(y.cpu(), want) < TOL[dtype], rel_err(y.cpu(), want)
    for i, (a, b) in enumerate(zip(got, exp)):
        assert a.shape == b.shape, i
        assert rel_err(a.cpu(), b) < TOL[dtype], (i, rel_err(a.cpu(), b))


def _rounded(args, dtype):
    """The inputs rounded to ``dtype`` (the reference sees what the kernels see), in float64."""
    return {k: v.to(dtype).double() for k, v in args.items()}


CASES = [  # (b, d, H, W, n, directions, per-direction, form, R); at the small tiles n = 5 is two blocks of states
    (1, 3, 5, 6, 3, ("row", "col_rev"), True, "cbx", "01"),
    (2, 2, 4, 7, 5, "paper", False, "eq9", "0011"),
    (1, 2, 6, 3, 2, "corners", True, "alg2", "1010"),
    (1, 1, 3, 3, 4, ("tr", "bl"), False, "cbx", None),
]


@pytest.mark.parametrize("device", TRITON_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "case",
    [  # (the paper's four directions: over 4 s on one core, make test only)
        pytest.param(
            c,
            id=f"{c[2]}x{c[3]}-{c[5] if isinstance(c[5], str) else '+'.join(c[5])}-{c[7]}{'-perdir' if c[6] else ''}",
            marks=[pytest.mark.slow] if c[5] == "paper" else [],
        )
        for c in CASES
    ],
)
def test_matches_the_reference(device, dtype, case):
    b, d, H, W, n, dirs, per_direction, form, R = case
    K = 4 if isinstance(dirs, str) else len(dirs)
    args = _rounded(_args(b, d, H, W, n, K, per_direction), dtype)
    opts = dict(R=R, directions=dirs, correction_form=form, delta_softplus=True, merge=per_direction)
    _check(*_run(args, device, dtype, opts), dtype)


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
@pytest.mark.parametrize("device", TRITON_DEVICES)
@pytest.mark.parametrize("programs", [1000, 24, 1])
def test_row_blocks(device, programs, monkeypatch):
    """Several row blocks (the forward's and the backward's carry passes), partial last blocks: 9 x 7 grid, transposed
    directions (9 frame rows, 9 or 7 of them in a direction); one block when the programs suffice."""
    if device == "cuda-production":
        pytest.skip("the tiles are the subject")
    monkeypatch.setattr(s2_op, "SCAN2D_PROGRAMS", programs)
    args = _args(1, 2, 9, 7, 3, 4, True, seed=programs)
    rows = s2_op.scan2d_blocks(1, 4, 2, 3, 9, 7, True)[0]
    assert (rows < 9) == (programs > 8)
    opts = dict(R="0110", directions="paper", correction_form="cbx", delta_softplus=True, merge=False)
    _check(*_run(args, device, torch.float32, opts), torch.float32)


@pytest.mark.slow  # (over 4 s on one core: make test runs it, make test-fast does not)
@pytest.mark.parametrize("device", TRITON_DEVICES)
def test_production_tiles(device, monkeypatch):
    """The production tiles: 4 frame columns per thread (8 lanes cover a row of 32 after padding), 4 channels per
    program (the second block partial); the forward's 8 states per program (two programs share a channel's 16 states
    and add y atomically), the backward's 2 (eight programs add gx and gdelta atomically)."""
    for name in ("SCAN2D_FWD_COLS", "SCAN2D_FWD_STATES", "SCAN2D_BWD_COLS", "SCAN2D_BWD_STATES"):
        monkeypatch.setattr(s2_op, name, PRODUCTION[name])
    fwd, bwd = s2_op.scan2d_fwd_tile(5, 16, 32), s2_op.scan2d_bwd_tile(5, 16, 32)
    assert (fwd.lanes, fwd.cols, fwd.nb, fwd.block_d) == (8, 4, 2, 4)
    assert (bwd.lanes, bwd.cols, bwd.nb, bwd.block_d) == (8, 4, 8, 4)
    args = _args(1, 5, 2, 17, 16, 2, True, seed=4)  # (W = 17: rows padded to 32; the transposed frame 2 wide)
    opts = dict(R="01", directions=("row", "col_rev"), correction_form="cbx", delta_softplus=True, merge=False)
    _check(*_run(args, device, torch.float32, opts), torch.float32)


@pytest.mark.parametrize("device", TRITON_DEVICES)
def test_permuted_input_and_one_launch_per_call(device, monkeypatch):
    """The model passes x as a permuted view of a (b, H, W, d) tensor: read in place through its strides; every
    direction in one forward and one backward launch of the fused kernels (one row block here)."""
    k = triton_loader.load("scan_2d", torch.device(triton_device(device)))
    launches = []
    for name in ("_s2_fwd_kernel", "_s2_bwd_kernel", "_s2_carry_kernel"):
        kernel = getattr(k, name)
        monkeypatch.setattr(k, name, _Counting(kernel, name, launches))
    args = _args(2, 3, 5, 4, 2, 4, True, seed=3)
    args["x"] = args["x"].permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    assert not args["x"].is_contiguous()
    opts = dict(R="0011", directions="paper", correction_form="eq9", delta_softplus=True, merge=False)
    _check(*_run(args, device, torch.float32, opts), torch.float32)
    assert launches == ["_s2_fwd_kernel", "_s2_bwd_kernel"]


class _Counting:
    """A kernel whose launches are recorded by name."""

    def __init__(self, kernel, name, log):
        self.kernel, self.name, self.log = kernel, name, log

    def __getitem__(self, grid):
        self.log.append(self.name)
        return self.kernel[grid]


def test_blocks_policy(monkeypatch):
    """The benchmark's 64 x 64 grid: one launch holds at least 1,024 programs; rows too long for a tile fall back."""
    for name, value in PRODUCTION.items():
        monkeypatch.setattr(s2_op, name, value)
    rows, bd, bn = s2_op.scan2d_blocks(8, 4, 64, 16, 64, 64, True)
    for tile in (s2_op.scan2d_fwd_tile(64, 16, 64), s2_op.scan2d_bwd_tile(64, 16, 64)):
        assert 8 * 4 * -(-64 // tile.block_d) * tile.nb * -(-64 // rows) >= 1024
    # 128 x 128: the carry pass's row of 16 states is two tiles: two blocks of states
    assert s2_op.scan2d_blocks(8, 4, 64, 16, 128, 128, True)[1:] == (1, 8)
    assert s2_op.scan2d_blocks(8, 4, 64, 16, 1024, 1024, True) is None
    # few programs: the rows are split into blocks (a carry pass) until there are enough
    rows, bd, bn = s2_op.scan2d_blocks(1, 4, 4, 16, 64, 64, True)
    assert rows < 64
