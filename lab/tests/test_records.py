"""Every record under lab/records reads on any checkout: it parses, names no machine's folder (no absolute path) and
no path of the layout before the lab (``benchmarks/``), keeps its configs in today's config layout (the library builds
them as they are), links only images that are there, and no checkpoint is among them or tracked anywhere in the lab.
The records' folders follow the one layout ``<paper>/<claim>/``."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

LAB = Path(__file__).resolve().parents[1]
RECORDS = LAB / "records"
PAPERS = {"lamo", "geomano", "stssm", "chonn", "nac", "operators", "time_series", "speed"}
TEXT = (".json", ".jsonl", ".yaml", ".md")
FILES = sorted(p for p in RECORDS.rglob("*") if p.is_file())
TEXT_FILES = [p for p in FILES if p.suffix in TEXT]
#: a machine's folder: /work/, /tmp/, /home/, /root/, /Users/ or a drive letter (C:\ or C:/)
MACHINE = re.compile(r"/(?:work|tmp|home|root|Users)/|(?<![\w])[A-Za-z]:[\\/]")


def _ids(paths):
    return [str(p.relative_to(RECORDS)) for p in paths]


def test_there_are_records():
    assert len(FILES) > 900 and {p.relative_to(RECORDS).parts[0] for p in FILES} == PAPERS


@pytest.mark.parametrize(
    "path",
    [p for p in FILES if p.suffix in (".json", ".jsonl", ".yaml")],
    ids=_ids([p for p in FILES if p.suffix in (".json", ".jsonl", ".yaml")]),
)
def test_every_record_parses(path):
    text = path.read_text()
    if path.suffix == ".json":
        json.loads(text)
    elif path.suffix == ".jsonl":
        assert all(json.loads(line) is not None for line in text.splitlines() if line.strip())
    else:
        assert isinstance(yaml.safe_load(text), dict)


def test_no_record_names_a_machine_folder_or_the_old_layout():
    bad = [
        f"{p.relative_to(RECORDS)}: {m.group(0)!r}" for p in TEXT_FILES for m in [MACHINE.search(p.read_text())] if m
    ]
    old = [str(p.relative_to(RECORDS)) for p in TEXT_FILES if "benchmarks/" in p.read_text()]
    assert not bad, f"absolute paths in records: {bad[:5]}"
    assert not old, f"records citing benchmarks/: {old[:5]}"


def test_the_machine_path_check_finds_one():
    assert MACHINE.search('{"overrides": ["data.path=/work/uea_stores/GunPoint_TRAIN.h5"]}')
    assert MACHINE.search(r'"C:\\data\\x.h5"') and MACHINE.search("see /tmp/wheels")
    assert not MACHINE.search('"data.path=<stores>/GunPoint_TRAIN.h5", "lab/records/chonn/order"')


def test_one_record_per_run():
    """A run's record is its ``runs/<run>/result.json``, or one entry of its claim's ``results.json`` when the claim
    keeps no run folders; never both, and no worker's copy (``run_result.json``) beside it."""
    assert not [p for p in FILES if p.name == "run_result.json"]
    for store in RECORDS.rglob("results.json"):
        names = {r.get("run") for r in json.loads(store.read_text()) if isinstance(r, dict)}
        twins = [p.parent.name for p in store.parent.glob("runs/*/result.json") if p.parent.name in names]
        assert not twins, f"{store.relative_to(RECORDS)} repeats {twins[:3]}"


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.name == "config.yaml"], ids=_ids([p for p in FILES if p.name == "config.yaml"])
)
def test_every_stored_config_is_in_todays_layout(path):
    """The model section builds its config as it is stored (no key of an older layout: the library refuses moved
    keys, and no compatibility function runs here)."""
    from neurodyn.models import make_config

    model = yaml.safe_load(path.read_text())["model"]
    make_config(model["name"], {k: v for k, v in model.items() if k != "name"})


def test_no_checkpoint_in_the_records_nor_tracked_in_the_lab():
    assert not [p for p in RECORDS.rglob("*.pt")]
    if shutil.which("git") is None or not (LAB.parent / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "-C", str(LAB), "ls-files", "--", "*.pt"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked == [], f"checkpoints tracked under lab/: {tracked}"


def test_committed_summaries_link_only_committed_images():
    import matplotlib.image
    import numpy as np

    summaries = sorted(RECORDS.rglob("runs/*/summary.md"))
    assert summaries
    for summary in summaries:
        for name in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", summary.read_text()):
            image = summary.parent / name
            assert image.is_file(), f"{image} is linked but missing"
            pixels = matplotlib.image.imread(image)
            assert pixels.std() > 0 and len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 10


def test_records_follow_the_one_layout():
    """``records/<paper>/<claim>/``: paper folders only at the top, claim folders only in a paper; a claim holds
    files, ``runs/<run>/`` folders of files, and (a comparison of several archive files) folders of files."""
    visible = lambda folder: [p for p in folder.iterdir() if not p.name.startswith(".")]  # noqa: E731
    assert {p.name for p in visible(RECORDS)} == PAPERS and all(p.is_dir() for p in visible(RECORDS))
    for paper in visible(RECORDS):
        for claim in visible(paper):
            assert claim.is_dir(), f"{paper.name}/{claim.name}: a paper folder holds claim folders only"
            for item in visible(claim):
                if item.name == "runs":
                    for run in visible(item):
                        assert run.is_dir() and all(f.is_file() for f in visible(run)), f"{claim}/runs/{run.name}"
                elif item.is_dir():
                    assert all(f.is_file() for f in visible(item)), f"{paper.name}/{claim.name}/{item.name}"


def test_a_copied_run_summary_names_its_data_by_placeholder(tmp_path):
    """write_run_record copies a run's summary.md with the placeholders of its config (a summary prints its data
    path: an absolute one would name this machine's folder)."""
    from neurodyn_lab.records import write_run_record

    stores, run = tmp_path / "stores", tmp_path / "run"
    run.mkdir()
    (run / "summary.md").write_text(f'- data: {{"path": "{stores}/A_TRAIN.h5"}}\n')
    (run / "metrics.jsonl").write_text('{"epoch": 1}\n')
    write_run_record(tmp_path / "records", "r", {"run": "r"}, run_dir=run, placeholders={str(stores): "<stores>"})
    copied = (tmp_path / "records" / "runs" / "r" / "summary.md").read_text()
    assert copied == '- data: {"path": "<stores>/A_TRAIN.h5"}\n'
    assert (tmp_path / "records" / "runs" / "r" / "metrics.jsonl").read_text() == '{"epoch": 1}\n'
