"""NAC's pruned NCP backbone: ``interface.py``; its Triton kernels, ``triton_kernels.py``."""
from .interface import (ACT_CODES, BACKENDS, fused_available, ncp_mlp, ncp_mlp_ref, pack_layers, packed_input_width,
                        packed_width, resolve_backend)

__all__ = ["ACT_CODES", "BACKENDS", "fused_available", "ncp_mlp", "ncp_mlp_ref", "pack_layers", "packed_input_width",
           "packed_width", "resolve_backend"]
