"""Rewrite the stored run configs of the records (``lab/records/**/config.yaml``) into the config layout of the
library's checkpoint format 2, once: the train section in sections (``schedule``, ``rollout``, ``logging``) and a
``lamo`` model of format 1 as ``lamo`` (grids) or ``lamo_mesh`` (meshes, point clouds), by the library's one
conversion (:func:`neurodyn.checkpoint_io.upgrade_checkpoint`). Run from the repository root:

    PYTHONPATH=lab python lab/tools/records_to_format_2.py

Kept as history, like ``rewrite_records.py``: it changed the layout of the stored configs and nothing else (the
overrides a record lists are what its run was given, in the spelling of its day)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from neurodyn.checkpoint_io import upgrade_checkpoint

RECORDS = Path(__file__).resolve().parents[1] / "records"


def main() -> int:
    changed = 0
    for path in sorted(RECORDS.rglob("config.yaml")):
        cfg = yaml.safe_load(path.read_text())
        new = upgrade_checkpoint({"format_version": 1, "experiment": cfg})["experiment"]
        if new != cfg:
            path.write_text(yaml.safe_dump(new, sort_keys=False))
            changed += 1
    print(f"{changed} stored configs rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
