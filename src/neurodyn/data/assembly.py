"""Datasets of an experiment config: the store file (generated when missing), the splits, the windows
or sequences a task trains on, and the normalizers fitted on the training split.

The ``data`` section arrives as a preset spells it (a flat mapping) and is read once into a typed
:class:`~neurodyn.data.config.DataConfig` (``DataConfig.parse``, checked when it is made); every function here takes
either and works on the DataConfig. The store file is opened once per call: :func:`build_data` opens it and hands
the handle down to the splits, the datasets and the run's record of the file (:func:`file_record`).

``build_data(cfg)`` is the one entry point of training (and of the benchmark drivers that train);
``build_split_sets(cfg, names)`` reads the asked splits of a trained run's existing store file (nothing generated,
no normalizer fitted: evaluation uses the checkpoint's).
``build_test_sets(cfg)`` adds the separate test files of ``data.test_path`` (one path, a list of paths, or
``{name: path}``), each read whole with the same windows / sequence options as the test split, so a model
trained at one resolution can be scored at others (the normalizers fitted on the training split are applied
to them; see :mod:`neurodyn.data.normalize` for pointwise statistics on another grid).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError
from ..files import check_not_special
from .config import DATA_KEYS, DataConfig, all_needs_a_file
from .datasets import SteadyDataset, TimeWindowDataset, split_indices
from .generators import get_generator
from .normalize import Normalizer
from .sequence_dataset import SequenceDataset, store_classes
from .store import StoredDataset

TASKS = ("steady", "autoregressive", "sequence")
DataSection = Mapping[str, Any] | DataConfig
"""A config's ``data``: the mapping a preset spells, or its :class:`DataConfig`."""


VAL_FRACTION = 0.1  # data.n_val "auto": this fraction of data.n_train validates


def split_sizes(data: DataSection, n_samples: int | None = None) -> tuple[int, int, int]:
    """``(train, val, test)`` sample counts of a data section.

    ``data.n_val`` is the validation split that every choice made during training sees (checkpoint selection,
    early stopping, ``compare``'s curves); the test split is evaluated once, after training.

    * an integer: that many samples between the training and the test samples (a generated file holds
      ``n_train + n_val + n_test``; a given file must have room for them);
    * ``"auto"`` (the default): ``VAL_FRACTION`` of ``n_train`` (at least 1 when ``n_train >= 2``) is carved from
      the end of the training samples, so the file and its test split are the same as without validation and
      the model trains on ``n_train - n_val`` samples;
    * ``0``: no validation split (nothing is selected: ``best.pt`` is not written).

    ``data.n_train: all`` (with ``data.path``): every sample of the file that is not in the test split (nor in an
    integer ``n_val``) trains, the validation split carved from them as above; ``n_samples`` is the file's count
    (read from the file when not given).
    """
    dc = DataConfig.parse(data)
    sp = dc.splits
    n_test, n_val, n_train = int(sp.n_test), sp.n_val, sp.n_train
    if n_train == "all":
        if n_samples is None and not dc.path:
            raise all_needs_a_file()
        total = n_samples if n_samples is not None else StoredDataset(dc.path, verify=False).n_samples
        n_train = total - n_test - (n_val if isinstance(n_val, int) and n_val > 0 else 0)
        if n_train < 1:
            raise ConfigError(
                f"data.n_train=all leaves no training sample in {dc.path or f'the {total} samples'} "
                f"after data.n_test="
                f"{n_test} and data.n_val={n_val}"
            )
    n_train = int(n_train)
    if n_val == "auto":
        carved = max(1, round(VAL_FRACTION * n_train)) if n_train >= 2 else 0
        return n_train - carved, carved, n_test
    return n_train, int(n_val), n_test


def stored_samples(data: DataSection) -> int:
    """Samples the data file of a data section holds: train, validation (unless carved from train) and test."""
    n_train, n_val, n_test = split_sizes(data)
    return n_train + n_val + n_test


def data_options(data: DataSection) -> dict[str, Any]:
    """The generator's own options: everything in ``data`` that is not a data key."""
    if isinstance(data, DataConfig):
        return dict(data.options)
    return {k: v for k, v in data.items() if k not in DATA_KEYS}


def without_generator(data_cfg: dict[str, Any]) -> dict[str, Any]:
    """The data section of a run on a file (``data.path``) without the generator and its options, which describe
    data the run never made nor read (a preset's ``generator: darcy, resolution: 32`` under a user's file);
    unchanged without ``data.path``."""
    if not data_cfg.get("path"):
        return data_cfg
    return {k: v for k, v in data_cfg.items() if k in DATA_KEYS and k != "generator"}


def file_record(store: StoredDataset) -> dict[str, Any]:
    """What a run records of the store file it read (the open ``store``): ``path``, ``sha256`` of the file's bytes,
    the ``shapes`` of its arrays (``fields/...``: ``(N, ...)``) and, for a converted file, ``converted_from`` (each
    source file's name, size and sha256)."""
    from .formats.convert import file_digest

    out = {
        "path": str(store.path),
        "sha256": file_digest(store.path),
        "shapes": {k: list(map(int, v)) for k, v in sorted(store.shapes.items())},
    }
    if store.config.get("source"):  # a conversion (neurodyn convert): the files it was made from
        out["converted_from"] = store.config["source"]
    return out


def ensure_dataset(
    data: DataSection,
    device: str | torch.device = "cpu",
    progress: Any = None,
    is_main: bool = True,
    barrier: Callable[[], None] | None = None,
) -> Path:
    """Path of the store file the config describes, generating it first when missing (``progress``: the one idiom
    of :mod:`neurodyn.progress`).

    Under several processes only the main one (``is_main``) generates; ``barrier`` (called by every
    process) then waits for it."""
    dc = DataConfig.parse(data)
    dc.check_source()
    if dc.path:
        return Path(dc.path)
    gen = get_generator(dc.generator)
    gcfg = gen.make_config(**dc.options)
    n = stored_samples(dc)
    seed = int(dc.splits.seed)
    path = gen.default_path(gcfg, n, seed)
    if is_main:  # an existing file is checked to hold this generator, config, seed and count (or refused)
        gen.run(gcfg, n, seed=seed, path=path, device=device, chunk_size=dc.chunk_size, progress=progress)
    if barrier is not None:
        barrier()
    return path


def build_data(
    cfg: dict[str, Any],
    device: str | torch.device = "cpu",
    progress: Any = None,
    is_main: bool = True,
    barrier: Callable[[], None] | None = None,
    *,
    train_window_steps: int = 1,
) -> dict[str, Any]:
    """Store file, split datasets and fitted normalizers of an experiment config.

    Returns ``config`` (the :class:`DataConfig`), ``path``, ``store`` (the one open handle of the file, which every
    dataset reads through), ``record`` (what the run records of the file: :func:`file_record`, for a run on a given
    file; else ``None``), ``sets`` (``train`` and, when the config has them, ``val`` / ``test``) and the normalizers
    fitted on the training split: ``x_norm`` / ``y_norm`` (steady and sequence tasks), ``u_norm`` plus ``cf_norm`` /
    ``ctx_norm`` when there are context fields / parameters (autoregressive). ``is_main`` / ``barrier``: see
    :func:`ensure_dataset`. ``train_window_steps``: model steps one autoregressive training window unrolls (the
    trainer's ``TrainConfig.window_steps``; this layer reads only the config's ``data`` and ``task``, never its
    ``train`` section)."""
    dc = DataConfig.parse(cfg["data"])
    task = _task(cfg)
    path = ensure_dataset(dc, device, progress, is_main, barrier)
    store = StoredDataset(path)
    out: dict[str, Any] = {
        "config": dc,
        "path": path,
        "store": store,
        "record": file_record(store) if dc.path else None,
    }
    if task == "sequence":
        return {**out, **_sequence_data(dc, store)}
    splits = _nonempty(split_indices(store.n_samples, *_ordered(split_sizes(dc, store.n_samples))))
    reduce = dc.normalize.reduce
    if task == "steady":
        sets = {name: SteadyDataset(store, ids) for name, ids in splits.items()}
        if sets["train"].has_mask and reduce != "channel":
            raise ConfigError(
                f"dataset file {path} holds point clouds of different sizes (padded, with "
                f"fields/mask); per-point statistics (data.normalize_reduce={reduce}) mean nothing "
                "there: set data.normalize_reduce=channel"
            )
        x_train, y_train = sets["train"].tensors()
        out["x_norm"] = Normalizer(dc.normalize.input, reduce).fit(x_train)
        out["y_norm"] = Normalizer(dc.normalize.target, reduce).fit(y_train)
    else:
        sets = _window_sets(dc, store, splits, train_window_steps)
        train = sets["train"]
        frames = torch.stack([train.trajectory(j) for j in range(len(train.ids))])  # (N, T', *spatial, C)
        out["u_norm"] = Normalizer(dc.normalize.input, reduce).fit(frames.flatten(0, 1))
        if train.context_fields:
            cf = torch.stack([train.context_at(j, f) for j in range(len(train.ids)) for f in (0, train.n_frames - 1)])
            out["cf_norm"] = Normalizer("gaussian", reduce).fit(cf)
        if train.context_params:
            ctx = torch.stack([train[j * train.windows_per_sample]["ctx"] for j in range(len(train.ids))])
            out["ctx_norm"] = Normalizer("gaussian", "pointwise").fit(ctx)
    out["sets"] = sets
    return out


def build_sequence_data(cfg: dict[str, Any], store: Any, record: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`build_data` of a sequence config over a store already open: a store file's
    :class:`~neurodyn.data.store.StoredDataset`, or arrays held in memory (a
    :class:`~neurodyn.data.memory_store.MemoryStore`; nothing generated, read from disk or written). The same keys:
    ``config``, ``path`` (the store's), ``store``, ``record`` (given: what the run records of the data, e.g.
    ``MemoryStore.record()``), ``sets`` (the splits of the config's ``data`` section, ``data.n_train: all`` counting
    the store's samples) and the normalizers ``x_norm`` (and ``y_norm`` for regression) fitted on the training
    split."""
    dc = DataConfig.parse(cfg["data"])
    if _task(cfg) != "sequence":
        raise ConfigError(
            f"build_sequence_data builds the data of a sequence task; this config's task is {_task(cfg)!r}"
        )
    return {"config": dc, "path": store.path, "store": store, "record": record, **_sequence_data(dc, store)}


def _task(cfg: dict[str, Any]) -> str:
    task = cfg.get("task", "steady")
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    return task


def _ordered(sizes: tuple[int, int, int]) -> tuple[int, int, int]:
    """``(train, val, test)`` -> the argument order of :func:`split_indices`: ``(train, test, val)``."""
    n_train, n_val, n_test = sizes
    return n_train, n_test, n_val


def _sequence_data(dc: DataConfig, store: StoredDataset) -> dict[str, Any]:
    """Sequence splits (by index, or by a per-sample parameter) and the input/target normalizers."""
    splits = _sequence_splits(dc, store)
    sets = {
        name: SequenceDataset(store, ids, pool_from=_steps(store), **_sequence_options(dc))
        for name, ids in _nonempty(splits).items()
    }
    train = sets["train"]
    out: dict[str, Any] = {"sets": sets}
    out["x_norm"] = Normalizer(dc.normalize.input, "channel").fit(train.valid_steps())
    if train.kind == "regression":
        out["y_norm"] = Normalizer(dc.normalize.target, "channel").fit(train.targets())
    return out


def _sequence_splits(dc: DataConfig, store: StoredDataset) -> dict[str, np.ndarray]:
    """Sample ids of each sequence split: by index (shuffled with ``data.shuffle``), or by a per-sample parameter."""
    sp = dc.splits
    n_train, n_val, n_test = split_sizes(dc, store.n_samples)
    if sp.param:
        key = f"params/{sp.param}"
        if key not in store.shapes:
            raise ConfigError(
                f"data.split_param: dataset file {store.path} has no {key}; it has {store.keys('params')}"
            )
        values = store.read(key)
        chosen = np.isin(values, np.asarray(list(sp.train_values)))
        pool, rest = np.flatnonzero(chosen), np.flatnonzero(~chosen)
        if not n_train and sp.n_val == "auto":  # the whole pool, validation carved from it
            n_val = max(1, round(VAL_FRACTION * len(pool))) if len(pool) >= 2 else 0
            n_train = len(pool) - n_val
        train_ids = pool[:n_train] if n_train else pool[: len(pool) - n_val]
        # validation from the training conditions (in distribution): the other conditions stay unseen until the test
        splits = {"train": train_ids, "val": pool[len(train_ids) : len(train_ids) + n_val], "test": rest}
        if not len(train_ids):
            raise ConfigError(f"data.split_param {sp.param}: no sample has a value in {list(sp.train_values)}")
        if len(train_ids) + len(splits["val"]) < n_train + n_val:
            raise ConfigError(
                f"data.split_param {sp.param}: {len(pool)} samples have a value in "
                f"{list(sp.train_values)}, fewer than data.n_train + data.n_val = {n_train + n_val}"
            )
    else:
        splits = split_indices(store.n_samples, n_train, n_test, n_val)
        if sp.shuffle:  # a file in class order (most UEA files): random splits, a fixed draw of data.seed
            perm = np.random.default_rng(int(sp.seed)).permutation(store.n_samples)
            splits = {name: np.sort(perm[ids]) for name, ids in splits.items()}
    return splits


def stored_path(data: DataSection, why: str = "") -> Path:
    """Path of the store file a data section describes, which must exist: never generated here (a trained run's
    data is read, not remade). One DataError naming the file and ``why`` it was wanted otherwise."""
    dc = DataConfig.parse(data)
    if dc.path:
        path = Path(dc.path)
    elif dc.generator:
        gen = get_generator(dc.generator)
        path = gen.default_path(gen.make_config(**dc.options), stored_samples(dc), int(dc.splits.seed))
    else:
        raise ConfigError(
            f"the data section names no store file (neither 'path' nor 'generator'){'; ' + why if why else ''}"
        )
    check_not_special(path, "data file")
    if not path.is_file():
        raise DataError(
            f"the data file {path} does not exist{'; ' + why if why else ''}: make it again with "
            "`neurodyn generate` (same preset and data options), or give files with --data FILE"
        )
    return path


def build_split_sets(
    cfg: dict[str, Any], names: Sequence[str] = ("test",), *, train_window_steps: int = 1
) -> dict[str, Any]:
    """``{name: dataset}`` of the asked splits (``train`` / ``val`` / ``test``) of a config's existing store file,
    exactly as :func:`build_data` splits and windows it, without generating data nor fitting normalizers (a trained
    run's checkpoint holds its normalizers). A split the config leaves empty is absent from the result."""
    dc = DataConfig.parse(cfg["data"])
    task = _task(cfg)
    unknown = sorted(set(names) - {"train", "val", "test"})
    if unknown:
        raise ConfigError(f"unknown split(s) {unknown}; the splits are train, val and test")
    store = StoredDataset(stored_path(dc, f"it holds the {'/'.join(names)} split of this run"))
    if task == "sequence":
        splits = _nonempty(_sequence_splits(dc, store))
        return {
            n: SequenceDataset(store, splits[n], pool_from=_steps(store), **_sequence_options(dc))
            for n in names
            if n in splits
        }
    splits = _nonempty(split_indices(store.n_samples, *_ordered(split_sizes(dc, store.n_samples))))
    if task == "steady":
        return {n: SteadyDataset(store, splits[n]) for n in names if n in splits}
    sets = _window_sets(dc, store, splits, train_window_steps)
    return {n: sets[n] for n in names if n in sets}


def _window_sets(dc: DataConfig, store: StoredDataset, splits: dict[str, Any], unroll: int) -> dict[str, Any]:
    """Training windows of ``unroll`` model steps (of ``data.step`` frames each); full-horizon windows to evaluate."""
    common = _window_options(dc)
    sets = {
        "train": TimeWindowDataset(
            store, splits["train"], t_out=unroll * dc.windows.step, stride=dc.windows.stride, **common
        )
    }
    for name in ("val", "test"):
        if name in splits and len(splits[name]):
            sets[name] = TimeWindowDataset(store, splits[name], t_out=dc.windows.t_out, **common)
    return sets


def _nonempty(splits: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The splits that hold samples (``n_test = 0``: no test split, e.g. when test files are given)."""
    return {name: ids for name, ids in splits.items() if name == "train" or len(ids)}


def _window_options(dc: DataConfig) -> dict[str, Any]:
    """TimeWindowDataset options shared by the training windows and every evaluation set."""
    w = dc.windows
    return dict(
        t_in=w.t_in,
        time_stride=w.time_stride,
        t_start=w.t_start,
        context_fields=tuple(w.context_fields),
        context_params=tuple(w.context_params),
        frames_as_channels=w.frames_as_channels,
    )


def _sequence_options(dc: DataConfig) -> dict[str, Any]:
    q = dc.sequences
    return dict(
        window=q.window,
        window_stride=dc.windows.stride,
        relative_time=q.relative_time,
        missing=q.missing,
        observed_channels=q.observed_channels,
        drop_steps=q.drop_steps,
        drop_seed=dc.drop_seed,
        max_steps=q.max_steps,
    )


def _steps(store: StoredDataset) -> int:
    """``T_max`` of a sequence store: the time length of its ``fields/x``."""
    return int(store.shapes["fields/x"][1])


def training_steps(data: DataSection) -> int | None:
    """``T_max`` of the run's training file, from which every split and test file takes its time-pooling factor
    (``data.max_steps``): the file itself where it exists, else the shapes the run recorded of it
    (``data.file.shapes``); ``None`` when neither is known (a test file then pools by its own length)."""
    dc = DataConfig.parse(data)
    try:
        path = stored_path(dc)
    except (ConfigError, DataError):
        path = None
    if path is not None:
        return _steps(StoredDataset(path, verify=False))
    shape = ((dc.file or {}).get("shapes") or {}).get("fields/x")
    return int(shape[1]) if shape and len(shape) == 3 else None


def _training_classes(dc: DataConfig) -> list[str] | None:
    """The class names of the training file ``data.path`` (a converted store), or those a run on arrays recorded
    (``data.file.classes``), to read a test file's labels by name; ``None`` when there is neither or they name no
    classes."""
    if not dc.path or not Path(dc.path).is_file():  # (a run on arrays in memory records them: MemoryStore.record)
        recorded = (dc.file or {}).get("classes")
        return [str(c) for c in recorded] if recorded else None
    return store_classes(StoredDataset(dc.path, verify=False))


def named_test_files(data: DataSection, option: str = "data.test_path") -> dict[str, Path]:
    """The named test files of ``data.test_path``: a path (named by its stem), a list of paths, or
    ``{name: path}``. Every file must exist. (A mapping is read as it is, without the other data keys: ``evaluate
    --data`` names files that way.)"""
    test_path = data.test_path if isinstance(data, DataConfig) else data.get("test_path")
    n_test = data.splits.n_test if isinstance(data, DataConfig) else data.get("n_test", 0)
    spec = test_path
    if not spec:
        return {}
    if isinstance(spec, (str, Path)):
        spec = [spec]
    if isinstance(spec, dict):
        named = {str(k): Path(v) for k, v in spec.items()}
    elif isinstance(spec, (list, tuple)):
        named = {}
        for item in spec:
            stem = Path(item).stem
            if stem in named:
                raise ConfigError(
                    f"data.test_path lists two files named {stem!r}; give names as "
                    "{name: path}, e.g. data.test_path={test16: a.h5, test32: b.h5}"
                )
            named[stem] = Path(item)
    else:
        raise ConfigError(f"data.test_path must be a path, a list of paths or {{name: path}}; got {spec!r}")
    if "test" in named and int(n_test or 0) > 0:  # its results would replace the test split's
        raise ConfigError(
            f"{option}: a test file named 'test' ({named['test']}) and the test split (data.n_test="
            f"{n_test}) would share one name; name the file, e.g. "
            "data.test_path={held_out: test.h5}"
        )
    for name, path in named.items():
        if path.is_dir():
            raise DataError(
                f"{option} {name}: {path} is a directory; expected an HDF5 store file (made by neurodyn generate)"
            )
        check_not_special(path, f"{option} {name}:")
        if not path.is_file():
            raise DataError(f"{option} {name}: file {path} does not exist")
    return named


def build_test_sets(cfg: dict[str, Any], files: dict[str, str | Path] | None = None) -> dict[str, Any]:
    """``{name: dataset}`` of every sample of each test file (``files``, default ``data.test_path``), built
    like the config's test split: whole inputs and targets (steady), full-horizon windows (autoregressive)
    or whole sequences (sequence)."""
    dc = DataConfig.parse(cfg["data"])
    task = _task(cfg)
    out: dict[str, Any] = {}
    named = named_test_files(dc) if files is None else {k: Path(v) for k, v in files.items()}
    steps = training_steps(dc) if task == "sequence" and named else None
    classes = _training_classes(dc) if task == "sequence" and named else None
    for name, path in named.items():
        store = StoredDataset(path)
        ids = np.arange(store.n_samples)
        if task == "steady":
            out[name] = SteadyDataset(store, ids)
        elif task == "sequence":
            out[name] = SequenceDataset(store, ids, classes=classes, pool_from=steps, **_sequence_options(dc))
        else:
            out[name] = TimeWindowDataset(store, ids, t_out=dc.windows.t_out, **_window_options(dc))
    return out
