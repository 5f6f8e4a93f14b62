"""Every reference from the source to the docs resolves: ``docs/....md#anchor`` names an existing page and one of
its headings (GitHub's anchor of the heading's text), and ``notes-X.md §N`` / ``notes-X.md N.M`` / ``notes-X.md,
Sec. N`` names a paper-notes page with a heading numbered N or N.M. The paper-vs-code tables live once, in
docs/papers/notes-*.md; the module docstrings point at them, and this keeps the pointers from drifting."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(
    p
    for p in (ROOT / "src").rglob("*")
    if p.suffix in (".py", ".yaml", ".md", ".cpp", ".h") and "__pycache__" not in p.parts
)
DOC_LINK = re.compile(r"(docs/[\w./-]+?\.md)(?:#([\w-]+))?")
FOREIGN = {"docs/data_format.md"}  # The Well's own page, named by data/formats/the_well.py: not ours
NUMBER = r"[A-Z]?\d+(?:\.\d+)*"
NOTES_SECTION = re.compile(rf"notes-([a-z]+)\.md,? (?:§ ?|Sec\. ?|section )?({NUMBER}(?:(?:, | and ){NUMBER})*)\b")


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def headings(page: Path) -> list[str]:
    """The heading titles of a Markdown page, skipping fenced code blocks (a ``# comment`` there is no heading)."""
    titles, fenced = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            titles.append(m.group(1))
    return titles


def test_the_anchor_rule_matches_githubs():
    assert anchor("LaMO model: paper vs code") == "lamo-model-paper-vs-code"
    assert anchor("2.5 Latent SSM block") == "25-latent-ssm-block"
    assert anchor("ST-SSM model: paper vs code") == "st-ssm-model-paper-vs-code"


def references(text: str):
    for m in DOC_LINK.finditer(text):
        if m.group(1) in FOREIGN:
            continue
        yield "link", m.group(1), m.group(2)
    for m in NOTES_SECTION.finditer(text):
        for number in re.split(r", | and ", m.group(2)):
            yield "section", f"docs/papers/notes-{m.group(1)}.md", number


@pytest.mark.parametrize(
    "source",
    [p for p in SOURCES if "docs/" in p.read_text() or "notes-" in p.read_text()],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_references_from_the_source_resolve(source):
    for kind, page, target in references(source.read_text()):
        path = ROOT / page
        assert path.is_file(), f"{source.name} refers to {page}, which does not exist"
        titles = headings(path)
        if kind == "link" and target:
            assert target in {anchor(t) for t in titles}, f"{source.name}: {page} has no heading #{target}"
        if kind == "section":
            numbers = {t.split()[0].rstrip(".") for t in titles}
            assert target in numbers, f"{source.name}: {page} has no section {target}"


def test_the_reference_patterns_catch_what_they_should():
    found = list(references("see docs/papers/notes-lamo.md#x-y and notes-lamo.md 2.5, 2.10 and notes-nac.md §3"))
    assert found == [
        ("link", "docs/papers/notes-lamo.md", "x-y"),
        ("section", "docs/papers/notes-lamo.md", "2.5"),
        ("section", "docs/papers/notes-lamo.md", "2.10"),
        ("section", "docs/papers/notes-nac.md", "3"),
    ]


def test_the_model_docstrings_point_at_their_tables():
    """The tables moved out of these docstrings are reachable from them (each docstring names its notes anchor)."""
    for module in (
        "models/lamo.py",
        "models/geomano.py",
        "models/chonn.py",
        "models/stssm.py",
        "nn/mamba.py",
        "nn/geomamba.py",
        "nn/kirchhoff.py",
        "models/nac.py",
        "models/ffno.py",
        "models/fno2d_time.py",
        "models/fno.py",
        "models/unet.py",
        "models/transolver.py",
    ):
        text = (ROOT / "src" / "neurodyn" / module).read_text()
        assert re.search(r"docs/papers/notes-[a-z]+\.md#[\w-]+-paper-vs-code", text), module
