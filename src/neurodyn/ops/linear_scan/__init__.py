"""The first-order linear scan ``h_t = a_t h_{t-1} + x_t``: ``interface.py``; its Triton kernels,
``triton_kernels.py``."""
from .interface import linear_scan

__all__ = ["linear_scan"]
