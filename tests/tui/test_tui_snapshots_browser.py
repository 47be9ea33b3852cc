"""Pictures of the results browser at 80x24 and 160x48, on a fixed synthetic run.

Regenerate with `pytest tests/tui/test_tui_snapshots_browser.py --snapshot-update` and read the
SVGs in __snapshots__ before committing them.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.run import RunScreen
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


@pytest.fixture(autouse=True)
def utc():
    """Dates on screen in one zone, whatever the machine's."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture(scope="module")
def snapshot_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("snap") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            return await synthesize_run(store, conversations=60, criteria_per=12, seed=3, name="synthetic-60")

    return db, asyncio.run(make())


def browse(run_id: int, *keys: str, conversation: bool = False):
    async def run_before(pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
        # Each picture from a fresh review: the conversations an earlier picture opened are
        # remembered in the database, and the run would open on the last of them.
        await app.store.db.execute("DELETE FROM review_positions")
        await app.store.db.commit()
        screen = RunScreen(run_id)
        await app.push_screen(screen)
        await wait_for(
            pilot, lambda: screen.conversation_list.loaded and screen.report is not None and screen.stats is not None
        )
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
            # A key that reloads the list does it in a worker: waited for, not guessed at (a busy
            # machine can look idle to pause() while a read is still going).
            await app.workers.wait_for_complete()
            await pilot.pause()
        if conversation:
            await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_run_summary(snap_compare, snapshot_db, size):
    db, run_id = snapshot_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_run_conversation_list(snap_compare, snapshot_db, size):
    """Worst first, cursor on the third row."""
    db, run_id = snapshot_db
    assert snap_compare(
        browser_app(db), terminal_size=size, run_before=browse(run_id, "2", "s", "down", "enter", "j", "j")
    )


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_conversation_with_penalty(snap_compare, snapshot_db, size):
    """The first conversation with a penalty, the penalty selected."""
    db, run_id = snapshot_db
    assert snap_compare(
        browser_app(db), terminal_size=size, run_before=browse(run_id, "2", "p", "enter", "p", conversation=True)
    )


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_conversation_with_grader_error(snap_compare, snapshot_db, size):
    """The first conversation with a grader error, the error selected."""
    db, run_id = snapshot_db
    assert snap_compare(
        browser_app(db), terminal_size=size, run_before=browse(run_id, "2", "e", "enter", "e", conversation=True)
    )


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_run_summary_breakdowns(snap_compare, snapshot_db, size):
    """The summary scrolled to its end: both breakdowns, every column whole (issue 13, defect 2)."""
    db, run_id = snapshot_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, "end"))
