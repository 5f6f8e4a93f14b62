"""`.ci/check_tree.py`: the tracked tree's size rules, on small repositories the tests build, and on this one."""

import importlib.util
import json
import subprocess
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_tree", ROOT / ".ci" / "check_tree.py")
check_tree = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_tree)
OUTSIDE = check_tree.LAB  # the folder whose files do not count as the library's (the tree check names it)


def _repo(tmp_path: Path, files: dict[str, bytes]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    subprocess.run(["git", "-C", str(repo), "add", "--force", "--all"], check=True)
    return repo


def test_this_repository_passes():
    assert check_tree.problems(ROOT) == []


def test_a_small_clean_tree_passes(tmp_path):
    assert check_tree.problems(_repo(tmp_path, {"src/a.py": b"x = 1\n", f"{OUTSIDE}/records/r.json": b"{}"})) == []


def test_a_file_over_two_megabytes_is_named(tmp_path):
    found = check_tree.problems(_repo(tmp_path, {"big.bin": b"0" * (2 * 2**20 + 1), "ok.bin": b"0" * 2**20}))
    assert len(found) == 1 and found[0].startswith("big.bin is 2.0 MB, over the 2 MB limit")


def test_the_library_part_over_five_megabytes_names_its_largest_files(tmp_path):
    """Everything outside the laboratory's folder counts as the library; the same bytes inside it do not."""
    files = {f"data/f{i}.bin": b"0" * (2 * 2**20 - 10) for i in range(3)}
    found = check_tree.problems(_repo(tmp_path, files))
    assert len(found) == 1 and f"(outside {OUTSIDE}/) is 6.0 MB, over the 5 MB" in found[0]
    assert "data/f" in found[0]
    inside = {f"{OUTSIDE}/records/f{i}.bin": b"0" * (2 * 2**20 - 10) for i in range(3)}
    (tmp_path / "inside").mkdir()
    assert check_tree.problems(_repo(tmp_path / "inside", inside)) == []


def test_a_tree_over_twenty_megabytes_names_its_largest_files(tmp_path):
    files = {f"{OUTSIDE}/records/f{i}.bin": b"0" * (2 * 2**20 - 10) for i in range(11)}
    found = check_tree.problems(_repo(tmp_path, files))
    assert len(found) == 1 and "the tracked tree is 22.0 MB, over the 20 MB limit" in found[0]


@pytest.mark.parametrize(
    "name",
    [
        "model.pt",
        "tests/fixtures/tiny.pt",
        "runs/exp/a-s0/checkpoints/last.pt",
        "results/exp/runs/a-s0/checkpoints/last.pt",
    ],
)
def test_any_tracked_checkpoint_is_refused(tmp_path, name):
    """No exception: not for tests' fixtures, not for a run still training (its metrics say so)."""
    run = PurePosixPath(name).parent.parent
    files = {name: b"0" * 100, f"{run}/metrics.jsonl": json.dumps({"epoch": 0, "train_loss": 1.0}).encode()}
    found = check_tree.problems(_repo(tmp_path, files))
    assert len(found) == 1 and found[0].startswith(f"{name} is a tracked checkpoint")


def test_the_command_line_exits_1_with_one_sentence_per_problem(tmp_path):
    repo = _repo(tmp_path, {"model.pt": b"0"})
    done = subprocess.run(["python3", str(ROOT / ".ci" / "check_tree.py"), str(repo)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.count("check_tree: ") == 1 and "model.pt" in done.stderr
