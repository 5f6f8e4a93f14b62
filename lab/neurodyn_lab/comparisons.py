"""``neurodyn.compare`` for the laboratory: the runs train in a claim's untracked folder, the records land in its
records folder.

:func:`compare_recorded` runs :func:`neurodyn.compare.compare` in ``lab/runs/<paper>/<claim>`` (its run folders,
checkpoints and plots stay there, untracked) and then writes the comparison's records, ``results.json`` and
``compare.md``, to ``lab/records/<paper>/<claim>`` (:mod:`neurodyn_lab.records`). Runs recorded there before are
handed to the untracked folder first, so a comparison resumes on any machine that has the records. With
``protocol=`` the comparison starts only under a frozen, committed protocol and into a folder of its records alone,
and the records it adds carry the protocol's stamp (:mod:`neurodyn_lab.protocols`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .paths import runs_for
from .records import STORE, load_results, portable, with_placeholders, write_store, write_text

if TYPE_CHECKING:
    from .protocols import Protocol


def compare_recorded(
    entries: Sequence[str],
    records_dir: str | Path,
    scale: str = "cpu",
    *,
    placeholders: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
    protocol: Protocol | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """:func:`neurodyn.compare.compare` of ``entries`` trained in the untracked twin of ``records_dir``; then its
    ``results.json`` (with ``placeholders`` for paths outside the repository, e.g. the converted archive files) and
    ``compare.md`` written to ``records_dir``. Returns compare's records. A path outside the repository that no
    placeholder covers stops it before anything trains. ``protocol``: the pre-registered protocol of the comparison
    (checked frozen and committed, and ``records_dir`` free of other records, before anything trains; the records it
    adds carry its stamp)."""
    from neurodyn.compare import compare

    placeholders = {str(Path(k).absolute()): v for k, v in (placeholders or {}).items()}
    portable(with_placeholders(list(overrides), placeholders))  # raises on a machine path before anything trains
    records_dir = Path(records_dir)
    if protocol is not None:
        from .protocols import refuse_foreign, require_registered

        require_registered(protocol)
        refuse_foreign(load_results(records_dir), protocol, records_dir)
    work = runs_for(records_dir)
    recorded = records_dir / STORE
    if recorded.exists() and not (work / STORE).exists():  # resume from the records: compare skips these runs
        work.mkdir(parents=True, exist_ok=True)
        (work / STORE).write_text(recorded.read_text())
    out = compare(list(entries), work, scale, overrides=list(overrides), **kwargs)
    records = json.loads((work / STORE).read_text())
    write_store(records_dir, with_placeholders(records, placeholders), protocol=protocol)
    if (work / "compare.md").exists():
        write_text(records_dir / "compare.md", with_placeholders((work / "compare.md").read_text(), placeholders))
    return out
