"""Lazy build of the fused CPU kernels in ``csrc/`` (``selective_scan_cpu.cpp``: the scans; ``head_scan_cpu.cpp``: the
multi-head scan with one decay per head; ``ncp_cpu.cpp``: the pruned NCP backbone of NAC; ``fast_math.h``: their
shared exp).

The extension is compiled on first use with :func:`torch.utils.cpp_extension.load` (needs a C++
compiler and ``ninja``; about a minute) into a stable cache directory, so later processes only load
it. Any failure (no compiler, no ninja, a build error) warns once and makes :func:`get` return
``None``; callers then use the pure-PyTorch path. ``NEURODYN_NO_CPP_EXT=1`` forces that fallback.

Cache directory: ``$NEURODYN_EXT_DIR`` if set, else
``~/.cache/neurodyn/torch_extensions/<torch version>/<cpu tag>-<source hash>``. The build uses
``-march=native``, so the cpu tag (a hash of the CPU model and flags) keeps machines that share a home
directory apart. torch serialises concurrent builds of one directory with a lock file; a process killed
mid-build leaves that lock behind and later builds wait on it: delete ``<dir>/lock`` then.
"""
from __future__ import annotations

import hashlib
import os
import platform
import threading
import warnings
from pathlib import Path

import torch

_CSRC = Path(__file__).with_name("csrc")
_SOURCES = (_CSRC / "selective_scan_cpu.cpp", _CSRC / "head_scan_cpu.cpp", _CSRC / "ncp_cpu.cpp")
_HEADERS = (_CSRC / "fast_math.h",)
_LOCK = threading.Lock()
_STATE: dict[str, object] = {}  # "module" -> ModuleType | None once a build was attempted
_ENV_DISABLE = "NEURODYN_NO_CPP_EXT"


def disabled_by_env() -> bool:
    """True when ``NEURODYN_NO_CPP_EXT`` asks for the pure-PyTorch fallback."""
    return os.environ.get(_ENV_DISABLE, "").strip().lower() not in ("", "0", "false", "no")


def _cpu_tag() -> str:
    text = platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features")):
                    text += line
                    if line.startswith(("flags", "Features")):
                        break
    except OSError:
        pass
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _source_tag() -> str:
    digest = hashlib.sha1()
    for f in (*_SOURCES, *_HEADERS):
        digest.update(f.read_bytes())
    return digest.hexdigest()[:10]


def build_dir() -> Path:
    """Directory where the compiled extension is cached.

    Keyed by the CPU and by a hash of the C++ sources and headers: ninja decides staleness by file times, so a build
    of an older source that finished after the source changed could otherwise be reused.
    """
    env = os.environ.get("NEURODYN_EXT_DIR")
    if env:
        return Path(env)
    version = torch.__version__.replace("+", "_")
    return (Path.home() / ".cache" / "neurodyn" / "torch_extensions" / version /
            f"{_cpu_tag()}-{_source_tag()}")


def _build():
    from torch.utils import cpp_extension

    directory = build_dir()
    directory.mkdir(parents=True, exist_ok=True)
    flags = ["-O3", "-fopenmp", "-std=c++17"]
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        flags.append("-march=native")
    cpp_extension.load(
        name="neurodyn_scan_cpu",
        sources=[str(f) for f in _SOURCES],
        extra_cflags=flags,
        extra_ldflags=["-fopenmp"],
        build_directory=str(directory),
        verbose=False,
        is_python_module=False,  # the kernels register themselves as torch.ops.neurodyn_scan.*
    )
    return torch.ops.neurodyn_scan


def get():
    """The compiled kernels (``torch.ops.neurodyn_scan``), built on first call; ``None`` if unavailable."""
    if disabled_by_env():
        return None
    if "module" in _STATE:
        return _STATE["module"]  # type: ignore[return-value]
    with _LOCK:
        if "module" not in _STATE:
            try:
                _STATE["module"] = _build()
            except Exception as exc:  # noqa: BLE001 - any build failure means "use the fallback"
                _STATE["module"] = None
                warnings.warn(
                    "neurodyn.ops: could not build the fused CPU scan kernel "
                    f"({type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}); "
                    "using the pure-PyTorch chunked scan instead (set NEURODYN_NO_CPP_EXT=1 to "
                    "skip the build attempt).",
                    RuntimeWarning,
                    stacklevel=3,
                )
    return _STATE["module"]  # type: ignore[return-value]


def available() -> bool:
    """Whether the fused CPU kernel can be used (builds it if needed)."""
    return get() is not None
