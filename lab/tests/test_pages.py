"""The lab's pages document themselves: every relative link of lab/README.md, lab/RESULTS.md, the details pages and
every report among the records resolves to a file of the repository (never outside it), and every record path a
page names in backticks (``lab/records/...``) exists."""

import re
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[1]
ROOT = LAB.parent
PAGES = [LAB / "README.md", LAB / "RESULTS.md", *sorted((LAB / "pages").glob("*.md"))]
REPORTS = sorted(p for p in (LAB / "records").rglob("*.md") if "runs" not in p.parts)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
#: a record path a page names, e.g. `lab/records/stssm/tables/table1.md` (globs and <placeholders> skipped)
NAMED = re.compile(r"`(lab/records/[^`*<>\s]+)`")


@pytest.mark.parametrize("page", PAGES + REPORTS, ids=lambda p: str(p.relative_to(LAB)))
def test_relative_links_resolve_inside_the_repository(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.exists(), f"{page.name} links to {target}, which does not exist"
        assert ROOT in resolved.parents or resolved == ROOT, f"{page.name} links outside the repository: {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(LAB)))
def test_record_paths_named_in_the_pages_exist(page):
    for named in NAMED.findall(page.read_text()):
        assert (ROOT / named.rstrip("/.,")).exists(), f"{page.name} names {named}, which does not exist"


def test_the_pages_name_no_path_of_the_layout_before_the_lab():
    """RESULTS.md and the details pages cite records where they are (the README tells the move's history)."""
    for page in PAGES[1:]:
        assert "benchmarks/results" not in page.read_text(), page.name
