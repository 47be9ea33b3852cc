"""The browser's search everything (/ with > and <), the sort picker (s) and the filter menu (f),
driven by keys on a synthetic run at 80x24 and 120x40."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from hbtui.store import ConversationFilter
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browse import open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.tui import wait_for

SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def search_db(tmp_path_factory) -> tuple[Path, int]:
    return synthetic_db(
        tmp_path_factory.mktemp("search") / "hbtui.sqlite",
        conversations=60,
        criteria_per=12,
        seed=3,
        name="synthetic-60",
    )


def rows(db: Path, sql: str, args=()) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


async def open_list(pilot, run_id: int) -> RunScreen:
    screen = await open_run(pilot, run_id)
    await pilot.press("2")
    return screen


async def pick(pilot, *keys: str) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, PickerModal))
    await pilot.press(*keys)


@pytest.mark.parametrize("size", SIZES)
async def test_search_finds_criterion_text_says_where_and_steps_through_matches(search_db, size):
    db, run_id = search_db
    expected = rows(
        db,
        "SELECT c.position, v.idx FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
        " WHERE v.run_id = ? AND v.criterion LIKE '%fabricated%' ORDER BY c.position, v.idx",
        (run_id,),
    )
    conversations = sorted({position for position, _ in expected})
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        screen = await open_list(pilot, run_id)
        lst = screen.conversation_list
        await pilot.press("slash", *"fabricated", "enter")
        await wait_for(pilot, lambda: lst.total == len(conversations) and screen.matches is not None)
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        assert f"{len(conversations)} of 60" in text
        assert f"{len(expected)} criteria" in text  # where it matched: criteria, not replies
        assert screen.matches.criteria == len(expected) and screen.matches.in_text == 0

        await pilot.press(">")  # on the run screen: the next matching conversation
        assert lst.cursor == 1
        await pilot.press("<")
        assert lst.cursor == 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        conversation = app.screen
        verdicts = conversation.query_one(VerdictList)
        seen = []
        for _ in expected:
            before = (conversation.index, verdicts.selected)
            await pilot.press(">")
            await wait_for(pilot, lambda before=before: (conversation.index, verdicts.selected) != before)
            seen.append((conversation.detail.summary.position, verdicts.selected))
        assert seen == expected
        assert "fabricated" in verdicts.current.verdict.criterion.lower()
        await pilot.press(">")  # past the last: says so and stays
        await wait_for(pilot, lambda: "no further match" in screen_text(app), what="told there is none")
        assert (conversation.detail.summary.position, verdicts.selected) == expected[-1]
        await pilot.press("<")
        await wait_for(pilot, lambda: (conversation.detail.summary.position, verdicts.selected) == expected[-2])


async def test_search_for_a_word_of_explanations_only(search_db):
    db, run_id = search_db
    count = rows(db, "SELECT count(*) FROM verdicts WHERE run_id = ? AND explanation LIKE '%satisfy%'", (run_id,))[0][0]
    app = browser_app(db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_list(pilot, run_id)
        await pilot.press("slash", *"satisf", "enter")
        await wait_for(pilot, lambda: screen.matches is not None)
        assert screen.matches.explanations == count > 0
        assert f"{count:,} explanations" in " ".join(screen_text(app).split())


@pytest.mark.parametrize("size", SIZES)
async def test_sort_picker_orders_by_penalties(search_db, size):
    db, run_id = search_db
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        screen = await open_list(pilot, run_id)
        await pilot.press("s")
        await pick(pilot, "down", "down", "down", "down", "down", "enter")  # the sixth: penalties
        await wait_for(pilot, lambda: screen.sort == "penalties" and screen.conversation_list.row(0) is not None)
        lst = screen.conversation_list
        shown = [lst.row(i).penalties for i in range(10)]
        assert shown == sorted(shown, reverse=True) and shown[0] > 0
        assert "penalties triggered (most first)" in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_filter_menu_by_criterion_tag_and_verdict_state(search_db, size):
    db, run_id = search_db
    expected = {
        conversation_id
        for conversation_id, points, status, tags in rows(
            db, "SELECT conversation_id, points, status, tags FROM verdicts WHERE run_id = ?", (run_id,)
        )
        if "axis:accuracy" in json.loads(tags) and points > 0 and status == "not_met"
    }
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        screen = await open_list(pilot, run_id)
        await pilot.press("f")
        await pick(pilot, "down", "enter")  # criterion tag…
        await pilot.pause()
        await pick(pilot, "down", "enter")  # the first tag after "any": axis:accuracy
        await wait_for(pilot, lambda: screen.filter.tag == "axis:accuracy")
        await pilot.press("f")
        await pick(pilot, "down", "down", "enter")  # verdict state…
        await pilot.pause()
        await pick(pilot, "down", "down", "enter")  # missed
        await wait_for(pilot, lambda: screen.filter.verdict_state == "missed" and screen.total == len(expected))
        ids = await app.store.conversation_ids(run_id, screen.filter)
        assert set(ids) == expected
        text = " ".join(screen_text(app).split())
        assert "tag axis:accuracy · verdict missed" in text
        # The single-key filters still work beside the menu, and x clears them all.
        await pilot.press("p")
        await wait_for(pilot, lambda: screen.filter.has_penalties)
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.filter == ConversationFilter() and screen.total == 60)


async def test_the_tag_picker_fits_80x24_one_line_a_tag(search_db, tmp_path):
    """At 80x24 the criterion-tag picker stays on the screen (its list scrolls) and each tag is
    one line: long cluster tags wrapped mid-word onto lines that read as other choices, and
    the dialog ran off the top and over the footer (a new user's trial)."""
    import shutil
    import sqlite3

    from textual.widgets import OptionList

    source, run_id = search_db
    db = tmp_path / "long-tags.sqlite"
    shutil.copy(source, db)
    long_tags = [f"cluster:communication_health-professional_accuracy_completeness_{n}" for n in range(30)]
    with sqlite3.connect(db) as conn:  # tags as long as the real cluster tags, and many of them
        ids = [row[0] for row in conn.execute("SELECT id FROM verdicts WHERE run_id = ? LIMIT 30", (run_id,))]
        for verdict_id, tag in zip(ids, long_tags):
            conn.execute("UPDATE verdicts SET tags = ? WHERE id = ?", (json.dumps([tag]), verdict_id))
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_list(pilot, run_id)
        await pilot.press("f")
        await pick(pilot, "down", "enter")  # criterion tag…
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal) and "tagged" in app.screen.title_text)
        await pilot.pause()
        dialog = app.screen.query_one(".dialog")
        assert dialog.region.y >= 0 and dialog.region.bottom <= 23  # above the footer
        options = app.screen.query_one(OptionList)
        assert options.virtual_size.height == options.option_count  # a line a choice
