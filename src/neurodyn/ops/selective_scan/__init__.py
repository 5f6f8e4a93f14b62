"""Mamba's selective scan (one folder per op, flash-linear-attention's shape).

* ``interface.py``: :func:`selective_scan` (mamba-ssm's ``selective_scan_fn`` signature) and its backend choice,
  :func:`resolve_backend`; ``checks.py``: the argument checks every path shares (the multi-head and Kirchhoff-cell
  scans' too); ``ref.py``: the sequential reference :func:`selective_scan_ref`;
* ``chunked.py``: the pure-PyTorch chunked scans with hand-written backward; ``sequential.py``: their CPU time loop;
* ``cpu.py``: the fused C++ kernel (``csrc/selective_scan_cpu.cpp``) as ``torch.ops.neurodyn.selective_scan_fwd`` /
  ``_bwd``, and the layouts it takes;
* ``triton_op.py``: the Triton kernels as ``torch.ops.neurodyn.selective_scan_triton`` / ``_bwd`` and their tiles;
  ``triton_kernels.py``: the kernels (also the multi-head scan's and, with the ZOH input, the Kirchhoff cell's),
  loaded by :func:`neurodyn.ops.triton_loader.load`.
"""

from .checks import check_float, check_selective_scan_args, compute_dtype, shape_text
from .interface import BACKENDS, resolve_backend, selective_scan
from .ref import selective_scan_ref

__all__ = [
    "BACKENDS",
    "check_float",
    "check_selective_scan_args",
    "compute_dtype",
    "resolve_backend",
    "selective_scan",
    "selective_scan_ref",
    "shape_text",
]
