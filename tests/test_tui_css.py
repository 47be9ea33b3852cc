"""No dead CSS: every type, id and class the app's stylesheets name exists in the app.

A rule left behind by a widget that was replaced (the rubric drew a CriterionView per criterion
once) styles nothing, and reads as if it still did.
"""

from __future__ import annotations

import re
from pathlib import Path

from textual.app import App
from textual.css.model import SelectorType
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode

import hbtui.tui
import hbtui.tui.app
import hbtui.tui.screens.compare
import hbtui.tui.screens.config
import hbtui.tui.screens.confirm
import hbtui.tui.screens.conversation
import hbtui.tui.screens.help
import hbtui.tui.screens.monitor
import hbtui.tui.screens.pair
import hbtui.tui.screens.presets
import hbtui.tui.screens.regrade
import hbtui.tui.screens.run
import hbtui.tui.screens.runs  # every widget class of the app defined before the types are listed

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


def test_every_selector_of_the_app_stylesheets_names_something_the_app_has() -> None:
    types = node_type_names()
    source = "\n".join(path.read_text() for path in TUI.rglob("*.py"))
    # Ids and classes are written in the code as a whole quoted word, or after # or . in a query.
    words = set(re.findall(r"""["'#. ]([-\w]+)(?=["' ])""", source))
    dead = []
    for sheet in sorted(TUI.glob("*.tcss")):
        for kind, name in sorted(selectors(sheet), key=lambda found: (found[0].value, found[1])):
            if kind == SelectorType.TYPE and name not in types:
                dead.append(f"{sheet.name}: {name}")
            elif kind in (SelectorType.ID, SelectorType.CLASS) and name not in words:
                dead.append(f"{sheet.name}: {'#' if kind == SelectorType.ID else '.'}{name}")
    assert dead == []
