"""Scan directions: the one resolver that turns a ``directions`` argument into a tuple of names.

Every multi-directional scan in neurodyn (``cross_scan``, ``selective_scan_2d``, LaMO's ``LatentSSM``,
GeoMaNO's ``GeoMambaKernel``, CHONN's Kirchhoff cells) accepts either the name of a preset (a fixed
tuple of directions, e.g. ``"cross"`` or ``"paper"``), a single direction name, or a sequence of names.
Each caller owns its vocabulary (``names``) and presets; this module owns the rules and the message.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

__all__ = ["resolve_directions"]


def resolve_directions(
    directions: str | Sequence[str],
    names: Collection[str],
    presets: Mapping[str, Sequence[str]] | None = None,
    *,
    single: bool = True,
    distinct: bool = False,
    what: str = "directions",
    error: type[Exception] = ValueError,
    note: str = "",
) -> tuple[str, ...]:
    """``directions`` -> a non-empty tuple of names from ``names``.

    Args:
        directions: a key of ``presets``, (``single=True``) one name of ``names``, or a sequence of names.
        names: the direction names the caller knows.
        presets: preset name -> tuple of direction names.
        single: accept a lone direction name given as a string.
        distinct: reject repeated names.
        what, error, note: the failure is ``error(f"{what} must be ...; got ...{note}")``.
    """
    presets = dict(presets or {})
    known = sorted(names)
    listing = f"distinct names among {known}" if distinct else f"a non-empty sequence of {known}"
    if isinstance(directions, str):
        if directions in presets:
            return tuple(presets[directions])
        if not single or directions not in known:
            choices = ", ".join(repr(p) for p in presets)
            head = f"one of {choices} or " if presets else ""
            raise error(f"{what} must be {head}{listing}; got {directions!r}.{note}")
        directions = (directions,)
    dirs = tuple(directions)
    if not dirs or any(d not in known for d in dirs) or (distinct and len(set(dirs)) != len(dirs)):
        raise error(f"{what} must be {listing}; got {dirs!r}.{note}")
    return dirs
