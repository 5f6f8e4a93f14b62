"""The experiment queue: seeded training runs of presets, each recorded once into a claim's records folder.

* :func:`train_preset`, :class:`RunResult`, :class:`Job`, :func:`preset_config` -- the library's
  (:mod:`neurodyn.train.queue`): one seeded training run of a preset into a run folder and what it recorded;
* :func:`run_jobs` -- every :class:`Job` not yet recorded, trained (optionally each in its own process) and
  recorded as ``<records>/runs/<name>/result.json`` (:mod:`neurodyn_lab.records`); a recorded run is never
  trained again.

With ``protocol=`` (:mod:`neurodyn_lab.protocols`) the queue refuses to start unless the protocol is frozen and
committed and the records folder holds only its records, and every record it writes carries the protocol's stamp.

Runs train in the untracked twin of the records folder (``lab/runs/<paper>/<claim>/<name>``,
:func:`neurodyn_lab.paths.runs_for`): an interrupted run resumes from its ``last.pt`` there while the machine keeps
the folder, and starts over on a machine that does not have it. Checkpoints never enter a commit.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from neurodyn.train.queue import Job, RunResult, preset_config, train_preset
from neurodyn.train.runs import TrainedRun, load_run

from .paths import child_env, runs_for
from .records import load_results, with_placeholders, write_run_record

if TYPE_CHECKING:
    from .protocols import Protocol

# ------------------------------------------------------------------------------------------------
# job lists


def run_jobs(
    jobs: Sequence[Job],
    records_dir: str | Path,
    scale: str = "cpu",
    *,
    evaluate: Callable[[TrainedRun], dict[str, Any]] | None = None,
    summary: Callable[[dict[str, Any]], str] | None = None,
    tag: str = "",
    overrides: Sequence[str] = (),
    train: bool = True,
    retrain: bool = False,
    runs_dir: str | Path | None = None,
    resume: bool = True,
    workers: int = 0,
    threads: int | None = None,
    device: str | torch.device = "cpu",
    placeholders: Mapping[str, str] | None = None,
    metric: str = "rel_l2",
    protocol: Protocol | None = None,
) -> list[dict[str, Any]]:
    """Train every job not yet recorded in ``records_dir`` and record it; returns the records of ``jobs``.

    A job's record is ``{"run": name, **job.keys, "seed", "overrides", **RunResult.record(),
    **evaluate(restored run)}``, written to ``<records_dir>/runs/<name>/result.json`` as each run ends (with its
    run folder's config, metrics and summary). Runs train in ``runs_dir`` (default: the untracked twin of the
    records folder, :func:`neurodyn_lab.paths.runs_for`) and resume from it. With ``train=False`` only recorded
    runs are returned; ``retrain`` trains recorded jobs again and replaces their records (``resume=False`` to start
    their run folders over). ``workers`` > 0 trains each job in a fresh process, that many at a time (``threads``:
    torch threads of each process or of this one); ``device``: where every job trains; ``evaluate`` and the
    recording always run here; ``metric``: the test metric the records keep as ``final_<metric>`` (and its
    validation curve and best). ``placeholders`` name folders outside the repository in the records
    (``{stores: "<stores>"}``: :func:`neurodyn_lab.records.with_placeholders`). ``protocol``: the pre-registered
    protocol the runs belong to (:mod:`neurodyn_lab.protocols`): checked frozen and committed, and the records folder
    free of other records, before anything trains; every new record carries its stamp. Prints ``[tag] <label> seed
    <seed>: <summary(record)>`` per new record.
    """
    placeholders = {str(Path(k).absolute()): v for k, v in (placeholders or {}).items()}
    records_dir = Path(records_dir)
    runs_dir = Path(runs_dir) if runs_dir is not None else runs_for(records_dir)
    recorded = {r.get("run"): r for r in load_results(records_dir)}
    if protocol is not None:
        from .protocols import refuse_foreign, require_registered, stamp

        require_registered(protocol)
        refuse_foreign(recorded.values(), protocol, records_dir)
    todo = [j for j in jobs if retrain or j.name not in recorded] if train else []

    def record(job: Job, result: RunResult) -> None:
        rec = {"run": job.name, **job.keys, "seed": job.seed, "overrides": _overrides(job, overrides)}
        rec.update({k: v for k, v in result.record().items() if k not in rec})  # the job's keys win
        if job.model_from:
            rec["model_from"] = job.model_from
        if job.data_from:
            rec["data_from"] = job.data_from
        if evaluate is not None:
            rec.update(evaluate(load_run(result.run_dir)))
        rec = with_placeholders(json.loads(json.dumps(rec)), placeholders)
        if job.name in recorded:  # retrained: the older record goes
            _forget(records_dir, job.name)
        write_run_record(
            records_dir, job.name, rec, run_dir=result.run_dir, placeholders=placeholders, protocol=protocol
        )
        recorded[job.name] = stamp(rec, protocol) if protocol is not None else rec
        shown = summary(rec) if summary else f"{result.metric} {result.final.get(result.metric)}"
        print(f"[{tag or records_dir.name}] {job.label or job.name} seed {job.seed}: {shown}", flush=True)

    if workers > 0:
        _run_in_processes(todo, scale, overrides, runs_dir, resume, workers, threads, record, str(device), metric)
    else:
        if threads:
            torch.set_num_threads(threads)
        for job in todo:
            record(job, _train_job(job, scale, overrides, runs_dir, resume, device, metric))
    return [recorded[j.name] for j in jobs if j.name in recorded]


def _forget(records_dir: Path, run: str) -> None:
    """Drop the entry of ``run`` from the folder's ``results.json`` (a record written before runs had their own file);
    its ``runs/<run>/result.json`` is overwritten by the new record."""
    from .records import STORE, write_store

    path = records_dir / STORE
    if path.exists():
        kept = [r for r in json.loads(path.read_text()) if r.get("run") != run]
        write_store(records_dir, kept)


def _overrides(job: Job, common: Sequence[str]) -> list[str]:
    return [*job.overrides, f"train.seed={job.seed}", *common]


def job_config(job: Job, scale: str = "cpu", common: Sequence[str] = ()) -> dict[str, Any]:
    """The config :func:`run_jobs` trains ``job`` with (``common``: its run list's common overrides)."""
    return preset_config(job.preset, scale, _overrides(job, common), job.model_overrides, job.model_from, job.data_from)


def _train_job(
    job: Job,
    scale: str,
    common: Sequence[str],
    runs_dir: Path,
    resume: bool,
    device: str | torch.device = "cpu",
    metric: str = "rel_l2",
) -> RunResult:
    return train_preset(
        job.preset,
        scale,
        runs_dir / job.name,
        _overrides(job, common),
        seed=job.seed,
        model_overrides=job.model_overrides,
        model_from=job.model_from,
        data_from=job.data_from,
        resume=resume,
        device=device,
        metric=metric,
    )


def _run_in_processes(
    jobs: Sequence[Job],
    scale: str,
    common: Sequence[str],
    runs_dir: Path,
    resume: bool,
    workers: int,
    threads: int | None,
    done: Callable[[Job, RunResult], None],
    device: str = "cpu",
    metric: str = "rel_l2",
) -> None:
    """Train every job in its own ``python -m neurodyn_lab.queue`` process, ``workers`` at a time
    (``OMP_WAIT_POLICY=PASSIVE``); ``done(job, result)`` as each one finishes."""
    env = child_env(OMP_WAIT_POLICY="PASSIVE")  # the workers import this same lab and neurodyn
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            spec = {
                "job": job._asdict(),
                "scale": scale,
                "common": list(common),
                "runs_dir": str(runs_dir),
                "resume": resume,
                "threads": threads,
                "device": device,
                "metric": metric,
            }
            running.append(
                (job, subprocess.Popen([sys.executable, "-m", "neurodyn_lab.queue", json.dumps(spec)], env=env))
            )
            print(f"started {job.label or job.name} seed {job.seed} ({len(pending)} queued)", flush=True)
        time.sleep(0.5)
        for job, proc in list(running):
            if proc.poll() is None:
                continue
            running.remove((job, proc))
            out = runs_dir / job.name / "run_result.json"
            if proc.returncode == 0 and out.exists():
                done(job, RunResult(**json.loads(out.read_text())))
            else:
                print(f"{job.label or job.name} seed {job.seed} FAILED (exit {proc.returncode})", flush=True)


def _worker(spec_json: str) -> int:
    spec = json.loads(spec_json)
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    job = Job(**spec["job"])
    result = _train_job(
        job,
        spec["scale"],
        spec["common"],
        Path(spec["runs_dir"]),
        spec["resume"],
        spec.get("device", "cpu"),
        spec.get("metric", "rel_l2"),
    )
    (Path(result.run_dir) / "run_result.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
