"""What every dataset generator provides, and the machinery shared by all of them.

A generator is a pure function of (config, seed, sample index): sample ``i`` draws its randomness
from a torch.Generator seeded by ``sample_seed(seed, i)``, so the same sample comes out whatever the
chunking, sharding or device, and a resumed generation matches an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from ...config_types import check_field_types
from ...errors import ConfigError, unknown_name
from ..store import StoreMeta, canonical_json, data_root, write_store


def sample_seed(seed: int, index: int) -> int:
    """A 63-bit seed for sample ``index`` of a dataset with master ``seed`` (independent streams)."""
    state = np.random.SeedSequence(entropy=int(seed), spawn_key=(int(index),)).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def sample_rng(seed: int, index: int) -> torch.Generator:
    """CPU torch.Generator for one sample; draw on CPU, then move to the compute device."""
    return torch.Generator().manual_seed(sample_seed(seed, index))


class Generator(ABC):
    """Base class of dataset generators.

    Subclasses declare what they make in the class statement (or as class attributes)::

        class DarcyGenerator(Generator, name="darcy", config=DarcyConfig, inputs=("a",), targets=("u",),
                             chunk_size=50):

    ``name``, ``version`` (default "1"; bump when the output bytes change), ``config`` (the config
    dataclass, ``config_cls``), ``inputs``/``targets`` (field names), ``chunk_size``
    (``default_chunk_size``), optionally ``field_labels`` (field name -> what it is, with its units where it
    has some, e.g. ``{"a": "permeability", "u": "solution"}``: the plots name the fields with them), and
    implement ``generate``. ``validate`` refuses impossible configs before
    any work starts.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    config_cls: ClassVar[type]
    inputs: ClassVar[tuple[str, ...]]
    targets: ClassVar[tuple[str, ...]]
    default_chunk_size: ClassVar[int] = 32
    field_labels: ClassVar[dict[str, str]] = {}

    def __init_subclass__(
        cls,
        *,
        name: str | None = None,
        version: str | None = None,
        config: type | None = None,
        inputs: tuple[str, ...] | None = None,
        targets: tuple[str, ...] | None = None,
        chunk_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        declared = {
            "name": name,
            "version": version,
            "config_cls": config,
            "inputs": inputs,
            "targets": targets,
            "default_chunk_size": chunk_size,
        }
        for attr, value in declared.items():
            if value is not None:
                setattr(cls, attr, value)

    def make_config(self, config: Any = None, **overrides: Any):
        """The config dataclass from ``config`` (a dataclass or mapping) updated with ``overrides``, checked.

        Unknown option names, a value of the wrong simple type (``resolution='abc'`` for an int field) and
        what :meth:`validate` refuses each raise one ConfigError naming the generator and the option. A string
        that reads as the declared number (``nu=1e-3``, a string to YAML 1.1) becomes that number; other values
        are kept as given (an int for a float field stays an int), so a config's identity is unchanged."""
        values: dict[str, Any] = {}
        if config is not None:
            values.update(dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config))
        values.update(overrides)
        fields = {f.name for f in dataclasses.fields(self.config_cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ConfigError(
                f"generator {self.name!r} has no option(s) {', '.join(unknown)}; its options "
                f"are: {', '.join(sorted(fields))}"
            )
        checked = check_field_types(
            self.config_cls, values, "", subject=f"generator {self.name!r} option", numeric_strings=True
        )
        values.update({k: checked[k] for k, v in values.items() if isinstance(v, str)})  # "1e-3" -> 0.001 only
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        cfg = self.config_cls(**values)
        self.validate(cfg)
        return cfg

    def validate(self, cfg) -> None:
        """Raise ConfigError naming the field when ``cfg`` is impossible. Default: accept."""
        return None

    @abstractmethod
    def generate(self, cfg, ids: np.ndarray, seed: int, device: torch.device) -> dict[str, np.ndarray]:
        """Samples ``ids`` as ``{"fields/<name>": (len(ids), ...), "params/<name>": ...}`` numpy arrays."""

    def coords(self, cfg) -> dict[str, np.ndarray]:
        """Coordinates shared by every sample (stored under /coords)."""
        return {}

    def tag(self, cfg) -> str:
        """Short human-readable part of the file name (e.g. ``r32``)."""
        return ""

    # ----------------------------------------------------------------------------------------------
    def default_path(self, cfg, n_samples: int, seed: int) -> Path:
        ident = canonical_json(
            {"g": self.name, "v": self.version, "c": dataclasses.asdict(cfg), "n": n_samples, "s": seed}
        )
        digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
        tag = self.tag(cfg)
        stem = "_".join(p for p in (self.name, tag, f"n{n_samples}", f"s{seed}", digest) if p)
        return data_root() / self.name / f"{stem}.h5"

    def run(
        self,
        cfg,
        n_samples: int,
        seed: int = 0,
        path: str | Path | None = None,
        device: str | torch.device = "cpu",
        chunk_size: int | None = None,
        shard: tuple[int, int] = (0, 1),
        progress: Any = None,
    ) -> Path | None:
        """Generate (or reuse) the store file for ``n_samples`` samples; returns its path (``None`` while other
        shards still have chunks to make).

        ``path`` defaults to :meth:`default_path`. An existing file is reused only when it holds this generator,
        version, config, seed and sample count (else one DataError naming what differs; see
        :func:`~neurodyn.data.store.write_store`). ``chunk_size`` (default ``default_chunk_size``; 0 is refused, not
        replaced) must be >= 1. ``progress``: the one idiom of :mod:`neurodyn.progress` (None: a bar on a terminal,
        lines in a log; False: nothing)."""
        if n_samples < 1:
            raise ConfigError(f"n_samples must be >= 1, got {n_samples}")
        chunk_size = self.default_chunk_size if chunk_size is None else chunk_size
        device = torch.device(device)
        path = Path(path) if path is not None else self.default_path(cfg, n_samples, seed)
        meta = StoreMeta(
            generator=self.name,
            generator_version=self.version,
            config=dataclasses.asdict(cfg),
            seed=seed,
            n_samples=n_samples,
            chunk_size=chunk_size,
            inputs=self.inputs,
            targets=self.targets,
        )
        shards = f", shard {shard[0]}/{shard[1]}" if shard[1] > 1 else ""
        return write_store(
            path,
            meta,
            lambda ids: self.generate(cfg, ids, seed, device),
            coords=self.coords(cfg),
            shard=shard,
            progress=progress,
            what=f"generating {self.name} into {path.name}{shards}",
        )


_GENERATORS: dict[str, Generator] = {}


def register_generator(cls: type[Generator]) -> type[Generator]:
    _GENERATORS[cls.name] = cls()
    return cls


def get_generator(name: str) -> Generator:
    _import_all()
    if name not in _GENERATORS:
        raise unknown_name("generator", name, _GENERATORS)
    return _GENERATORS[name]


def available_generators() -> list[str]:
    _import_all()
    return sorted(_GENERATORS)


def _import_all() -> None:
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):  # the generator files beside this one
        if info.name not in ("base",) and not info.name.startswith("_"):
            importlib.import_module(f"{__package__}.{info.name}")


def as_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()


def check_positive(cfg, *names: str) -> None:
    for n in names:
        v = getattr(cfg, n)
        if not v > 0:
            raise ConfigError(f"{type(cfg).__name__}.{n} must be > 0, got {v}")


def check_source(generator: str, cfg, choices: Sequence[str], needs_file: Sequence[str], file_hint: str) -> None:
    """``cfg.source`` is one of ``choices``; the ``needs_file`` sources need ``cfg.source_path`` (``file_hint``)."""
    if cfg.source not in choices:
        raise ConfigError(f"{generator} source must be {', '.join(choices[:-1])} or {choices[-1]}, got {cfg.source!r}")
    if cfg.source in needs_file and not cfg.source_path:
        raise ConfigError(f"{generator} source={cfg.source} needs data.source_path ({file_hint})")


_REAL_FILES: dict[tuple, Any] = {}


def real_file(generator: str, source: str, path: str | Path, kind: str, note: bool = True, **options: Any):
    """The sequence store of the real file ``path`` as the converter reads it (``read_public(path, kind=kind,
    **options)``): a generator's real-file source goes through the one reader of the format. ``note`` prints one
    line (a warning) naming the route for real files, ``neurodyn convert``. Kept per (file, modification time,
    kind, options), so a generator's chunks read the file once."""
    from ..formats import read_public

    p = Path(path)
    try:
        stamp = p.stat().st_mtime_ns
    except OSError:
        stamp = None  # the reader says the file does not exist
    key = (str(p), stamp, kind, tuple(sorted(options.items())))
    if key not in _REAL_FILES:
        if note:
            import warnings

            opts = "".join(f" {k}={v}" for k, v in sorted(options.items()))
            warnings.warn(
                f"{generator} source={source} reads {p} through the converter; real files enter through "
                f"`neurodyn convert {p} kind={kind}{opts} --out STORE`, then train with data.path=STORE",
                stacklevel=2,
            )
        _REAL_FILES.clear()  # one file at a time: they can be large
        _REAL_FILES[key] = read_public(p, kind=kind, **options)
    return _REAL_FILES[key]


def solve_grid(generator: str, cfg, minimum: int, nodes: bool) -> int:
    """The solver's grid size ``cfg.solve_resolution`` (default ``cfg.resolution``), checked: the resolution is at
    least ``minimum`` and the solver grid subsamples to it (``nodes``: ``solve - 1`` a multiple of
    ``resolution - 1``, as for grids with their boundary nodes; else cells, ``solve`` a multiple of it)."""
    res = cfg.resolution
    if res < minimum:
        raise ConfigError(f"{generator} resolution must be >= {minimum}{'' if nodes else ' cells'}, got {res}")
    fine = cfg.solve_resolution or res
    if fine < res or ((fine - 1) % (res - 1) if nodes else fine % res):
        expected = (
            "solve_resolution - 1 to be a multiple of resolution - 1 (e.g. 421 -> 85)"
            if nodes
            else "a multiple of it (e.g. 1024 -> 128)"
        )
        raise ConfigError(
            f"{generator} solve_resolution {fine} cannot be subsampled to resolution {res}: expected {expected}"
        )
    return fine


@contextlib.contextmanager
def single_threaded_on_cpu(device: torch.device):
    """Run torch CPU kernels on one thread inside the block (restoring the setting after).

    The 1-D solvers work on small arrays (a block of ~16k values): torch's CPU FFT and indexing kernels
    split them over ``torch.get_num_threads()`` threads, which gains little on an idle machine and
    collapses on a shared one (measured: batched 512-point FFTs 40x slower with 2 threads than with 1 at
    load 15 on 2 cores). Parallelise generation with ``--shard`` instead.
    """
    if torch.device(device).type != "cpu" or torch.get_num_threads() == 1:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)
