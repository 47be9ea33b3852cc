"""Pick up where you left off: each run remembers the reviewer's last conversation and criterion
in the database, and opening the run again puts the list there and opens on the criterion."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browse import open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.tui import wait_for


@pytest.fixture
def resume_db(tmp_path) -> tuple[Path, int]:
    return synthetic_db(tmp_path / "hbtui.sqlite", conversations=12, criteria_per=6, seed=4)


def stored(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT run_id, conversation_id, criterion FROM review_positions").fetchall()


def test_the_position_is_one_row_a_run_and_goes_with_the_run(resume_db):
    db, run_id = resume_db

    async def go():
        async with await Store.open(db) as store:
            ids = await store.conversation_ids(run_id)
            assert await store.review_position(run_id) is None
            await store.remember_review_position(run_id, ids[3], 1)
            await store.remember_review_position(run_id, ids[5], 2)
            return ids, await store.review_position(run_id)

    ids, position = asyncio.run(go())
    assert (position.conversation_id, position.position, position.criterion) == (ids[5], 5, 2)
    assert stored(db) == [(run_id, ids[5], 2)]
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
    assert stored(db) == []


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_reopening_a_run_offers_the_conversation_and_criterion_left(resume_db, size):
    db, run_id = resume_db
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        screen = await open_run(pilot, run_id, read_first=True)
        assert screen.conversation_list.cursor == 0  # nothing stored yet
        await pilot.press("2", "j", "j", "j", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        await pilot.press("j", "j", "j")
        assert app.screen.query_one(VerdictList).selected == 2
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        conversation_id = screen.conversation_list.row(3).id
        await wait_for(pilot, lambda: stored(db) == [(run_id, conversation_id, 2)])

    app = browser_app(db)  # another session, days later
    async with app.run_test(size=size) as pilot:
        screen = await open_run(pilot, run_id, read_first=True)
        assert screen.conversation_list.cursor == 3
        await pilot.pause()
        assert "last reviewed: #4, criterion 3 (enter opens it)" in str(screen.query_one("KeyBar").render())
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        assert app.screen.detail.summary.id == conversation_id
        assert app.screen.query_one(VerdictList).selected == 2
