"""Mamba's selective scan (one folder per op, flash-linear-attention's shape).

* ``interface.py``: :func:`selective_scan` (mamba-ssm's ``selective_scan_fn`` signature) and its backend choice,
  :func:`resolve_backend`; the sequential reference :func:`selective_scan_ref` and the argument checks;
* ``chunked.py``: the pure-PyTorch chunked scans with hand-written backward; ``sequential.py``: their CPU time loop;
* ``cpu.py``: the fused C++ kernel's binding (``csrc/selective_scan_cpu.cpp``);
* ``triton_kernels.py``: the Triton kernels (also the multi-head and Kirchhoff-cell scans'), loaded by
  :func:`neurodyn.ops.triton_loader.load`.
"""
from .interface import (BACKENDS, check_float, check_selective_scan_args, compute_dtype, resolve_backend,
                        selective_scan, selective_scan_ref, shape_text)

__all__ = ["BACKENDS", "check_float", "check_selective_scan_args", "compute_dtype", "resolve_backend",
           "selective_scan", "selective_scan_ref", "shape_text"]
