"""Named benchmarks: ``neurodyn bench NAME [--scale tiny|cpu|paper] [--dir FOLDER] [options...]``.

A benchmark is a script in a source checkout's ``benchmarks/`` folder exposing
``run(scale: str, argv: list[str]) -> int``, or a module of this package with the same ``run`` (it then works
from an installed wheel: ``neurodyn bench kernels``, :mod:`neurodyn.bench.kernel_report`). :data:`BENCHMARKS` is
the explicit registry: name -> script file (or module), the arguments put before the user's (one script may hold
several experiments) and a one-line description. To add one, write ``benchmarks/<name>.py`` with such a ``run`` and
add an entry here.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from ..errors import ConfigError, unknown_name
from .measure import TensorSizeTracker, current_rss_mb, peak_rss_mb, reset_peak_rss, rss_increase_kib, status_kib, timed  # noqa: F401

SCALES = ("tiny", "cpu", "paper")


class Benchmark(NamedTuple):
    script: str               # file name in the benchmarks folder ("" for a module of this package)
    description: str
    args: tuple[str, ...] = ()  # put before the user's arguments
    module: str = ""          # a module of this package with run(scale, argv), in place of a script


BENCHMARKS: dict[str, Benchmark] = {
    "nac_runtime": Benchmark("nac_runtime.py", "NAC paper Table 5: run time and peak memory of NAC modes / Top-K "
                                               "vs attention, CfC, LTC, GRU, LSTM, ODE-RNN; block Top-K recall and "
                                               "memory"),
    "nac_repro": Benchmark("nac_repro.py", "NAC paper Table 1 at our scale: NAC modes and ablations vs baselines on "
                                           "event digits, activity and bearing RUL, several seeds"),
    "geomano-ablation": Benchmark("geomano_ablation.py", "GeoMaNO paper Table 3 at our scale: 1-D / 2-D SSM x "
                                                         "correction R (none = D only, 0001/0011/0111, learnable), "
                                                         "several seeds"),
    "resolution-transfer": Benchmark("resolution_transfer.py", "Darcy trained at 17x17, tested zero-shot at 17x17 "
                                                               "and 33x33: FNO, LaMO (resample / tokens), GeoMaNO"),
    "chonn-order": Benchmark("chonn_experiments.py", "CHONN Fig. 3: order-n CKB vs n stacked first-order blocks on "
                                                     "T1-T4 (point/spectral/derivative RelL2), 2x2 vs depth 3",
                             ("order",)),
    "chonn-poisson": Benchmark("chonn_experiments.py", "CHONN Fig. 4g: Poisson order ablation, U-Net (order 0) vs CKB "
                                                       "orders 1-4, ID K=16 / OOD K=20", ("poisson",)),
    "chonn-darcy": Benchmark("chonn_experiments.py", "CHONN Fig. 4c-d: CHONN-UNet vs U-Net vs FNO on Darcy, PDEBench "
                                                     "metric table, relative gains", ("darcy",)),
    "chonn-rollout": Benchmark("chonn_experiments.py", "CHONN Fig. 5: CHONN-FNO vs FNO, shallow-water rollout and NS "
                                                       "40-step rollout from 3/5/10 frames", ("rollout",)),
    "compile-speed": Benchmark("compile_speed.py", "torch.compile (inductor, fullgraph) and bf16 autocast vs eager: "
                                                   "forward + backward step time, LaMO / GeoMaNO"),
    "chonn-speed": Benchmark("chonn_speed.py", "CHONN: training-step time of Cascaded Kirchhoff Blocks of order 1-4 "
                                               "against their backbones (chain, U-Net, FNO)"),
    "fno-speed": Benchmark("fno_speed.py", "FNO training step, ours vs neuraloperator's (same architecture; needs "
                                           "the bench extra)"),
    "gpu": Benchmark("gpu.py", "the scans' forward / backward against the memory floor, seed models vs baselines per "
                               "sample (fp32, bf16, compiled), paper protocols' GPU-hours; --scale tiny on a CPU"),
    "kernels": Benchmark("", "static report of every Triton kernel compiled for sm_80 / sm_90 on a CPU: registers, "
                             "spills, shared memory, SASS per element, predicted ratio to the memory floor",
                         module="neurodyn.bench.kernel_report"),
    "generators": Benchmark("generators.py", "dataset generation speed per generator and the projected time of each "
                                             "dataset at cpu and paper scale"),
    "ns-resolution": Benchmark("ns_resolution.py", "Navier-Stokes nu = 1e-4: the 64^2 data's solve against 128^2 and "
                                                   "256^2 solves over t <= 20, same and own initial draws"),
    "protocol": Benchmark("protocol.py", "the paper experiments at the papers' protocol or scaled to two cores, "
                                         "as resumable queues (--status, --lanes a b c)"),
    "geomano-compare": Benchmark("geomano_compare.py", "GeoMaNO vs LaMO vs Transolver vs FNO on Darcy and "
                                                       "Navier-Stokes, several seeds"),
    "geomano-kernel": Benchmark("geomano_kernel.py", "GeoMamba kernel vs a plain four-direction Mamba kernel: time and "
                                                     "memory on 32^2-128^2 patch grids"),
    "head-scan-speed": Benchmark("head_scan_speed.py", "ops.head_scan's fused kernel vs the scan folded into channels "
                                                       "(selective_scan, C++ and PyTorch) at LaMO's shapes"),
    "lamo-scaling": Benchmark("lamo_scaling.py", "LaMO vs Transolver vs full attention: forward+backward time and peak "
                                                 "memory per sample as N grows"),
    "operators-darcy": Benchmark("operators_darcy.py", "LaMO vs Transolver vs FNO on Darcy: same data, epochs and "
                                                       "seeds (--runs label=preset;overrides for variants)"),
    "uea-sequences": Benchmark("uea_sequences.py", "NAC (paper and tuned) vs GRU, LSTM, CfC, LTC, MHA, ODE-RNN and "
                                                   "the majority / 1-NN / MiniRocket baselines on UEA/UCR archive "
                                                   "files, regular and made irregular, equal epochs and time"),
    "uea-tuning": Benchmark("uea_tuning.py", "the sequence presets' settings (learning rate, width, pooling) chosen "
                                             "on validation of UEA/UCR training files; test files never read"),
    "scan": Benchmark("scan.py", "selective scan speed and peak memory: fused C++ kernel, PyTorch fallback, reference, "
                                 "mambapy pscan; 2-D, cross-scan, S4D, Kirchhoff sections"),
    "step-speed": Benchmark("step_speed.py", "training-step time of every seed model against its baselines at the "
                                             "presets' cpu scale"),
    "stssm-speed": Benchmark("stssm_speed.py", "ST-SSM vs FFNO training step on 64x64 fields, and one S4D layer's "
                                               "cost as the sequence grows"),
    "stssm-table1": Benchmark("stssm_tables.py", "ST-SSM paper Table 1 at our scale: KS nu=0.1, ST-SSM vs FFNO, "
                                                 "Multi-Input FFNO, S4-FFNO, U-Net", ("--table", "1")),
    "stssm-table5": Benchmark("stssm_tables.py", "ST-SSM paper Table 5 at our scale: factorisations on a TorusLi-like "
                                                 "set (ST-SSM, -VM, -FF, FNO2D-R)", ("--table", "5")),
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
    if bench.module:
        module = importlib.import_module(bench.module)
    else:
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
