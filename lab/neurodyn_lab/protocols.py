"""Pre-registered protocols: the rules of a comparison fixed in a committed file before its first test-split read,
the records written under it stamped with its hash, and the status of every verdict computed from them.

A protocol is a YAML file ``lab/protocols/<paper>/<claim>.yaml`` (its name: ``<paper>/<claim>``). It states what a
verdict rests on, before anything is run:

* ``files``: the data files by role -- ``development`` (used while the method was developed; their test splits were
  read before) and ``confirmation`` (never used in development, named here before any run on them), with what has
  been seen of each and by whom, and the files left out;
* ``candidates``: the models (presets and their settings) that compete, each with a ``label``;
* ``selection``: how one candidate is chosen (on the training file only; the test split never chooses);
* ``refit``: how a chosen candidate is trained again before its one test evaluation;
* ``seeds``; ``floors``: the verdict's rules, each with an ``id`` and its rule in words;
* ``budget``: the CPU-hours stated before launching, and how they were estimated;
* ``status``: ``draft`` (being written: nothing may be recorded under it) or ``frozen`` (the rules are final).

The protocol's identity is its name and the sha256 of the file's bytes (:attr:`Protocol.sha256`). A record written
under it carries ``"protocol": {"name": ..., "sha256": ...}`` (:func:`stamp`); the lab's writers
(:func:`neurodyn_lab.records.write_store`, :func:`~neurodyn_lab.records.write_run_record`,
:func:`neurodyn_lab.queue.run_jobs`, :func:`neurodyn_lab.comparisons.compare_recorded`, each with ``protocol=``)
add it, and refuse to write before :func:`require_registered` holds: the protocol frozen and committed, its
working-tree bytes those of a commit. So a stamped record was written after its rules were committed.

A verdict (:func:`verdict`) is ``pre-registered`` only when every record it reads carries this protocol's name and
the hash of the file as it is now (a protocol edited after its records were written no longer matches them) and
nothing was chosen after the fact; otherwise it is ``exploratory``, with the reasons, and its text never says
"met" or "holds": it says ``exploratory (floor reached)`` or ``exploratory (floor not reached)``.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from neurodyn.errors import DataError

from .paths import LAB

PROTOCOLS = LAB / "protocols"
PRE_REGISTERED, EXPLORATORY = "pre-registered", "exploratory"
#: the keys every protocol states (``budget`` holds at least ``cpu_hours``)
REQUIRED = ("protocol", "status", "files", "candidates", "selection", "refit", "seeds", "floors", "budget")
STATUSES = ("draft", "frozen")
STAMP = "protocol"  # the key of a record's stamp


@dataclass(frozen=True)
class Protocol:
    """One protocol file: its ``name`` (``<paper>/<claim>``), ``path``, ``sha256`` of its bytes and ``spec`` (the
    parsed YAML)."""

    name: str
    path: Path
    sha256: str
    spec: dict[str, Any] = field(repr=False, compare=False)

    @property
    def stamp(self) -> dict[str, str]:
        """What a record written under this protocol carries: ``{"name": ..., "sha256": ...}``."""
        return {"name": self.name, "sha256": self.sha256}

    @property
    def frozen(self) -> bool:
        return self.spec.get("status") == "frozen"

    def candidates(self) -> list[dict[str, Any]]:
        return list(self.spec["candidates"])

    def labels(self) -> list[str]:
        """The candidates' labels, in the order the protocol lists them (the order that breaks ties)."""
        return [c["label"] for c in self.spec["candidates"]]

    def files(self, role: str | None = None) -> list[dict[str, Any]]:
        """The data files of ``role`` (``development`` / ``confirmation``), or of both in that order."""
        roles = [role] if role else ["development", "confirmation"]
        return [f for r in roles for f in self.spec["files"].get(r) or []]

    def floor(self, floor_id: str) -> dict[str, Any]:
        for f in self.spec["floors"]:
            if f["id"] == floor_id:
                return f
        raise DataError(
            f"protocol {self.name} has no floor {floor_id!r}; its floors: "
            f"{', '.join(f['id'] for f in self.spec['floors'])}"
        )


def protocol_path(name: str | Path) -> Path:
    """The file of protocol ``name`` (``time_series/uea`` -> ``lab/protocols/time_series/uea.yaml``); a path to a
    ``.yaml`` file is taken as it is."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    return PROTOCOLS / f"{name}.yaml"


def sha256_of(path: str | Path) -> str:
    """The sha256 of a file's bytes (hex)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load(name: str | Path) -> Protocol:
    """The protocol ``name`` (or a path to its file), checked to state every key of :data:`REQUIRED`; its name is
    the file's path under ``lab/protocols`` without ``.yaml``, and must equal the file's own ``protocol:``."""
    path = protocol_path(name)
    if not path.is_file():
        raise DataError(f"no protocol file {path}; protocols live in lab/protocols/<paper>/<claim>.yaml")
    data = path.read_bytes()
    spec = yaml.safe_load(data)
    if not isinstance(spec, dict):
        raise DataError(f"{path} is not a protocol: expected a YAML mapping with {', '.join(REQUIRED)}")
    missing = [k for k in REQUIRED if k not in spec]
    if missing:
        raise DataError(
            f"protocol {path} does not state {', '.join(missing)}; a protocol states "
            f"{', '.join(REQUIRED)} before its first run"
        )
    if spec["status"] not in STATUSES:
        raise DataError(f"protocol {path}: status must be one of {', '.join(STATUSES)}; got {spec['status']!r}")
    try:
        expected = path.resolve().relative_to(PROTOCOLS.resolve()).with_suffix("").as_posix()
    except ValueError:
        expected = spec["protocol"]  # a protocol outside lab/protocols (a test's) names itself
    if spec["protocol"] != expected:
        raise DataError(
            f"protocol {path} calls itself {spec['protocol']!r}; its name is its path under lab/protocols: {expected!r}"
        )
    if not isinstance(spec["budget"], Mapping) or "cpu_hours" not in spec["budget"]:
        raise DataError(f"protocol {path}: budget must state cpu_hours (the CPU-hours stated before launching)")
    labels = [c.get("label") for c in spec["candidates"]]
    if None in labels or len(set(labels)) != len(labels):
        raise DataError(f"protocol {path}: every candidate needs a label, each label once; got {labels}")
    ids = [f.get("id") for f in spec["floors"]]
    if None in ids or len(set(ids)) != len(ids):
        raise DataError(f"protocol {path}: every floor needs an id, each id once; got {ids}")
    return Protocol(spec["protocol"], path, hashlib.sha256(data).hexdigest(), spec)


# ------------------------------------------------------------------------------------------------
# registration: frozen and committed


def _git(path: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path.parent), *args], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return out.stdout if out.returncode == 0 else None


def committed(protocol: Protocol) -> tuple[str, str] | None:
    """``(commit, ISO date)`` of the last commit of the protocol's file when the file as it is now is that
    commit's (no change since, staged or not); None when it is not committed, or changed since, or git is
    unavailable."""
    path = protocol.path.resolve()
    log = _git(path, "log", "-1", "--format=%H %cI", "--", path.name)
    if not log or not log.strip():
        return None
    commit, date = log.split()
    if _git(path, "status", "--porcelain", "--", path.name):
        return None  # changed since (staged or in the working tree)
    top = _git(path, "rev-parse", "--show-toplevel")
    rel = path.relative_to(Path(top.strip()).resolve()).as_posix() if top else path.name
    blob = subprocess.run(["git", "-C", str(path.parent), "show", f"{commit}:{rel}"], capture_output=True, check=False)
    if blob.returncode != 0 or hashlib.sha256(blob.stdout).hexdigest() != protocol.sha256:
        return None
    return commit, date


def require_registered(protocol: Protocol) -> tuple[str, str]:
    """Raise :class:`DataError` unless records may be written under ``protocol``: ``status: frozen`` and the file
    committed as it is (:func:`committed`). Returns ``(commit, date)``. The writers call this before anything
    trains."""
    if not protocol.frozen:
        raise DataError(
            f"protocol {protocol.name} is a draft (status: {protocol.spec.get('status')}); nothing may "
            "be recorded under it until its rules are final: set status: frozen and commit it"
        )
    found = committed(protocol)
    if found is None:
        raise DataError(
            f"protocol {protocol.name} ({protocol.path}) is not committed as it is now; commit it "
            "before the first run, so its hash names rules fixed before any test split was read"
        )
    return found


# ------------------------------------------------------------------------------------------------
# records


def stamp(record: Mapping[str, Any], protocol: Protocol) -> dict[str, Any]:
    """``record`` with the protocol's stamp (``"protocol": {"name", "sha256"}``)."""
    return {**record, STAMP: protocol.stamp}


def stamp_new(
    records: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]], protocol: Protocol
) -> list[dict[str, Any]]:
    """``records`` with the stamp added to those whose ``run`` is not among ``before`` (the records the folder held
    already keep theirs: a record is never stamped after the fact)."""
    old = {r.get("run"): r for r in before}
    return [dict(old[r.get("run")]) if r.get("run") in old else stamp(r, protocol) for r in records]


def refuse_foreign(records: Iterable[Mapping[str, Any]], protocol: Protocol, where: str | Path) -> None:
    """Raise :class:`DataError` when a records folder that is to take records under ``protocol`` already holds
    records not written under it (no stamp, or another protocol's): a protocol's records live in a folder of
    their own."""
    foreign = [r.get("run", "?") for r in records if r.get(STAMP) != protocol.stamp]
    if foreign:
        raise DataError(
            f"{where} holds {len(foreign)} record(s) not written under protocol {protocol.name} "
            f"({', '.join(map(str, foreign[:3]))}{', ...' if len(foreign) > 3 else ''}); give the "
            "protocol's records a folder of their own"
        )


def check_records(
    protocol: Protocol, records: Sequence[Mapping[str, Any]], expected_runs: Iterable[str] | None = None
) -> list[str]:
    """What keeps ``records`` from being this protocol's complete set, one sentence each (empty: they are): a
    record without the stamp, a record stamped by another protocol or by another version of this one, and, with
    ``expected_runs`` (the run names the protocol's plan makes), a planned run not recorded or a record of a run
    the plan does not make."""
    problems = []
    for r in records:
        got = r.get(STAMP)
        run = r.get("run", "?")
        if got is None:
            problems.append(f"record {run} carries no protocol stamp")
        elif got.get("name") != protocol.name:
            problems.append(f"record {run} was written under protocol {got.get('name')!r}, not {protocol.name!r}")
        elif got.get("sha256") != protocol.sha256:
            problems.append(
                f"record {run} was written under another version of {protocol.name} (sha256 "
                f"{str(got.get('sha256'))[:12]}, the file now {protocol.sha256[:12]}): the protocol "
                "changed after its records were written"
            )
    if expected_runs is not None:
        expected, seen = set(expected_runs), {r.get("run") for r in records}
        problems += [f"planned run {run} is not recorded" for run in sorted(expected - seen)]
        problems += [f"record {run} is not a run of the protocol's plan" for run in sorted(seen - expected, key=str)]
    return problems


# ------------------------------------------------------------------------------------------------
# verdicts


@dataclass(frozen=True)
class Verdict:
    """One floor's verdict: whether it is ``reached`` on the records, its ``status`` (``pre-registered`` or
    ``exploratory``) and, for an exploratory one, why."""

    floor: str
    reached: bool | None
    status: str
    reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """``met`` / ``not met`` for a pre-registered verdict; ``exploratory (floor reached)`` / ``exploratory
        (floor not reached)`` otherwise (never "met"); ``not computed`` without an outcome."""
        if self.reached is None:
            return "not computed"
        if self.status == PRE_REGISTERED:
            return "met" if self.reached else "not met"
        return f"exploratory (floor {'reached' if self.reached else 'not reached'})"


def verdict(
    protocol: Protocol | None,
    records: Sequence[Mapping[str, Any]],
    floor: str,
    reached: bool | None,
    *,
    expected_runs: Iterable[str] | None = None,
    post_hoc: Sequence[str] = (),
) -> Verdict:
    """The verdict of ``floor`` (its outcome ``reached``, computed by the caller from ``records`` by the floor's rule
    as the protocol states it) with its status: ``pre-registered`` when ``protocol`` is given, is frozen, names the
    floor, and :func:`check_records` finds nothing; ``exploratory`` otherwise, or when ``post_hoc`` names a choice
    made after test numbers were seen (a rule, a candidate, a file). The reasons say which."""
    reasons = list(post_hoc)
    if protocol is None:
        reasons.insert(0, "no pre-registered protocol")
    else:
        if not protocol.frozen:
            reasons.append(f"protocol {protocol.name} is a draft")
        if floor not in [f["id"] for f in protocol.spec["floors"]]:
            reasons.append(f"floor {floor!r} is not one of protocol {protocol.name}'s")
        problems = check_records(protocol, records, expected_runs)
        if not records:
            problems.append("no records")
        reasons += problems
    return Verdict(floor, reached, EXPLORATORY if reasons else PRE_REGISTERED, tuple(reasons))
