"""Training logs beside ``metrics.jsonl``: ``train.logging.to = none | csv | tensorboard`` (or a list of them).

* ``csv``: ``metrics.csv`` with one row per epoch (epoch, train_loss, lr, seconds, and ``val_<metric>`` for every
  scalar validation metric), rewritten from the history after each epoch, so a resumed run holds no stale rows.
* ``tensorboard``: event files in ``tensorboard/`` (``train/loss``, ``train/lr``, ``val/<metric>`` per epoch);
  needs the ``tensorboard`` package (``pip install 'neurodyn[tensorboard]'``). A resumed run purges the events
  after the epoch it resumes from.

``metrics.jsonl`` is always written (the run API reads it).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError

LOGGERS = ("none", "csv", "tensorboard")


def parse_loggers(value: Any) -> tuple[str, ...]:
    """``"csv"``, ``["csv", "tensorboard"]`` or ``"none"`` -> the loggers to write; unknown names are one error."""
    names = [value] if isinstance(value, str) else list(value or [])
    for name in names:
        if name not in LOGGERS:
            raise ConfigError(f"train.logging.to must be none, csv, tensorboard or a list of them; got {value!r}")
    return tuple(n for n in names if n != "none")


def check_available(loggers: Sequence[str]) -> None:
    """One ConfigError when a logger's package is missing (before any training)."""
    if "tensorboard" in loggers:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError:
            raise ConfigError(
                "train.logging.to=tensorboard needs the tensorboard package: pip install "
                "'neurodyn[tensorboard]' (or pip install tensorboard), or use train.logging.to=csv"
            ) from None


class RunLogs:
    """The extra logs of one run folder (main process only)."""

    def __init__(self, run_dir: Path, loggers: Sequence[str], first_epoch: int = 0):
        self.run_dir, self.loggers = Path(run_dir), tuple(loggers)
        check_available(self.loggers)
        self.writer = None
        if "tensorboard" in self.loggers:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=first_epoch)

    def epoch(self, record: dict[str, Any], history: Sequence[dict[str, Any]]) -> None:
        """Log one finished epoch (``record``; ``history`` holds every epoch so far, ``record`` included)."""
        if "csv" in self.loggers:
            write_csv(self.run_dir / "metrics.csv", history)
        if self.writer is not None:
            step = record["epoch"] + 1
            self.writer.add_scalar("train/loss", record["train_loss"], step)
            if record.get("lr") is not None:  # (a fitted baseline's one pass has no learning rate)
                self.writer.add_scalar("train/lr", record["lr"], step)
            for key, value in record.get("val", {}).items():
                if isinstance(value, (int, float)):
                    self.writer.add_scalar(f"val/{key}", value, step)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def write_csv(path: Path, history: Sequence[dict[str, Any]]) -> None:
    """``history`` (epoch records) as CSV, one row per epoch; a metric missing in an epoch is an empty cell."""
    val_keys: list[str] = []
    for rec in history:
        val_keys += [k for k, v in rec.get("val", {}).items() if isinstance(v, (int, float)) and k not in val_keys]
    columns = ["epoch", "train_loss", "lr", "seconds"] + [f"val_{k}" for k in val_keys]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for rec in history:
        writer.writerow(
            [rec["epoch"] + 1, rec["train_loss"], rec.get("lr", ""), rec["seconds"]]
            + [rec.get("val", {}).get(k, "") for k in val_keys]
        )
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(out.getvalue())
    tmp.replace(path)
