"""Progress of long steps, one idiom for every command (the trainer's):

===============  ====================  ==========================================================
``progress``     on a terminal         in a log file or a pipe (stderr not a terminal)
===============  ====================  ==========================================================
``None``         a bar                 one line per stage, when it starts (and one when it ends,
                                       with its time, when it took 5 s or more)
``"lines"``      the lines             the lines
``True``         a bar                 a bar
``False``        nothing               nothing
===============  ====================  ==========================================================

The command line maps its flags onto it: no flag is ``None``; ``train --no-progress`` is ``"lines"`` (no bar, the
lines stay) and ``--quiet`` is ``False`` (``compare`` the same); ``generate`` / ``convert`` / ``evaluate`` /
``predict --no-progress`` is ``False`` (their output is only their result). Bars and stage lines go to stderr,
so stdout keeps a command's result (a path, a table, JSON); the trainer prints its header and epoch lines on stdout.

A :class:`Stage` is one long step of ``total`` units (samples, series, chunks). Its first line says what it does
and, when the time is estimated before it starts (``estimate``: seconds, e.g. DTW 1-NN: a few pairs timed, times
the pairs to come) and exceeds a minute, about how long it will take; a bar says the same before it starts. Without
an estimate, in lines mode, the first units' pace is extrapolated once and said when the rest exceeds a minute
(a bar shows its own rate and time left). A stage of 5 s or more closes with a line saying how long it took.

:func:`evaluate_stage` is a task's evaluation pass (``task.evaluate(model, batches)``) as one stage, estimated before
it starts by the model itself where it can (``model.predict_seconds(n) -> (seconds, what was timed)``:
:func:`predict_estimate`; the fitted baselines of :mod:`neurodyn.baselines`, whose DTW 1-NN can take hours).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .errors import ConfigError

__all__ = [
    "CLOSING_LINE_SECONDS",
    "LONG_SECONDS",
    "Stage",
    "progress_style",
    "duration",
    "evaluate_stage",
    "predict_estimate",
]

LONG_SECONDS = 60.0
"""A stage estimated to take longer says so before it starts."""
CLOSING_LINE_SECONDS = 5.0
"""In lines mode, a stage that took this long or longer closes with a line saying how long (a shorter one has its
one line, when it starts)."""

T = TypeVar("T")


def progress_style(progress: Any) -> str:
    """``"bar"``, ``"lines"`` or ``"off"`` for a ``progress`` setting (module docstring); anything else is one
    ConfigError."""
    if progress is None:
        return "bar" if sys.stderr.isatty() else "lines"
    if progress is True:
        return "bar"
    if progress is False:
        return "off"
    if progress == "lines":
        return "lines"
    raise ConfigError(
        f"progress must be None (a bar on a terminal, else lines), 'lines', True (a bar) or False "
        f"(nothing); got {progress!r}"
    )


def duration(seconds: float) -> str:
    """``seconds`` for a person: ``0.4 s``, ``45 s``, ``3.2 min``, ``1.5 h``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Stage:
    """One long step of ``total`` ``unit`` s, shown as the ``progress`` setting says (module docstring).

    ``with Stage("generating darcy into darcy_r16.h5", 1200, "sample", progress) as stage: ... stage.update(n)``;
    :meth:`track` counts the items of an iterable as they are consumed. ``estimate``: the seconds the stage is
    expected to take, measured before it starts (None: not estimated); ``detail``: what the estimate rests on.
    Lines go to ``stream`` (stderr)."""

    def __init__(
        self,
        what: str,
        total: int,
        unit: str = "sample",
        progress: Any = None,
        estimate: float | None = None,
        detail: str = "",
        stream=None,
    ):
        self.what, self.total, self.unit = what, int(total), unit
        self.style = progress_style(progress)
        self.estimate, self.detail = estimate, detail
        self.stream = stream
        self.done = 0
        self._bar = None
        self._told = False
        self._t0 = 0.0

    def _units(self, n: int) -> str:
        plural = "" if n == 1 or self.unit.endswith("s") else "s"  # 1 sample, 2 samples, 2 series
        return f"{n:,} {self.unit}{plural}"

    def _say(self, text: str) -> None:
        print(text, file=self.stream or sys.stderr, flush=True)

    def __enter__(self) -> Stage:
        self._t0 = time.perf_counter()
        if self.style == "off":
            return self
        about = ""
        if self.estimate is not None and self.estimate > LONG_SECONDS:
            about = f", about {duration(self.estimate)}" + (f" ({self.detail})" if self.detail else "")
            self._told = True
        if self.style == "lines":
            self._say(f"{self.what}: {self._units(self.total)}{about} ...")
        else:
            if about:
                self._say(f"{self.what}: {self._units(self.total)}{about}")
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=self.total,
                desc=self.what,
                unit=self.unit,
                leave=False,
                dynamic_ncols=True,
                file=self.stream or sys.stderr,
            )
        return self

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.style == "lines" and not self._told and 0 < self.done < self.total:
            elapsed = time.perf_counter() - self._t0
            rest = elapsed / self.done * (self.total - self.done)
            self._told = True  # one extrapolation, from the first units
            if rest > LONG_SECONDS:
                self._say(
                    f"{self.what}: about {duration(rest)} more ({self._units(self.done)} took {duration(elapsed)})"
                )

    def track(self, items: Iterable[T], size: Callable[[T], int] = lambda item: 1) -> Iterator[T]:
        """The items of ``items``, each counted (``size(item)`` units) once the consumer asks for the next."""
        for item in items:
            yield item
            self.update(size(item))

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._bar is not None:
            self._bar.close()
        elapsed = time.perf_counter() - self._t0
        if self.style == "lines" and exc_type is None and elapsed >= CLOSING_LINE_SECONDS:
            self._say(f"{self.what}: done, {self._units(self.done or self.total)} in {duration(elapsed)}")
        return False


def predict_estimate(model: Any, n: int) -> tuple[float | None, str]:
    """The seconds ``model`` should take to predict ``n`` samples, measured before it starts by the models that
    can (``predict_seconds(n) -> (seconds, what was timed)``: the fitted baselines, whose DTW 1-NN can take hours),
    and what the estimate rests on; ``(None, "")`` for the others (their stages extrapolate their first batches)."""
    measure = getattr(model, "predict_seconds", None)
    found = measure(n) if callable(measure) else None
    return found if found is not None else (None, "")


def evaluate_stage(
    task: Any, model: Any, batches: Iterable[dict[str, Any]], n: int, what: str, progress: Any = False, **kwargs: Any
) -> dict[str, Any]:
    """``task.evaluate(model, batches, **kwargs)`` as one :class:`~neurodyn.progress.Stage` of ``n`` samples
    (``what``: its name; ``progress``: the one idiom), with the model's estimate (:func:`predict_estimate`)."""
    estimate, detail = predict_estimate(model, n) if progress is not False else (None, "")
    with Stage(what, n, "sample", progress, estimate=estimate, detail=detail) as stage:
        return task.evaluate(model, stage.track(batches, lambda b: len(b["x"])), **kwargs)
