"""Pruned NCP backbone as one fused CPU op (``csrc/ncp_cpu.cpp``), with a plain-PyTorch reference.

For ``C`` cells, ``x: (C, M, a)`` and layers ``l = 0..n-1`` of widths ``h_l`` (the neurons one Algorithm-1 update
of :class:`neurodyn.nn.ncp.NCPCell` computes)::

    s_0 = act(x W_in_0 + b_0) * mask_0
    s_l = act(x W_in_l + b_l + s_{l-1} W_rec_l) * mask_l        (l >= 1)

with ``W_in_l (C, a, h_l)``, ``b_l (C, h_l)``, ``W_rec_l (C, h_{l-1}, h_l)`` (``None`` for ``l = 0``),
``mask_l (h_l,)``.
Returns ``s_{n-1}: (C, M, h_{n-1})``. In NAC the backbone runs on every query-key pair (16,384 rows of 8 inputs and
36 / 16 / 2 neurons at the cpu presets); as separate batched matmuls and elementwise ops it was half of a NAC
training step, most of it memory passes over ``(C, M, 36)`` activations. The fused op keeps one row's activations
in cache and saves only the layer outputs for the backward. :func:`ncp_mlp_ref` is the same computation with
torch ops (its test oracle and the path on other devices, or without the compiled kernel).

Synapse patterns: ``pattern_in[l] (a, h_l)`` and ``pattern_rec[l] (h_{l-1}, h_l)`` in {0, 1}, shared by the cells,
make the layers use ``W_in_l * pattern_in[l]`` and ``W_rec_l * pattern_rec[l]``: weights outside a pattern are
ignored and get a zero gradient. The kernel then loops over the listed synapses only (NCP wiring keeps about a third
of them, so a third of the multiply-adds); the reference multiplies the weights by the patterns.

Input affine and head (both optional, so that NAC's per-pair input scaling and time gate run inside the same pass
over the pairs instead of as small matmuls and elementwise ops): with ``in_scale, in_shift (C, a)`` the layers read
``x * in_scale + in_shift`` (NCP's sensory scaling ``u * w_in + b_in``); with ``head = (W_h (C, a, o), b_h (C, o))``
the op also returns the linear read ``x W_h + b_h`` of the *raw* input, ``(C, M, o)``.

Backends (``ncp_mlp(backend=...)``): ``"cpp"`` (the fused CPU kernel; float32 / float64 CPU tensors), ``"triton"``
(the Triton kernels of :mod:`neurodyn.ops.triton_ops` on the layers packed by :func:`pack_layers`, each at its own
width: float16 / bfloat16 / float32 inputs computed in float32 (float32 products: the TF32 measurement is in
:mod:`neurodyn.ops.ncp_mlp.triton_kernels`), the backward recomputing the layer outputs; CUDA tensors, or CPU
tensors under ``TRITON_INTERPRET=1``), ``"torch"`` (:func:`ncp_mlp_ref`); ``"auto"``: ``"triton"`` for CUDA tensors when
``triton`` imports (not float64), ``"cpp"`` for CPU tensors when the kernel builds, else ``"torch"``.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ...errors import check_choice
from .. import kernel_ops, triton_loader
from ..kernel_ops import OPS
from ..triton_ops import ncp_mlp_triton

Tensor = torch.Tensor

__all__ = ["ncp_mlp", "ncp_mlp_ref", "pack_layers", "ACT_CODES", "BACKENDS"]

BACKENDS = ("auto", "triton", "cpp", "torch")
_TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

ACT_CODES = {"linear": 0, "tanh": 1, "relu": 2, "sigmoid": 3}
_REF_ACTS = {"linear": lambda v: v, "tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}


def ncp_mlp_ref(x: Tensor, w_in: Sequence[Tensor | None], bias: Sequence[Tensor], w_rec: Sequence[Tensor | None],
                mask: Sequence[Tensor], activation: str = "tanh", pattern_in: Sequence[Tensor | None] | None = None,
                pattern_rec: Sequence[Tensor | None] | None = None, in_scale: Tensor | None = None,
                in_shift: Tensor | None = None, head: tuple[Tensor, Tensor] | None = None):
    """The module docstring's layers with batched matmuls (any device, plain autograd); ``(y, head output)`` when
    ``head`` is given."""
    if head is not None:
        return (ncp_mlp_ref(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift),
                torch.baddbmm(head[1][:, None, :], x, head[0]))
    if in_scale is not None:
        x = x * in_scale[:, None, :] + in_shift[:, None, :]
    act = _REF_ACTS[activation]
    if pattern_in is not None:
        w_in = [w if w is None or p is None else w * p.to(w.dtype) for w, p in zip(w_in, pattern_in)]
    if pattern_rec is not None:
        w_rec = [w if w is None or p is None else w * p.to(w.dtype) for w, p in zip(w_rec, pattern_rec)]
    s = None
    for l, (wi, b, wr, m) in enumerate(zip(w_in, bias, w_rec, mask)):
        pre = b[:, None, :].expand(x.shape[0], x.shape[1], b.shape[-1])
        if wi is not None:
            pre = torch.baddbmm(pre, x, wi)
        if l > 0:
            pre = torch.baddbmm(pre, s, wr)
        s = act(pre) * m
    return s


def _layers(x: Tensor, n: int, params):
    """``params`` as packed by :func:`ncp_mlp` -> the kernel's ``w_in``, ``bias``, ``w_rec`` lists (``w_rec[0]`` empty)
    and its ``io`` list (in_scale, in_shift, head_w, head_b; empty tensors when unused)."""
    return (list(params[:n]), list(params[n:2 * n]), [x.new_empty(0), *params[2 * n:3 * n - 1]],
            list(params[3 * n - 1:3 * n + 3]))


class _NCPMLPFunction(torch.autograd.Function):
    """Inputs: ``act`` code, layer count ``n``, masks, the kernel's two pattern lists (empty lists: dense), ``x``,
    then ``n`` input weights (empty tensor: no input term), ``n`` biases, ``n - 1`` recurrent weights, in_scale,
    in_shift, head_w, head_b (empty when unused). Outputs ``y`` and the head output (empty without a head)."""

    @staticmethod
    def forward(ctx, act: int, n: int, mask: tuple, patterns: tuple, x: Tensor, *params: Tensor):
        w_in, bias, w_rec, io = _layers(x, n, params)
        *saved, y, head = OPS["ncp_mlp_fwd"](x, w_in, bias, w_rec, list(mask), act, *patterns, io)
        ctx.act, ctx.n, ctx.mask, ctx.patterns = act, n, mask, patterns
        ctx.save_for_backward(x, *params, *saved)
        return y, head

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gout: Tensor, ghead: Tensor | None):
        n = ctx.n
        x, *rest = ctx.saved_tensors
        params, saved = rest[:3 * n + 3], rest[3 * n + 3:]
        w_in, bias, w_rec, io = _layers(x, n, params)
        if ghead is None or io[2].numel() == 0:
            ghead = x.new_empty(0)
        g = OPS["ncp_mlp_bwd"](x, w_in, bias, w_rec, list(ctx.mask), list(saved), gout.contiguous(), ctx.act,
                               *ctx.patterns, io, ghead.contiguous())
        gx, per_layer, g_io = g[0], g[1:3 * n + 1], g[3 * n + 1:]
        g_w_in = [per_layer[3 * l] if w_in[l].numel() else None for l in range(n)]
        g_bias = [per_layer[3 * l + 1] for l in range(n)]
        g_w_rec = [per_layer[3 * l + 2] for l in range(1, n)]
        g_io = [gi if t.numel() else None for gi, t in zip(g_io, io)]
        return (None, None, None, None, gx, *g_w_in, *g_bias, *g_w_rec, *g_io)


def _cpp_applies(x: Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and kernel_ops.available()


def resolve_backend(backend: str, x: Tensor) -> str:
    """The backend :func:`ncp_mlp` uses for ``x`` (module docstring)."""
    check_choice("ncp_mlp backend", backend, BACKENDS, error=ValueError)
    if backend != "auto":
        return backend
    if triton_loader.chosen("auto", x) and x.dtype in _TRITON_DTYPES:
        return "triton"
    return "cpp" if _cpp_applies(x) else "torch"


def fused_available(x: Tensor) -> bool:
    """Whether :func:`ncp_mlp` (``backend="auto"``) runs ``x`` on a fused kernel: the compiled CPU kernel (CPU,
    float32 / float64, kernel built) or the Triton kernels (CUDA, ``triton`` importable)."""
    return resolve_backend("auto", x) != "torch"


def packed_width(k: int) -> int:
    """A packed layer width: the next multiple of 16 (the Triton kernels' chunk of neurons, ``tl.dot``'s smallest)."""
    return max(16, -(-int(k) // 16) * 16)


def packed_input_width(a: int) -> int:
    """The packed input width: the next power of two, at least 16."""
    return max(16, 1 << max(int(a) - 1, 0).bit_length())


def pack_layers(x: Tensor, w_in, bias, w_rec, mask, pattern_in=None, pattern_rec=None):
    """The layers as the Triton kernels read them, each layer at its own width: ``(w_in (C, sum_l A H_l), bias (C,
    sum_l H_l), w_rec (C, sum_{l>=1} H_{l-1} H_l), mask (sum_l H_l,), widths, inputs, h_out)`` in float32.

    Layer ``l`` is zero-padded to ``H_l = packed_width(h_l)`` neurons (a multiple of 16) and the input to ``A =
    packed_input_width(a)`` features (a power of two, at least 16); each
    cell's weights are flattened layer after layer (``(A, H_l)`` input blocks of the layers in ``inputs``, the layers
    with an input term; ``(H_{l-1}, H_l)`` recurrent blocks from layer 1 on), the patterns applied (``W *
    pattern``). Differentiable (padding and concatenation): the gradients of the packed tensors flow back to the
    listed weights."""
    C, _, a = x.shape
    n = len(bias)
    widths = [packed_width(b.shape[-1]) for b in bias]
    inputs = [int(w is not None) for w in w_in]
    A = packed_input_width(a)
    pattern_in = pattern_in or [None] * n
    pattern_rec = pattern_rec or [None] * n

    def pad(w, pattern, rows, cols):
        w = w.float() if pattern is None else w.float() * pattern.float()
        return F.pad(w, (0, cols - w.shape[-1], 0, rows - w.shape[-2])).reshape(C, -1)

    f32 = dict(dtype=torch.float32, device=x.device)
    blocks_in = [pad(w, pt, A, h) for w, pt, h in zip(w_in, pattern_in, widths) if w is not None]
    blocks_rec = [pad(w, pt, p, h) for w, pt, p, h in zip(list(w_rec)[1:], list(pattern_rec)[1:], widths, widths[1:])]
    packed_in = torch.cat(blocks_in, 1) if blocks_in else torch.zeros(C, 1, **f32)
    packed_rec = torch.cat(blocks_rec, 1) if blocks_rec else torch.zeros(C, 1, **f32)
    packed_b = torch.cat([F.pad(b.float(), (0, h - b.shape[-1])) for b, h in zip(bias, widths)], 1)
    packed_m = torch.cat([F.pad(m.detach().float(), (0, h - m.shape[-1])) for m, h in zip(mask, widths)])
    return packed_in, packed_b, packed_rec, packed_m, widths, inputs, int(bias[-1].shape[-1])


def _ncp_triton(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift, head):
    if x.dtype not in _TRITON_DTYPES:
        raise ValueError(f"ncp_mlp backend='triton' takes float16 / bfloat16 / float32 inputs, got {x.dtype}")
    w_in_p, b_p, w_rec_p, m_p, widths, inputs, h_out = pack_layers(x, w_in, bias, w_rec, mask, pattern_in,
                                                                   pattern_rec)
    y = ncp_mlp_triton(x, w_in_p, b_p, w_rec_p, m_p, widths, inputs, ACT_CODES[activation], h_out, in_scale,
                       in_shift)
    return y if head is None else (y, torch.baddbmm(head[1][:, None, :], x, head[0]))


def ncp_mlp(x: Tensor, w_in: Sequence[Tensor | None], bias: Sequence[Tensor], w_rec: Sequence[Tensor | None],
            mask: Sequence[Tensor], activation: str = "tanh", pattern_in: Sequence[Tensor | None] | None = None,
            pattern_rec: Sequence[Tensor | None] | None = None, in_scale: Tensor | None = None,
            in_shift: Tensor | None = None, head: tuple[Tensor, Tensor] | None = None, backend: str = "auto"):
    """The module docstring's layers on the ``backend`` of the module docstring (``"auto"``: the Triton kernels on
    CUDA, the fused kernel on CPU, :func:`ncp_mlp_ref` elsewhere).

    ``x (C, M, a)``; ``w_in[l] (C, a, h_l)`` or ``None`` (no input term), ``bias[l] (C, h_l)``,
    ``w_rec[l] (C, h_{l-1}, h_l)`` with ``w_rec[0]`` ignored, ``mask[l] (h_l,)`` (constant); optional synapse
    patterns (module docstring; ``None`` entries: dense), input affine ``in_scale, in_shift (C, a)`` and linear
    head ``(W_h (C, a, o), b_h (C, o))``. Returns ``y (C, M, h_last)``, or ``(y, head output (C, M, o))`` with a
    head. Gradients reach every tensor but the masks and patterns (first order).
    """
    if activation not in ACT_CODES:
        raise ValueError(f"ncp_mlp activation must be one of {sorted(ACT_CODES)}, got {activation!r}")
    if x.dim() != 3:
        raise ValueError(f"ncp_mlp input has shape {tuple(x.shape)}; expected (cells, rows, features)")
    n = len(bias)
    for name, pats in (("pattern_in", pattern_in), ("pattern_rec", pattern_rec)):
        if pats is not None and len(pats) != n:
            raise ValueError(f"ncp_mlp {name} needs one entry per layer ({n}), got {len(pats)}")
    if (in_scale is None) != (in_shift is None):
        raise ValueError("ncp_mlp needs in_scale and in_shift together (the layers read x * in_scale + in_shift)")
    C, _, a = x.shape
    for name, t, shape in (("in_scale", in_scale, (C, a)), ("in_shift", in_shift, (C, a))):
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"ncp_mlp {name} has shape {tuple(t.shape)}, expected (cells, features) = {shape}")
    if head is not None and (head[0].dim() != 3 or tuple(head[0].shape[:2]) != (C, a)
                             or tuple(head[1].shape) != (C, head[0].shape[2])):
        raise ValueError(f"ncp_mlp head must be (W (cells, features, o), b (cells, o)) "
                         f"with cells, features = {C}, {a}; "
                         f"got {tuple(head[0].shape)}, {tuple(head[1].shape)}")
    which = resolve_backend(backend, x)
    if which == "triton":
        return _ncp_triton(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift, head)
    if which == "cpp" and not _cpp_applies(x):
        raise ValueError(f"ncp_mlp backend='cpp' needs float32 / float64 CPU tensors and the compiled kernel; got "
                         f"{x.dtype} on {x.device}" + ("" if kernel_ops.available() else " (the kernel is not built)"))
    if which == "torch":
        return ncp_mlp_ref(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift, head)
    dt = x.dtype
    c = lambda t: t.to(dt).contiguous()  # noqa: E731
    opt = lambda t: x.new_empty(0) if t is None else c(t)  # noqa: E731
    params = ([opt(w) for w in w_in] + [c(b) for b in bias] + [c(w) for w in list(w_rec)[1:]]
              + [opt(in_scale), opt(in_shift), *((c(head[0]), c(head[1])) if head is not None else (opt(None),) * 2)])
    masks = tuple(c(m.detach()) for m in mask)
    pat = lambda ps: [] if ps is None else [x.new_empty(0) if p is None else p.detach() for p in ps]  # noqa: E731
    patterns = (pat(pattern_in), pat(pattern_rec))
    y, head_out = _NCPMLPFunction.apply(ACT_CODES[activation], n, masks, patterns, x.contiguous(), *params)
    return y if head is None else (y, head_out)
