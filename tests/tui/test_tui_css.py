"""No dead CSS: every type, id and class the app's stylesheets name exists in the app.

A rule left behind by a widget that was replaced (the rubric drew a CriterionView per criterion
once) styles nothing, and reads as if it still did.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

from textual.app import App
from textual.css.model import SelectorType
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode

import hbtui.tui

# Every module of the app imported, so that every widget class exists before the types are listed.
for module in pkgutil.walk_packages(hbtui.tui.__path__, "hbtui.tui."):
    importlib.import_module(module.name)

TUI = Path(hbtui.tui.__file__).parent


def node_type_names() -> set[str]:
    names: set[str] = set()
    todo: list[type] = [DOMNode]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def selectors(path: Path) -> set[tuple[SelectorType, str]]:
    sheet = Stylesheet(variables=App().get_css_variables())
    sheet.read(path)
    sheet.parse()
    return {
        (selector.type, selector.name)
        for rule in sheet.rules
        for selector_set in rule.selector_set
        for selector in selector_set.selectors
    }


def code_names() -> tuple[set[str], set[str]]:
    """The ids and classes the app's code can give: the words of its string literals (a query's
    "#id .class", a classes="a b"; docstrings are prose, not names), and the literal beginnings
    of f-strings (f"row-{name}")."""
    words: set[str] = set()
    prefixes: set[str] = set()
    for path in TUI.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.JoinedStr):
                first = node.values[0] if node.values else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and len(node.values) > 1:
                    prefix = re.split(r"[\s#.,>]", first.value)[-1]
                    if prefix:
                        prefixes.add(prefix)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                words.update(word for word in re.split(r"[\s#.,>:()]+", node.value) if word)
    return words, prefixes


def test_every_selector_of_the_app_stylesheets_names_something_the_app_has() -> None:
    types = node_type_names()
    words, prefixes = code_names()
    dead = []
    for sheet in sorted(TUI.glob("*.tcss")):
        for kind, name in sorted(selectors(sheet), key=lambda found: (found[0].value, found[1])):
            if kind == SelectorType.TYPE and name not in types:
                dead.append(f"{sheet.name}: {name}")
            elif kind in (SelectorType.ID, SelectorType.CLASS) and not (
                name in words or any(name.startswith(prefix) for prefix in prefixes)
            ):
                dead.append(f"{sheet.name}: {'#' if kind == SelectorType.ID else '.'}{name}")
    assert dead == []
