"""Named benchmarks: ``neurodyn bench NAME [--scale tiny|cpu|paper] [--dir FOLDER] [options...]``.

A benchmark is a script in a source checkout's ``benchmarks/`` folder exposing
``run(scale: str, argv: list[str]) -> int``. :data:`BENCHMARKS` is the explicit registry: name -> script
file, the arguments put before the user's (one script may hold several experiments) and a one-line
description. To add one, write ``benchmarks/<name>.py`` with such a ``run`` and add an entry here.

The scripts folder is ``--dir`` (:func:`run`'s ``folder``), else ``$NEURODYN_BENCHMARKS``, else
``./benchmarks`` under the current directory; the scripts write their results beside themselves
(``benchmarks/results/``).

Also here (from :mod:`neurodyn.bench.measure`): the measurement helpers scripts share (``timed``,
``peak_rss_mb``, ``rss_increase_kib``, ``TensorSizeTracker``, ...) and :func:`script_main`, the command line
of a script run directly.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from ..errors import ConfigError, unknown_name
from .measure import (TensorSizeTracker, current_rss_mb, peak_rss_mb, reset_peak_rss, rss_increase_kib,  # noqa: F401
                      status_kib, timed)

SCALES = ("tiny", "cpu", "paper")


class Benchmark(NamedTuple):
    script: str               # file name in the benchmarks folder
    description: str
    args: tuple[str, ...] = ()  # put before the user's arguments


BENCHMARKS: dict[str, Benchmark] = {
    "nac_runtime": Benchmark("nac_runtime.py", "NAC paper Table 5: run time and peak memory of NAC modes / Top-K vs "
                                               "attention, CfC, LTC, GRU, LSTM, ODE-RNN; block Top-K recall and memory"),
    "nac_repro": Benchmark("nac_repro.py", "NAC paper Table 1 at our scale: NAC modes and ablations vs baselines on "
                                           "event digits, activity and bearing RUL, several seeds"),
    "geomano-ablation": Benchmark("geomano_ablation.py", "GeoMaNO paper Table 3 at our scale: 1-D / 2-D SSM x "
                                                         "correction R (none = D only, 0001/0011/0111, learnable), "
                                                         "several seeds"),
    "resolution-transfer": Benchmark("resolution_transfer.py", "Darcy trained at 17x17, tested zero-shot at 17x17 "
                                                               "and 33x33: FNO, LaMO (resample / tokens), GeoMaNO"),
    "chonn-order": Benchmark("chonn_experiments.py", "CHONN Fig. 3: order-n CKB vs n stacked first-order blocks on "
                                                     "T1-T4 (point/spectral/derivative RelL2), 2x2 vs depth 3", ("order",)),
    "chonn-poisson": Benchmark("chonn_experiments.py", "CHONN Fig. 4g: Poisson order ablation, U-Net (order 0) vs CKB "
                                                       "orders 1-4, ID K=16 / OOD K=20", ("poisson",)),
    "chonn-darcy": Benchmark("chonn_experiments.py", "CHONN Fig. 4c-d: CHONN-UNet vs U-Net vs FNO on Darcy, PDEBench "
                                                     "metric table, relative gains", ("darcy",)),
    "chonn-rollout": Benchmark("chonn_experiments.py", "CHONN Fig. 5: CHONN-FNO vs FNO, shallow-water rollout and NS "
                                                       "40-step rollout from 3/5/10 frames", ("rollout",)),
    "compile-speed": Benchmark("compile_speed.py", "torch.compile (inductor, fullgraph) and bf16 autocast vs eager: "
                                                   "forward + backward step time, LaMO / GeoMaNO"),
}

ENV = "NEURODYN_BENCHMARKS"


def available() -> list[str]:
    return sorted(BENCHMARKS)


def benchmarks_dir(folder: str | Path | None = None) -> Path:
    """The benchmark scripts folder: ``folder``, else ``$NEURODYN_BENCHMARKS``, else ``./benchmarks``."""
    where = (f"--dir {folder}" if folder else f"${ENV}={os.environ[ENV]}" if os.environ.get(ENV)
             else f"./benchmarks under {Path.cwd()}")
    path = Path(folder or os.environ.get(ENV) or Path.cwd() / "benchmarks")
    if not path.is_dir():
        raise ConfigError(f"no benchmarks folder at {path} ({where}); benchmarks are scripts of a source checkout: "
                          f"run from its top folder, pass --dir PATH/TO/benchmarks or set ${ENV}")
    return path


def load_script(path: str | Path, module_name: str | None = None):
    """Import the benchmark script ``path`` as a module (its ``run(scale, argv)`` checked)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"benchmark script {path} is not there; pass --dir PATH/TO/benchmarks or set ${ENV}")
    name = module_name or f"neurodyn_bench_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not callable(getattr(module, "run", None)):
        raise ConfigError(f"benchmark script {path} has no run(scale, argv) function")
    return module


def run(name: str, scale: str = "cpu", argv: Sequence[str] = (), folder: str | Path | None = None) -> int:
    """Run benchmark ``name`` at ``scale`` with extra script arguments ``argv``."""
    if name not in BENCHMARKS:
        raise unknown_name("benchmark", name, BENCHMARKS)
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; expected tiny, cpu or paper")
    bench = BENCHMARKS[name]
    module = load_script(benchmarks_dir(folder) / bench.script)
    return int(module.run(scale, [*bench.args, *argv]) or 0)


def script_main(run_fn: Callable[[str, list[str]], int], argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/<name>.py [--scale S] [options...]``: ``run_fn(S, options)``, S = cpu by default."""
    args = list(sys.argv[1:] if argv is None else argv)
    scale = "cpu"
    if "--scale" in args:
        i = args.index("--scale")
        scale = args[i + 1]
        del args[i:i + 2]
    return run_fn(scale, args)
