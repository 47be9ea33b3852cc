"""The documentation holds together: the README stays short, every link leads somewhere, and
docs/architecture.md names paths that exist and every layer of the contracts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHANGE_KINDS = {"command", "provider quirk", "screen", "metric", "setting", "export"}


def prose(text: str) -> str:
    """The text without its fenced blocks and code spans, where brackets are code, not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def links(text: str) -> list[str]:
    """The targets of the Markdown links and images of ``text``."""
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", prose(text))


def anchor(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M), re.M)
    return {anchor(heading) for heading in headings}


def test_the_readme_is_under_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) < 200


def test_the_readme_lists_every_document():
    section = (ROOT / "README.md").read_text().split("## Documentation", 1)[1]
    listed = set(re.findall(r"\]\((docs/[^)#]+\.md)\)", section))
    assert listed == {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_that_exists(document):
    found = [target for target in links(document.read_text()) if not target.startswith(("http://", "https://", "#"))]
    missing = [target for target in found if not (document.parent / target.split("#", 1)[0]).exists()]
    assert missing == [], f"{document.name} links to files that do not exist"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_to_a_heading_finds_it(document):
    wrong = []
    for target in links(document.read_text()):
        if target.startswith(("http://", "https://")) or "#" not in target:
            continue
        file, heading = target.split("#", 1)
        path = document.parent / file if file else document
        if path.suffix == ".md" and path.exists() and heading not in anchors(path):
            wrong.append(target)
    assert wrong == [], f"{document.name} links to headings that do not exist"


def test_brackets_in_code_are_not_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [the app](app.md), [a command](`not a link`) and `[x](code.md)`.\n")
    assert links(page.read_text()) == ["app.md"]
    assert not (tmp_path / "app.md").exists()


def exists(path: str) -> bool:
    """A path ending in / is a folder of the repository, any other a file."""
    return (ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file()


def test_every_hbtui_path_in_the_architecture_exists():
    paths = set(re.findall(r"`(hbtui/[^`\s]*)`", ARCHITECTURE.read_text()))
    assert len(paths) > 20
    missing = [path for path in sorted(paths) if not exists(path)]
    assert missing == [], "docs/architecture.md names paths that do not exist"


def change_kinds() -> set[str]:
    section = ARCHITECTURE.read_text().split("## Where a change goes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    kinds = {row.split("|")[1].strip() for row in rows[1:]}  # rows[0] is the header
    return {re.sub(r"^(a|an) ", "", kind) for kind in kinds}


def test_the_architecture_says_where_each_kind_of_change_goes():
    assert CHANGE_KINDS <= change_kinds()


def test_the_architecture_names_every_layer_of_the_contracts():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(contract for contract in contracts if contract["type"] == "layers")["layers"]
    names = {part.strip() for layer in layers for part in layer.replace(":", "|").split("|")}
    text = ARCHITECTURE.read_text()
    unnamed = [name for name in sorted(names) if f"`hbtui/{name}/`" not in text and f"`hbtui/{name}.py`" not in text]
    assert unnamed == [], "docs/architecture.md does not name these layers"


def test_a_module_over_500_lines_says_why_in_its_docstring():
    """Issue 24, item 4: no file over about 500 lines without a reason stated in its docstring."""
    import ast

    root = Path(__file__).resolve().parents[2] / "hbtui"
    unexplained = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 520:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Longer than most modules" not in doc:
                unexplained.append(str(path.relative_to(root.parent)))
    assert unexplained == []
