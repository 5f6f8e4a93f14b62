"""Where the laboratory keeps things: its records (tracked), its run folders and raw outputs (untracked).

* :data:`RECORDS` -- ``lab/records/<paper>/<claim>/``: what the pages cite, written only by the drivers' record
  writers (:mod:`neurodyn_lab.records`);
* :data:`RUNS` -- ``lab/runs/<paper>/<claim>/``: the run folders a claim trains into (checkpoints, logs, raw outputs;
  ignored by git). A run resumes from its folder while this machine keeps it and starts over on another machine;
  its record, once written, is never trained again.

A claim is named ``<paper>/<claim>`` (``lamo/darcy_heads``); the drivers' ``--tag`` takes such a name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LAB = Path(__file__).resolve().parents[1]  # lab/ of a checkout
ROOT = LAB.parent  # the repository
RECORDS = LAB / "records"
RUNS = LAB / "runs"
PAGES = LAB / "pages"
PAPERS = ("lamo", "geomano", "stssm", "chonn", "nac", "operators", "time_series", "speed")


def records(claim: str | Path) -> Path:
    """The records folder of ``claim`` (``<paper>/<claim>``; an absolute path or one starting with ``.`` is taken
    as it is, for records written outside the lab, e.g. by a test)."""
    path = Path(claim)
    return path if path.is_absolute() or str(claim).startswith(".") else RECORDS / path


def runs_for(records_dir: str | Path) -> Path:
    """The untracked folder the runs of a records folder train in: ``lab/runs/<paper>/<claim>`` for
    ``lab/records/<paper>/<claim>``, else ``<records_dir>.runs`` beside it (a records folder outside the lab)."""
    path = Path(records_dir).resolve()
    try:
        return RUNS / path.relative_to(RECORDS.resolve())
    except ValueError:
        return path.parent / f"{path.name}.runs"


def relative(path: str | Path) -> str:
    """``path`` relative to the repository when it lies inside it (as records and pages name files), else as given."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def module_command(module: str) -> list[str]:
    """The command line that runs lab module ``module`` (``neurodyn_lab.lamo.scaling``) in a child process."""
    return [sys.executable, "-m", module]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with the lab (and the ``neurodyn`` this process imports) on ``PYTHONPATH``, so a
    child process imports the same code; ``extra`` set on top."""
    import neurodyn

    paths = [str(LAB), str(Path(neurodyn.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), **extra)
