"""What a table's runs cost, estimated from the records: the seconds per epoch the records measured for the same
preset (and model section) at the same scale, times the epochs and seeds still to run.

:func:`index` reads every record under ``lab/records`` that names its preset, scale and training time;
:func:`estimate` gives each row its seconds per epoch and says what the number rests on:

* ``measured``: the median over the records of the same preset, model overrides and scale;
* ``scaled``: no record at this scale: the median at another scale (cpu first) times the ratio of the work of an
  epoch (training samples x grid points, from the presets' data sections) -- a lower bound when scaling up, since
  the paper-scale model is larger too;
* no record of the preset at all: the row has no estimate (``None``), and the command says so.

GPU-hours: no record holds a GPU timing yet, so a ``--device cuda`` estimate is the CPU estimate, labelled as an
upper bound.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from neurodyn_lab.paths import RECORDS


class Timing(NamedTuple):
    seconds_per_epoch: float | None
    how: str  # "measured" | "scaled" | "none"
    source: str  # what it rests on, in words


def _seconds_per_epoch(rec: dict[str, Any]) -> float | None:
    spe = rec.get("seconds_per_epoch")
    if isinstance(spe, (int, float)) and spe > 0:
        return float(spe)
    seconds, epochs = rec.get("train_seconds"), rec.get("epochs")
    if isinstance(seconds, (int, float)) and isinstance(epochs, (int, float)) and seconds > 0 and epochs > 0:
        return float(seconds) / float(epochs)
    return None


def _nac_preset(rec: dict[str, Any]) -> str | None:
    """The preset of a NAC Table 1 record (``variant`` and ``task``, no ``preset``)."""
    variant, task = rec.get("variant"), rec.get("task")
    if not isinstance(variant, str) or not isinstance(task, str):
        return None
    model = variant if variant in ("gru", "lstm", "cfc", "ltc", "mha", "odernn") else "nac"
    return f"{model}/{task}"


def _model_overrides(rec: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(o for o in rec.get("overrides", []) or [] if isinstance(o, str) and o.startswith("model.")))


@functools.cache
def index(root: Path = RECORDS) -> tuple[dict[str, Any], ...]:
    """Every record under ``root`` with a preset, a scale and a training time: ``{preset, model_from, scale,
    model_overrides, seconds_per_epoch, claim}``."""
    found = []
    for path in sorted(root.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        for rec in data if isinstance(data, list) else [data]:
            if not isinstance(rec, dict):
                continue
            preset = rec.get("preset") if "/" in str(rec.get("preset", "")) else _nac_preset(rec)
            preset = rec.get("data_from") if preset is None and "/" in str(rec.get("data_from", "")) else preset
            spe = _seconds_per_epoch(rec)
            if preset is None or spe is None or not isinstance(rec.get("scale"), str):
                continue
            claim = path.parent.relative_to(root)
            claim = claim.parent.parent if claim.parent.name == "runs" else claim
            found.append(
                {
                    "preset": preset,
                    "model_from": rec.get("model_from"),
                    "scale": rec["scale"],
                    "model_overrides": _model_overrides(rec),
                    "seconds_per_epoch": spe,
                    "claim": claim.as_posix(),
                }
            )
    return tuple(found)


def work(preset: str, scale: str, overrides: Sequence[str] = ()) -> float:
    """The work of one epoch, in units that compare across scales: training samples x grid points (a field's
    ``data.resolution`` per axis: 1-D for KS and the order benchmark, else 2-D; a sequence task counts samples)."""
    from neurodyn.experiments import load_experiment

    data = load_experiment(preset, scale, list(overrides))["data"]
    n = data.get("n_train") or (data.get("split_sizes") or [1])[0] or 1
    r = data.get("resolution")
    dims = 1 if data.get("generator") in ("ks", "order1d") else 2
    return float(n) * float(r**dims if isinstance(r, int) else 1)


def estimate(
    preset: str,
    scale: str,
    model_overrides: Sequence[str] = (),
    model_from: str | None = None,
    overrides: Sequence[str] = (),
    root: Path = RECORDS,
) -> Timing:
    """The seconds per epoch of a run of ``preset`` at ``scale`` (module docstring)."""
    same = [r for r in index(root) if r["preset"] == preset and r["model_from"] == model_from]
    model = tuple(sorted(model_overrides))
    exact = [r for r in same if r["model_overrides"] == model]
    pool = exact or same
    if not pool:
        return Timing(None, "none", f"no record of {preset} measures its training time")
    here = [r for r in pool if r["scale"] == scale]
    claims = lambda rs: ", ".join(sorted({r["claim"] for r in rs}))  # noqa: E731
    if here:
        spe = statistics.median(r["seconds_per_epoch"] for r in here)
        return Timing(spe, "measured", f"median of {len(here)} {scale}-scale run(s) in {claims(here)}")
    other = min(
        {r["scale"] for r in pool},
        key=lambda s: ("cpu", "paper", "tiny").index(s) if s in ("cpu", "paper", "tiny") else 9,
    )
    base = [r for r in pool if r["scale"] == other]
    spe = statistics.median(r["seconds_per_epoch"] for r in base)
    ratio = work(preset, scale, overrides) / work(preset, other, overrides)
    bound = "a lower bound" if ratio > 1 else "an upper bound" if ratio < 1 else "the same work"
    return Timing(
        spe * ratio,
        "scaled",
        f"median of {len(base)} {other}-scale run(s) in {claims(base)}, x {ratio:.3g} "
        f"(training samples x grid points, {other} -> {scale}): {bound}",
    )
