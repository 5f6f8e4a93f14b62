"""The speed benchmarks a user of the wheel runs: ``neurodyn bench NAME [--scale tiny|cpu|paper] [options...]``.

Each benchmark is a module of this package with ``run(scale: str, argv: list[str]) -> int``: it prints its tables
and writes its raw measurements under ``bench-results/`` of the current folder (``--out``; git-ignored in a
checkout). :data:`BENCHMARKS` is the registry: name -> module, the arguments put before the user's and a one-line
description; ``python -m neurodyn.bench.<module>`` runs one directly (:func:`script_main`). The experiments that test
the papers' claims are not here: they are the laboratory's, a project of its own beside the library.

Also here (from :mod:`neurodyn.bench.measure`): the measurement helpers the benchmarks share (``timed``,
``peak_rss_mb``, ``rss_increase_kib``, ``TensorSizeTracker``, ...).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..errors import ConfigError, unknown_name
from .measure import TensorSizeTracker, current_rss_mb, peak_rss_mb, reset_peak_rss, rss_increase_kib, status_kib, timed  # noqa: F401

SCALES = ("tiny", "cpu", "paper")


class Benchmark(NamedTuple):
    module: str  # the module of this package with run(scale, argv)
    description: str
    args: tuple[str, ...] = ()  # put before the user's arguments


BENCHMARKS: dict[str, Benchmark] = {
    "scan": Benchmark(
        "scan",
        "selective scan speed and peak memory: fused C++ kernel, PyTorch fallback, reference, "
        "mambapy pscan when installed; 2-D, cross-scan, S4D, Kirchhoff sections",
    ),
    "head-scan-speed": Benchmark(
        "head_scan_speed",
        "ops.head_scan's fused kernel vs the scan folded into channels "
        "(selective_scan, C++ and PyTorch) at LaMO's shapes",
    ),
    "step-speed": Benchmark(
        "step_speed", "training-step time of every seed model against its baselines at the presets' cpu scale"
    ),
    "compile-speed": Benchmark(
        "compile_speed",
        "torch.compile (inductor, fullgraph) and bf16 autocast vs eager: forward + backward step time, LaMO / GeoMaNO",
    ),
    "gpu": Benchmark(
        "gpu",
        "the scans' forward / backward against the memory floor, seed models vs baselines per "
        "sample (fp32, bf16, compiled), paper protocols' GPU-hours; --scale tiny on a CPU",
    ),
    "kernels": Benchmark(
        "kernel_report",
        "static report of every Triton kernel compiled for sm_80 / sm_90 on a CPU: "
        "registers, spills, shared memory, SASS per element, predicted ratio to "
        "the memory floor",
    ),
    "generators": Benchmark(
        "generators",
        "dataset generation speed per generator and the projected time of each dataset at cpu and paper scale",
    ),
}


def available() -> list[str]:
    return sorted(BENCHMARKS)


def run(name: str, scale: str = "cpu", argv: Sequence[str] = ()) -> int:
    """Run benchmark ``name`` at ``scale`` with extra arguments ``argv`` (its module's ``run``)."""
    if name not in BENCHMARKS:
        raise unknown_name("benchmark", name, BENCHMARKS)
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; expected tiny, cpu or paper")
    bench = BENCHMARKS[name]
    module = importlib.import_module(f"{__name__}.{bench.module}")
    return int(module.run(scale, [*bench.args, *argv]) or 0)


def script_main(run_fn: Callable[[str, list[str]], int], argv: Sequence[str] | None = None) -> int:
    """``python -m neurodyn.bench.<module> [--scale S] [options...]``: ``run_fn(S, options)``, S = cpu by default."""
    args = list(sys.argv[1:] if argv is None else argv)
    scale = "cpu"
    if "--scale" in args:
        i = args.index("--scale")
        scale = args[i + 1]
        del args[i : i + 2]
    return run_fn(scale, args)
