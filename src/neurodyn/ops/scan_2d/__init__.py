"""GeoMaNO's 2-D selective scan with the geometric correction R (one folder per op).

* ``interface.py``: :func:`selective_scan_2d` and its backend choice, the double-loop reference
  :func:`selective_scan_2d_ref` (which shares its argument checks and direction frames);
* ``cpu.py``: the fused C++ kernel (one direction) as ``torch.ops.neurodyn.scan2d_fwd`` / ``_bwd``;
* ``triton_op.py``: the Triton kernels (every direction in one launch) as ``torch.ops.neurodyn.scan2d_triton`` /
  ``_bwd`` and their tiles; ``triton_kernels.py``: the kernels.
"""

from .interface import BACKENDS, FORMS, PRESETS, direction_names, selective_scan_2d, selective_scan_2d_ref

__all__ = ["BACKENDS", "FORMS", "PRESETS", "direction_names", "selective_scan_2d", "selective_scan_2d_ref"]
