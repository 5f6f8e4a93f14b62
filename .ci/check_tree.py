#!/usr/bin/env python3
"""The tracked tree stays a library with a laboratory beside it: no tracked file over 2 MB, the library part (every
tracked file outside ``lab/``) under 5 MB, the whole tracked tree under 20 MB, and no checkpoint (``*.pt``) tracked
anywhere (a run resumes from its untracked folder or starts over: lab/README.md).

    python3 .ci/check_tree.py [REPO]      # exit 1 with one sentence per problem, naming the file

Standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path, PurePosixPath

FILE_LIMIT = 2 * 2**20  # bytes of one tracked file
LIBRARY_LIMIT = 5 * 2**20  # bytes of every tracked file outside lab/ together
TREE_LIMIT = 20 * 2**20  # bytes of every tracked file together
LAB = "lab"  # the laboratory: experiments, records, pages (its own project)


def tracked_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def _largest(sizes: list[tuple[int, str]]) -> str:
    return ", ".join(f"{n} ({s / 2**20:.1f} MB)" for s, n in sorted(sizes, reverse=True)[:3])


def sizes(repo: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(library, lab)``: (bytes, name) of every tracked file present, outside ``lab/`` and inside it."""
    library, lab = [], []
    for name in tracked_files(repo):
        path = repo / name
        if not path.is_file():  # deleted in the working tree, or a submodule
            continue
        (lab if PurePosixPath(name).parts[0] == LAB else library).append((path.stat().st_size, name))
    return library, lab


def problems(repo: Path) -> list[str]:
    found = []
    library, lab = sizes(repo)
    for size, name in library + lab:
        if size > FILE_LIMIT:
            found.append(
                f"{name} is {size / 2**20:.1f} MB, over the 2 MB limit of one tracked file: keep only "
                "records in the tree (configs, metrics, summaries, plots of a few hundred kB) and "
                f"`git rm --cached {name}`."
            )
        if PurePosixPath(name).suffix == ".pt":
            found.append(
                f"{name} is a tracked checkpoint: checkpoints never enter a commit (a run's numbers are in "
                f"its records; it resumes from its untracked run folder), so `git rm --cached {name}`."
            )
    in_library = sum(s for s, _ in library)
    if in_library > LIBRARY_LIMIT:
        found.append(
            f"the library part of the tree (outside {LAB}/) is {in_library / 2**20:.1f} MB, over the 5 MB "
            f"limit; its largest files: {_largest(library)}."
        )
    total = in_library + sum(s for s, _ in lab)
    if total > TREE_LIMIT:
        found.append(
            f"the tracked tree is {total / 2**20:.1f} MB, over the 20 MB limit; its largest files: "
            f"{_largest(library + lab)}."
        )
    return found


def main(argv: list[str]) -> int:
    repo = Path(argv[0] if argv else Path(__file__).resolve().parents[1])
    found = problems(repo)
    for sentence in found:
        print(f"check_tree: {sentence}", file=sys.stderr)
    if not found:
        library, lab = sizes(repo)
        a, b = sum(s for s, _ in library), sum(s for s, _ in lab)
        print(
            f"check_tree: {len(library) + len(lab)} tracked files, {(a + b) / 2**20:.1f} MB (library "
            f"{a / 2**20:.1f} MB, {LAB}/ {b / 2**20:.1f} MB); no checkpoint"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
