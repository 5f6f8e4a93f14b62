"""``nn.Module`` layers and the networks the models share (ARCHITECTURE.md, layer 2).

``neurodyn.nn.Mamba`` is mamba-ssm's Mamba block (``nn.mamba_block``), imported on first use so that
``import neurodyn.nn.<module>`` stays as light as that module.
"""
__all__ = ["Mamba"]


def __getattr__(name: str):
    if name == "Mamba":
        from .mamba_block import Mamba

        return Mamba
    raise AttributeError(f"module 'neurodyn.nn' has no attribute {name!r}")
