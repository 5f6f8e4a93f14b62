"""Assemble the documentation site's sources, then ``mkdocs build --strict`` turns them into ``site/`` (``make docs``).

The site is built offline from what the repository holds:

* the guides: ``docs/*.md`` and ``docs/papers/`` (the index is ``docs/README.md``), and ``ARCHITECTURE.md``;
* the API reference, generated from the docstrings: one page per package of ``neurodyn`` (each module of it
  rendered by mkdocstrings), found by walking the package, so a module added or moved is documented without
  editing anything here;
* the examples: one page per script of ``examples/`` (its docstring, then its code);
* the results: the laboratory's summary and details pages with the records they link to (``lab/``).

Every page keeps its own relative links: the sources are copied into ``build/docs-src/`` in the repository's
layout (``docs/...`` at the top, ``lab/...`` beside it), so a link that works in the repository works on the site,
and ``mkdocs build --strict`` fails on any link that leads nowhere.

    python docs/build_site.py            # then: mkdocs build --strict
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "docs-src"
PACKAGE = "neurodyn"
SKIP_MODULES = ("__main__",)  # modules that run on import


def copy_guides() -> list[str]:
    """The guides and the papers' notes under ``docs/``, ``ARCHITECTURE.md`` at the top (the repository's layout, so
    their relative links hold), and the site's landing page: ``docs/README.md`` with its links made relative to the
    top. Returns the site paths of the pages."""
    pages = []
    for src in sorted((ROOT / "docs").rglob("*.md")):
        dst = OUT / "docs" / src.relative_to(ROOT / "docs")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
        pages.append(dst.relative_to(OUT).as_posix())
    shutil.copy(ROOT / "ARCHITECTURE.md", OUT / "ARCHITECTURE.md")
    index = (ROOT / "docs" / "README.md").read_text()
    index = re.sub(r"\]\((?!https?:|#|\.\./)", "](docs/", index).replace("](../", "](")
    (OUT / "index.md").write_text(index + "\n" + LANDING)
    return pages


LANDING = """## On this site

| section | what it holds |
| --- | --- |
| [API reference](api/index.md) | every package and module of `neurodyn`, from its docstrings |
| [Examples](examples/train_seed_model.md) | the scripts of `examples/`: a seed model with `fit`, `load_run` in \
physical units, your time series, the scan's backends, point clouds |
| [Results](lab/RESULTS.md) | what the laboratory measured against each paper's claims, with its records |
"""


def copy_results() -> None:
    """The laboratory's pages and the records they cite, under ``lab/`` as in the repository."""
    lab = ROOT / "lab"
    if not (lab / "RESULTS.md").is_file():
        return
    (OUT / "lab").mkdir(parents=True, exist_ok=True)
    for name in ("RESULTS.md", "README.md"):
        shutil.copy(lab / name, OUT / "lab" / name)
    for folder in ("pages", "records", "protocols"):
        if (lab / folder).is_dir():
            shutil.copytree(lab / folder, OUT / "lab" / folder, dirs_exist_ok=True)


def api_pages() -> list[str]:
    """One page per package of ``neurodyn`` (its modules rendered by mkdocstrings); returns their site paths."""
    sys.path.insert(0, str(ROOT / "src"))
    root = importlib.import_module(PACKAGE)
    packages: dict[str, list[str]] = {PACKAGE: [PACKAGE]}
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{PACKAGE}."):
        name = info.name
        if name.rsplit(".", 1)[-1] in SKIP_MODULES or "._" in name and not name.endswith("__init__"):
            continue
        parent = name if info.ispkg else name.rsplit(".", 1)[0]
        top = ".".join(parent.split(".")[:2])
        packages.setdefault(top, []).append(name)
    pages = []
    for package, modules in sorted(packages.items()):
        path = OUT / "api" / f"{package.removeprefix(PACKAGE + '.') if package != PACKAGE else 'index'}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        title = f"`{package}`"
        body = [f"# {title}", ""]
        for module in sorted(set(modules)):
            body += [
                f"## `{module}`",
                "",
                f"::: {module}",
                "    options:",
                "      members_order: source",
                "      show_submodules: false",
                "",
            ]
        path.write_text("\n".join(body))
        pages.append(path.relative_to(OUT).as_posix())
    return pages


def example_pages() -> list[str]:
    """One page per script of ``examples/``: its docstring as prose, then its code."""
    pages = []
    for script in sorted((ROOT / "examples").glob("*.py")):
        text = script.read_text()
        doc = re.match(r'\s*"""(.*?)"""', text, re.S)
        path = OUT / "examples" / f"{script.stem}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            f"# `examples/{script.name}`",
            "",
            doc.group(1).strip() if doc else "",
            "",
            "```python",
            text.rstrip(),
            "```",
            "",
        ]
        path.write_text("\n".join(lines))
        pages.append(path.relative_to(OUT).as_posix())
    return pages


def main() -> int:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    guides = copy_guides()
    copy_results()
    api, examples = api_pages(), example_pages()
    print(
        f"site sources in {OUT.relative_to(ROOT)}: {len(guides)} guide pages, {len(api)} API pages, "
        f"{len(examples)} examples, results {'included' if (OUT / 'lab').is_dir() else 'absent'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
