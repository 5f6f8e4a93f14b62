"""The multi-head selective scan, one decay per head, time-major (one folder per op).

* ``interface.py``: :func:`head_scan` and its backend choice, the reference :func:`head_scan_ref` (through the
  selective scan's) and the fold into the selective scan's channels;
* ``cpu.py``: its own fused C++ kernel (``csrc/head_scan_cpu.cpp``) as ``torch.ops.neurodyn.head_scan_fwd`` / ``_bwd``;
* ``triton_op.py``: ``torch.ops.neurodyn.head_scan_triton`` / ``_bwd`` on the selective scan's Triton kernels
  (``selective_scan/triton_kernels.py``: ``head_fwd`` / ``head_bwd`` read this layout in place).
"""

from .interface import HEAD_SCAN_BACKENDS, fold_to_channels, head_kernel_applies, head_scan, head_scan_ref

__all__ = ["HEAD_SCAN_BACKENDS", "fold_to_channels", "head_kernel_applies", "head_scan", "head_scan_ref"]
