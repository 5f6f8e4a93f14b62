"""Training precision: ``train.precision = 32 | bf16 | 16``.

* ``32``: float32 throughout.
* ``bf16``: the model's forward runs under ``torch.autocast(dtype=torch.bfloat16)`` (CPU and CUDA); parameters,
  optimizer state, losses and metrics stay float32 (the model's outputs are cast back to float32 before the
  loss), so only the model's matmuls and convolutions run in bfloat16. The scans accumulate in float32.
* ``16``: float16 autocast with a gradient scaler (``torch.amp.GradScaler``), CUDA only: float16 has too small a
  range to train without loss scaling, and CPU autocast is meant for bfloat16.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..errors import ConfigError

PRECISIONS = ("32", "bf16", "16")


def parse_precision(value: Any) -> str:
    """``32`` / ``"32"`` / ``"fp32"`` -> ``"32"``, ``"bf16"`` / ``"bfloat16"`` -> ``"bf16"``, ``16`` / ``"fp16"`` ->
    ``"16"``; anything else is one ConfigError."""
    text = str(value).strip().lower()
    aliases = {
        "32": "32",
        "fp32": "32",
        "float32": "32",
        "bf16": "bf16",
        "bfloat16": "bf16",
        "16": "16",
        "fp16": "16",
        "float16": "16",
    }
    if text not in aliases:
        raise ConfigError(f"train.precision must be one of 32, bf16, 16; got {value!r}")
    return aliases[text]


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``precision`` on ``device`` (``None`` for float32)."""
    precision = parse_precision(precision)
    if precision == "32":
        return None
    if precision == "16" and device.type != "cuda":
        raise ConfigError(
            f"train.precision=16 (float16 with loss scaling) needs a CUDA device, not {device.type}; "
            "use train.precision=bf16 on the CPU"
        )
    return torch.bfloat16 if precision == "bf16" else torch.float16


class Autocast(nn.Module):
    """Calls ``inner`` under ``torch.autocast(device_type, dtype)`` and returns its floating outputs as float32.

    Only the call is wrapped: ``inner`` keeps its parameters (float32) and its state dict."""

    def __init__(self, inner: nn.Module, device_type: str, dtype: torch.dtype):
        super().__init__()
        self.inner, self.device_type, self.dtype = inner, device_type, dtype

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with torch.autocast(self.device_type, dtype=self.dtype):
            out = self.inner(*args, **kwargs)
        return _to_float32(out)


def _to_float32(out: Any) -> Any:
    if torch.is_tensor(out):
        return out.float() if out.is_floating_point() and out.dtype != torch.float64 else out
    if isinstance(out, (tuple, list)):
        return type(out)(_to_float32(o) for o in out)
    if isinstance(out, dict):
        return {k: _to_float32(v) for k, v in out.items()}
    return out


def with_precision(model: nn.Module, precision: str, device: torch.device) -> nn.Module:
    """``model`` itself for float32, else ``model`` wrapped in :class:`Autocast`."""
    dtype = autocast_dtype(precision, device)
    return model if dtype is None else Autocast(model, device.type, dtype)


def grad_scaler(precision: str, device: torch.device):
    """A ``GradScaler`` for float16 training, else ``None``."""
    if parse_precision(precision) != "16":
        return None
    return torch.amp.GradScaler(device.type)
