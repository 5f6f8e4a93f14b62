"""The ``data`` section of an experiment as a typed config: :class:`DataConfig`, validated when it is made.

Presets and overrides keep their flat spelling (``data.n_train=100``, ``data.normalize_input=none``,
``data.t_in=10``, ``data.missing=mean``); :meth:`DataConfig.parse` reads a flat section into nested sections, by
the one table :data:`FLAT_KEYS` (key -> section and field), and everything that is not a data key is the
generator's own options (``resolution``, ``nu``, ...), typed and checked by that generator's config::

    DataConfig
      generator, path, test_path, chunk_size, file,    where the data comes from (file: what a run recorded of it;
      arrays                                           arrays: arrays given in memory, no file)
      options                                          the generator's own options (its config checks them)
      splits     SplitConfig      n_train, n_val, n_test, seed, shuffle, param (split_param), train_values
      normalize  NormalizeConfig  input, target, reduce           (normalize_input / _target / _reduce)
      windows    WindowConfig     t_in, t_out, step, time_stride, t_start, stride (window_stride), context_fields,
                                  context_params, frames_as_channels          (autoregressive tasks; stride also
                                                                              steps the sequence windows)
      sequences  SequenceConfig   window, relative_time, missing, observed_channels, drop_steps, drop_seed,
                                  max_steps                                   (sequence tasks)

Every value is checked in the sections' ``__post_init__`` (one ConfigError naming ``data.<key>`` as the preset
spells it, the value and what it must be), before anything is generated, read or removed; the source (a file, or a
generator and its options) by :meth:`DataConfig.check_source`, where the data would be made or read.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config_types import check_field_types, check_flag, check_whole
from ..errors import ConfigError, check_choice
from .normalize import KINDS, REDUCES

MISSING_FILL = ("ffill", "mean", "drop")


def _count(key: str, value: Any, words: tuple[str, ...], what: str) -> None:
    """A whole number >= 0, or one of ``words`` (``"all"``, ``"auto"``)."""
    if value in words:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"data.{key} must be a whole number >= 0{what}; got {value!r}")


@dataclass
class SplitConfig:
    """Sample counts and order of the splits (the flat keys ``data.n_train`` ...; :func:`neurodyn.data.assembly.
    split_sizes` says what each count means).

    Attributes:
        n_train (int | str, 0): training samples, or "all" (every sample of data.path not in another split).
        n_val (int | str, "auto"): validation samples; "auto": 10 % of n_train carved from its end; 0: none.
        n_test (int, 0): test samples, the last of the file.
        seed (int, 0): the generator's seed, and the draw of shuffled splits.
        shuffle (bool, False): sequence files: random splits (a fixed draw of seed) instead of the file's order.
        param (str | None, None): sequence files: split by this per-sample parameter (data.split_param).
        train_values (list, [0]): with param: the values whose samples train and validate (the rest test).
    """

    n_train: Any = 0
    n_val: Any = "auto"
    n_test: int = 0
    seed: int = 0
    shuffle: bool = False
    param: str | None = None
    train_values: list = field(default_factory=lambda: [0])

    def __post_init__(self) -> None:
        _count("n_train", self.n_train, ("all",), ", or all (every sample of data.path)")
        _count("n_val", self.n_val, ("auto",), " or 'auto'")
        _count("n_test", self.n_test, (), "")
        check_whole("data.seed", self.seed, 0)
        check_flag("data.shuffle", self.shuffle)
        if self.param is not None and not (isinstance(self.param, str) and self.param):
            raise ConfigError(f"data.split_param names a per-sample parameter of the file; got {self.param!r}")
        if not isinstance(self.train_values, (list, tuple)):
            raise ConfigError(f"data.train_values is a list of parameter values; got {self.train_values!r}")


@dataclass
class NormalizeConfig:
    """How inputs and targets are normalised, with statistics of the training split.

    Attributes:
        input (str, "gaussian"): gaussian | minmax | none (data.normalize_input).
        target (str, "gaussian"): gaussian | minmax | none (data.normalize_target).
        reduce (str, "pointwise"): pointwise (a statistic per grid point and channel) | channel (data.normalize_reduce).
    """

    input: str = "gaussian"
    target: str = "gaussian"
    reduce: str = "pointwise"

    def __post_init__(self) -> None:
        check_choice("data.normalize_input", self.input, KINDS)
        check_choice("data.normalize_target", self.target, KINDS)
        check_choice("data.normalize_reduce", self.reduce, REDUCES)


@dataclass
class WindowConfig:
    """The time windows of autoregressive tasks (and the stride of sequence windows).

    Attributes:
        t_in (int, 1): frames the model is given.
        t_out (int | None, None): frames evaluated after them (None: the rest of the trajectory).
        step (int, 1): frames one model call predicts.
        time_stride (int, 1): keep every k-th stored frame.
        t_start (int, 0): frames skipped at the start of every trajectory.
        stride (int, 1): steps between the starts of consecutive training windows (data.window_stride).
        context_fields (list, []): fields given at every step beside the state (e.g. a forcing).
        context_params (list, []): per-sample parameters given to the model (e.g. the viscosity).
        frames_as_channels (bool, True): the t_in frames stacked as channels (else a time axis).
    """

    t_in: int = 1
    t_out: int | None = None
    step: int = 1
    time_stride: int = 1
    t_start: int = 0
    stride: int = 1
    context_fields: list = field(default_factory=list)
    context_params: list = field(default_factory=list)
    frames_as_channels: bool = True

    def __post_init__(self) -> None:
        for key, least in (("t_in", 1), ("step", 1), ("time_stride", 1), ("t_start", 0)):
            check_whole(f"data.{key}", getattr(self, key), least)
        check_whole("data.window_stride", self.stride, 1)
        if self.t_out is not None:
            check_whole("data.t_out", self.t_out, 1)
        for key in ("context_fields", "context_params"):
            value = getattr(self, key)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"data.{key} is a list of names; got {value!r}")
        check_flag("data.frames_as_channels", self.frames_as_channels)


@dataclass
class SequenceConfig:
    """How sequence stores are read (:class:`neurodyn.data.sequence_dataset.SequenceDataset`).

    Attributes:
        window (int, 0): train on windows of this many steps (0: whole sequences).
        relative_time (bool, True): timestamps from each sequence's first one.
        missing (str, "ffill"): a missing value is filled: ffill | mean | drop (the step).
        observed_channels (bool, False): append one 0/1 channel per input channel: observed here.
        drop_steps (float, 0.0): the fraction of each sequence's steps dropped at random (irregular sampling).
        drop_seed (int | None, None): the draw of the dropped steps (None: data.seed).
        max_steps (int | str, 0): pool in time to at most this many steps; "auto": 256 above that; 0: never.
    """

    window: int = 0
    relative_time: bool = True
    missing: str = "ffill"
    observed_channels: bool = False
    drop_steps: float = 0.0
    drop_seed: int | None = None
    max_steps: Any = 0

    def __post_init__(self) -> None:
        check_whole("data.window", self.window, 0)
        check_flag("data.relative_time", self.relative_time)
        check_choice("data.missing", self.missing, MISSING_FILL)
        check_flag("data.observed_channels", self.observed_channels)
        if not (
            isinstance(self.drop_steps, (int, float))
            and not isinstance(self.drop_steps, bool)
            and 0 <= self.drop_steps < 1
        ):
            raise ConfigError(
                f"data.drop_steps is the fraction of each sequence's steps dropped, in [0, 1); got {self.drop_steps!r}"
            )
        if self.drop_seed is not None:
            check_whole("data.drop_seed", self.drop_seed, 0)
        if self.max_steps != "auto":
            check_whole("data.max_steps", self.max_steps, 0)


FLAT_KEYS: dict[str, tuple[str, str]] = {
    **{k: ("splits", k) for k in ("n_train", "n_val", "n_test", "seed", "shuffle", "train_values")},
    "split_param": ("splits", "param"),
    "normalize_input": ("normalize", "input"),
    "normalize_target": ("normalize", "target"),
    "normalize_reduce": ("normalize", "reduce"),
    **{
        k: ("windows", k)
        for k in (
            "t_in",
            "t_out",
            "step",
            "time_stride",
            "t_start",
            "context_fields",
            "context_params",
            "frames_as_channels",
        )
    },
    "window_stride": ("windows", "stride"),
    **{
        k: ("sequences", k)
        for k in ("window", "relative_time", "missing", "observed_channels", "drop_steps", "drop_seed", "max_steps")
    },
}
"""A flat data key of the presets -> ``(section, field)`` of :class:`DataConfig` (the one spelling table)."""
SOURCE_KEYS = ("generator", "path", "test_path", "chunk_size", "file", "arrays")
"""The keys that say where the data comes from (top-level fields of :class:`DataConfig`)."""
DATA_KEYS = tuple(FLAT_KEYS) + SOURCE_KEYS


def all_needs_a_file() -> ConfigError:
    """The error of ``data.n_train=all`` without ``data.path``."""
    return ConfigError(
        "data.n_train=all counts the samples of a given file: set data.path=STORE (a generator makes "
        "the samples the splits ask for, so give it a number)"
    )


@dataclass
class DataConfig:
    """The ``data`` section, typed (module docstring). Make it with :meth:`parse` from a preset's flat section.

    Attributes:
        generator (str | None, None): the generator that makes the data (neurodyn info generators).
        path (str | None, None): a store file to read instead (neurodyn convert FILE makes one).
        test_path (Any, None): separate test files: a path, a list of paths, or {name: path}.
        chunk_size (int | None, None): samples generated or converted at a time.
        file (dict | None, None): what a trained run recorded of its data file (path, sha256, shapes).
        arrays (str | None, None): the data were arrays given in memory, not a file: their digest (the sequence
            estimators: ``sha256:<16 hex digits>``); such a run has no stored split to read again.
        options (dict, {}): the generator's own options (checked by its config).
        splits (SplitConfig): sample counts and order.
        normalize (NormalizeConfig): normalisation of inputs and targets.
        windows (WindowConfig): autoregressive windows.
        sequences (SequenceConfig): how sequence stores are read.
    """

    generator: str | None = None
    path: str | None = None
    test_path: Any = None
    chunk_size: int | None = None
    file: dict | None = None
    arrays: str | None = None
    options: dict = field(default_factory=dict)
    splits: SplitConfig = field(default_factory=SplitConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    windows: WindowConfig = field(default_factory=WindowConfig)
    sequences: SequenceConfig = field(default_factory=SequenceConfig)

    def __post_init__(self) -> None:
        if self.splits.n_train == "all" and not self.path and self.generator:
            raise all_needs_a_file()
        for key in ("generator", "path", "arrays"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"data.{key} is a name; got {value!r}")
        if self.chunk_size is not None:
            check_whole("data.chunk_size", self.chunk_size, 1)

    @classmethod
    def parse(cls, section: Mapping[str, Any] | DataConfig) -> DataConfig:
        """A preset's flat ``data`` section (or a DataConfig, returned as it is) as a DataConfig. Keys that are no
        data key are the generator's options; a run on a file (``data.path``) or on arrays (``data.arrays``) has no
        generator options, so there an unknown key is refused with the closest data key."""
        if isinstance(section, DataConfig):
            return section
        if not isinstance(section, Mapping):
            raise ConfigError(f"the data section must be a mapping of data keys; got {section!r}")
        parts: dict[str, dict[str, Any]] = {name: {} for name in ("splits", "normalize", "windows", "sequences")}
        top: dict[str, Any] = {}
        options: dict[str, Any] = {}
        for key, value in section.items():
            if key in FLAT_KEYS:
                part, name = FLAT_KEYS[key]
                parts[part][name] = value
            elif key in SOURCE_KEYS:
                top[key] = value
            else:
                options[key] = value
        if options and (top.get("path") or top.get("arrays")) and not top.get("generator"):
            key = sorted(options)[0]
            close = difflib.get_close_matches(key, DATA_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            on = "a file" if top.get("path") else "arrays"
            raise ConfigError(
                f"data.{key} is not a data key of a run on {on}{hint}; the data keys are {', '.join(sorted(DATA_KEYS))}"
            )
        sections = {name: _section(name, values) for name, values in parts.items()}
        return cls(**top, options=options, **sections)

    def check_source(self) -> None:
        """One ConfigError unless the section says where its data comes from: a file, or a generator whose options
        its config accepts (checked here, where the data would be made or read, not when the section is parsed: the
        split sizes and the test files are read without them)."""
        if not self.generator and not self.path:
            raise ConfigError(
                "the data section needs either 'generator' (to make the data) or 'path' (a store file: "
                "data.path=STORE, e.g. one made by `neurodyn convert FILE`)"
            )
        if self.splits.n_train == "all" and not self.path:
            raise all_needs_a_file()
        if self.generator and not self.path:
            from .generators import get_generator

            get_generator(self.generator).make_config(**self.options)  # the generator's own checks

    @property
    def drop_seed(self) -> int:
        """The draw of dropped steps: ``data.drop_seed``, else ``data.seed``."""
        return self.splits.seed if self.sequences.drop_seed is None else int(self.sequences.drop_seed)


_SECTION_TYPES = {
    "splits": SplitConfig,
    "normalize": NormalizeConfig,
    "windows": WindowConfig,
    "sequences": SequenceConfig,
}


def _section(name: str, values: dict[str, Any]):
    """The section ``name`` from its fields' values; a value of the wrong type is one ConfigError naming the flat key
    a preset spells (``data.normalize_input``, not the field ``input``)."""
    cls = _SECTION_TYPES[name]
    flat = {fld: key for key, (part, fld) in FLAT_KEYS.items() if part == name}
    typed = {}
    for fld, value in values.items():
        try:
            typed.update(check_field_types(cls, {fld: value}, "data"))
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(f"data.{fld}=", f"data.{flat[fld]}=")) from None
    return cls(**typed)


__all__ = ["DATA_KEYS", "DataConfig", "FLAT_KEYS", "NormalizeConfig", "SequenceConfig", "SplitConfig", "WindowConfig"]
