"""Measurement helpers every benchmark script can share: peak and current RSS (Linux ``/proc``), the RSS
increase of one call, the largest tensor an operation creates, and wall / CPU timing."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def _release_free_heap() -> None:
    """Hand memory the C allocator holds free back to the OS (glibc ``malloc_trim``; a no-op elsewhere). Without it
    a later allocation can reuse pages that are still resident, and a peak-RSS measurement sees no increase."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter of this process (Linux ``/proc/self/clear_refs``), after releasing the
    allocator's free memory so that what a measured call allocates shows up in the peak."""
    _release_free_heap()
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
                for t in out if isinstance(out, (tuple, list)) else (out,):
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
    return {
        "median": statistics.median(times),
        "min": q[0],
        "max": q[-1],
        "iqr": (q[(3 * len(q)) // 4] - q[len(q) // 4]) if len(q) > 1 else 0.0,
        "cpu_median": statistics.median(cpu),
    }
