"""Stage the experiments' run state for a commit: records always, checkpoints only while their run trains.

    .venv/bin/python benchmarks/tools/protocol_snapshot.py            # stage what the next sitting needs
    .venv/bin/python benchmarks/tools/protocol_snapshot.py --dry-run  # only list it

A sitting's machine keeps nothing outside the repository, and ignored files are not carried over either, so a
run that is still training resumes next time only from checkpoints that were committed. For every run folder
``benchmarks/results/<experiment>/runs/<run>/`` (one with a ``metrics.jsonl``; not those git ignores as a whole):

* its records (``config.yaml``, ``metrics.jsonl``, ``summary.md``, ``result.json``, small plots) are staged; a
  ``summary.md`` that links images the folder lacks (written by a driver started before summaries linked only the
  plots drawn) keeps only the links to the images it has;
* while the run trains (no test evaluation in its ``metrics.jsonl`` yet), its ``checkpoints/last.pt`` and
  ``best.pt`` (the optimizer and scheduler state for an exact resume, and the model the validation split
  selected) are staged too, whatever git's ignore rules say;
* once it has finished, its checkpoints leave the tree (``git rm --cached``: the files stay on this disk, and git
  history keeps the versions committed while it ran). The tree at rest holds no checkpoint (``.ci/check_tree.py``).

Everything else under ``benchmarks/results/`` that git does not ignore (reports, tables, plots) is staged as well.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))  # a checkout's neurodyn when run directly
from neurodyn.plots import link_plots, linked_images  # noqa: E402
from neurodyn.train.runs import read_test_metrics  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
TRACKED_FILE_LIMIT = 2 * 2**20  # the tree check's limit for one tracked file (.ci/check_tree.py)


def plan(root: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """``(files, training, finished)`` under ``root``: every run folder's record files, the checkpoints of the runs
    still training, and the checkpoints of the finished runs."""
    files, training, finished = [], [], []
    runs = [metrics.parent for metrics in sorted(root.glob("*/runs/*/metrics.jsonl"))]
    skipped = ignored(runs)
    for run in [r for r in runs if r.resolve() not in skipped]:
        files += [f for f in sorted(run.iterdir()) if f.is_file() and not f.name.startswith(".")]
        found = sorted((run / "checkpoints").glob("*.pt"))
        # every experiment run has test data, so its test evaluation (written after the last epoch) marks it finished
        (finished if read_test_metrics(run) else training).extend(found)
    return files, training, finished


def ignored(runs: list[Path]) -> set[Path]:
    """The run folders git ignores as a whole (e.g. the UEA evidence runs, whose ``results.json`` is the record)."""
    if not runs:
        return set()
    # check-ignore echoes the paths it is given that git ignores: absolute in, absolute out
    out = subprocess.run(["git", "check-ignore", "--", *(f"{r.resolve()}/" for r in runs)], capture_output=True,
                         text=True, cwd=REPO).stdout.splitlines()
    return {Path(line) for line in out}


def drop_dead_image_links(run: Path) -> bool:
    """Keep only the image links of ``run/summary.md`` whose files exist; True when it changed the file."""
    linked = linked_images(run)
    if all((run / name).is_file() for name in linked):
        return False
    link_plots(run, linked)  # relinks only the names that exist
    return True


def tracked(paths: list[Path]) -> list[Path]:
    if not paths:
        return []
    out = subprocess.run(["git", "ls-files", "--", *map(str, paths)], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.split()
    return [REPO / p for p in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=RESULTS, help="the results folder (experiment folders under it)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    files, training, finished = plan(args.root)
    leaving = tracked(finished)
    relinked = [] if args.dry_run else [run for run in sorted({f.parent for f in files}) if drop_dead_image_links(run)]
    if not args.dry_run:  # staged before anything is printed: a closed pipe cannot stop it
        if files + training:
            subprocess.run(["git", "-C", str(REPO), "add", "--force", "--", *map(str, files + training)], check=True)
        if leaving:
            subprocess.run(["git", "-C", str(REPO), "rm", "--cached", "--quiet", "--", *map(str, leaving)],
                           check=True)
        subprocess.run(["git", "-C", str(REPO), "add", "--", str(args.root)], check=True)  # reports, plots
    verb = "to stage" if args.dry_run else "staged"
    print(f"{len(files)} run files and {len(training)} checkpoints of runs still training {verb} "
          f"({sum(p.stat().st_size for p in training) / 2**20:.1f} MB); {len(leaving)} checkpoints of finished runs "
          f"{'to take' if args.dry_run else 'taken'} out of the tree")
    for run in relinked:
        print(f"  {run.relative_to(REPO)}/summary.md: links to images it lacks dropped")
    for p in training:
        large = p.stat().st_size > TRACKED_FILE_LIMIT
        print(f"  {p.relative_to(REPO)}  {p.stat().st_size / 2**20:.2f} MB"
              + ("  (over the 2 MB limit of one tracked file: CI refuses it; resume this run in this sitting)"
                 if large else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
