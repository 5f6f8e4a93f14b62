"""The laboratory's command line, ``python -m neurodyn_lab COMMAND``.

    python -m neurodyn_lab list                                   # every experiment command, one line each
    python -m neurodyn_lab run NAME [--scale tiny|cpu|paper] ...   # one experiment (its own options follow)
    python -m neurodyn_lab reproduce PAPER [--table T] [--scale cpu|paper] [--device cuda] [--seeds ...] [--dry-run]

``run`` takes the names of :data:`neurodyn_lab.registry.COMMANDS` (``lamo/scaling``, ``chonn/order``, ...);
``reproduce`` runs one table of a paper as a resumable queue (:mod:`neurodyn_lab.reproduce`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = __doc__.split("\n\n")[1]


def script_main(run_fn: Callable[[str, list[str]], int], argv: Sequence[str] | None = None) -> int:
    """``python -m neurodyn_lab.<module> [--scale S] [options...]``: ``run_fn(S, options)``, S = cpu by default."""
    args = list(sys.argv[1:] if argv is None else argv)
    scale = "cpu"
    if "--scale" in args:
        i = args.index("--scale")
        scale = args[i + 1]
        del args[i : i + 2]
    return int(run_fn(scale, args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "list":
        from .registry import COMMANDS

        width = max(map(len, COMMANDS))
        for name, c in COMMANDS.items():
            print(f"{name:{width}s}  {c.description}")
        return 0
    if command == "run":
        if not rest or rest[0].startswith("-"):
            print(
                "usage: python -m neurodyn_lab run NAME [--scale tiny|cpu|paper] [options...] "
                "(python -m neurodyn_lab list: the names)",
                file=sys.stderr,
            )
            return 2
        from .registry import run

        name = rest.pop(0)
        return script_main(lambda scale, options: run(name, scale, options), rest)
    if command == "reproduce":
        from .reproduce.command import main as reproduce

        return reproduce(rest)
    print(f"unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2
