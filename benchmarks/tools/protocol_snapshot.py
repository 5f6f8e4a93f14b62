"""Stage the protocol-matched runs' state for a commit, so that the next sitting resumes them exactly.

    .venv/bin/python benchmarks/tools/protocol_snapshot.py            # stage (git add) what the next sitting needs
    .venv/bin/python benchmarks/tools/protocol_snapshot.py --dry-run  # only list it

A sitting's machine keeps nothing outside the repository, and ignored files are not carried over either, so a
run that is still training resumes next time only from checkpoints that were committed. Staged: everything
under ``benchmarks/results/protocol/`` that git does not ignore (records, tables, plots); every run folder's
files (``config.yaml``, ``metrics.jsonl``, summaries); and the checkpoints (``checkpoints/last.pt`` and
``best.pt``: the optimizer and scheduler state for an exact resume, and the model the validation split selected):

* for a run still training (no test evaluation in its ``metrics.jsonl`` yet), whatever their size;
* for a finished run only when they are small (``--keep-below``, 0.5 MB) or tracked already: a finished run's
  numbers are in its records, and the larger checkpoints of finished runs would only grow the repository.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from neurodyn.train.runs import read_test_metrics

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = REPO / "benchmarks" / "results" / "protocol"


def plan(root: Path, keep_below: int) -> tuple[list[Path], list[Path]]:
    """``(files, checkpoints)`` to stage under ``root``: every run folder's files, and the checkpoints of the runs
    still training plus those of finished runs below ``keep_below`` bytes (tracked ones are staged anyway)."""
    files, ckpts = [], []
    for metrics in sorted(root.rglob("metrics.jsonl")):
        run = metrics.parent
        files += [f for f in sorted(run.iterdir()) if f.is_file() and not f.name.startswith(".")]
        found = sorted((run / "checkpoints").glob("*.pt"))
        # every protocol run has test data, so its test evaluation (written after the last epoch) marks it finished
        ckpts += found if not read_test_metrics(run) else [c for c in found if c.stat().st_size < keep_below]
    return files, ckpts


def tracked(paths: list[Path]) -> list[Path]:
    if not paths:
        return []
    out = subprocess.run(["git", "ls-files", "--", *map(str, paths)], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.split()
    return [REPO / p for p in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=PROTOCOL)
    ap.add_argument("--keep-below", type=float, default=0.5, help="MB: finished runs' checkpoints kept below this")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    files, ckpts = plan(args.root, int(args.keep_below * 2**20))
    new = sorted(set(ckpts) - set(tracked(ckpts)))
    if not args.dry_run and files + ckpts:  # staged before anything is printed: a closed pipe cannot stop it
        subprocess.run(["git", "-C", str(REPO), "add", "--force", "--", *map(str, files + ckpts)], check=True)
        subprocess.run(["git", "-C", str(REPO), "add", "--", str(args.root)], check=True)  # records, plots
    print(f"{len(files)} run files and {len(ckpts)} checkpoints {'to stage' if args.dry_run else 'staged'}; new "
          f"checkpoints ({sum(p.stat().st_size for p in new) / 2**20:.1f} MB):")
    for p in new:
        print(f"  {p.relative_to(REPO)}  {p.stat().st_size / 2**20:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
