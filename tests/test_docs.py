"""The project documents itself: every relative link in README.md, ARCHITECTURE.md, docs/, the benchmark pages
(benchmarks/README.md, RESULTS.md, the details pages) and every experiment's report resolves to a file of the
repository, and nothing points at folders outside it; benchmarks/results/ follows its one layout."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md")),
         ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "RESULTS.md", *sorted(RESULTS.glob("*.md")),
         *sorted(RESULTS.glob("*/*.md"))]  # details pages and experiment reports (run summaries: issue of their own)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(page):
    text = page.read_text()
    assert "../shared" not in text and "shared/DESIGN" not in text
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.exists(), f"{page.name} links to {target}, which does not exist"
        assert ROOT in resolved.parents or resolved == ROOT, f"{page.name} links outside the repository: {target}"


def test_every_paper_the_code_cites_has_notes():
    index = (ROOT / "docs" / "papers" / "README.md").read_text()
    for system in ("chonn", "lamo", "nac", "geomano", "stssm"):
        assert (ROOT / "docs" / "papers" / f"notes-{system}.md").exists()
        assert f"notes-{system}.md" in index
    for number in ("000", "001", "002", "003", "004"):
        assert f"| {number} |" in index


# a path a page names in backticks, e.g. `benchmarks/results/stssm_tables/table1.md` (globs and <placeholders> skipped)
NAMED = re.compile(r"`(benchmarks/results/[^`*<>\s]+)`")


@pytest.mark.parametrize("page", [p for p in PAGES if "benchmarks" in p.parts], ids=lambda p: str(p.relative_to(ROOT)))
def test_result_paths_named_in_benchmark_pages_exist(page):
    for named in NAMED.findall(page.read_text()):
        assert (ROOT / named.rstrip("/.,")).exists(), f"{page.name} names {named}, which does not exist"


def test_results_follow_the_one_layout():
    """``results/`` holds details pages and experiment folders; an experiment folder holds files and ``runs/``;
    ``runs/`` holds one folder per run, of files (and ``checkpoints/`` while a run trains, never tracked at rest).
    Hidden entries (a training run's lock file) are transient and skipped."""
    visible = lambda folder: (p for p in folder.iterdir() if not p.name.startswith("."))  # noqa: E731
    for entry in visible(RESULTS):
        if entry.is_file():
            assert entry.suffix == ".md", f"{entry.name}: only details pages lie directly in benchmarks/results"
            continue
        for item in visible(entry):
            if item.is_dir():
                assert item.name == "runs", f"{entry.name}/{item.name}: an experiment folder holds no other folder"
                for run in visible(item):
                    assert run.is_dir(), f"{entry.name}/runs/{run.name}: runs/ holds one folder per run"
                    for f in visible(run):
                        assert f.is_file() or f.name == "checkpoints", f"{entry.name}/runs/{run.name}/{f.name}"
