"""The records: what the pages cite, one ``result.json`` per run, written here and read here.

Layout of a claim's records folder ``lab/records/<paper>/<claim>/`` (:mod:`neurodyn_lab.paths`):

* ``runs/<run>/result.json`` -- one run's record (compact JSON), with the ``config.yaml``, ``metrics.jsonl`` and
  ``summary.md`` of the run folder it trained in (never a checkpoint);
* ``results.json`` -- the records of a comparison whose run folders are not kept (``neurodyn.compare``'s list, one
  entry per run: the UEA/UCR comparisons' hundreds of short runs), or of records written before runs had folders;
* reports (``report.md``, ``tables.md``, ``compare.md``), a speed benchmark's JSON and plots.

Every writer here makes paths relative to the repository and refuses a record that still names an absolute path
(a machine's folder), so that a record reads the same on every checkout. With ``protocol=`` (a
:class:`neurodyn_lab.protocols.Protocol`) a writer first checks that the protocol is frozen and committed
(:func:`~neurodyn_lab.protocols.require_registered`) and stamps the record with its name and hash; a records folder
written under a protocol holds that protocol's records only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurodyn.errors import DataError

from .paths import ROOT

if TYPE_CHECKING:
    from .protocols import Protocol

STORE = "results.json"
RECORD = "result.json"
#: the files of a run folder its record keeps beside ``result.json`` (a summary only when it links no image)
RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.md")
#: an absolute path: ``/x/...`` or ``C:\\...`` at the start of a string or after ``=``, a space, a quote, a bracket
ABSOLUTE = re.compile(r"(?:^|[\s=(\[,;:'\"])(?:/[\w.-]+/|~/|[A-Za-z]:[\\/])")


def portable(value: Any) -> Any:
    """``value`` with the repository's own path dropped from every string (``/.../repo/lab/x`` -> ``lab/x``);
    raises :class:`DataError` naming a string that still holds an absolute path."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    if isinstance(value, str):
        text = value.replace(f"{ROOT}/", "").replace(str(ROOT), ".")
        if ABSOLUTE.search(text):
            raise DataError(
                f"a record may not name a machine's folder: {text!r}; give paths inside the repository "
                "(relative to it) or a placeholder such as <stores>/NAME"
            )
        return text
    return value


def with_placeholders(value: Any, placeholders: Mapping[str, str]) -> Any:
    """``value`` with every path prefix of ``placeholders`` (``{"/data/stores": "<stores>"}``) replaced, in every
    string it holds."""
    if isinstance(value, dict):
        return {k: with_placeholders(v, placeholders) for k, v in value.items()}
    if isinstance(value, list):
        return [with_placeholders(v, placeholders) for v in value]
    if isinstance(value, str):
        for prefix, name in placeholders.items():
            value = value.replace(str(prefix).rstrip("/") + "/", f"{name}/")
        return value
    return value


def dumps(value: Any) -> str:
    """Compact JSON (no indentation: the pages read records through code, not by eye)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=True)


def write_json(path: str | Path, value: Any) -> Path:
    """Write ``value`` as compact, portable JSON through a temporary file (an interruption never leaves half)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.partial")
    tmp.write_text(dumps(portable(value)) + "\n")
    tmp.replace(path)
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Write a report (Markdown) with the repository's own path dropped; refuses one naming a machine's folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(portable(text))
    return path


def write_run_record(
    records_dir: str | Path,
    run: str,
    record: dict[str, Any],
    run_dir: str | Path | None = None,
    placeholders: Mapping[str, str] | None = None,
    protocol: Protocol | None = None,
) -> Path:
    """``<records_dir>/runs/<run>/result.json``, and the :data:`RUN_FILES` of ``run_dir`` (the run folder it trained
    in) copied beside it (every one with ``placeholders`` for folders outside the repository, as in
    :func:`with_placeholders`); returns the record's path. With ``protocol`` the record carries its stamp (the
    protocol frozen and committed, else :class:`DataError` before anything is written)."""
    if protocol is not None:
        from .protocols import require_registered, stamp

        require_registered(protocol)
        record = stamp(record, protocol)
    folder = Path(records_dir) / "runs" / run
    path = write_json(folder / RECORD, record)
    if run_dir is not None and Path(run_dir).resolve() != folder.resolve():
        for name in RUN_FILES:
            src = Path(run_dir) / name
            if not src.is_file() or (name == "summary.md" and "![" in src.read_text()):
                continue
            if name == "config.yaml":
                import yaml

                config = with_placeholders(yaml.safe_load(src.read_text()), placeholders or {})
                write_text(folder / name, yaml.safe_dump(portable(config), sort_keys=False))
            else:  # (text: the same placeholders, e.g. the data path that summary.md prints)
                write_text(folder / name, with_placeholders(src.read_text(), placeholders or {}))
    return path


def write_store(records_dir: str | Path, records: list[dict[str, Any]], protocol: Protocol | None = None) -> Path:
    """``<records_dir>/results.json``: the records of a comparison whose run folders are not kept. With ``protocol``
    the records the store did not hold yet (by ``run``) get its stamp; those it held keep theirs (checked frozen and
    committed first, else :class:`DataError` before anything is written)."""
    if protocol is not None:
        from .protocols import require_registered, stamp_new

        require_registered(protocol)
        path = Path(records_dir) / STORE
        records = stamp_new(records, _read(path) if path.exists() else [], protocol)
    return write_json(Path(records_dir) / STORE, records)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DataError(f"{path} is not valid JSON ({e}); expected a record") from None


def load_results(records_dir: str | Path) -> list[dict[str, Any]]:
    """Every recorded run of a records folder: the entries of ``results.json``, then the ``runs/<run>/result.json``
    it lacks (in run-name order), then ``<name>.json`` files beside it (the one-file-per-run records of older
    drivers), each named by its folder or file (``"run"``)."""
    records_dir = Path(records_dir)
    path = records_dir / STORE
    records = _read(path) if path.exists() else []
    if not isinstance(records, list):
        raise DataError(f"{path} is not a list of run records")
    known = {r.get("run") for r in records}
    loose = [(f.parent.name, f) for f in sorted(records_dir.glob(f"runs/*/{RECORD}"))]
    loose += [(f.stem, f) for f in sorted(records_dir.glob("*.json")) if f.name != STORE]
    for name, f in loose:
        rec = _read(f)
        if name not in known and rec not in records:
            records.append({"run": name, **rec})
            known.add(name)
    return records


def record_path(records_dir: str | Path, run: str) -> Path:
    """Where the record of ``run`` of a records folder lives: ``<records_dir>/runs/<run>/result.json``."""
    return Path(records_dir) / "runs" / run / RECORD


def read_run_records(records_dir: str | Path, runs: str = "*") -> list[dict[str, Any]]:
    """The ``runs/<run>/result.json`` of a records folder whose run name matches the glob ``runs``, in run-name
    order."""
    return [_read(f) for f in sorted(Path(records_dir).glob(f"runs/{runs}/{RECORD}"))]
