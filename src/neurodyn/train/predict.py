"""A trained run as a predictor in physical units: ``neurodyn.load_run(path).predict(x)``.

:func:`load_run` rebuilds the model (eval mode), its normalizers and its task from a checkpoint alone, without the
dataset: the input is encoded with the training normalizers, the output decoded back to the data's units.

* steady operators: ``predict(x, pos=None, ctx=None)``, ``x (N, *spatial, C_in)`` -> ``(N, *spatial, C_out)``;
  point clouds padded to a common size add ``mask=(N, P)`` (True on real points; the outputs at padding are
  meaningless);
* autoregressive operators: ``predict(history, steps=K, ctx=None)``, the last ``t_in`` frames in the dataset's
  layout -> the next ``K`` frames, rolled out;
* sequence models: ``predict(x, t=None, mask=None)`` -> class logits ``(N, classes)`` (``.argmax(-1)``: the class)
  or regression values in the target's units; NaN in ``x`` is a missing value, filled as the run's
  ``data.missing`` filled it in training (and the observed indicators appended with ``data.observed_channels``);
  long sequences are pooled in time as the run's data was (``data.max_steps``, :mod:`neurodyn.data.sequences`).

Inputs may be numpy arrays or tensors; they are processed in batches of ``batch_size`` under ``torch.no_grad``.
A checkpoint holds its task (``task_spec``) and its format version (:data:`neurodyn.checkpoint_io.CHECKPOINT_FORMAT`).

:func:`load_run` is the one way a trained run is restored (``neurodyn predict / evaluate / compare``, the run plots,
the benchmark drivers): data is read only when asked for (:meth:`TrainedRun.split`, :meth:`TrainedRun.test_sets`),
from the run's existing store or from given files, never generated, and always with the checkpoint's normalizers.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate

from ..checkpoint_io import nonfinite_tensors, read_checkpoint
from ..data.assembly import build_split_sets, build_test_sets, named_test_files, split_sizes, training_steps
from ..data.normalize import Normalizer
from ..data.sequence_arrays import Spelling, check_series
from ..data.sequences import pool_factor, pool_in_time, prepare_raw_inputs
from ..errors import ConfigError, DataError, DiskFullError, disk_full_errno, make_room, no_room
from ..files import atomic_output, check_not_special, check_outside_runs
from ..models.registry import module_device, rebuild
from ..progress import evaluate_stage
from .experiment import check_model_accepts
from .task_spec import task_from_spec
from .trainer import MIN_VAL_FOR_BEST, TrainConfig

FIT_SOURCE = "neurodyn.train.fit"  # data.source of a run trained by neurodyn.train.fit on arrays (no store)


def in_memory_source(cfg: dict[str, Any]) -> str | None:
    """Who trained a run on arrays in memory, which a run cannot read again: ``neurodyn.train.fit`` (``data.source``)
    or an estimator (``data.arrays``: the arrays' digest); None for a run on a store file."""
    data = cfg.get("data")
    if not isinstance(data, dict):
        return None
    if data.get("source") == FIT_SOURCE:
        return FIT_SOURCE
    return f"a sequence estimator ({data['arrays']})" if data.get("arrays") else None


@dataclasses.dataclass
class TrainedRun:
    """A run's model, normalizers and task, ready to predict in physical units (``checkpoint``: the file they were
    restored from; None for a training held in memory, which wrote nothing)."""

    model: torch.nn.Module
    task: Any
    cfg: dict[str, Any]
    checkpoint: Path | None
    train_config: TrainConfig

    @property
    def device(self) -> torch.device:
        return module_device(self.model)

    @property
    def run_dir(self) -> Path | None:
        return self.checkpoint.parent.parent if self.checkpoint is not None else None

    @property
    def eval_batch_size(self) -> int:
        return self.train_config.eval_batch_size or self.train_config.batch_size

    def split(self, name: str = "test"):
        """The dataset of split ``name`` (``train`` / ``val`` / ``test``) of the run's store file, read as in training
        (nothing generated: the file must exist). One ConfigError when the run has no such split (a run of
        ``neurodyn.train.fit`` or an estimator, trained on arrays in memory, has none: evaluate it on files)."""
        if in_memory_source(self.cfg):
            raise ConfigError(
                f"the run {self.run_dir} was trained by {in_memory_source(self.cfg)} on arrays, so it "
                f"has no stored {name} split; evaluate it on a store file: `neurodyn evaluate RUN --data "
                "FILE`"
            )
        found = build_split_sets(self.cfg, (name,), train_window_steps=self.train_config.window_steps)
        if name not in found:
            raise ConfigError(
                f"the experiment of {self.checkpoint} has no {name} split (data.n_{name} = 0); evaluate "
                "it on files with `neurodyn evaluate RUN --data FILE`"
            )
        return found[name]

    def test_sets(self, files=None, required: bool = True) -> dict[str, Any]:
        """``{name: dataset}`` to score: ``files`` (store files, named by their stems, or ``{name: path}``), or by
        default the test split (``"test"``) and the separate test files of the config (``data.test_path``). A run
        with neither is one ConfigError saying what to give, or ``{}`` when not ``required``."""
        if files is not None:
            named = (
                files if isinstance(files, dict) else named_test_files({"test_path": list(map(str, files))}, "--data")
            )
            return build_test_sets(self.cfg, named)
        sets: dict[str, Any] = {}
        if not in_memory_source(self.cfg):
            sets.update(build_split_sets(self.cfg, ("test",), train_window_steps=self.train_config.window_steps))
            sets.update(build_test_sets(self.cfg))
        if not sets and required:
            why = (
                f"was trained by {in_memory_source(self.cfg)} on arrays"
                if in_memory_source(self.cfg)
                else "has no test split and no data.test_path"
            )
            raise ConfigError(
                f"the run {self.run_dir} {why}; give store files to evaluate it on "
                "(`neurodyn evaluate RUN --data FILE`)"
            )
        return sets

    def evaluate(self, files=None, progress: Any = False) -> dict[str, dict[str, Any]]:
        """``{name: metrics}`` on :meth:`test_sets` ``(files)`` with the checkpoint's normalizers. A file the model
        cannot take (another channel count, a resolution the model refuses) is one ConfigError naming it.
        ``progress`` (the one idiom, :mod:`neurodyn.progress`): one stage per set."""
        out = {}
        sets = self.test_sets(files)
        for name, dataset in sets.items():
            check_model_accepts(self.model, self.task, dataset, self.cfg["model"]["name"], what=f"{name!r}")
        for name, dataset in sets.items():
            out[name] = evaluate_stage(
                self.task,
                self.model,
                batches(dataset, self.eval_batch_size, self.device),
                len(dataset),
                f"evaluating {self.cfg['model']['name']} on {name!r}",
                progress,
            )
        return out

    def _tensor(self, a) -> torch.Tensor | None:
        if a is None:
            return None
        t = torch.as_tensor(np.asarray(a) if not torch.is_tensor(a) else a)
        return t.to(self.device, torch.float32 if t.is_floating_point() else t.dtype)

    @torch.no_grad()
    def predict(
        self, x, *, pos=None, ctx=None, t=None, mask=None, steps: int | None = None, batch_size: int = 64
    ) -> torch.Tensor:
        """Predictions for raw inputs ``x`` (module docstring); returns a CPU tensor in the data's units."""
        check_batch_size(batch_size)
        name = getattr(self.task, "name", "")
        if name == "sequence":  # checked as a sequence file is: shapes, Inf, complex, masks, times in order
            x, t, mask = check_series(x, t, mask, spelling=Spelling(x="x"))
        x = self._tensor(x)
        extra = {k: self._tensor(v) for k, v in (("pos", pos), ("ctx", ctx), ("t", t), ("mask", mask)) if v is not None}
        if name == "autoregressive":
            if not steps or steps < 1:
                raise ConfigError("an autoregressive run predicts a number of frames: give steps=K (K >= 1)")
        elif steps is not None:
            raise ConfigError(f"steps= applies to autoregressive runs; this run's task is {name!r}")
        if name == "sequence":
            if "mask" not in extra:
                extra["mask"] = torch.ones(x.shape[:2], dtype=torch.bool, device=self.device)
            d = self.cfg.get("data", {})
            raw, mask = self._pooled(x.cpu().numpy(), extra)
            x = torch.from_numpy(
                prepare_raw_inputs(raw, mask, d.get("missing", "ffill"), bool(d.get("observed_channels")))
            )
            x = x.to(self.device)
        self.model.eval()
        out = []
        for i in range(0, len(x), batch_size):
            batch = {"x": x[i : i + batch_size], **{k: v[i : i + batch_size] for k, v in extra.items()}}
            if name == "autoregressive":
                batch["y"] = self._empty_frames(batch["x"], steps)
            out.append(self.task.predict(self.model, batch).float().cpu())
        return torch.cat(out) if out else torch.empty(0)

    def _pooled(self, x: np.ndarray, extra: dict[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
        """Raw sequences ``x (N, T, C)`` (NaN: missing) pooled in time as the run's data was (``data.max_steps``,
        the factor of its training file: :mod:`neurodyn.data.sequences`), ``extra``'s ``mask`` and ``t`` with them;
        returns ``(x, mask)`` as numpy arrays."""
        d = self.cfg.get("data", {})
        mask = extra["mask"].cpu().numpy().astype(bool)
        if not d.get("max_steps"):  # 0 or absent: the run never pooled
            return x, mask
        per_step = bool(getattr(self.task, "per_step", False))
        k = pool_factor(d["max_steps"], training_steps(d) or x.shape[1], per_step)
        if k == 1:
            return x, mask
        obs = np.isfinite(x)
        t = extra["t"].cpu().numpy() if "t" in extra else np.zeros(mask.shape, dtype=np.float32)
        xp, tp, mp, seen = pool_in_time(np.where(obs, x, 0.0), t, mask, obs, k)
        extra["mask"] = torch.from_numpy(mp).to(self.device)
        if "t" in extra:
            extra["t"] = torch.from_numpy(np.ascontiguousarray(tp, dtype=np.float32)).to(self.device)
        return np.where(seen, xp, np.nan).astype(np.float32), mp

    def _empty_frames(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        """A placeholder target of ``steps`` frames in the dataset's layout (its values are not read)."""
        from .rollout import from_frames, to_frames

        history = to_frames(x, self.task.channels, self.task.fac)
        return from_frames(history.new_zeros(history.shape[0], steps, *history.shape[2:]), self.task.fac)


WHICH = ("auto", "last", "best")


def choose_checkpoint(run: str | Path, which: str = "auto") -> tuple[str, str]:
    """``(checkpoint name, why)`` for ``which`` of a run folder: ``last`` and ``best`` as asked; ``auto``: ``best``
    when ``best.pt`` exists and the validation split that selected it held at least ``MIN_VAL_FOR_BEST`` cases,
    else ``last`` (a best epoch picked on a few cases is mostly noise). ``why`` is one line for the user (empty
    when the folder holds no ``last.pt``: loading it then says what is wrong)."""
    if which not in WHICH:
        raise ConfigError(f"which must be one of {', '.join(WHICH)}, got {which!r}")
    if which != "auto":
        return which, f"--which {which}"
    ckpts = Path(run) / "checkpoints"
    if not (ckpts / "last.pt").is_file():  # not a trained run: loading it says what is wrong
        return "last", ""
    if not (ckpts / "best.pt").is_file():
        return "last", "the run has no best.pt: it had no validation split to select one"
    n_val = validation_cases(read_checkpoint(ckpts / "last.pt", map_location="cpu"))
    if n_val is None:
        return "last", (
            "the run does not record its validation split's size, so best.pt is not trusted; --which best to override"
        )
    if n_val < MIN_VAL_FOR_BEST:
        return "last", (
            f"the validation split has {n_val} cases, under {MIN_VAL_FOR_BEST}: too few to select a "
            "checkpoint; --which best to override"
        )
    return "best", (
        f"the validation split has {n_val} cases, at least {MIN_VAL_FOR_BEST}: best.pt, the best "
        "validation epoch; --which last to override"
    )


def validation_cases(ckpt: dict[str, Any]) -> int | None:
    """The validation cases a checkpoint's run selected ``best.pt`` on: recorded in the checkpoint (``n_val``), else
    (older checkpoints) the config's ``data.n_val`` or the split sizes it implies; ``None`` when unknown."""
    if isinstance(ckpt.get("n_val"), int):
        return ckpt["n_val"]
    data = (ckpt.get("experiment") or {}).get("data") or {}
    if isinstance(data.get("n_val"), int) and not isinstance(data.get("n_val"), bool):
        return data["n_val"]
    try:
        return split_sizes(data)[1]
    except (ConfigError, DataError, OSError):
        return None


def load_run(
    run: str | Path, which: str = "last", device: str | torch.device = "cpu", model: torch.nn.Module | None = None
) -> TrainedRun:
    """The run folder's ``checkpoints/<which>.pt`` (``last``: the final model, which the run's summary reports;
    ``best``: the best validation epoch; ``auto``: :func:`choose_checkpoint`), or a checkpoint file, as a
    :class:`TrainedRun` in eval mode. A run of a user's own module (``neurodyn.train.fit``) is rebuilt from its
    class when that is imported, or into ``model`` (:func:`neurodyn.models.registry.rebuild`)."""
    run = Path(run)
    if which not in WHICH:
        raise ConfigError(f"which must be one of {', '.join(WHICH)}, got {which!r}")
    if which == "auto" and not run.is_file():
        which = choose_checkpoint(run)[0]
    path = run if run.is_file() else run / "checkpoints" / f"{which}.pt"
    ckpt = read_checkpoint(path, map_location="cpu")  # built on the CPU, then moved once: nothing stays behind
    if "experiment" not in ckpt or "model" not in ckpt:
        raise DataError(
            f"checkpoint {path} was not written by the neurodyn trainer (no experiment config); load a "
            "bare model with neurodyn.models.load"
        )
    bad = nonfinite_tensors(ckpt["model_state"])
    if bad:
        raise DataError(f"checkpoint {path} holds non-finite weights ({', '.join(bad[:3])}): the run diverged")
    if not ckpt.get("task_spec") or "normalizer_kinds" not in ckpt:
        raise DataError(
            f"checkpoint {path} does not hold its task (written by a neurodyn before 0.1's checkpoint "
            "format); train the run again to load it"
        )
    tcfg = TrainConfig.from_options(ckpt["train_config"])
    norms = {}
    for key, kind in ckpt["normalizer_kinds"].items():
        norm = Normalizer(kind["kind"], kind["reduce"])
        norm.load_state_dict(ckpt["normalizers"][key])
        norms[key] = norm
    task = task_from_spec(ckpt["task_spec"], norms)
    task.to(torch.device(device))
    model = rebuild(ckpt["model"], model)
    model.load_state_dict(ckpt["model_state"])
    model.to(device).eval()
    return TrainedRun(model, task, ckpt["experiment"], path, tcfg)


def batches(dataset, batch_size: int = 32, device: str | torch.device | None = None, count: int | None = None):
    """The first ``count`` (default all) samples of ``dataset`` in collated batches, on ``device``."""
    n = len(dataset) if count is None else min(count, len(dataset))
    for i in range(0, n, batch_size):
        batch = default_collate([dataset[j] for j in range(i, min(n, i + batch_size))])
        if device is not None:
            batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
        yield batch


def write_predictions(
    run: str | Path,
    data: str | Path,
    out: str | Path,
    which: str = "last",
    device: str | torch.device = "cpu",
    batch_size: int = 64,
    overwrite: bool = False,
    progress: Any = False,
) -> tuple[Path, dict[str, Any]]:
    """Predict every sample of the store file ``data`` (read like the run's test split: same windows and sequence
    options) and write ``out`` (HDF5: dataset ``pred``, in the data's units and the dataset's layout; attributes name
    the run, the checkpoint and the source). Returns ``(out, metrics of the predictions against the file's targets)``.

    ``out`` is checked before anything is loaded (:func:`check_output`): never the input, nor a file of the run, nor
    an existing file unless ``overwrite``. It is written to a temporary name and renamed, so an interrupted or failed
    call leaves nothing (and removes the temporaries of killed calls). ``progress`` (:mod:`neurodyn.progress`): the
    prediction pass as one stage."""
    import h5py

    check_batch_size(batch_size)
    if which == "auto" and not Path(run).is_file():
        which = choose_checkpoint(run)[0]
    out = check_output(out, data, run, which, overwrite)
    trained = load_run(run, which, device)
    files = named_test_files({"test_path": [str(data)]}, "--data")
    dataset = next(iter(build_test_sets(trained.cfg, files).values()))
    preds: list[torch.Tensor] = []
    trained.model.eval()
    with torch.no_grad():  # one pass: the evaluation hands over the predictions it scores
        metrics = evaluate_stage(
            trained.task,
            trained.model,
            batches(dataset, batch_size, trained.device),
            len(dataset),
            f"predicting {Path(data).name}",
            progress,
            keep=lambda p: preds.append(p.float().cpu()),
        )
    pred = torch.cat(preds).numpy()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(out) as tmp, h5py.File(tmp, "w") as f:
            f.create_dataset("pred", data=pred)
            f.attrs.update(
                {
                    "run": str(run),
                    "checkpoint": str(trained.checkpoint),
                    "source": str(data),
                    "model": trained.cfg["model"]["name"],
                    "units": "the data's (normalizers decoded)",
                }
            )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"nothing was written to {out}") from None
    except OSError as exc:
        code = disk_full_errno(exc)
        if code is not None:
            raise DiskFullError(
                f"{no_room(code, out.parent)} (writing the predictions to {out.name}); nothing was "
                f"written: {make_room(code, out.parent)} or choose another --out"
            ) from None
        reason = os.strerror(exc.errno) if exc.errno else _first_line(exc)
        raise DataError(
            f"cannot write the predictions to {out} ({reason}); nothing was written: choose another --out"
        ) from None
    return out, {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


def check_batch_size(batch_size: Any) -> None:
    """Raise ConfigError unless ``batch_size`` is an integer >= 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a whole number >= 1 (samples per forward pass); got {batch_size!r}")


def check_output(
    out: str | Path, data: str | Path, run: str | Path, which: str = "last", overwrite: bool = False
) -> Path:
    """``out`` as a Path once it is known not to destroy anything: not empty, not a folder or special file, not the
    input ``data``, not inside any run folder (this run's or another's: :func:`neurodyn.files.check_outside_runs`),
    and not an existing file unless ``overwrite``; one ConfigError or DataError otherwise."""
    if not str(out).strip():
        raise ConfigError("--out is empty; give the path of the HDF5 file to write, e.g. --out pred.h5")
    out, run = Path(out), Path(run)
    check_not_special(out, "--out")
    if out.is_dir():
        raise DataError(f"--out {out} is a folder; give a file name inside it, e.g. --out {out / 'pred.h5'}")
    blocked = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise DataError(f"--out {out} cannot be written: {blocked} is a file, not a folder; choose another --out")
    if _same_file(out, Path(data)):
        raise DataError(
            f"--out {out} is the input --data file; predictions never replace their input: choose another --out"
        )
    if _same_file(out, run) or _same_file(out, run / "checkpoints" / f"{which}.pt"):
        raise DataError(f"--out {out} is the checkpoint the predictions come from; choose another --out")
    check_outside_runs(out, "--out")
    if (out.exists() or out.is_symlink()) and not overwrite:
        raise DataError(f"--out {out} already exists; choose another --out, or pass --overwrite to replace it")
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False
