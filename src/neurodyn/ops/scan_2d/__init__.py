"""GeoMaNO's 2-D selective scan: ``interface.py``; its Triton kernels, ``triton_kernels.py``."""
from .interface import BACKENDS, FORMS, PRESETS, direction_names, selective_scan_2d, selective_scan_2d_ref

__all__ = ["BACKENDS", "FORMS", "PRESETS", "direction_names", "selective_scan_2d", "selective_scan_2d_ref"]
