"""Runs: train a preset, restore, evaluate and read a trained run, and run lists of jobs into a results store.

The one run API the command line and every benchmark driver use:

* :func:`train_preset` -- one seeded training run of a preset (with overrides) into a run folder; returns a
  :class:`RunResult` (final metrics, best, epochs, seconds, parameters, split sizes, eval curve);
* :func:`restore_run` -- a trained run's config, data, task and model with the checkpoint's normalizers and
  weights (a :class:`RestoredRun`); :func:`evaluate_run` re-evaluates it on its test split;
* :func:`read_history` -- the per-epoch records of a run's ``metrics.jsonl``;
* :func:`run_jobs` -- every :class:`Job` not yet recorded, trained (optionally each in its own process) and
  recorded in ``<store>/results.json``, the merged record of a folder keyed by run name (written atomically
  after each run; a recorded run is never trained again); :func:`load_results` reads such a store.
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.utils.data import default_collate

from ..checkpoint_io import nonfinite_tensors, read_checkpoint
from ..data.assembly import build_data, split_sizes
from ..errors import ConfigError, DataError
from ..models import build, count_parameters
from ..models.registry import module_device, upgrade_config
from .experiment import build_task, run_experiment
from .trainer import TrainConfig

Tensor = torch.Tensor


# ------------------------------------------------------------------------------------------------
# reading a run


def read_history(run_dir: str | Path) -> list[dict[str, Any]]:
    """The per-epoch records of a run's ``metrics.jsonl`` (``epoch``, ``train_loss``, ``lr``, ``seconds``, and
    ``val``: the validation metrics of the epochs that were evaluated)."""
    return [r for r in _records(run_dir) if "train_loss" in r]


def read_test_metrics(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The one evaluation of the test data after training: ``{set: {"last": metrics, "best": metrics}}`` for the
    test split (``"test"``) and each separate test file (``data.test_path``), of the final model and of the
    checkpoint the validation split selected; empty when the run had no test data or has not finished."""
    found: dict[str, dict[str, Any]] = {}
    for rec in _records(run_dir):
        if "test" in rec and "train_loss" not in rec:
            found = rec["test"]
    return found


def read_test_file_metrics(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """``{test file name: metrics}`` of the final model on the run's separate test files (``data.test_path``);
    empty when the run had none."""
    return {name: m["last"] for name, m in read_test_metrics(run_dir).items() if name != "test"}


def _records(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise DataError(f"run folder {run_dir} has no metrics.jsonl; was it trained by neurodyn?")
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@dataclasses.dataclass
class RestoredRun:
    """A trained run as it was at a checkpoint: config, data (:func:`neurodyn.data.assembly.build_data`),
    task with the checkpoint's normalizers, model with its weights (in eval mode), the training config."""

    cfg: dict[str, Any]
    data: dict[str, Any]
    task: Any
    model: torch.nn.Module
    train_config: TrainConfig
    checkpoint: Path

    @property
    def run_dir(self) -> Path:
        return self.checkpoint.parent.parent

    @property
    def eval_batch_size(self) -> int:
        return self.train_config.eval_batch_size or self.train_config.batch_size


def restore_run(run: str | Path, which: str = "last", device: str | torch.device = "cpu") -> RestoredRun:
    """Restore a run folder (its ``checkpoints/<which>.pt``) or a checkpoint file, with the model and every
    normalizer of the task on ``device`` (the data stays on the CPU: :func:`batches` moves it).

    The checkpoint is read onto the CPU and everything built from it is moved once, at the end, so no tensor of the
    restored task or model stays behind on another device."""
    run = Path(run)
    path = run if run.is_file() else run / "checkpoints" / f"{which}.pt"
    ckpt = read_checkpoint(path, map_location="cpu")
    cfg = ckpt.get("experiment")
    if not cfg:
        raise DataError(f"checkpoint {path} holds no experiment config; it was not written by the trainer")
    bad = nonfinite_tensors(ckpt.get("model_state", {}))
    if bad:
        raise DataError(f"checkpoint {path} holds non-finite weights ({', '.join(bad[:3])}"
                        f"{' ...' if len(bad) > 3 else ''}): the run diverged; train it again with a lower train.lr "
                        "(--fresh, or a new folder with --run-name NAME)")
    tcfg = TrainConfig(**ckpt["train_config"])
    data = build_data(cfg, device, progress=False, train_window_steps=tcfg.window_steps)
    task = build_task(cfg, data, tcfg)
    for key, norm in task.normalizers().items():
        norm.load_state_dict(ckpt["normalizers"][key])
    model = build(ckpt["model"]["name"], upgrade_config(ckpt["model"]["name"], ckpt["model"]["config"]))
    model.load_state_dict(ckpt["model_state"])
    device = torch.device(device)
    model.to(device).eval()
    task.to(device)
    return RestoredRun(cfg, data, task, model, tcfg, path)


def batches(dataset, batch_size: int = 32, device: str | torch.device | None = None,
            count: int | None = None) -> Iterator[dict[str, Tensor]]:
    """The first ``count`` (default all) samples of ``dataset`` in collated batches, on ``device``."""
    n = len(dataset) if count is None else min(count, len(dataset))
    for i in range(0, n, batch_size):
        batch = default_collate([dataset[j] for j in range(i, min(n, i + batch_size))])
        if device is not None:
            batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
        yield batch


@torch.no_grad()
def predict(task, model, dataset, batch_size: int = 32) -> tuple[Tensor, Tensor]:
    """Predictions and targets ``(N, *spatial, C)`` (physical units) of every sample of ``dataset``."""
    preds, trues = [], []
    for batch in batches(dataset, batch_size):
        preds.append(task.predict(model, batch))
        trues.append(batch["y"])
    return torch.cat(preds), torch.cat(trues)


def evaluate_run(run: str | Path, device: str | torch.device = "cpu", which: str = "last") -> dict[str, Any]:
    """Re-evaluate a run's checkpoint on its test split with the normalizers saved in the checkpoint."""
    r = restore_run(run, which, device)
    test = r.data["sets"].get("test")
    if test is None:
        raise ConfigError(f"the experiment of {r.checkpoint} has no test split (data.n_test = 0); evaluate it on "
                          "files with `neurodyn evaluate RUN --data FILE`")
    return r.task.evaluate(r.model, batches(test, r.eval_batch_size, torch.device(device)))


def evaluate_sets(run: str | Path, files: Sequence[str | Path] | dict[str, str | Path] | None = None,
                  device: str | torch.device = "cpu", which: str = "last") -> dict[str, dict[str, Any]]:
    """``{name: metrics}`` of a run's checkpoint, with the training normalizers, on ``files`` (store files, named
    by their stems, or ``{name: path}``), or by default on its test split (``"test"``) and the separate test
    files of its config (``data.test_path``). A file the model cannot take (another channel count, a
    resolution the model refuses) is one ConfigError naming it."""

    return evaluate_restored(restore_run(run, which, device), files)


def evaluate_restored(r: RestoredRun, files: Sequence[str | Path] | dict[str, str | Path] | None = None
                      ) -> dict[str, dict[str, Any]]:
    """:func:`evaluate_sets` of an already restored run."""
    from ..data.assembly import build_test_sets, named_test_files
    from .experiment import check_model_accepts

    dev = module_device(r.model)
    sets: dict[str, Any] = {}
    if files is None:
        if "test" in r.data["sets"]:
            sets["test"] = r.data["sets"]["test"]
        sets.update(build_test_sets(r.cfg))
        if not sets:
            raise ConfigError(f"the experiment of {r.checkpoint} has no test split and no data.test_path; give "
                              "files to evaluate on (`neurodyn evaluate RUN --data FILE`)")
    else:
        named = files if isinstance(files, dict) else named_test_files({"test_path": list(map(str, files))}, "--data")
        sets.update(build_test_sets(r.cfg, named))
    out = {}
    for name, dataset in sets.items():
        check_model_accepts(r.model, r.task, dataset, r.cfg["model"]["name"], what=f"{name!r}")
        out[name] = r.task.evaluate(r.model, batches(dataset, r.eval_batch_size, dev))
    return out


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
        return {"preset": self.cfg.get("preset"), "scale": self.cfg.get("scale"), "model": self.cfg["model"]["name"],
                "params": self.params, f"final_{self.metric}": self.final.get(self.metric),
                f"test_{self.metric}_at_best_val": self.test_at_best.get(self.metric),
                f"best_val_{self.metric}": self.best, "epochs": self.epochs, "train_seconds": self.train_seconds,
                "wall_seconds": self.wall_seconds, "seconds_per_epoch": self.seconds_per_epoch,
                "n_train": self.n_train, "n_val": self.n_val, "n_test": self.n_test,
                "final_train_loss": self.final_train_loss, "curve": self.curve, **self.env}


def preset_config(preset: str, scale: str = "cpu", overrides: Sequence[str] = (), model_overrides: Sequence[str] = (),
                  model_from: str | None = None, data_from: str | None = None) -> dict[str, Any]:
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


def train_preset(preset: str, scale: str, run_dir: str | Path, overrides: Sequence[str] = (), *,
                 seed: int | None = None, model_overrides: Sequence[str] = (), model_from: str | None = None,
                 data_from: str | None = None, resume: bool = True, device: str | torch.device = "cpu",
                 metric: str = "rel_l2") -> RunResult:
    """Train ``preset`` at ``scale`` into ``run_dir`` (see :func:`preset_config` for the overrides).

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
    final = run_experiment(cfg, run_dir, device=device, resume=resume, progress=False)
    wall = time.time() - t0
    history = read_history(run_dir)
    ckpt = read_checkpoint(run_dir / "checkpoints" / "last.pt")
    curve = [h["val"][metric] for h in history if metric in h.get("val", {})]
    best = (max if metric in HIGHER_IS_BETTER else min)(curve, default=float("nan"))
    n_train, n_val, n_test = split_sizes(cfg["data"])
    return RunResult(run_dir=str(run_dir), cfg=cfg, final=final, best=best, curve=curve,
                     test_at_best=read_test_metrics(run_dir).get("test", {}).get("best", {}), n_val=n_val,
                     epochs=len(history), train_seconds=sum(h["seconds"] for h in history), wall_seconds=wall,
                     seconds_per_epoch=statistics.median(h["seconds"] for h in history) if history else float("nan"),
                     params=count_parameters(build(ckpt["model"]["name"],
                                                   upgrade_config(ckpt["model"]["name"], ckpt["model"]["config"]))),
                     n_train=n_train, n_test=n_test,
                     final_train_loss=history[-1]["train_loss"] if history else float("nan"), metric=metric,
                     env={"date": datetime.datetime.now().isoformat(timespec="seconds"), "torch": torch.__version__,
                          "threads": torch.get_num_threads(), "load_avg": list(os.getloadavg())})


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


def run_jobs(jobs: Sequence[Job], store_dir: str | Path, scale: str = "cpu", *,
             evaluate: Callable[[RestoredRun], dict[str, Any]] | None = None,
             summary: Callable[[dict[str, Any]], str] | None = None, tag: str = "", overrides: Sequence[str] = (),
             train: bool = True, retrain: bool = False, runs_dir: str | Path | None = None, resume: bool = True,
             workers: int = 0, threads: int | None = None,
             device: str | torch.device = "cpu") -> list[dict[str, Any]]:
    """Train every job not yet recorded in ``store_dir`` and record it; returns the records of ``jobs``.

    A job's record is ``{"run": name, **job.keys, "seed", "overrides", **RunResult.record(),
    **evaluate(restored run)}``, written to ``<runs_dir>/<name>/result.json`` and merged into
    ``<store_dir>/results.json`` after every run (``runs_dir`` defaults to ``<store_dir>/runs``). With
    ``train=False`` only recorded runs are returned; ``retrain`` trains recorded jobs again and replaces
    their records (``resume=False`` to start their run folders over). ``workers`` > 0 trains each job in a fresh
    process, that many at a time (``threads``: torch threads of each process or of this one); ``device``: where every
    job trains; ``evaluate`` and the recording always run here. Prints ``[tag] <label> seed <seed>:
    <summary(record)>`` per new record.
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
            rec.update(evaluate(restore_run(result.run_dir)))
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
            record(job, _train_job(job, scale, overrides, runs_dir, resume, device))
    if store:  # also records runs that only their folders held
        save_results(store_dir, store)
    return [recorded[j.name] for j in jobs if j.name in recorded]


def _overrides(job: Job, common: Sequence[str]) -> list[str]:
    return [*job.overrides, f"train.seed={job.seed}", *common]


def job_config(job: Job, scale: str = "cpu", common: Sequence[str] = ()) -> dict[str, Any]:
    """The config :func:`run_jobs` trains ``job`` with (``common``: its run list's common overrides)."""
    return preset_config(job.preset, scale, _overrides(job, common), job.model_overrides, job.model_from,
                         job.data_from)


def _train_job(job: Job, scale: str, common: Sequence[str], runs_dir: Path, resume: bool,
               device: str | torch.device = "cpu") -> RunResult:
    return train_preset(job.preset, scale, runs_dir / job.name, _overrides(job, common), seed=job.seed,
                        model_overrides=job.model_overrides, model_from=job.model_from, data_from=job.data_from,
                        resume=resume, device=device)


def _run_in_processes(jobs: Sequence[Job], scale: str, common: Sequence[str], runs_dir: Path, resume: bool,
                      workers: int, threads: int | None, done: Callable[[Job, RunResult], None],
                      device: str = "cpu") -> None:
    """Train every job in its own ``python -m neurodyn.train.runs`` process, ``workers`` at a time
    (``OMP_WAIT_POLICY=PASSIVE``); ``done(job, result)`` as each one finishes."""
    package_root = str(Path(__file__).resolve().parents[2])  # the workers import this same neurodyn
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE",
               PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            spec = {"job": job._asdict(), "scale": scale, "common": list(common), "runs_dir": str(runs_dir),
                    "resume": resume, "threads": threads, "device": device}
            running.append((job, subprocess.Popen([sys.executable, "-m", "neurodyn.train.runs", json.dumps(spec)],
                                                  env=env)))
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
    result = _train_job(job, spec["scale"], spec["common"], Path(spec["runs_dir"]), spec["resume"],
                        spec.get("device", "cpu"))
    (Path(result.run_dir) / "run_result.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
