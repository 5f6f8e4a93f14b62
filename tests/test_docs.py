"""The project documents itself: every relative link in README.md, ARCHITECTURE.md and docs/ resolves to a file of
the repository, and nothing points at folders outside it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]
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
