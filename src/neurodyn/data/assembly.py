"""Datasets of an experiment config: the store file (generated when missing), the splits, the windows
or sequences a task trains on, and the normalizers fitted on the training split.

``build_data(cfg)`` is the one entry point of training (and of the benchmark drivers that train);
``build_split_sets(cfg, names)`` reads the asked splits of a trained run's existing store file (nothing generated,
no normalizer fitted: evaluation uses the checkpoint's).
``build_test_sets(cfg)`` adds the separate test files of ``data.test_path`` (one path, a list of paths, or
``{name: path}``), each read whole with the same windows / sequence options as the test split, so a model
trained at one resolution can be scored at others (the normalizers fitted on the training split are applied
to them; see :mod:`neurodyn.data.normalize` for pointwise statistics on another grid).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError
from ..files import check_not_special
from .datasets import SteadyDataset, TimeWindowDataset, split_indices
from .generators import get_generator
from .normalize import Normalizer
from .sequences import SequenceDataset
from .store import StoredDataset

SPLIT_KEYS = ("generator", "path", "test_path", "n_train", "n_val", "n_test", "seed", "chunk_size",
              "normalize_input", "normalize_target", "normalize_reduce", "shuffle")
WINDOW_KEYS = ("t_in", "t_out", "step", "time_stride", "t_start", "window_stride", "context_fields",
               "context_params", "frames_as_channels")
SEQUENCE_KEYS = ("window", "relative_time", "split_param", "train_values",  # (max_len belongs to the generators)
                 "missing", "observed_channels", "drop_steps", "drop_seed",  # see data.sequences.SequenceDataset
                 "max_steps")
DATA_KEYS = SPLIT_KEYS + WINDOW_KEYS + SEQUENCE_KEYS
TASKS = ("steady", "autoregressive", "sequence")


VAL_FRACTION = 0.1  # data.n_val "auto": this fraction of data.n_train validates


def split_sizes(data_cfg: dict[str, Any]) -> tuple[int, int, int]:
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
    integer ``n_val``) trains, the validation split carved from them as above.
    """
    _check_counts(data_cfg)
    n_test = int(data_cfg.get("n_test", 0))
    n_val = data_cfg.get("n_val", "auto")
    n_train = data_cfg.get("n_train", 0)
    if n_train == "all":
        n_train = _all_samples(data_cfg) - n_test - (n_val if isinstance(n_val, int) and n_val > 0 else 0)
        if n_train < 1:
            raise ConfigError(f"data.n_train=all leaves no training sample in {data_cfg['path']} after data.n_test="
                              f"{n_test} and data.n_val={n_val}")
    n_train = int(n_train)
    if n_val == "auto":
        carved = max(1, round(VAL_FRACTION * n_train)) if n_train >= 2 else 0
        return n_train - carved, carved, n_test
    if isinstance(n_val, bool) or not isinstance(n_val, int) or n_val < 0:
        raise ConfigError(f"data.n_val must be a whole number >= 0 or 'auto'; got {n_val!r}")
    return n_train, n_val, n_test


def _check_counts(data_cfg: dict[str, Any]) -> None:
    """data.n_train (``all`` or a whole number >= 0) and data.n_test (a whole number >= 0), as given."""
    for key in ("n_train", "n_test"):
        value = data_cfg.get(key, 0)
        if key == "n_train" and value == "all":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            also = ", or all (every sample of data.path)" if key == "n_train" else ""
            raise ConfigError(f"data.{key} must be a whole number >= 0{also}; got {value!r}")


def _all_samples(data_cfg: dict[str, Any]) -> int:
    """Samples of the store file ``data.path`` (what ``data.n_train: all`` counts from)."""
    if not data_cfg.get("path"):
        raise ConfigError("data.n_train=all counts the samples of a given file: set data.path=STORE (a generator "
                          "makes the samples the splits ask for, so give it a number)")
    return StoredDataset(data_cfg["path"], verify=False).n_samples


def stored_samples(data_cfg: dict[str, Any]) -> int:
    """Samples the data file of a data section holds: train, validation (unless carved from train) and test."""
    n_train, n_val, n_test = split_sizes(data_cfg)
    return n_train + n_val + n_test


def data_options(data_cfg: dict[str, Any]) -> dict[str, Any]:
    """The generator's own options: everything in ``data`` that is not a split/normalisation key."""
    return {k: v for k, v in data_cfg.items() if k not in DATA_KEYS}


def without_generator(data_cfg: dict[str, Any]) -> dict[str, Any]:
    """The data section of a run on a file (``data.path``) without the generator and its options, which describe
    data the run never made nor read (a preset's ``generator: darcy, resolution: 32`` under a user's file);
    unchanged without ``data.path``."""
    if not data_cfg.get("path"):
        return data_cfg
    return {k: v for k, v in data_cfg.items() if k in DATA_KEYS and k != "generator"}


def file_record(path: str | Path) -> dict[str, Any]:
    """What a run records of the store file it read: ``path``, ``sha256`` of the file's bytes, the ``shapes`` of
    its arrays (``fields/...``: ``(N, ...)``) and, for a converted file, ``converted_from`` (each source file's
    name, size and sha256)."""
    from .formats.convert import file_digest

    path = Path(path)
    store = StoredDataset(path, verify=False)
    out = {"path": str(path), "sha256": file_digest(path),
           "shapes": {k: list(map(int, v)) for k, v in sorted(store.shapes.items())}}
    if store.config.get("source"):  # a conversion (neurodyn convert): the files it was made from
        out["converted_from"] = store.config["source"]
    return out


def ensure_dataset(data_cfg: dict[str, Any], device: str | torch.device = "cpu", progress: Any = None,
                   is_main: bool = True, barrier: Callable[[], None] | None = None) -> Path:
    """Path of the store file the config describes, generating it first when missing (``progress``: the one idiom
    of :mod:`neurodyn.progress`).

    Under several processes only the main one (``is_main``) generates; ``barrier`` (called by every
    process) then waits for it."""
    if data_cfg.get("path"):
        return Path(data_cfg["path"])
    if "generator" not in data_cfg:
        raise ConfigError("the data section needs either 'generator' (to make the data) or 'path' (a store file: "
                          "data.path=STORE, e.g. one made by `neurodyn convert FILE`)")
    gen = get_generator(data_cfg["generator"])
    gcfg = gen.make_config(**data_options(data_cfg))
    n = stored_samples(data_cfg)
    seed = int(data_cfg.get("seed", 0))
    path = gen.default_path(gcfg, n, seed)
    if is_main:  # an existing file is checked to hold this generator, config, seed and count (or refused)
        gen.run(gcfg, n, seed=seed, path=path, device=device, chunk_size=data_cfg.get("chunk_size"),
                progress=progress)
    if barrier is not None:
        barrier()
    return path


def build_data(cfg: dict[str, Any], device: str | torch.device = "cpu", progress: Any = None,
               is_main: bool = True, barrier: Callable[[], None] | None = None, *,
               train_window_steps: int = 1) -> dict[str, Any]:
    """Store file, split datasets and fitted normalizers of an experiment config.

    Returns ``path``, ``store``, ``sets`` (``train`` and, when the config has them, ``val`` / ``test``)
    and the normalizers fitted on the training split: ``x_norm`` / ``y_norm`` (steady and sequence
    tasks), ``u_norm`` plus ``cf_norm`` / ``ctx_norm`` when there are context fields / parameters
    (autoregressive). ``is_main`` / ``barrier``: see :func:`ensure_dataset`. ``train_window_steps``: model
    steps one autoregressive training window unrolls (the trainer's ``TrainConfig.window_steps``; this layer
    reads only the config's ``data`` and ``task``, never its ``train`` section)."""
    d = cfg["data"]
    task = cfg.get("task", "steady")
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    path = ensure_dataset(d, device, progress, is_main, barrier)
    store = StoredDataset(path)
    if task == "sequence":
        return _sequence_data(cfg, path, store)
    n_train, n_val, n_test = split_sizes(d)
    splits = _nonempty(split_indices(store.n_samples, n_train, n_test, n_val))
    reduce = d.get("normalize_reduce", "pointwise")
    out: dict[str, Any] = {"path": path, "store": store}
    if task == "steady":
        sets = {name: SteadyDataset(store, ids) for name, ids in splits.items()}
        if sets["train"].has_mask and reduce != "channel":
            raise ConfigError(f"dataset file {path} holds point clouds of different sizes (padded, with "
                              f"fields/mask); per-point statistics (data.normalize_reduce={reduce}) mean nothing "
                              "there: set data.normalize_reduce=channel")
        x_train, y_train = sets["train"].tensors()
        out["x_norm"] = Normalizer(d.get("normalize_input", "gaussian"), reduce).fit(x_train)
        out["y_norm"] = Normalizer(d.get("normalize_target", "gaussian"), reduce).fit(y_train)
    else:
        sets = _window_sets(d, store, splits, train_window_steps)
        train = sets["train"]
        frames = torch.stack([train.trajectory(j) for j in range(len(train.ids))])  # (N, T', *spatial, C)
        out["u_norm"] = Normalizer(d.get("normalize_input", "gaussian"), reduce).fit(frames.flatten(0, 1))
        if train.context_fields:
            cf = torch.stack([train.context_at(j, f) for j in range(len(train.ids)) for f in (0, train.n_frames - 1)])
            out["cf_norm"] = Normalizer("gaussian", reduce).fit(cf)
        if train.context_params:
            ctx = torch.stack([train[j * train.windows_per_sample]["ctx"] for j in range(len(train.ids))])
            out["ctx_norm"] = Normalizer("gaussian", "pointwise").fit(ctx)
    out["sets"] = sets
    return out


def _sequence_data(cfg: dict[str, Any], path: Path, store: StoredDataset) -> dict[str, Any]:
    """Sequence splits (by index, or by a per-sample parameter) and the input/target normalizers."""
    d = cfg["data"]
    splits = _sequence_splits(d, path, store)
    sets = {name: SequenceDataset(store, ids, pool_from=_steps(store), **_sequence_options(d))
            for name, ids in _nonempty(splits).items()}
    train = sets["train"]
    out: dict[str, Any] = {"path": path, "store": store, "sets": sets}
    out["x_norm"] = Normalizer(d.get("normalize_input", "gaussian"), "channel").fit(train.valid_steps())
    if train.kind == "regression":
        out["y_norm"] = Normalizer(d.get("normalize_target", "gaussian"), "channel").fit(train.targets())
    return out


def _sequence_splits(d: dict[str, Any], path: Path, store: StoredDataset) -> dict[str, np.ndarray]:
    """Sample ids of each sequence split: by index (shuffled with ``data.shuffle``), or by a per-sample parameter."""
    n_train, n_val, n_test = split_sizes(d)
    if d.get("split_param"):
        key = f"params/{d['split_param']}"
        if key not in store.shapes:
            raise ConfigError(f"data.split_param: dataset file {path} has no {key}; it has {store.keys('params')}")
        values = store.read(key)
        chosen = np.isin(values, np.asarray(list(d.get("train_values", [0]))))
        pool, rest = np.flatnonzero(chosen), np.flatnonzero(~chosen)
        if not n_train and d.get("n_val", "auto") == "auto":  # the whole pool, validation carved from it
            n_val = max(1, round(VAL_FRACTION * len(pool))) if len(pool) >= 2 else 0
            n_train = len(pool) - n_val
        train_ids = pool[:n_train] if n_train else pool[:len(pool) - n_val]
        # validation from the training conditions (in distribution): the other conditions stay unseen until the test
        splits = {"train": train_ids, "val": pool[len(train_ids):len(train_ids) + n_val], "test": rest}
        if not len(train_ids):
            raise ConfigError(f"data.split_param {d['split_param']}: no sample has a value in {d.get('train_values')}")
        if len(train_ids) + len(splits["val"]) < n_train + n_val:
            raise ConfigError(f"data.split_param {d['split_param']}: {len(pool)} samples have a value in "
                              f"{d.get('train_values')}, fewer than data.n_train + data.n_val = {n_train + n_val}")
    else:
        splits = split_indices(store.n_samples, n_train, n_test, n_val)
        if d.get("shuffle"):  # a file in class order (most UEA files): random splits, a fixed draw of data.seed
            perm = np.random.default_rng(int(d.get("seed", 0))).permutation(store.n_samples)
            splits = {name: np.sort(perm[ids]) for name, ids in splits.items()}
    return splits


def stored_path(data_cfg: dict[str, Any], why: str = "") -> Path:
    """Path of the store file a data section describes, which must exist: never generated here (a trained run's
    data is read, not remade). One DataError naming the file and ``why`` it was wanted otherwise."""
    if data_cfg.get("path"):
        path = Path(data_cfg["path"])
    elif "generator" in data_cfg:
        gen = get_generator(data_cfg["generator"])
        path = gen.default_path(gen.make_config(**data_options(data_cfg)), stored_samples(data_cfg),
                                int(data_cfg.get("seed", 0)))
    else:
        raise ConfigError(f"the data section {data_cfg!r} names no store file (neither 'path' nor 'generator')"
                          f"{'; ' + why if why else ''}")
    check_not_special(path, "data file")
    if not path.is_file():
        raise DataError(f"the data file {path} does not exist{'; ' + why if why else ''}: make it again with "
                        "`neurodyn generate` (same preset and data options), or give files with --data FILE")
    return path


def build_split_sets(cfg: dict[str, Any], names: Sequence[str] = ("test",), *,
                     train_window_steps: int = 1) -> dict[str, Any]:
    """``{name: dataset}`` of the asked splits (``train`` / ``val`` / ``test``) of a config's existing store file,
    exactly as :func:`build_data` splits and windows it, without generating data nor fitting normalizers (a trained
    run's checkpoint holds its normalizers). A split the config leaves empty is absent from the result."""
    d = cfg["data"]
    task = cfg.get("task", "steady")
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    unknown = sorted(set(names) - {"train", "val", "test"})
    if unknown:
        raise ConfigError(f"unknown split(s) {unknown}; the splits are train, val and test")
    path = stored_path(d, f"it holds the {'/'.join(names)} split of this run")
    store = StoredDataset(path)
    if task == "sequence":
        splits = _nonempty(_sequence_splits(d, path, store))
        return {n: SequenceDataset(store, splits[n], pool_from=_steps(store), **_sequence_options(d))
                for n in names if n in splits}
    n_train, n_val, n_test = split_sizes(d)
    splits = _nonempty(split_indices(store.n_samples, n_train, n_test, n_val))
    if task == "steady":
        return {n: SteadyDataset(store, splits[n]) for n in names if n in splits}
    sets = _window_sets(d, store, splits, train_window_steps)
    return {n: sets[n] for n in names if n in sets}


def _window_sets(d: dict[str, Any], store: StoredDataset, splits: dict[str, Any], unroll: int) -> dict[str, Any]:
    """Training windows of ``unroll`` model steps (of ``data.step`` frames each); full-horizon windows to evaluate."""
    step = int(d.get("step", 1))
    common = _window_options(d)
    sets = {"train": TimeWindowDataset(store, splits["train"], t_out=unroll * step,
                                       stride=int(d.get("window_stride", 1)), **common)}
    for name in ("val", "test"):
        if name in splits and len(splits[name]):
            sets[name] = TimeWindowDataset(store, splits[name], t_out=d.get("t_out"), **common)
    return sets


def _nonempty(splits: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The splits that hold samples (``n_test = 0``: no test split, e.g. when test files are given)."""
    return {name: ids for name, ids in splits.items() if name == "train" or len(ids)}


def _window_options(d: dict[str, Any]) -> dict[str, Any]:
    """TimeWindowDataset options shared by the training windows and every evaluation set."""
    return dict(t_in=int(d.get("t_in", 1)), time_stride=int(d.get("time_stride", 1)),
                t_start=int(d.get("t_start", 0)), context_fields=tuple(d.get("context_fields", ())),
                context_params=tuple(d.get("context_params", ())),
                frames_as_channels=bool(d.get("frames_as_channels", True)))


def _sequence_options(d: dict[str, Any]) -> dict[str, Any]:
    return dict(window=int(d.get("window", 0)), window_stride=int(d.get("window_stride", 1)),
                relative_time=bool(d.get("relative_time", True)), missing=d.get("missing", "ffill"),
                observed_channels=bool(d.get("observed_channels", False)), drop_steps=d.get("drop_steps", 0.0),
                drop_seed=int(d.get("drop_seed", d.get("seed", 0))), max_steps=d.get("max_steps", 0))


def _steps(store: StoredDataset) -> int:
    """``T_max`` of a sequence store: the time length of its ``fields/x``."""
    return int(store.shapes["fields/x"][1])


def training_steps(d: dict[str, Any]) -> int | None:
    """``T_max`` of the run's training file, from which every split and test file takes its time-pooling factor
    (``data.max_steps``): the file itself where it exists, else the shapes the run recorded of it
    (``data.file.shapes``); ``None`` when neither is known (a test file then pools by its own length)."""
    try:
        path = stored_path(d) if d.get("path") or "generator" in d else None
    except (ConfigError, DataError):
        path = None
    if path is not None:
        return _steps(StoredDataset(path, verify=False))
    shape = ((d.get("file") or {}).get("shapes") or {}).get("fields/x")
    return int(shape[1]) if shape and len(shape) == 3 else None


def _training_classes(d: dict[str, Any]) -> list[str] | None:
    """The class names of the training file ``data.path`` (a converted store), to read a test file's labels by
    name; ``None`` when there is no such file or it names no classes."""
    from .sequences import store_classes

    path = d.get("path")
    if not path or not Path(path).is_file():
        return None
    return store_classes(StoredDataset(path, verify=False))


def named_test_files(data_cfg: dict[str, Any], option: str = "data.test_path") -> dict[str, Path]:
    """The named test files of ``data.test_path``: a path (named by its stem), a list of paths, or
    ``{name: path}``. Every file must exist."""
    spec = data_cfg.get("test_path")
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
                raise ConfigError(f"data.test_path lists two files named {stem!r}; give names as "
                                  "{name: path}, e.g. data.test_path={test16: a.h5, test32: b.h5}")
            named[stem] = Path(item)
    else:
        raise ConfigError(f"data.test_path must be a path, a list of paths or {{name: path}}; got {spec!r}")
    if "test" in named and int(data_cfg.get("n_test", 0) or 0) > 0:  # its results would replace the test split's
        raise ConfigError(f"{option}: a test file named 'test' ({named['test']}) and the test split (data.n_test="
                          f"{data_cfg['n_test']}) would share one name; name the file, e.g. "
                          "data.test_path={held_out: test.h5}")
    for name, path in named.items():
        if path.is_dir():
            raise DataError(f"{option} {name}: {path} is a directory; expected an HDF5 store file (made by "
                            "neurodyn generate)")
        check_not_special(path, f"{option} {name}:")
        if not path.is_file():
            raise DataError(f"{option} {name}: file {path} does not exist")
    return named


def build_test_sets(cfg: dict[str, Any], files: dict[str, str | Path] | None = None) -> dict[str, Any]:
    """``{name: dataset}`` of every sample of each test file (``files``, default ``data.test_path``), built
    like the config's test split: whole inputs and targets (steady), full-horizon windows (autoregressive)
    or whole sequences (sequence)."""
    d = cfg["data"]
    task = cfg.get("task", "steady")
    out: dict[str, Any] = {}
    for name, path in (named_test_files(d) if files is None else {k: Path(v) for k, v in files.items()}).items():
        store = StoredDataset(path)
        ids = np.arange(store.n_samples)
        if task == "steady":
            out[name] = SteadyDataset(store, ids)
        elif task == "sequence":
            out[name] = SequenceDataset(store, ids, classes=_training_classes(d), pool_from=training_steps(d),
                                        **_sequence_options(d))
        else:
            out[name] = TimeWindowDataset(store, ids, t_out=d.get("t_out"), **_window_options(d))
    return out
