"""NAC's pruned NCP backbone (one folder per op, flash-linear-attention's shape).

* ``interface.py``: :func:`ncp_mlp` and its backend choice, :func:`resolve_backend`, :func:`fused_available`;
* ``ref.py``: the batched-matmul reference :func:`ncp_mlp_ref` (also the ``"torch"`` backend);
* ``cpu.py``: the fused C++ kernel (``csrc/ncp_cpu.cpp``) as ``torch.ops.neurodyn.ncp_mlp_fwd`` / ``_bwd``;
* ``triton_op.py``: the Triton kernels as ``torch.ops.neurodyn.ncp_mlp_triton`` / ``_bwd``, the packed layers they
  read (:func:`pack_layers`) and their tiles; ``triton_kernels.py``: the kernels (loaded by
  :func:`neurodyn.ops.triton_loader.load`).
"""

from .interface import ACT_CODES, BACKENDS, fused_available, ncp_mlp, resolve_backend
from .ref import ncp_mlp_ref
from .triton_op import pack_layers, packed_input_width, packed_width

__all__ = [
    "ACT_CODES",
    "BACKENDS",
    "fused_available",
    "ncp_mlp",
    "ncp_mlp_ref",
    "pack_layers",
    "packed_input_width",
    "packed_width",
    "resolve_backend",
]
