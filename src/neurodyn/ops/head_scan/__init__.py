"""The multi-head selective scan (one decay per head, time-major): ``interface.py``."""
from .interface import HEAD_SCAN_BACKENDS, fold_to_channels, head_kernel_applies, head_scan, head_scan_ref

__all__ = ["HEAD_SCAN_BACKENDS", "fold_to_channels", "head_kernel_applies", "head_scan", "head_scan_ref"]
