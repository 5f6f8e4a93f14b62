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

Backends (``ncp_mlp(backend=...)``), each a module of this folder: ``"cpp"`` (the fused CPU kernel, ``cpu.py``;
float32 / float64 CPU tensors), ``"triton"`` (the Triton kernels, ``triton_kernels.py``, as the operator of
``triton_op.py``, on the layers packed by :func:`pack_layers`, each at its own width: float16 / bfloat16 / float32
inputs computed in float32 (float32 products: the TF32 measurement is in ``triton_kernels.py``), the backward
recomputing the layer outputs; CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``), ``"torch"``
(:func:`ncp_mlp_ref`, ``ref.py``); ``"auto"``: ``"triton"`` for CUDA tensors when ``triton`` imports (not float64),
``"cpp"`` for CPU tensors when the kernel builds, else ``"torch"``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...errors import check_choice
from .. import cpu_kernel, triton_loader
from .cpu import ncp_mlp_cpu
from .ref import ncp_mlp_ref
from .triton_op import ncp_mlp_triton, pack_layers

Tensor = torch.Tensor

__all__ = ["ncp_mlp", "resolve_backend", "fused_available", "ACT_CODES", "BACKENDS"]

BACKENDS = ("auto", "triton", "cpp", "torch")
_TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

ACT_CODES = {"linear": 0, "tanh": 1, "relu": 2, "sigmoid": 3}


def _cpp_applies(x: Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and cpu_kernel.available()


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


def _ncp_triton(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift, head):
    if x.dtype not in _TRITON_DTYPES:
        raise ValueError(f"ncp_mlp backend='triton' takes float16 / bfloat16 / float32 inputs, got {x.dtype}")
    w_in_p, b_p, w_rec_p, m_p, widths, inputs, h_out = pack_layers(x, w_in, bias, w_rec, mask, pattern_in, pattern_rec)
    y = ncp_mlp_triton(x, w_in_p, b_p, w_rec_p, m_p, widths, inputs, ACT_CODES[activation], h_out, in_scale, in_shift)
    return y if head is None else (y, torch.baddbmm(head[1][:, None, :], x, head[0]))


def ncp_mlp(
    x: Tensor,
    w_in: Sequence[Tensor | None],
    bias: Sequence[Tensor],
    w_rec: Sequence[Tensor | None],
    mask: Sequence[Tensor],
    activation: str = "tanh",
    pattern_in: Sequence[Tensor | None] | None = None,
    pattern_rec: Sequence[Tensor | None] | None = None,
    in_scale: Tensor | None = None,
    in_shift: Tensor | None = None,
    head: tuple[Tensor, Tensor] | None = None,
    backend: str = "auto",
):
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
    if head is not None and (
        head[0].dim() != 3 or tuple(head[0].shape[:2]) != (C, a) or tuple(head[1].shape) != (C, head[0].shape[2])
    ):
        raise ValueError(
            f"ncp_mlp head must be (W (cells, features, o), b (cells, o)) "
            f"with cells, features = {C}, {a}; "
            f"got {tuple(head[0].shape)}, {tuple(head[1].shape)}"
        )
    which = resolve_backend(backend, x)
    if which == "triton":
        return _ncp_triton(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift, head)
    if which == "cpp" and not _cpp_applies(x):
        raise ValueError(
            f"ncp_mlp backend='cpp' needs float32 / float64 CPU tensors and the compiled kernel; got "
            f"{x.dtype} on {x.device}" + ("" if cpu_kernel.available() else " (the kernel is not built)")
        )
    if which == "torch":
        return ncp_mlp_ref(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift, head)
    dt = x.dtype
    c = lambda t: t.to(dt).contiguous()  # noqa: E731
    opt = lambda t: x.new_empty(0) if t is None else c(t)  # noqa: E731
    pat = lambda ps: [] if ps is None else [x.new_empty(0) if p is None else p.detach() for p in ps]  # noqa: E731
    io = [opt(in_scale), opt(in_shift), *((c(head[0]), c(head[1])) if head is not None else (opt(None),) * 2)]
    y, head_out = ncp_mlp_cpu(
        x.contiguous(),
        [opt(w) for w in w_in],
        [c(b) for b in bias],
        [x.new_empty(0)] + [c(w) for w in list(w_rec)[1:]],
        [c(m.detach()) for m in mask],
        ACT_CODES[activation],
        pat(pattern_in),
        pat(pattern_rec),
        io,
    )
    return y if head is None else (y, head_out)
