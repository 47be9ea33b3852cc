"""The run screen's filter menu (`f`): every filter of the conversation list in one place, each
value picked from a list (theme, criterion tag, verdict state) or typed (score range, search).

The single-key filters (t, r, p, e, /, x) stay; the menu is where a reviewer finds them all,
and the only way to the filters by criterion tag and verdict state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hbtui.core.reviews import REVIEW_FILTER_LABELS, REVIEW_FILTERS
from hbtui.core.text import middle_cut, one_line
from hbtui.store.search import VERDICT_STATE_LABELS
from hbtui.tui.screens.picker import PickerModal

if TYPE_CHECKING:
    from hbtui.tui.screens.run import RunScreen

# What the menu offers: (label, what choosing it does), in the order of the menu.
MENU = (
    ("theme…", "theme"),
    ("criterion tag: axis, cluster or level…", "tag"),
    ("verdict state: met, missed, penalty, error…", "state"),
    ("score range…", "range"),
    ("review: flagged, flipped, not all reviewed…", "review"),
    ("search everything…", "search"),
    ("only with penalties (on/off)", "penalties"),
    ("only with errors (on/off)", "errors"),
    ("clear every filter", "clear"),
)


def open_filter_menu(screen: RunScreen) -> None:
    async def chosen(choice: tuple[str] | None) -> None:
        if choice is None:
            return
        action = choice[0]
        if action == "theme":
            await screen.action_filter_theme()
        elif action == "tag":
            await pick_tag(screen)
        elif action == "state":
            pick_state(screen)
        elif action == "range":
            await screen.action_score_range()
        elif action == "review":
            pick_review(screen)
        elif action == "search":
            await screen.action_search()
        elif action == "penalties":
            screen.action_toggle_penalties()
        elif action == "errors":
            screen.action_toggle_errors()
        else:
            screen.action_clear_filters()

    screen.app.push_screen(PickerModal("Filter the conversations by", list(MENU), MENU[0][1]), chosen)


def _apply(screen: RunScreen, **changes) -> None:
    screen._to_list()
    screen.filter = replace(screen.filter, **changes)


async def pick_tag(screen: RunScreen) -> None:
    tags = await screen.app.db.criterion_tags(screen.run_id)

    def picked(choice: tuple[str | None] | None) -> None:
        if choice is not None:
            _apply(screen, tag=choice[0])

    # One line a tag in the picker at 80 columns: a long cluster tag keeps its start and its end.
    labels: list[tuple[str, str | None]] = [
        ("any criterion tag", None),
        *((middle_cut(one_line(t, 200), 56), t) for t in tags),
    ]
    screen.app.push_screen(PickerModal("Conversations with a criterion tagged", labels, screen.filter.tag), picked)


def pick_review(screen: RunScreen) -> None:
    """The review filter (also `v`, which cycles through it) picked from a list."""

    def picked(choice: tuple[str | None] | None) -> None:
        if choice is not None:
            _apply(screen, review=choice[0])

    labels: list[tuple[str, str | None]] = [
        ("reviewed or not", None),
        *((REVIEW_FILTER_LABELS[name], name) for name in REVIEW_FILTERS),
    ]
    screen.app.push_screen(PickerModal("Conversations by their review", labels, screen.filter.review), picked)


def pick_state(screen: RunScreen) -> None:
    def picked(choice: tuple[str | None] | None) -> None:
        if choice is not None:
            _apply(screen, verdict_state=choice[0])

    labels: list[tuple[str, str | None]] = [
        ("any verdict", None),
        *((f"with {label}", state) for state, label in VERDICT_STATE_LABELS.items()),
    ]
    title = "Conversations with" + (" (of the criterion tag chosen)" if screen.filter.tag else "")
    screen.app.push_screen(PickerModal(title, labels, screen.filter.verdict_state), picked)
