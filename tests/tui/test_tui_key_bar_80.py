"""At 80x24 every screen keeps help and quit on its key bar (issue 13): `? Help` and `q Quit`,
or, where an input takes `?` and `q` as text (the configuration form), `f1 Help` and `^q Quit`;
the screen's own keys give way first, from the least important, with a "…"."""

from __future__ import annotations

import re

import pytest

from hbtui.core.settings.config import Settings
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.screens.runs import RunsScreen
from hbtui.tui.widgets.key_bar import KeyBar
from tests.support.tui import wait_for


def bar_text(app) -> str:
    return str(app.screen.query_one(KeyBar).render())


def help_and_quit_shown(app) -> bool:
    text = bar_text(app)
    return bool(re.search(r"(\?|f1) Help", text)) and bool(re.search(r"(q|\^q) Quit", text))


async def test_every_screen_keeps_help_and_quit_at_80_columns(finished_run_db):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        seen = []
        for key, screen_type in (
            ("enter", RunScreen),
            ("2", RunScreen),
            ("enter", ConversationScreen),
            ("escape", RunScreen),
            ("escape", RunsScreen),
            ("m", MonitorScreen),
            ("escape", RunsScreen),
            ("n", ConfigScreen),
        ):
            await pilot.press(key)
            await wait_for(pilot, lambda screen_type=screen_type: isinstance(app.screen, screen_type))
            await pilot.pause(0.2)
            seen.append((type(app.screen).__name__, bar_text(app)))
            assert help_and_quit_shown(app), seen[-1]
        assert "f1 Help" in bar_text(app) and "^q Quit" in bar_text(app)  # the form's input has the focus
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal), what="f1 opening the help from an input")


@pytest.mark.parametrize("width", [80, 120])
async def test_the_runs_list_drops_its_own_keys_before_help_and_quit(finished_run_db, width):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(width, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        text = bar_text(app)
        assert help_and_quit_shown(app) and text.startswith(" m Monitor")  # the first keys kept, in order
        assert "…" in text  # ? lists the keys given way
        assert ("/ Search runs" in text) == (width == 120)


def test_the_conversation_header_leaves_out_whole_parts_at_80_columns_never_half_a_word():
    from hbtui.store.rows import ConversationDetail, ConversationSummary
    from hbtui.tui.screens.conversation import header_text

    summary = ConversationSummary(9, 0, 0, "453d4d4c-aaaa", "communication", "", "generated", -0.114, 7, 3, 2, 3, None)
    detail = ConversationDetail(summary, [], [], "reply", None, None, None)
    whole = header_text(detail, 0, 21).plain
    fitted = header_text(detail, 0, 21, width=78).plain  # 80 columns, less the padding
    assert len(fitted) <= 78 and "3 penalties" in fitted and "2 grader errors" in fitted  # before the id, the theme
    assert set(fitted.split("  ")) <= set(whole.split("  "))  # whole parts only
    assert "communication" in whole and "communication" not in fitted


def test_reviewing_at_80_columns_the_header_keeps_both_scores_before_the_counts():
    """A reviewer at 80 columns watches the reviewed score move as they flip verdicts: with repeats
    and a review, the graded and the reviewed score stay; the run's reviewed score, the counts
    and the prompt_id give way first (a new user's trial saw both scores dropped)."""
    from hbtui.store.rows import ConversationDetail, ConversationSummary
    from hbtui.tui.screens.conversation import header_text
    from hbtui.tui.screens.reviewing import score_part

    summary = ConversationSummary(40, 39, 0, "ace28a77-bbbb", "emergency", "", "generated", 0.032, 6, 6, 0, 12, None)
    detail = ConversationDetail(summary, [], [], "reply", None, None, None)
    fitted = header_text(detail, 39, 80, 2, width=78, reviewed=score_part(0.086, 0.348)).plain
    assert len(fitted) <= 78
    assert fitted.startswith("Conversation 40/80  #40 (repeat 1 of 2)  score 0.032  reviewed 0.086")
    whole = header_text(detail, 39, 80, 2, reviewed=score_part(0.086, 0.348)).plain
    assert "(run reviewed 0.348)" in whole and "ace28a77" in whole


async def test_a_long_run_name_gives_way_to_the_score_and_status_in_the_run_header(finished_run_db):
    import sqlite3

    from textual.widgets import Static

    long_name = "llama-3.3-70b-instruct-graded-by-gpt-4.1-on-main-2026-11-30-18-00-00"
    with sqlite3.connect(finished_run_db) as conn:
        conn.execute("UPDATE runs SET name = ?", (long_name,))
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.report is not None)
        await pilot.pause(0.1)
        title = str(app.screen.query_one("#run-title", Static).render())
        assert len(title) <= 78 and title.endswith("  finished") and "score 0.625" in title
        assert title.startswith("Run 1 llama-3.3-70b") and "18-00-00" in title  # both ends of the name kept


def test_the_filter_bar_keeps_every_filter_and_never_cuts_a_word():
    """The run's filter line at 80 columns: the separators narrow, then the sort order gives way,
    and only past that is the end cut, at a word's end (a new user's trial read
    "search 'fever': 58 criteria, 6 re…")."""
    from rich.text import Text

    from hbtui.tui.fit import every_part

    search = "search 'fever': 58 criteria, 6 replies/prompts"
    parts = [Text("20 of 80"), Text("sort score ↑ (worst first)"), Text(search)]
    wide = f"20 of 80  ·  sort score ↑ (worst first)  ·  {search}"
    assert every_part(parts, len(wide), optional=1).plain == wide
    assert every_part(parts, len(wide) - 1, optional=1).plain == f"20 of 80 · sort score ↑ (worst first) · {search}"
    assert every_part(parts, 78, optional=1).plain == f"20 of 80 · {search}"
    # Said in short before it gives way (issue 25, item 11: at 80 columns it dropped out).
    short = Text("sort score ↑")
    assert every_part(parts, 78, optional=1, shorter=short).plain == f"20 of 80 · sort score ↑ · {search}"
    assert every_part(parts, 66, optional=1, shorter=short).plain == f"20 of 80 · {search}"
    more = [*parts, Text("tag axis:completeness"), Text("verdict missed")]
    whole = f"20 of 80 · {search} · tag axis:completeness · verdict missed"
    tight = every_part(more, 78, optional=1).plain
    assert len(tight) <= 78 and tight.endswith("…")
    kept = tight.removesuffix("…").rstrip()
    assert whole.startswith(kept) and whole[len(kept)] == " "  # cut where a word ends
