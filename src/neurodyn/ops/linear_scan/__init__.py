"""The first-order linear scan ``h_t = a_t h_{t-1} + x_t`` along one axis (one folder per op).

* ``interface.py``: :func:`linear_scan` and its backend choice;
* ``chunked.py``: the pure-PyTorch path and the adjoint every backward shares;
* ``cpu.py``: the fused C++ kernel as ``torch.ops.neurodyn.linear_scan``;
* ``triton_op.py``: the Triton kernels as ``torch.ops.neurodyn.linear_scan_triton`` / ``_bwd`` and their tiles;
  ``triton_kernels.py``: the kernels.
"""

from .interface import linear_scan

__all__ = ["linear_scan"]
