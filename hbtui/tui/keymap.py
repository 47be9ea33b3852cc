"""One keymap: the keys of every screen, read from the bindings themselves.

The help (`?`) shows it below the keys of the screen it was opened on, and the key table of
docs/app.md is written from it (`python -m hbtui.tui.keymap --write`; a test checks that the two
agree), so a key added, moved or reworded in a BINDINGS list reaches both without a second
description.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from textual.binding import Binding
from textual.dom import DOMNode

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "app.md"
TABLE_START = "<!-- keymap: written by `python -m hbtui.tui.keymap --write` -->"
TABLE_END = "<!-- end of the keymap -->"
KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "greater_than_sign": ">",
    "less_than_sign": "<",
    "escape": "esc",
    "pagedown": "pgdn",
    "pageup": "pgup",
}


EVERY_SCREEN = "every screen"  # the app's own keys, in the keymap's first group


def screens() -> list[tuple[str, list[type[DOMNode]]]]:
    """Each screen by the name the help and docs/app.md give it, with the widgets whose keys it shows."""
    from hbtui.tui.app import HBTuiApp
    from hbtui.tui.screens.compare import CompareScreen, PairList
    from hbtui.tui.screens.config import ConfigScreen
    from hbtui.tui.screens.confirm import ConfirmModal
    from hbtui.tui.screens.conversation import ConversationScreen
    from hbtui.tui.screens.criteria import CriteriaScreen
    from hbtui.tui.screens.help import HelpModal
    from hbtui.tui.screens.meta_eval import MetaEvalScreen
    from hbtui.tui.screens.monitor import MonitorScreen
    from hbtui.tui.screens.pair import PairScreen
    from hbtui.tui.screens.picker import PickerModal
    from hbtui.tui.screens.presets import PresetNameModal, PresetPickerModal
    from hbtui.tui.screens.quit import QuitModal
    from hbtui.tui.screens.regrade import RegradeModal
    from hbtui.tui.screens.repeats import RepeatsScreen
    from hbtui.tui.screens.review_question import ReviewQuestion
    from hbtui.tui.screens.run import RunScreen
    from hbtui.tui.screens.runs import RunsScreen
    from hbtui.tui.widgets.conversation_list import ConversationList
    from hbtui.tui.widgets.filter_input import FilterInput

    return [
        (EVERY_SCREEN, [HBTuiApp]),
        ("runs", [RunsScreen]),
        ("configuration", [ConfigScreen]),
        ("presets", [PresetPickerModal, PresetNameModal]),
        ("monitor", [MonitorScreen]),
        ("run", [RunScreen, ConversationList, FilterInput]),
        ("filter picker", [PickerModal]),
        ("grade again", [RegradeModal]),
        ("conversation", [ConversationScreen]),
        ("criteria", [CriteriaScreen, FilterInput]),
        ("repeats", [RepeatsScreen]),
        ("meta-eval", [MetaEvalScreen]),
        ("review note or name", [ReviewQuestion]),
        ("compare", [CompareScreen, PairList]),
        ("pair (both replies)", [PairScreen]),
        ("question", [ConfirmModal]),
        ("quit while runs go on", [QuitModal]),
        ("help", [HelpModal]),
    ]


def key_text(keys: str) -> str:
    return "/".join(KEY_NAMES.get(key.strip(), key.strip()) for key in keys.split(","))


def own_bindings(node: type[DOMNode]) -> list[Binding]:
    """The keys hbtui gives ``node`` (each has an id), not Textual's own cursor keys."""
    found: list[Binding] = []
    for binding in node.BINDINGS:
        if isinstance(binding, Binding) and binding.id and binding.description:
            found.append(binding)
    return found


def screen_keys(nodes: list[type[DOMNode]]) -> list[tuple[str, str]]:
    """(keys, what they do) of one screen, each pair once (two dialogs may both cancel on esc)."""
    seen: dict[tuple[str, str], None] = {}
    for node in nodes:
        for binding in own_bindings(node):
            seen.setdefault((key_text(binding.key), binding.description), None)
    return list(seen)


def rows() -> list[tuple[str, str, str]]:
    """(screen, keys, what they do), in the order of the screens and their bindings."""
    return [(screen, keys, description) for screen, nodes in screens() for keys, description in screen_keys(nodes)]


def clashes() -> list[str]:
    """Keys that mean two things on one screen (its own keys and its widgets'): what a key does
    is what it says it does, so a table's enter and the screen's, both "Both replies", agree."""
    found = []
    for screen, nodes in screens():
        meaning: dict[str, str] = {}
        for node in nodes:
            for binding in own_bindings(node):
                for key in binding.key.split(","):
                    said = meaning.setdefault(key.strip(), binding.description)
                    if said != binding.description:
                        found.append(f"{screen}: {key_text(key)} is both {said!r} and {binding.description!r}")
    return found


def keymap_table() -> str:
    lines = [TABLE_START, "", "| screen | keys |", "| --- | --- |"]
    for screen, nodes in screens():
        keys = ", ".join(f"`{keys}` {description.lower()}" for keys, description in screen_keys(nodes))
        lines.append(f"| {screen} | {keys} |")
    return "\n".join([*lines, "", TABLE_END])


def document_with_table(document: str) -> str:
    """docs/app.md with its key table (between the two markers) written anew."""
    before, found, rest = document.partition(TABLE_START)
    if not found or TABLE_END not in rest:
        raise ValueError(f"docs/app.md lacks the keymap's markers {TABLE_START!r} ... {TABLE_END!r}")
    return before + keymap_table() + rest.split(TABLE_END, 1)[1]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    document = DOCUMENT.read_text(encoding="utf-8")
    if args == ["--write"]:
        DOCUMENT.write_text(document_with_table(document), encoding="utf-8")
        return 0
    if args == ["--check"]:
        if document_with_table(document) != document:
            print("docs/app.md's keymap is out of date: python -m hbtui.tui.keymap --write", file=sys.stderr)
            return 1
        return 0
    print("usage: python -m hbtui.tui.keymap --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
