"""Offline dataset generators, one module per PDE; ``get_generator(name)`` finds them by name."""

from .base import Generator, available_generators, get_generator, register_generator, sample_rng, sample_seed

__all__ = ["Generator", "available_generators", "get_generator", "register_generator", "sample_rng", "sample_seed"]
