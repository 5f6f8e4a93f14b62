"""Models: one file per model, each registered with its config dataclass (see ``registry``)."""

from .registry import available, build, count_parameters, entry, load, make_config, register, save

__all__ = ["available", "build", "count_parameters", "entry", "load", "make_config", "register", "save"]
