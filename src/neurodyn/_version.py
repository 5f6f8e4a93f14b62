"""The library version (layer 0: the package root, the store writer and the CLI read it here)."""

__version__ = "0.1.0"
