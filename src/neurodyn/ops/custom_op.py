"""The one way a fused kernel becomes a PyTorch operator, for the C++ and the Triton kernels alike: :func:`define_op`.

Every fused kernel is reached through an operator ``torch.ops.neurodyn.<name>`` made by ``torch.library.custom_op``
from four things:

* a **schema** with named arguments and results (``"(Tensor u, Tensor? D, bool zoh) -> (Tensor out, Tensor ckpt)"``);
* the **implementation**: a call into the compiled C++ library (``backend="cpp"``, registered for CPU tensors; the
  library is built on the first call, :func:`neurodyn.ops.cpu_kernel.library`) or a Triton launcher
  (``backend="triton"``, every device: the kernel module compiled for CUDA tensors, interpreted for CPU tensors,
  :func:`neurodyn.ops.triton_loader.launcher`);
* a **fake** that computes every result's shape and dtype from the arguments (blocking constants and tile sizes
  included), so ``torch.compile`` and ``torch.export`` trace through the operator without running it;
* for a forward operator, its **autograd formula** (``register_autograd``), which calls the matching backward
  operator, so that an exported graph stays differentiable and AOTAutograd compiles both. The backward operators
  are first order (no formula).

Why operators at all: the C++ library registers its functions as ``torch.ops.neurodyn_scan.*`` with
``m.def(name, &fn)``, an inferred schema and the kernel as ``CompositeImplicitAutograd``, which tracers take at its
word: FakeTensor propagation, ``make_fx`` and the autograd keys run the kernel itself on tensors without data. The
operators here are opaque to the tracers instead. Outputs a kernel may leave undefined (no checkpoints without a
gradient) are empty tensors, and no output aliases an input or another one (``torch.library.opcheck`` checks
every operator: ``tests/ops/test_compile_export.py`` the C++ ones, ``tests/ops/test_triton_scan.py`` the Triton
ones, listed in :data:`OPS`).

The autograd formula is declared by names: ``save`` lists the arguments and results (by their schema names) the
backward needs, and every non-tensor argument is kept as well; ``backward(saved, *grads)`` reads them as attributes
of ``saved`` (``None`` for an absent optional tensor, a list for a ``Tensor[]``) and returns ``{argument name:
gradient}``; arguments it leaves out get no gradient. One registration is then a few declarative lines, e.g.::

    linear_scan_triton = define_op(
        "linear_scan_triton", "(Tensor a, Tensor x, Tensor? h0, bool reverse, int block_l, int block_q) -> Tensor h",
        triton_loader.launcher("linear_scan", "fwd", device_of=1), _fwd_fake, backend="triton",
        save=("a", "h0", "h"), backward=_backward)

with ``_backward(s, gh)`` returning ``{"a": ga, "x": gx, "h0": gh0}`` from ``s.a, s.h0, s.h, s.reverse, ...``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace

import torch

Tensor = torch.Tensor

__all__ = ["OPS", "cdiv", "compute_dtype", "constant_for_compile", "contiguous", "define_op", "needs_grad"]

NAMESPACE = "neurodyn"
# backend -> the device types an operator's implementation is registered for (None: every device)
DEVICE_TYPES = {"cpp": "cpu", "triton": None}
# backend -> {operator name: operator}: every operator define_op made (the opcheck tests walk them)
OPS: dict[str, dict[str, Callable]] = {backend: {} for backend in DEVICE_TYPES}


def constant_for_compile(fn):
    """Mark ``fn`` as ``torch.compiler.assume_constant_result`` does (Dynamo calls it while tracing and uses its result
    as a constant, never tracing into it), without importing ``torch._dynamo`` (2 s) when neurodyn is imported.
    ``tests/ops/test_compile_export.py`` checks that the mark is still the one torch's decorator sets."""
    fn._dynamo_marked_constant = True
    return fn


def needs_grad(*tensors: Tensor | None) -> bool:
    """Whether autograd records a call with these inputs (grad mode on and one of them requires grad): what a forward
    operator's ``save_checkpoints`` argument is set from."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def compute_dtype(*tensors: Tensor | None) -> torch.dtype:
    """The kernels' accumulation dtype: float64 if any input is float64, else float32 (half inputs accumulate in
    float32)."""
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else torch.float32


def contiguous(t: Tensor | None) -> Tensor | None:
    """``t`` contiguous (``None`` stays ``None``): the layout every operator takes."""
    return None if t is None else t.contiguous()


def cdiv(n: int, size: int) -> int:
    """``ceil(n / size)``: the chunks (rows, tiles) of ``size`` that ``n`` steps fill, for the fakes' shapes."""
    return (n + size - 1) // size


def define_op(
    name: str,
    schema: str,
    impl: Callable,
    fake: Callable,
    *,
    backend: str,
    save: Sequence[str] = (),
    backward: Callable | None = None,
):
    """The operator ``torch.ops.neurodyn.<name>`` (returned as ``torch.library.CustomOpDef``, called like a function).

    ``schema``: the arguments and results, named (``save`` refers to them); ``impl``: the kernel call, with the
    operator's arguments in schema order; ``fake``: the same signature, returns empty tensors of the results' shapes
    and dtypes; ``backend``: ``"cpp"`` (the implementation registered for CPU tensors) or ``"triton"`` (for every
    device); ``save`` and ``backward``: the autograd formula of a forward operator (module docstring)."""
    if backend not in OPS:
        raise ValueError(f"define_op {name}: backend must be one of {sorted(OPS)}, got {backend!r}")
    op = torch.library.custom_op(
        f"{NAMESPACE}::{name}", impl, mutates_args=(), schema=schema, device_types=DEVICE_TYPES[backend]
    )
    op.register_fake(fake)
    if backward is not None:
        formula = _Formula(name, schema, save, backward)
        op.register_autograd(formula.backward, setup_context=formula.setup_context)
    elif save:
        raise ValueError(f"define_op {name}: save={tuple(save)} without a backward")
    OPS[backend][name] = op
    return op


def _kind(t) -> str:
    """An argument's kind for the formula: ``"tensor"`` (also an optional one), ``"tensors"`` or ``"value"``."""
    text = str(t)
    return {"Tensor": "tensor", "Optional[Tensor]": "tensor", "List[Tensor]": "tensors"}.get(text, "value")


class _Formula:
    """An operator's autograd formula from the names of its schema (:func:`define_op`): ``setup_context`` saves the
    named tensors (a ``Tensor[]`` as its elements, an absent optional as a marker) and keeps the non-tensor
    arguments; ``backward`` hands them to the op's formula by name and lays its gradients out in argument order."""

    def __init__(self, name: str, schema: str, save: Sequence[str], formula: Callable):
        parsed = torch._C.parse_schema(f"{NAMESPACE}::{name}{schema}")
        self.name = name
        self.arguments = [(a.name, _kind(a.type)) for a in parsed.arguments]
        self.results = [r.name for r in parsed.returns]
        known = {n for n, _ in self.arguments} | {r for r in self.results if r}
        unknown = [s for s in save if s not in known]
        if unknown:
            raise ValueError(
                f"define_op {name}: save names {unknown}, neither an argument nor a named result of {schema}"
            )
        self.save = tuple(save)
        self.formula = formula

    def setup_context(self, ctx, inputs, output):
        values = dict(zip((n for n, _ in self.arguments), inputs))
        values.update(zip(self.results, output if len(self.results) > 1 else (output,)))
        ctx.kept = {n: values[n] for n, kind in self.arguments if kind == "value"}
        ctx.lengths = {n: len(values[n]) for n, kind in self.arguments if kind == "tensors"}
        tensors, layout = [], []
        for n in self.save:  # per saved name: None (absent), -1 (one tensor) or the length of a list
            v = values[n]
            if v is None:
                layout.append(None)
            elif isinstance(v, Tensor):
                layout.append(-1)
                tensors.append(v)
            else:
                layout.append(len(v))
                tensors.extend(v)
        ctx.layout = layout
        ctx.save_for_backward(*tensors)

    def backward(self, ctx, *grads):
        it = iter(ctx.saved_tensors)
        saved = dict(ctx.kept)
        for n, count in zip(self.save, ctx.layout):
            saved[n] = None if count is None else next(it) if count < 0 else [next(it) for _ in range(count)]
        got = dict(self.formula(SimpleNamespace(**saved), *grads))
        out = []
        for n, kind in self.arguments:
            g = got.pop(n, None)
            out.append([None] * ctx.lengths[n] if kind == "tensors" and g is None else g)
        if got:
            raise RuntimeError(f"{self.name}: the backward returned gradients of {sorted(got)}, not arguments")
        return tuple(out)
