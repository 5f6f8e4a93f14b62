"""Seeded training runs of presets, recorded into a results folder: what ``neurodyn compare`` trains.

* :func:`preset_config` -- a preset's config with overrides, its model or its data taken from other presets;
* :func:`train_preset` -- one seeded training run of a preset (with overrides) into a run folder; returns a
  :class:`RunResult` (final metrics, best, epochs, seconds, parameters, split sizes, validation curve);
* :func:`run_jobs` -- every :class:`Job` not yet recorded, trained (optionally each in its own process) and
  recorded in ``<store>/results.json``, the merged record of a folder keyed by run name (written atomically
  after each run; a recorded run is never trained again); :func:`load_results` reads such a store.

A results folder holds ``results.json`` and ``runs/<run>/``, one run folder per run (its ``result.json`` record,
and while it trains its config, metrics and checkpoints).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ..checkpoint_io import read_checkpoint
from ..data.assembly import split_sizes
from ..errors import DataError
from ..models import build, count_parameters
from .experiment import run_experiment
from .predict import TrainedRun, load_run
from .runs import read_history, read_test_metrics

# ------------------------------------------------------------------------------------------------
# training a preset


HIGHER_IS_BETTER = ("accuracy",)  # metrics whose best value is the largest


@dataclasses.dataclass
class RunResult:
    """What one training run of :func:`train_preset` recorded: ``curve``, the validation ``metric`` per evaluated
    epoch; ``best``, its best value (the epoch that selected ``best.pt``); ``final``, the test metrics of the final
    model; ``test_at_best``, the test metrics of the ``best.pt`` model (empty without a validation split)."""

    run_dir: str
    cfg: dict[str, Any]
    final: dict[str, Any]
    best: float
    curve: list[float]
    epochs: int
    train_seconds: float
    wall_seconds: float
    seconds_per_epoch: float
    params: int
    n_train: int | None
    n_test: int | None
    final_train_loss: float
    metric: str = "rel_l2"
    env: dict[str, Any] = dataclasses.field(default_factory=dict)  # date, torch version, threads, load average
    n_val: int | None = None
    test_at_best: dict[str, Any] = dataclasses.field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The numbers a results store keeps of the run (plain JSON). ``final_<metric>``: test, final model;
        ``test_<metric>_at_best_val``: test, the model of the best validation epoch; ``best_val_<metric>`` and
        ``curve``: validation only."""
        return {
            "preset": self.cfg.get("preset"),
            "scale": self.cfg.get("scale"),
            "model": self.cfg["model"]["name"],
            "params": self.params,
            f"final_{self.metric}": self.final.get(self.metric),
            f"test_{self.metric}_at_best_val": self.test_at_best.get(self.metric),
            f"best_val_{self.metric}": self.best,
            "epochs": self.epochs,
            "train_seconds": self.train_seconds,
            "wall_seconds": self.wall_seconds,
            "seconds_per_epoch": self.seconds_per_epoch,
            "n_train": self.n_train,
            "n_val": self.n_val,
            "n_test": self.n_test,
            "final_train_loss": self.final_train_loss,
            "curve": self.curve,
            **self.env,
        }


def preset_config(
    preset: str,
    scale: str = "cpu",
    overrides: Sequence[str] = (),
    model_overrides: Sequence[str] = (),
    model_from: str | None = None,
    data_from: str | None = None,
) -> dict[str, Any]:
    """The preset at ``scale`` with ``overrides`` then ``model_overrides``; with ``model_from`` the model
    section is that preset's (same scale) with ``model_overrides`` instead; with ``data_from`` the task and
    data sections are that preset's (same scale, with ``overrides``), so several models train on one dataset."""
    from ..experiments import load_experiment

    if model_from:
        cfg = load_experiment(preset, scale, list(overrides))
        cfg["model"] = load_experiment(model_from, scale, list(model_overrides))["model"]
    else:
        cfg = load_experiment(preset, scale, [*overrides, *model_overrides])
    if data_from:
        source = load_experiment(data_from, scale, list(overrides))
        cfg["task"], cfg["data"] = source["task"], source["data"]
    return cfg


def train_preset(
    preset: str,
    scale: str,
    run_dir: str | Path,
    overrides: Sequence[str] = (),
    *,
    seed: int | None = None,
    model_overrides: Sequence[str] = (),
    model_from: str | None = None,
    data_from: str | None = None,
    resume: bool = True,
    device: str | torch.device = "cpu",
    metric: str = "rel_l2",
    progress: Any = False,
) -> RunResult:
    """Train ``preset`` at ``scale`` into ``run_dir`` (see :func:`preset_config` for the overrides); ``progress``:
    the trainer's (:mod:`neurodyn.progress`; False, the default: nothing).

    ``seed``: ``torch.manual_seed(seed)`` first, and ``train.seed=seed`` unless the overrides set it.
    ``resume``: continue the run folder's checkpoint (refused when its config differs).
    """
    overrides = list(overrides)
    if seed is not None and not any(o.startswith("train.seed=") for o in overrides):
        overrides.append(f"train.seed={seed}")
    cfg = preset_config(preset, scale, overrides, model_overrides, model_from, data_from)
    run_dir = Path(run_dir)
    if seed is not None:
        torch.manual_seed(seed)
    t0 = time.time()
    final = run_experiment(cfg, run_dir, device=device, resume=resume, progress=progress)
    wall = time.time() - t0
    history = read_history(run_dir)
    ckpt = read_checkpoint(run_dir / "checkpoints" / "last.pt")
    curve = [h["val"][metric] for h in history if metric in h.get("val", {})]
    best = (max if metric in HIGHER_IS_BETTER else min)(curve, default=float("nan"))
    n_train, n_val, n_test = split_sizes(cfg["data"])
    return RunResult(
        run_dir=str(run_dir),
        cfg=cfg,
        final=final,
        best=best,
        curve=curve,
        test_at_best=read_test_metrics(run_dir).get("test", {}).get("best", {}),
        n_val=n_val,
        epochs=len(history),
        train_seconds=sum(h["seconds"] for h in history),
        wall_seconds=wall,
        seconds_per_epoch=statistics.median(h["seconds"] for h in history) if history else float("nan"),
        params=count_parameters(build(ckpt["model"]["name"], ckpt["model"]["config"])),
        n_train=n_train,
        n_test=n_test,
        final_train_loss=history[-1]["train_loss"] if history else float("nan"),
        metric=metric,
        env={
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "load_avg": list(os.getloadavg()),
        },
    )


# ------------------------------------------------------------------------------------------------
# results store and job lists

STORE = "results.json"


def load_results(store_dir: str | Path) -> list[dict[str, Any]]:
    """Every recorded run of a store folder, in recording order: ``results.json``, plus the records it lacks
    from ``runs/<name>/result.json`` (a run finished by an interrupted invocation) and from ``<name>.json``
    files beside it (the one-file-per-run layout of older drivers), each named by its folder / file."""
    store_dir = Path(store_dir)
    path = store_dir / STORE
    try:
        records = json.loads(path.read_text()) if path.exists() else []
    except json.JSONDecodeError as e:
        raise DataError(f"{path} is not valid JSON ({e}); expected the list of run records") from None
    known = {r.get("run") for r in records}
    loose = [(f.parent.name, f) for f in sorted(store_dir.glob("runs/*/result.json"))]
    loose += [(f.stem, f) for f in sorted(store_dir.glob("*.json")) if f.name != STORE]
    for name, f in loose:
        rec = json.loads(f.read_text())
        if name not in known and rec not in records:  # records written before runs were named
            records.append({"run": name, **rec})
            known.add(name)
    return records


def record_path(experiment: str | Path, run: str) -> Path:
    """Where the record of ``run`` of an experiment folder lives: ``<experiment>/runs/<run>/result.json``."""
    return Path(experiment) / "runs" / run / "result.json"


def read_run_records(experiment: str | Path, runs: str = "*") -> list[dict[str, Any]]:
    """The records ``runs/<run>/result.json`` of an experiment folder whose run name matches the glob ``runs``,
    in run-name order (the one-record-per-run drivers; :func:`load_results` also merges ``results.json``)."""
    found = []
    for f in sorted(Path(experiment).glob(f"runs/{runs}/result.json")):
        try:
            found.append(json.loads(f.read_text()))
        except json.JSONDecodeError as e:
            raise DataError(f"{f} is not valid JSON ({e}); expected one run's record") from None
    return found


def save_results(store_dir: str | Path, records: list[dict[str, Any]]) -> None:
    """Write ``results.json`` through a temporary file, so an interruption never leaves half of it."""
    store_dir = Path(store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    tmp = store_dir / f"{STORE}.partial"
    tmp.write_text(json.dumps(records, indent=1))
    tmp.replace(store_dir / STORE)


class Job(NamedTuple):
    """One training run: recorded as ``name``, trained from ``preset`` with ``overrides`` (then the seed's
    ``train.seed`` and the run list's common overrides); ``keys`` open its record, ``label`` names it in
    the log. ``model_from`` / ``model_overrides`` / ``data_from``: see :func:`preset_config`."""

    name: str
    preset: str
    seed: int
    overrides: list[str] = []
    keys: dict[str, Any] = {}
    label: str = ""
    model_from: str | None = None
    model_overrides: list[str] = []
    data_from: str | None = None


def run_jobs(
    jobs: Sequence[Job],
    store_dir: str | Path,
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
    progress: Any = False,
) -> list[dict[str, Any]]:
    """Train every job not yet recorded in ``store_dir`` and record it; returns the records of ``jobs``.

    A job's record is ``{"run": name, **job.keys, "seed", "overrides", **RunResult.record(),
    **evaluate(restored run)}``, written to ``<runs_dir>/<name>/result.json`` and merged into
    ``<store_dir>/results.json`` after every run (``runs_dir`` defaults to ``<store_dir>/runs``). With
    ``train=False`` only recorded runs are returned; ``retrain`` trains recorded jobs again and replaces
    their records (``resume=False`` to start their run folders over). ``workers`` > 0 trains each job in a fresh
    process, that many at a time (``threads``: torch threads of each process or of this one); ``device``: where every
    job trains; ``evaluate`` and the recording always run here. Prints ``[tag] <label> seed <seed>:
    <summary(record)>`` per new record. ``progress``: the trainings' in this process (:mod:`neurodyn.progress`;
    False, the default: nothing; worker processes show none).
    """
    store_dir = Path(store_dir)
    runs_dir = Path(runs_dir) if runs_dir is not None else store_dir / "runs"
    store = load_results(store_dir)
    recorded = {r.get("run"): r for r in store}
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
        rec = json.loads(json.dumps(rec))
        (Path(result.run_dir) / "result.json").write_text(json.dumps(rec, indent=1))
        if job.name in recorded:  # retrained
            store[:] = [r for r in store if r.get("run") != job.name]
        store.append(rec)
        recorded[job.name] = rec
        save_results(store_dir, store)
        shown = summary(rec) if summary else f"{result.metric} {result.final.get(result.metric)}"
        print(f"[{tag or store_dir.name}] {job.label or job.name} seed {job.seed}: {shown}", flush=True)

    if workers > 0:
        _run_in_processes(todo, scale, overrides, runs_dir, resume, workers, threads, record, str(device))
    else:
        if threads:
            torch.set_num_threads(threads)
        for job in todo:
            record(job, _train_job(job, scale, overrides, runs_dir, resume, device, progress))
    if store:  # also records runs that only their folders held
        save_results(store_dir, store)
    return [recorded[j.name] for j in jobs if j.name in recorded]


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
    progress: Any = False,
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
        progress=progress,
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
) -> None:
    """Train every job in its own ``python -m neurodyn.train.queue`` process, ``workers`` at a time
    (``OMP_WAIT_POLICY=PASSIVE``); ``done(job, result)`` as each one finishes."""
    package_root = str(Path(__file__).resolve().parents[2])  # the workers import this same neurodyn
    env = dict(
        os.environ,
        OMP_WAIT_POLICY="PASSIVE",
        PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
    )
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
            }
            running.append(
                (job, subprocess.Popen([sys.executable, "-m", "neurodyn.train.queue", json.dumps(spec)], env=env))
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
        job, spec["scale"], spec["common"], Path(spec["runs_dir"]), spec["resume"], spec.get("device", "cpu")
    )
    (Path(result.run_dir) / "run_result.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
