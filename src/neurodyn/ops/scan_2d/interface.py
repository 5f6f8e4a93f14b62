"""GeoMaNO's 2-D selective scan (2DMamba recurrence) with the geometric correction ``R``.

For one direction, in that direction's frame (it starts at the top-left corner), per channel and
state s, with ``a = exp(dt * A_s)``, ``bx = dt * B_s * x`` (``dt = softplus?(delta + delta_bias)``)::

    g[i, j] = a[i, j] g[i, j-1] + bx[i, j]              (row scan)
    h[i, j] = a[i, j] h[i-1, j] + g[i, j]               (column scan)
    y[i, j] = sum_s C_s[i, j] (h_s[i, j] - R_s bx_s[i, j]) + D x[i, j]          correction_form="cbx"
            = sum_s C_s h_s - sum_s R_s bx_s + D x                              correction_form="eq9"
            = sum_s C_s (h_s - R_s x) + D x                                     correction_form="alg2"

so ``h[i, j] = sum_{i'<=i, j'<=j} (prod of a along the path right-then-down) bx[i', j']``: the decay
between two cells is a product over their Manhattan path. With ``"cbx"`` and R = 1 a direction becomes
an exclusive scan (its own ``bx`` term removed exactly).

Backends: ``"cpp"`` = a fused CPU kernel (``cpu.py``) that runs the row scan and the column scan cell by cell
with the states in a row buffer (never materialising ``(batch, d, H, W, n)``), with a hand-written
backward (row checkpoints + the two adjoint recurrences); ``"triton"`` = the fused Triton kernels with every
direction in one launch (``triton_kernels.py``, the operator of ``triton_op.py``: direction a program axis, frames
read by strides, softplus and bias inside; built like the 1-D scans: a row's columns in-thread chunks, the states
an unrolled loop whose row states stay in registers, the row scan in-thread then across lanes, ``y`` accumulated in
registers; row blocks joined by a carry pass; the backward likewise, from a checkpoint of every row), or, for rows too
long for them (``n_pow2 * BQ > 8192``, ``SCAN2D_MAX_ROW``), the ``"scan"`` path on the Triton linear-scan kernel;
``"scan"`` = a row then a column :func:`linear_scan` on ``(batch, d, H, W, n)`` tensors (autograd through them);
``"torch"`` = the same with the pure-PyTorch chunked scan; ``"auto"`` = ``"cpp"`` for CPU tensors when the kernel
builds, ``"triton"`` for CUDA tensors when ``triton`` imports (pending a GPU measurement), else ``"torch"``.
float16/bfloat16 inputs are computed in float32.

Directions (``directions=``): ``"paper"`` = GeoMaNO's four cross-scan traversals
``("row", "row_rev", "col", "col_rev")`` (the 2-D scan starting at the top-left / bottom-right corner,
row-first or column-first), ``"corners"`` = ``("tl", "tr", "bl", "br")`` (row-first from each corner,
which together cover all four quadrants), or a tuple of those names.

Shapes (all in the grid frame; the function transforms per direction and transforms back):
``x (batch, d, H, W)``; ``delta (batch, d, H, W)`` or per direction ``(batch, K, d, H, W)``;
``A (d, n)`` or ``(K, d, n)``; ``B, C (batch, n, H, W)`` or ``(batch, K, n, H, W)``; ``D`` and
``delta_bias (d,)`` or ``(K, d)``; ``R``: a pattern string such as ``"0011"`` (digit k = direction k),
a number, or a tensor broadcastable to ``(K, d, n)``. Returns ``(batch, d, H, W)`` summed over
directions (``merge=True``) or ``(batch, K, d, H, W)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ...errors import check_choice
from .. import cpu_kernel, triton_loader
from ..custom_op import compute_dtype
from ..directions import resolve_directions
from ..linear_scan.interface import linear_scan
from .cpu import scan2d_cpu
from .triton_op import scan2d_blocks, scan2d_triton

Tensor = torch.Tensor

# name -> (transpose, flip the frame's rows, flip the frame's columns)
_DIRS = {
    "row": (False, False, False),
    "tl": (False, False, False),
    "row_rev": (False, True, True),
    "br": (False, True, True),
    "col": (True, False, False),
    "col_rev": (True, True, True),
    "tr": (False, False, True),
    "bl": (False, True, False),
}
PRESETS = {"paper": ("row", "row_rev", "col", "col_rev"), "corners": ("tl", "tr", "bl", "br")}
FORMS = ("cbx", "eq9", "alg2")
BACKENDS = ("auto", "cpp", "triton", "scan", "torch")


def _to_frame(t: Tensor, spec) -> Tensor:
    transpose, fh, fw = spec
    if transpose:
        t = t.transpose(-1, -2)
    dims = [d for d, f in ((-2, fh), (-1, fw)) if f]
    return t.flip(dims) if dims else t


def _from_frame(t: Tensor, spec) -> Tensor:
    transpose, fh, fw = spec
    dims = [d for d, f in ((-2, fh), (-1, fw)) if f]
    t = t.flip(dims) if dims else t
    return t.transpose(-1, -2) if transpose else t


def _resolve_R(R, K: int, d: int, n: int, ref: Tensor) -> Tensor | None:
    if R is None:
        return None
    if isinstance(R, str):
        if len(R) != K or set(R) - {"0", "1"}:
            raise ValueError(f"R pattern {R!r} must be {K} digits of 0/1, one per direction")
        R = torch.tensor([float(c) for c in R]).view(K, 1, 1)
    R = torch.as_tensor(R, dtype=ref.dtype, device=ref.device)
    try:
        if R.dim() <= 3:
            return R.expand(K, d, n)
    except RuntimeError:
        pass
    raise ValueError(f"R has shape {tuple(R.shape)}, expected a shape broadcastable to (K, d, n) = ({K}, {d}, {n})")


class _Args:
    """Validated per-direction views of the inputs."""

    def __init__(self, x, delta, A, B, C, D, delta_bias, R, directions, correction_form):
        check_choice("correction_form", correction_form, FORMS, error=ValueError)
        self.dirs = direction_names(directions)
        K = self.K = len(self.dirs)
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
            raise ValueError(
                f"x has shape {tuple(getattr(x, 'shape', ()))}, expected a floating tensor (batch, d, H, W)"
            )
        b, d, H, W = x.shape
        if (
            not isinstance(A, torch.Tensor)
            or A.dim() not in (2, 3)
            or A.shape[-2] != d
            or (A.dim() == 3 and A.shape[0] != K)
        ):
            raise ValueError(
                f"A has shape {tuple(getattr(A, 'shape', ()))}, expected (d, n) = ({d}, n) or (K, d, n) with K = {K}"
            )
        n = A.shape[-1]
        self.shape = (b, d, H, W, n)
        self.x, self.A, self.B, self.C = x, A, B, C
        self.delta, self.D, self.bias = delta, D, delta_bias
        self._check("delta", delta, (b, d, H, W), (b, K, d, H, W), "(batch, d, H, W) or (batch, K, d, H, W)")
        self._check("B", B, (b, n, H, W), (b, K, n, H, W), "(batch, n, H, W) or (batch, K, n, H, W)")
        self._check("C", C, (b, n, H, W), (b, K, n, H, W), "(batch, n, H, W) or (batch, K, n, H, W)")
        if D is not None:
            self._check("D", D, (d,), (K, d), "(d,) or (K, d)")
        if delta_bias is not None:
            self._check("delta_bias", delta_bias, (d,), (K, d), "(d,) or (K, d)")
        self.R = _resolve_R(R, K, d, n, x)

    def _check(self, name, t, shared, per_dir, desc):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) not in (tuple(shared), tuple(per_dir)):
            raise ValueError(
                f"{name} has shape {tuple(getattr(t, 'shape', ()))}, expected {desc} = "
                f"{tuple(shared)} or {tuple(per_dir)}"
            )
        if t.device != self.x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {self.x.device}")

    @staticmethod
    def pick(t: Tensor | None, k: int, shared_dim: int) -> Tensor | None:
        if t is None:
            return None
        return t if t.dim() == shared_dim else t.select(1 if shared_dim >= 3 else 0, k)

    def direction(self, k: int):
        return (
            self.pick(self.delta, k, 4),
            self.pick(self.A, k, 2),
            self.pick(self.B, k, 4),
            self.pick(self.C, k, 4),
            self.pick(self.D, k, 1),
            self.pick(self.bias, k, 1),
            None if self.R is None else self.R[k],
        )


def _dt(delta, bias, softplus):
    raw = delta if bias is None else delta + bias[:, None, None]
    return F.softplus(raw) if softplus else raw


def _output(h, bx, xk, Ck, Rk, Dk, form):
    """y from states h and injections bx (batch, d, H, W, n) in one direction's frame."""
    Cl = Ck.permute(0, 2, 3, 1).unsqueeze(1)  # (batch, 1, H, W, n)
    if Rk is None:
        y = (h * Cl).sum(-1)
    elif form == "cbx":
        y = ((h - Rk[:, None, None, :] * bx) * Cl).sum(-1)
    elif form == "eq9":
        y = (h * Cl).sum(-1) - (Rk[:, None, None, :] * bx).sum(-1)
    else:  # alg2
        y = ((h - Rk[:, None, None, :] * xk.unsqueeze(-1)) * Cl).sum(-1)
    if Dk is not None:
        y = y + Dk[:, None, None] * xk
    return y


def _direction_cpu(xk, dk, Ak, Bk, Ck, Dk, bk, Rk, softplus, form, cdt):
    n = Ak.shape[-1]
    npad = -(-n // 8) * 8
    pad = lambda t: t if n == npad else F.pad(t, (0, npad - n))  # noqa: E731
    c = lambda t: None if t is None else t.to(cdt).contiguous()  # noqa: E731
    R = torch.zeros_like(Ak) if Rk is None else Rk
    dt = _dt(c(dk), c(bk), softplus)  # (batch, d, H, W) elementwise: vectorised torch, autograd
    return scan2d_cpu(
        c(xk),
        dt.contiguous(),
        pad(c(Ak)).contiguous(),
        pad(c(Bk).permute(0, 2, 3, 1)).contiguous(),
        pad(c(Ck).permute(0, 2, 3, 1)).contiguous(),
        c(Dk),
        pad(c(R)).contiguous(),
        FORMS.index(form) if Rk is not None else 0,
    )


def _all_directions_triton(args: _Args, softplus: bool, form: str, cdt, blocks) -> Tensor:
    """Every direction in one launch of the fused Triton kernels (frames by strides, softplus and bias inside):
    ``(batch, K, d, H, W)`` in ``cdt``. The per-direction parameters are expanded to ``(K, ...)`` (small)."""
    b, d, H, W, n = args.shape
    K = args.K
    per = lambda t, shape: None if t is None else t.to(cdt).expand(*shape)  # noqa: E731
    R = args.R if args.R is not None else torch.zeros(K, d, n, dtype=cdt, device=args.x.device)
    dirs = [int(f) for name in args.dirs for f in _DIRS[name]]
    return scan2d_triton(
        args.x,
        args.delta,
        per(args.A, (K, d, n)),
        args.B,
        args.C,
        per(args.D, (K, d)),
        per(R, (K, d, n)),
        per(args.bias, (K, d)),
        dirs,
        softplus,
        FORMS.index(form) if args.R is not None else 0,
        blocks,
    )


def _direction_scan(xk, dk, Ak, Bk, Ck, Dk, bk, Rk, softplus, form, backend):
    dt = _dt(dk, bk, softplus)
    a = torch.exp(dt.unsqueeze(-1) * Ak[:, None, None, :])  # (batch, d, H, W, n)
    bx = (dt * xk).unsqueeze(-1) * Bk.permute(0, 2, 3, 1).unsqueeze(1)
    g = linear_scan(a, bx, dim=-2, backend=backend)
    h = linear_scan(a, g, dim=-3, backend=backend)
    return _output(h, bx, xk, Ck, Rk, Dk, form)


def selective_scan_2d(
    x,
    delta,
    A,
    B,
    C,
    D=None,
    R=None,
    *,
    delta_bias=None,
    delta_softplus=False,
    directions="paper",
    correction_form="cbx",
    merge=True,
    backend="auto",
):
    """2-D selective scan over several directions (see the module docstring for the equations)."""
    args = _Args(x, delta, A, B, C, D, delta_bias, R, directions, correction_form)
    check_choice("backend", backend, BACKENDS, error=ValueError)
    on_cpu = x.device.type == "cpu"
    if triton_loader.chosen(backend, x):
        backend = "triton"
    elif backend == "auto":
        backend = "cpp" if on_cpu and cpu_kernel.available() else "torch"
    if backend == "cpp" and (not on_cpu or not cpu_kernel.available()):
        raise RuntimeError("backend='cpp' needs CPU tensors and the compiled kernel")
    cdt = compute_dtype(x, delta, A, B, C, D, delta_bias, args.R)
    if backend == "triton" and x.numel() > 0:
        b, d, H, W, n = args.shape
        blocks = scan2d_blocks(b, args.K, d, n, H, W, any(_DIRS[name][0] for name in args.dirs))
        if blocks is not None:
            y = _all_directions_triton(args, delta_softplus, correction_form, cdt, blocks)
            return (y.sum(1) if merge else y).to(x.dtype)
    outs = []
    for k, name in enumerate(args.dirs):
        spec = _DIRS[name]
        dk, Ak, Bk, Ck, Dk, bk, Rk = args.direction(k)
        xk, dk, Bk, Ck = (_to_frame(t, spec) for t in (x, dk, Bk, Ck))
        if backend == "cpp":
            y = _direction_cpu(xk, dk, Ak, Bk, Ck, Dk, bk, Rk, delta_softplus, correction_form, cdt)
        else:
            c = lambda t: None if t is None else t.to(cdt)  # noqa: E731
            y = _direction_scan(
                c(xk),
                c(dk),
                c(Ak),
                c(Bk),
                c(Ck),
                c(Dk),
                c(bk),
                c(Rk),
                delta_softplus,
                correction_form,
                {"scan": "auto", "triton": "triton"}.get(backend, "torch"),
            )
        outs.append(_from_frame(y, spec).to(x.dtype))
    return sum(outs) if merge else torch.stack(outs, dim=1)


def selective_scan_2d_ref(
    x,
    delta,
    A,
    B,
    C,
    D=None,
    R=None,
    *,
    delta_bias=None,
    delta_softplus=False,
    directions="paper",
    correction_form="cbx",
    merge=True,
):
    """Direct double loop over the cells of every direction (oracle of the tests; slow)."""
    args = _Args(x, delta, A, B, C, D, delta_bias, R, directions, correction_form)
    b, d, H, W, n = args.shape
    outs = []
    for k, name in enumerate(args.dirs):
        transpose, fh, fw = _DIRS[name]
        dk, Ak, Bk, Ck, Dk, bk, Rk = args.direction(k)
        dt = _dt(dk, bk, delta_softplus)
        P, Q = (W, H) if transpose else (H, W)

        def cell(p, q, P=P, Q=Q, fh=fh, fw=fw, transpose=transpose):  # cell visited at outer step p, inner q
            p = P - 1 - p if fh else p
            q = Q - 1 - q if fw else q
            return (q, p) if transpose else (p, q)

        g, h, ys = {}, {}, {}
        for p in range(P):
            for q in range(Q):
                i, j = cell(p, q)
                a = torch.exp(dt[:, :, i, j, None] * Ak)  # (batch, d, n)
                bx = (dt[:, :, i, j] * x[:, :, i, j])[..., None] * Bk[:, None, :, i, j]
                g[i, j] = a * g[cell(p, q - 1)] + bx if q > 0 else bx
                h[i, j] = a * h[cell(p - 1, q)] + g[i, j] if p > 0 else g[i, j]
                c = Ck[:, None, :, i, j]
                if Rk is None:
                    yij = (c * h[i, j]).sum(-1)
                elif correction_form == "cbx":
                    yij = (c * (h[i, j] - Rk * bx)).sum(-1)
                elif correction_form == "eq9":
                    yij = (c * h[i, j]).sum(-1) - (Rk * bx).sum(-1)
                else:
                    yij = (c * (h[i, j] - Rk * x[:, :, i, j, None])).sum(-1)
                if Dk is not None:
                    yij = yij + Dk * x[:, :, i, j]
                ys[i, j] = yij
        outs.append(
            torch.stack([torch.stack([ys[i, j] for j in range(W)], -1) for i in range(H)], -2) if H and W else x.clone()
        )  # an empty grid: nothing to scan
    return sum(outs) if merge else torch.stack(outs, dim=1)


def direction_names(directions: Sequence[str] | str = "paper") -> tuple[str, ...]:
    """The direction names a ``directions`` argument stands for (a preset of ``PRESETS``, a name, or names)."""
    return resolve_directions(directions, _DIRS, PRESETS)
