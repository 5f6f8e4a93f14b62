"""Named benchmarks: ``neurodyn bench NAME [--scale tiny|cpu|paper] [options...]``.

A benchmark is a script in the source checkout's ``benchmarks/`` folder exposing
``run(scale: str, argv: list[str]) -> int``; :data:`BENCHMARKS` maps its name to the script and a
one-line description. To add one, write ``benchmarks/<name>.py`` with such a ``run`` and add an entry
(``register`` does the same from code). Benchmarks print their tables and may write files under
``benchmarks/results/``.

Also here: measurement helpers every benchmark can share (``peak_rss_mb``, ``rss_increase_kib``,
``TensorSizeTracker``, ``timed``), ``script_main``, the command line of a script run directly, and
``train_preset``, one seeded training run of a preset with the numbers the benchmark records keep.
"""
from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from .errors import ConfigError, unknown_name

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = Path(os.environ.get("NEURODYN_BENCHMARKS", REPO / "benchmarks"))

#: name -> (script under benchmarks/ or a callable run(scale, argv), description)
BENCHMARKS: dict[str, tuple[str | Callable[[str, list[str]], int], str]] = {
    "nac_runtime": ("nac_runtime.py", "NAC paper Table 5: run time and peak memory of NAC modes / Top-K vs "
                                      "attention, CfC, LTC, GRU, LSTM, ODE-RNN; block Top-K recall and memory"),
    "nac_repro": ("nac_repro.py", "NAC paper Table 1 at our scale: NAC modes and ablations vs baselines on "
                                  "event digits, activity and bearing RUL, several seeds"),
}


def _geomano_ablation(scale: str, argv: list[str]) -> int:
    from .bench_geomano import main

    return main(scale, argv)


BENCHMARKS["geomano-ablation"] = (_geomano_ablation, "GeoMaNO paper Table 3 at our scale: 1-D / 2-D SSM x "
                                                     "correction R (none = D only, 0001/0011/0111, learnable), "
                                                     "several seeds (neurodyn.bench_geomano)")


def register(name: str, target: str | Callable[[str, list[str]], int], description: str) -> None:
    """Add a benchmark: ``target`` is a script name under ``benchmarks/`` or a ``run(scale, argv)`` callable."""
    BENCHMARKS[name] = (target, description)


def available() -> list[str]:
    return sorted(BENCHMARKS)


def _load(name: str) -> Callable[[str, list[str]], int]:
    if name not in BENCHMARKS:
        raise unknown_name("benchmark", name, BENCHMARKS)
    target, _ = BENCHMARKS[name]
    if callable(target):
        return target
    path = BENCH_DIR / target
    if not path.exists():
        raise ConfigError(f"benchmark {name!r} is the script {path}, which is not there; benchmarks run from a "
                          "source checkout (or set $NEURODYN_BENCHMARKS to its benchmarks/ folder)")
    spec = importlib.util.spec_from_file_location(f"neurodyn_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "run"):
        raise ConfigError(f"benchmark script {path} has no run(scale, argv) function")
    return module.run


def run(name: str, scale: str = "cpu", argv: Sequence[str] = ()) -> int:
    """Run benchmark ``name`` at ``scale`` with extra script arguments ``argv``."""
    if scale not in ("tiny", "cpu", "paper"):
        raise ConfigError(f"unknown scale {scale!r}; expected tiny, cpu or paper")
    return int(_load(name)(scale, list(argv)) or 0)


def script_main(run_fn: Callable[[str, list[str]], int], argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/<name>.py [--scale S] [options...]``: ``run_fn(S, options)``, S = cpu by default."""
    args = list(sys.argv[1:] if argv is None else argv)
    scale = "cpu"
    if "--scale" in args:
        i = args.index("--scale")
        scale = args[i + 1]
        del args[i:i + 2]
    return run_fn(scale, args)


def train_preset(preset: str, scale: str, overrides: Sequence[str], model_overrides: Sequence[str], seed: int,
                 run_dir: str | Path, model_from: str | None = None, resume: bool = True) -> dict:
    """Train ``preset`` at ``scale`` through ``run_experiment`` in ``run_dir`` after ``torch.manual_seed(seed)``.

    The config is the preset with ``overrides`` then ``model_overrides``; with ``model_from`` its model section
    is that preset's (same scale) with ``model_overrides`` instead. ``overrides`` should set ``train.seed``.
    Returns ``cfg``, ``final`` (the last evaluation's metrics) and ``final_rel_l2``, ``best_rel_l2``, ``epochs``,
    ``train_seconds``, ``wall_seconds``, ``params`` (of the model in the last checkpoint), ``n_train``,
    ``n_test``, ``final_train_loss``, ``curve`` (test relative L2 per evaluated epoch).
    """
    import json

    import torch

    from .experiments import load_experiment
    from .models import build, count_parameters
    from .checkpoint_io import read_checkpoint
    from .train.experiment import run_experiment

    if model_from:
        cfg = load_experiment(preset, scale, list(overrides))
        cfg["model"] = load_experiment(model_from, scale, list(model_overrides))["model"]
    else:
        cfg = load_experiment(preset, scale, [*overrides, *model_overrides])
    run_dir = Path(run_dir)
    torch.manual_seed(seed)
    t0 = time.time()
    final = run_experiment(cfg, run_dir, resume=resume, progress=False)
    wall = time.time() - t0
    history = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    ckpt = read_checkpoint(run_dir / "checkpoints" / "last.pt")
    curve = [h["eval"]["rel_l2"] for h in history if "eval" in h]
    return {"cfg": cfg, "final": final, "final_rel_l2": final.get("rel_l2"), "best_rel_l2": min(curve),
            "epochs": len(history), "train_seconds": sum(h["seconds"] for h in history), "wall_seconds": wall,
            "params": count_parameters(build(ckpt["model"]["name"], ckpt["model"]["config"])),
            "n_train": cfg["data"].get("n_train"), "n_test": cfg["data"].get("n_test"),
            "final_train_loss": history[-1]["train_loss"], "curve": curve}


# --------------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------------

def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter of this process (Linux ``/proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB since the last :func:`reset_peak_rss` (VmHWM)."""
    try:
        return status_kib("VmHWM") / 1024.0
    except (OSError, KeyError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def status_kib(key: str) -> int:
    """A ``/proc/self/status`` entry in KiB (``VmRSS``, ``VmHWM``, ...); Linux only."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    raise KeyError(key)


def rss_increase_kib(fn: Callable[[], object]) -> int:
    """By how much (KiB) one call of ``fn()`` raises the peak RSS above the RSS before it (Linux only):
    ``max(0, VmHWM after - VmRSS before)``, with VmHWM reset to the current RSS first (``/proc/self/clear_refs``)."""
    if not reset_peak_rss():
        raise OSError("cannot reset the peak-RSS counter through /proc/self/clear_refs")
    before = status_kib("VmRSS")
    fn()
    return max(0, status_kib("VmHWM") - before)


def current_rss_mb() -> float:
    """Resident set size of this process in MB (VmRSS); NaN where ``/proc`` has no such entry."""
    try:
        return status_kib("VmRSS") / 1024.0
    except (OSError, KeyError):
        return float("nan")


class TensorSizeTracker:
    """Context manager recording the largest tensor that any torch operation creates inside it.

    ``largest_numel``, ``largest_bytes``, ``largest_shape`` and ``largest_op``: the biggest single op
    output (a TorchDispatchMode, so it sees every op of the forward pass on any device).
    """

    def __init__(self):
        self.largest_numel, self.largest_bytes, self.largest_shape, self.largest_op = 0, 0, (), ""

    def __enter__(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in (out if isinstance(out, (tuple, list)) else (out,)):
                    if isinstance(t, torch.Tensor) and t.numel() > tracker.largest_numel:
                        tracker.largest_numel, tracker.largest_bytes = t.numel(), t.numel() * t.element_size()
                        tracker.largest_shape, tracker.largest_op = tuple(t.shape), str(func)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        return False


def timed(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> dict[str, float]:
    """Wall time (s) of ``fn()`` over ``repeats`` calls after ``warmup`` calls: median, min, max, IQR,
    and ``cpu_median``, the median CPU time of this process (all threads), which a machine shared with
    other work inflates much less than the wall time."""
    for _ in range(warmup):
        fn()
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    q = sorted(times)
    return {"median": statistics.median(times), "min": q[0], "max": q[-1],
            "iqr": (q[(3 * len(q)) // 4] - q[len(q) // 4]) if len(q) > 1 else 0.0,
            "cpu_median": statistics.median(cpu)}


def _register_chonn() -> None:
    """The CHONN experiments (issue 8) live in ``neurodyn.bench_chonn``: chonn-order, -poisson, -darcy, -rollout."""
    from . import bench_chonn

    bench_chonn.register_benchmarks()


_register_chonn()
