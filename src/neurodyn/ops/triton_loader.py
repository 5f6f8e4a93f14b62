"""The lazy loader of the ops' Triton kernels: importing :mod:`neurodyn` never imports ``triton``.

An op with Triton kernels keeps them in its folder, ``ops/<op>/triton_kernels.py`` (``selective_scan``, whose
kernels the multi-head and Kirchhoff-cell scans share, ``linear_scan``, ``scan_2d``, ``ncp_mlp``), and the helpers
they share are ``ops/triton_common.py``. These kernel modules import ``triton`` at their top and are only ever loaded
by :func:`load` (by an op's name), which the op's custom operators (``ops/<op>/triton_op.py``) call when they run.

Two builds of each kernel module: Triton decides between compiling a ``@triton.jit`` function for the GPU and running
it in its CPU interpreter when the function is *decorated* (``triton.jit`` reads ``TRITON_INTERPRET`` then, not at
launch; triton 3.x). So :func:`load` executes a kernel module's file twice, as two module objects: once as it stands
(compiled kernels, for CUDA tensors) and once with ``TRITON_INTERPRET=1`` set while its decorators run (interpreted
kernels, for CPU tensors), restoring the variable afterwards. Which one a call gets depends on its tensors' device,
not on the order of imports; with ``TRITON_INTERPRET=1`` in the environment every call is interpreted. Running the
kernels on CPU tensors (in the interpreter, slowly: tests only) must be asked for with ``TRITON_INTERPRET=1``
(:func:`check_device`).

The same holds for Triton's own library: ``tl.sum``, ``tl.zeros``, ``tl.sigmoid`` ... are ``@triton.jit`` functions
decorated when ``triton`` is imported, and the interpreter cannot call a compiled one ("Cannot call @triton.jit'd
outside of the scope of a kernel"). So the kernels use only Triton's builtins (``tl.reduce`` with
``tl.standard._sum_combine`` for a sum, ``tl.full`` for zeros) and their own helpers, and run in the interpreter
whether or not ``triton`` was first imported under ``TRITON_INTERPRET=1``. (The converse does not hold: in a process
that imported ``triton`` under ``TRITON_INTERPRET=1`` its library is interpreted and nothing compiles, which is why
that variable makes every call interpreted.)

``NEURODYN_NO_TRITON=1`` makes :func:`available` false, so that ``backend="auto"`` never picks the kernels.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path

import torch

from .custom_op import constant_for_compile

_ENV_DISABLE = "NEURODYN_NO_TRITON"
_HERE = Path(__file__).parent
_KERNELS = "triton_kernels"  # an op's kernel module: ops/<op>/triton_kernels.py
_COMMON = "triton_common"  # the helpers its kernels share: ops/triton_common.py
_LOCK = threading.RLock()  # (reentrant: a kernel module loads the shared helpers while being loaded)
_MODULES: dict[tuple[str, bool], object] = {}


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0")


def interpreter_requested() -> bool:
    """Whether ``TRITON_INTERPRET=1`` is set: Triton's CPU interpreter may run the kernels (on CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip() == "1"


def target_arch(t: torch.Tensor | None = None) -> int:
    """The compute capability the Triton kernels compile for (e.g. 90): ``t``'s GPU when it is a CUDA tensor, else the
    active driver's target (a GPU's, or the static report's stand-in), 0 when there is none (the interpreter)."""
    if t is not None and t.is_cuda:
        major, minor = torch.cuda.get_device_capability(t.device)
        return 10 * major + minor
    try:
        from triton.runtime import driver

        return int(driver.active.get_current_target().arch)
    except Exception:  # noqa: BLE001 - no GPU driver here: the interpreter's build
        return 0


def triton_importable() -> bool:
    """Whether ``import triton`` succeeds (false on platforms or torch builds without it)."""
    try:
        if importlib.util.find_spec("triton") is None:
            return False
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken or blocked install counts as absent
        return False
    return True


@constant_for_compile
def available() -> bool:
    """Whether the Triton kernels can be dispatched to: ``triton`` imports and ``NEURODYN_NO_TRITON`` is unset.

    A constant for ``torch.compile`` (evaluated once while tracing, never traced into)."""
    return not _env_on(_ENV_DISABLE) and triton_importable()


def is_cuda(t: torch.Tensor) -> bool:
    """Whether ``t`` is on a CUDA device: the device check of :func:`chosen` (one function, so that a test can make a
    CPU tensor claim CUDA)."""
    return t.is_cuda


def chosen(backend: str, t: torch.Tensor) -> bool:
    """Whether a scan called with ``backend`` on ``t`` runs on the Triton kernels: ``"triton"`` asked for (checked by
    :func:`check_device` when the kernels run), or ``"auto"`` with ``t`` on CUDA and the kernels :func:`available`.
    CPU tensors under ``"auto"`` keep the CPU kernels (or the PyTorch path)."""
    return backend == "triton" or (backend == "auto" and is_cuda(t) and available())


def check_device(t: torch.Tensor, what: str) -> None:
    """Raise one clear error unless the kernels can run on ``t``'s device: CUDA, or CPU under the interpreter."""
    if not triton_importable():
        raise RuntimeError(f"{what}: backend='triton' needs the triton package (pip install 'neurodyn[triton]')")
    if t.is_cuda or (t.device.type == "cpu" and interpreter_requested()):
        return
    raise ValueError(
        f"{what}: backend='triton' needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1, which runs "
        f"the kernels in Triton's CPU interpreter); got tensors on {t.device}"
    )


def kernel_modules() -> tuple[str, ...]:
    """The ops with Triton kernels: the folders ``ops/<op>/`` that hold a ``triton_kernels.py``."""
    return tuple(sorted(p.parent.name for p in _HERE.glob(f"*/{_KERNELS}.py")))


def load(name: str, device: torch.device):
    """The Triton kernel module of op ``name`` (``"selective_scan"``, ``"linear_scan"``, ``"scan_2d"``,
    ``"ncp_mlp"``: ``ops/<name>/triton_kernels.py``) built for ``device``: interpreted for CPU tensors or when
    ``TRITON_INTERPRET=1``, compiled otherwise."""
    interpret = device.type == "cpu" or interpreter_requested()
    mod = _MODULES.get((name, interpret))
    return mod if mod is not None else _load_build(name, interpret)


def launcher(name: str, function: str, device_of: int = 0):
    """An operator's implementation (:func:`neurodyn.ops.custom_op.define_op`): ``function`` of op ``name``'s kernel
    module, loaded for the device of argument ``device_of``, called with the operator's arguments as they are."""

    def implementation(*args):
        return getattr(load(name, args[device_of].device), function)(*args)

    implementation.__name__ = f"{name}_{function}"
    return implementation


def ceil_pow2(x: int) -> int:
    """The least power of two ``>= x`` (1 for ``x <= 1``): a block size ``tl.arange`` takes."""
    return 1 << max(int(x) - 1, 0).bit_length()


def floor_pow2(x: int) -> int:
    """The greatest power of two ``<= x`` (1 for ``x <= 1``)."""
    return 1 << (max(int(x), 1).bit_length() - 1)


def shared():
    """The helpers module ``triton_common.py`` of the build being loaded: called by a kernel module at its import,
    while :func:`load` has set ``TRITON_INTERPRET`` for that build."""
    return _load_build(_COMMON, interpreter_requested())


def _load_build(name: str, interpret: bool):
    key = (name, interpret)
    with _LOCK:
        if key not in _MODULES:
            _MODULES[key] = _exec(name, interpret)
        return _MODULES[key]


def _exec(name: str, interpret: bool):
    """Execute the file of kernel module ``name`` (``triton_common`` or an op's) as a new module of this build."""
    full = f"{__package__}.{name}" if name == _COMMON else f"{__package__}.{name}.{_KERNELS}"
    full += "_interpreted" if interpret else ""
    path = _HERE / (f"{name}.py" if name == _COMMON else f"{name}/{_KERNELS}.py")
    if not path.is_file():
        raise ValueError(
            f"no Triton kernels for {name!r}: {path} does not exist (kernel modules: {', '.join(kernel_modules())})"
        )
    spec = importlib.util.spec_from_file_location(full, path)
    mod = importlib.util.module_from_spec(spec)
    # floating-point contraction (FMA) on, as every kernel was measured and tested; unset, Triton 3.9 warns that 3.10
    # turns it off. A value the user set is kept.
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        sys.modules[full] = mod  # (triton resolves a kernel's globals through its module)
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(full, None)
        raise
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old
    return mod
