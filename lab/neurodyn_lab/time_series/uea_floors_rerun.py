"""The UEA/UCR floors rerun itself, under its frozen protocol (``lab/protocols/time_series/uea_floors.yaml``): the
archive files checked against the protocol's sha256 and converted, the selection's fold stores, and the three
stages, each a ``neurodyn compare`` whose records carry the protocol's stamp.

    # one worker per core (two on 2 cores), one thread each (the protocol's cost basis); any of them resumes:
    python -m neurodyn_lab run time_series/uea_floors --archive $AEON $SKTIME &
    python -m neurodyn_lab run time_series/uea_floors --archive $AEON $SKTIME

The stages, per file (development files first, then the confirmation files, in the protocol's order):

* ``cv``: for each repeat ``r`` and fold ``k`` of the selection rule, every candidate trains once (the training seed)
  on a fold store that lists the fold's training cases then its inner validation cases (``data.n_val`` = their
  count, ``data.shuffle=false``, so exactly those validate), and the held-out fold is its test file: the final model
  is scored on it. Records: ``<records>/<file>-cv-r<r>-f<k>/results.json``.
* ``fit``: the fitted candidates and the file's reference (1-NN ED, or the training mean of a regression file) on the
  whole training file (``data.n_val=0``), every seed, scored on the test file. Records: ``<file>-fit/``.
* ``refit``: once every fold of a file is recorded, each chosen neural candidate (:mod:`.uea_floors_verdicts`) trains
  on the whole training file (``data.n_val=0``, ``train.early_stop=0``) for the mean epochs of its fold runs, every
  seed, scored once on the test file. Records: ``<file>-refit-<label>/``.

A job is one records folder, trained under a lock (:func:`neurodyn.locks.hold`, released when its process ends,
however it ends): every worker takes the next job nobody holds, so two workers never share a folder and any number
of them can run (one per core). Before each job the CPU-hours recorded so far (wall seconds x
threads of every record) are summed: at the protocol's stop (``budget.stop_cpu_hours``) nothing more starts, and
the report calls the rerun incomplete. The converted stores live in ``lab/runs/time_series/uea_floors_stores``
(untracked; ``<stores>`` in the records).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from neurodyn.errors import DataError
from neurodyn_lab import protocols
from neurodyn_lab.comparisons import compare_recorded
from neurodyn_lab.paths import RUNS, runs_for
from neurodyn_lab.time_series.uea import archive_folder, read_cases, write_cases
from neurodyn_lab.time_series.uea_floors import HELD_OUT, TEST, Job, fold_split, job_runs, jobs, records_dir
from neurodyn_lab.time_series.uea_floors_verdicts import cpu_hours, file_refits, recorded, refit_epochs, selection

STORES = RUNS / "time_series" / "uea_floors_stores"


# ------------------------------------------------------------------------------------------------
# the files and their stores


def whole_stores(file: dict[str, Any], archives: list[Path], stores: Path = STORES) -> dict[str, Path]:
    """``{"TRAIN": store, "TEST": store}`` of a protocol file, each ``.ts`` checked against the protocol's sha256
    before it is converted (a converted store is reused)."""
    from neurodyn.data.formats.convert import convert_to_store

    out = {}
    for split in ("TRAIN", "TEST"):
        dst = stores / file["name"] / (f"{TEST}.h5" if split == "TEST" else "train.h5")
        if not dst.exists():
            src = archive_folder(archives, file["name"], split) / file["name"] / f"{file['name']}_{split}.ts"
            digest = protocols.sha256_of(src)
            if digest != file["sha256"][split.lower()]:
                raise DataError(
                    f"{src} has sha256 {digest[:12]}..., not the protocol's {file['sha256'][split.lower()][:12]}...: "
                    "not the file the protocol names"
                )
            dst.parent.mkdir(parents=True, exist_ok=True)
            convert_to_store(src, dst)
        out[split] = dst
    return out


def fold_stores(protocol: protocols.Protocol, file: dict[str, Any], train: Path, repeat: int, fold: int):
    """``(training store, held-out store, validation cases)`` of fold ``fold`` of repeat ``repeat``: the training
    store lists the fold's training cases then its inner validation cases (:func:`.uea_floors.fold_split`)."""
    sel = protocol.spec["selection"]
    folder = train.parent / f"r{repeat}-f{fold}"
    tr, held = folder / "train.h5", folder / f"{HELD_OUT}.h5"
    cases = read_cases(train)
    regression = file["task"] == "regression"
    fit, val, out = fold_split(cases["y"], int(sel["k"]), int(sel["fold_seeds"][repeat]), fold, regression)
    if not tr.exists():
        write_cases(cases, np.concatenate([fit, val]), tr)
    if not held.exists():
        write_cases(cases, out, held)
    return tr, held, len(val)


# ------------------------------------------------------------------------------------------------
# the jobs


def refit_jobs(protocol: protocols.Protocol, root: Path) -> list[Job]:
    """The refits of every file whose selection is complete: one per chosen neural candidate."""
    return [job for f in protocol.files() for job in file_refits(protocol, f, root) or []]


def run_job(protocol: protocols.Protocol, job: Job, archives: list[Path], root: Path, stores: Path = STORES) -> None:
    """Train and record ``job`` (compare resumes: a recorded run is not trained again)."""
    file = next(f for f in protocol.files() if f["name"] == job.file)
    whole = whole_stores(file, archives, stores)
    train = protocol.spec["train"]
    common = [*protocol.spec["common_overrides"]]
    kwargs = dict(placeholders={str(stores): "<stores>"}, protocol=protocol)
    entries, seeds = job_runs(protocol, job)
    if job.stage == "cv":
        tr, held, n_val = fold_stores(protocol, file, whole["TRAIN"], job.repeat, job.fold)
        overrides = [*common, f"data.path={tr}", f"data.test_path={held}", f"data.n_val={n_val}", "data.shuffle=false"]
        epochs = int(train["epochs"])
    else:
        overrides = [*common, f"data.path={whole['TRAIN']}", f"data.test_path={whole['TEST']}", "data.n_val=0"]
        if job.stage == "fit":
            epochs = 1
        else:
            overrides.append("train.early_stop=0")
            epochs = refit_epochs(protocol, file, job.label, root)
    print(f"== {job.folder}: {len(entries)} entries x {len(seeds)} seed(s), {epochs} epochs", flush=True)
    compare_recorded(
        entries, root / job.folder, "cpu", overrides=overrides, seeds=seeds, epochs=epochs, progress=False, **kwargs
    )


def rerun(
    protocol: protocols.Protocol,
    archives: list[Path],
    root: Path | None = None,
    stores: Path = STORES,
    poll_seconds: float = 30.0,
) -> int:
    """Take the jobs no other worker holds, one at a time (each under a lock that dies with its process), until
    every job of the plan and every refit its selections call for is recorded. A worker with nothing free waits
    while another holds a job (its records may complete a selection, and so make refits). Before each job the
    CPU-hours recorded are summed: at the protocol's stop nothing more starts. Returns 0 when everything is
    recorded, 3 when it stopped at the budget."""
    import time

    import torch

    from neurodyn.locks import LockHeld, hold

    protocols.require_registered(protocol)
    root = Path(root) if root is not None else records_dir(protocol)
    torch.set_num_threads(int(protocol.spec["train"]["threads"]))
    stop = float(protocol.spec["budget"]["stop_cpu_hours"])
    locks = runs_for(root) / "locks"
    while True:
        pending = [j for j in [*jobs(protocol), *refit_jobs(protocol, root)] if not recorded(protocol, root, j)]
        if not pending and all(selection(protocol, f, root) is not None for f in protocol.files()):
            return 0
        ran = False
        for job in pending:
            used = cpu_hours(root)
            if used >= stop:
                print(f"stopped: {used:.2f} CPU-hours recorded, the protocol's stop is {stop:g}", file=sys.stderr)
                return 3
            try:
                with hold(locks / f"{job.folder}.lock", f"job {job.folder}"):
                    if not recorded(protocol, root, job):  # another worker may have finished it meanwhile
                        run_job(protocol, job, archives, root, stores)
                        ran = True
            except LockHeld:
                continue
        if not ran:
            time.sleep(poll_seconds)  # every pending job is another worker's: wait for its records
