"""``nn.Module`` layers and the networks the models share (ARCHITECTURE.md, layer 2).

``neurodyn.nn.Mamba`` is mamba-ssm's Mamba block (``nn.mamba_block``; ``neurodyn.nn.InferenceParams`` its decoding
state), imported on first use so that ``import neurodyn.nn.<module>`` stays as light as that module.
"""

__all__ = ["Mamba", "InferenceParams"]


def __getattr__(name: str):
    if name in ("Mamba", "InferenceParams"):
        from . import mamba_block

        return getattr(mamba_block, name)
    raise AttributeError(f"module 'neurodyn.nn' has no attribute {name!r}")
