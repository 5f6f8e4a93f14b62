#!/usr/bin/env python3
"""The tracked tree stays a library: no tracked file over 2 MB, the whole tracked tree under 20 MB, and no
checkpoint (``*.pt``) tracked outside the tests' fixtures, except those of an experiment run still training
(``benchmarks/results/<experiment>/runs/<run>/checkpoints/``, committed so the next sitting resumes it).

    python3 .ci/check_tree.py [REPO]      # exit 1 with one sentence per problem, naming the file

Standard library only, so it runs before anything is installed.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

FILE_LIMIT = 2 * 2**20      # bytes of one tracked file
TREE_LIMIT = 20 * 2**20     # bytes of every tracked file together
FIXTURES = "fixtures"       # a folder of this name under tests/ may hold small checkpoints the tests read


def tracked_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def run_still_training(repo: Path, checkpoint: PurePosixPath) -> bool:
    """Whether ``checkpoint`` is ``benchmarks/results/<experiment>/runs/<run>/checkpoints/<name>.pt`` of a run whose
    ``metrics.jsonl`` has no test evaluation yet (the trainer writes it once, after the last epoch)."""
    parts = checkpoint.parts
    if len(parts) != 7 or parts[:2] != ("benchmarks", "results") or parts[3] != "runs" or parts[5] != "checkpoints":
        return False
    metrics = repo / checkpoint.parent.parent / "metrics.jsonl"
    if not metrics.is_file():
        return False
    for line in metrics.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "test" in rec and "train_loss" not in rec:
            return False
    return True


def problems(repo: Path) -> list[str]:
    found, total, sizes = [], 0, []
    for name in tracked_files(repo):
        path = repo / name
        if not path.is_file():  # deleted in the working tree, or a submodule
            continue
        size = path.stat().st_size
        total += size
        sizes.append((size, name))
        posix = PurePosixPath(name)
        if size > FILE_LIMIT:
            found.append(f"{name} is {size / 2**20:.1f} MB, over the 2 MB limit of one tracked file: keep only "
                         "records in the tree (configs, metrics, summaries, plots of a few hundred kB) and "
                         f"`git rm --cached {name}`.")
        if posix.suffix == ".pt" and not (posix.parts[0] == "tests" and FIXTURES in posix.parts[1:-1]):
            if not run_still_training(repo, posix):
                found.append(f"{name} is a tracked checkpoint outside the tests' fixtures: a finished run's numbers "
                             f"are in its records, so take it out of the tree with `git rm --cached {name}` (git "
                             "history keeps it).")
    if total > TREE_LIMIT:
        largest = ", ".join(f"{n} ({s / 2**20:.1f} MB)" for s, n in sorted(sizes, reverse=True)[:3])
        found.append(f"the tracked tree is {total / 2**20:.1f} MB, over the 20 MB limit; its largest files: "
                     f"{largest}.")
    return found


def main(argv: list[str]) -> int:
    repo = Path(argv[0] if argv else Path(__file__).resolve().parents[1])
    found = problems(repo)
    for sentence in found:
        print(f"check_tree: {sentence}", file=sys.stderr)
    if not found:
        total = sum((repo / n).stat().st_size for n in tracked_files(repo) if (repo / n).is_file())
        print(f"check_tree: {len(tracked_files(repo))} tracked files, {total / 2**20:.1f} MB; no checkpoint at rest")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
