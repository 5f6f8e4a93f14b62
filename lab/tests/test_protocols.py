"""Pre-registered protocols (neurodyn_lab.protocols): a protocol's hash is its file's bytes; records are written under
it only when it is frozen and committed as it is, and then carry its stamp; a verdict is pre-registered only on the
complete, stamped records of the protocol as it is now, and exploratory (never "met") otherwise. Protocol files and
git repositories are made here in temporary folders; nothing trains."""

import hashlib
import json
import subprocess
import sys

import pytest
import yaml

from neurodyn.errors import DataError
from neurodyn_lab import protocols
from neurodyn_lab.records import write_run_record, write_store

SPEC = {
    "protocol": "demo/claim",
    "status": "frozen",
    "files": {"development": [{"name": "A"}], "confirmation": [{"name": "B"}]},
    "candidates": [{"label": "gru", "entry": "gru/sequence"}, {"label": "knn", "entry": "knn/sequence"}],
    "selection": {"rule": "5-fold"},
    "refit": {"rule": "whole train file"},
    "seeds": [0, 1, 2],
    "floors": [{"id": "F1", "rule": "gru >= knn"}],
    "budget": {"cpu_hours": 1.0},
}


def git(repo, *args):
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "HOME": str(repo),
        },
    )


def write_protocol(folder, commit=True, **changes):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claim.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}, sort_keys=False))
    if commit:
        if not (folder / ".git").exists():
            git(folder, "init", "-q")
        git(folder, "add", path.name)
        git(folder, "commit", "-q", "-m", "protocol")
    return path


def test_a_protocol_is_its_files_bytes_and_names_itself(tmp_path):
    path = write_protocol(tmp_path / "p", commit=False)
    p = protocols.load(path)
    assert p.name == "demo/claim" and p.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert p.stamp == {"name": "demo/claim", "sha256": p.sha256} and p.labels() == ["gru", "knn"]
    assert [f["name"] for f in p.files()] == ["A", "B"] and p.floor("F1")["rule"] == "gru >= knn"
    path.write_text(path.read_text() + "# a comment changes the bytes, so the hash\n")
    assert protocols.load(path).sha256 != p.sha256
    for key in ("selection", "floors", "budget"):
        bad = write_protocol(tmp_path / key, commit=False)
        bad.write_text(yaml.safe_dump({k: v for k, v in SPEC.items() if k != key}))
        with pytest.raises(DataError, match=key):
            protocols.load(bad)
    with pytest.raises(DataError, match="status"):
        protocols.load(write_protocol(tmp_path / "s", commit=False, status="final"))
    with pytest.raises(DataError, match="label"):
        protocols.load(write_protocol(tmp_path / "l", commit=False, candidates=[{"label": "a"}, {"label": "a"}]))


def test_records_are_written_only_under_a_frozen_committed_protocol(tmp_path):
    draft = protocols.load(write_protocol(tmp_path / "draft", status="draft"))
    with pytest.raises(DataError, match="draft"):
        protocols.require_registered(draft)
    loose = protocols.load(write_protocol(tmp_path / "loose", commit=False))
    with pytest.raises(DataError, match="not committed"):
        protocols.require_registered(loose)
    path = write_protocol(tmp_path / "ok")
    p = protocols.load(path)
    commit, _ = protocols.require_registered(p)
    assert len(commit) == 40
    path.write_text(path.read_text().replace("gru >= knn", "knn >= gru"))  # the rule edited, not committed
    with pytest.raises(DataError, match="not committed"):
        protocols.require_registered(protocols.load(path))
    git(tmp_path / "ok", "add", path.name)  # staged is not committed either
    with pytest.raises(DataError, match="not committed"):
        protocols.require_registered(protocols.load(path))
    with pytest.raises(DataError, match="not committed"):
        write_store(tmp_path / "records", [{"run": "r"}], protocol=protocols.load(path))
    assert not (tmp_path / "records").exists()  # refused before anything was written


def test_the_writers_stamp_new_records_and_never_old_ones(tmp_path):
    p = protocols.load(write_protocol(tmp_path / "p"))
    records = tmp_path / "records"
    write_store(records, [{"run": "old", "x": 1}])  # written before, under no protocol
    write_store(records, [{"run": "old", "x": 1}, {"run": "new", "x": 2}], protocol=p)
    stored = {r["run"]: r for r in json.loads((records / "results.json").read_text())}
    assert "protocol" not in stored["old"] and stored["new"]["protocol"] == p.stamp
    path = write_run_record(records, "run1", {"run": "run1", "acc": 0.9}, protocol=p)
    assert json.loads(path.read_text())["protocol"] == p.stamp
    with pytest.raises(DataError, match="not written under protocol demo/claim"):
        protocols.refuse_foreign(json.loads((records / "results.json").read_text()), p, records)


def test_compare_recorded_refuses_a_folder_of_other_records_and_stamps_what_it_adds(tmp_path, monkeypatch):
    import neurodyn.compare
    from neurodyn_lab import comparisons

    def fake_compare(entries, work, scale, **kwargs):
        work.mkdir(parents=True, exist_ok=True)
        old = json.loads((work / "results.json").read_text()) if (work / "results.json").exists() else []
        new = [{"run": f"{e}-s0", "preset": e, "sets": {"T": 0.5}} for e in entries]
        (work / "results.json").write_text(
            json.dumps(old + [r for r in new if r["run"] not in {o["run"] for o in old}])
        )
        return new

    monkeypatch.setattr(neurodyn.compare, "compare", fake_compare)
    p = protocols.load(write_protocol(tmp_path / "p"))
    out = tmp_path / "records" / "cmp"
    comparisons.compare_recorded(["a"], out, protocol=p)
    comparisons.compare_recorded(["a", "b"], out, protocol=p)  # resumes: a kept, b added
    stored = json.loads((out / "results.json").read_text())
    assert [r["run"] for r in stored] == ["a-s0", "b-s0"] and all(r["protocol"] == p.stamp for r in stored)
    other = tmp_path / "records" / "other"
    write_store(other, [{"run": "x-s0"}])
    with pytest.raises(DataError, match="not written under protocol"):
        comparisons.compare_recorded(["a"], other, protocol=p)
    draft = protocols.load(write_protocol(tmp_path / "d", status="draft"))
    with pytest.raises(DataError, match="draft"):
        comparisons.compare_recorded(["a"], tmp_path / "records" / "fresh", protocol=draft)


def test_run_jobs_checks_the_protocol_before_anything_trains(tmp_path):
    from neurodyn_lab.queue import Job, run_jobs

    draft = protocols.load(write_protocol(tmp_path / "d", status="draft"))
    job = Job("never-trained", "gru/sequence", 0)
    with pytest.raises(DataError, match="draft"):
        run_jobs([job], tmp_path / "records", "tiny", protocol=draft)
    p = protocols.load(write_protocol(tmp_path / "p"))
    write_store(tmp_path / "mixed", [{"run": "older"}])
    with pytest.raises(DataError, match="not written under protocol"):
        run_jobs([job], tmp_path / "mixed", "tiny", protocol=p)


def test_a_verdict_is_pre_registered_only_on_the_protocols_own_complete_records(tmp_path):
    path = write_protocol(tmp_path / "p")
    p = protocols.load(path)
    recs = [protocols.stamp({"run": r}, p) for r in ("a", "b")]
    v = protocols.verdict(p, recs, "F1", True, expected_runs=["a", "b"])
    assert (v.status, v.text, v.reasons) == ("pre-registered", "met", ())
    assert protocols.verdict(p, recs, "F1", False).text == "not met"
    # every way out: no protocol, a record without its stamp, another protocol, a run missing, a rule changed after
    cases = {
        "no pre-registered protocol": protocols.verdict(None, recs, "F1", True),
        "carries no protocol stamp": protocols.verdict(p, [*recs, {"run": "c"}], "F1", True),
        "not 'demo/claim'": protocols.verdict(
            p, [{"run": "a", "protocol": {"name": "x/y", "sha256": p.sha256}}], "F1", True
        ),
        "planned run b is not recorded": protocols.verdict(p, recs[:1], "F1", True, expected_runs=["a", "b"]),
        "ranking rule changed": protocols.verdict(
            p, recs, "F1", True, post_hoc=["the ranking rule changed after the test numbers were seen"]
        ),
        "no records": protocols.verdict(p, [], "F1", True),
        "is not one of": protocols.verdict(p, recs, "F9", True),
    }
    for why, v in cases.items():
        assert v.status == "exploratory" and any(why in r for r in v.reasons), (why, v.reasons)
        assert v.text == "exploratory (floor reached)" and "met" not in v.text
    # the protocol's rule edited after its records were written: the records no longer match the file
    path.write_text(path.read_text().replace("gru >= knn", "knn >= gru"))
    edited = protocols.verdict(protocols.load(path), recs, "F1", False)
    assert edited.status == "exploratory" and "changed after its records were written" in edited.reasons[0]
    assert edited.text == "exploratory (floor not reached)"


def test_the_lab_imports_the_protocols_without_git_in_reach(tmp_path, monkeypatch):
    """No git (or not a repository): not committed, so nothing is recorded, and nothing crashes."""
    p = protocols.load(write_protocol(tmp_path / "p", commit=False))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert protocols.committed(p) is None
    assert sys.modules["neurodyn_lab.protocols"] is protocols
