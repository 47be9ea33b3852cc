"""Pictures of the review flow at 80x24 and 120x40, on a fixed synthetic run reviewed by two
reviewers at fixed times: a verdict flipped and flagged by keyboard, the note's question, the run
summary with both scores, and the list filtered to flagged conversations.

Regenerate with `pytest tests/tui/test_tui_snapshots_review.py --snapshot-update` and read the SVGs
in __snapshots__ before committing them.
"""

from __future__ import annotations

import asyncio

import pytest

from hbtui.core import reviews as rv
from hbtui.store import Store
from hbtui.tui.screens.review_question import ReviewQuestion
from hbtui.tui.widgets.review_summary import ReviewSummary
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for
from tests.tui.test_tui_snapshots_browser import browse, utc  # noqa: F401 - utc is a fixture

SIZES = [(80, 24), (120, 40)]
AT = 1_750_000_000.0


@pytest.fixture(autouse=True)
def reviewer_account(monkeypatch):
    monkeypatch.setenv("USER", "tester")


@pytest.fixture(scope="module")
def reviewed_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("review-snap") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            run_id = await synthesize_run(store, conversations=24, criteria_per=6, seed=5, name="reviewed-24")
            keys = await store._all(
                "SELECT conversation_id, idx FROM verdicts WHERE run_id = ? AND status IN ('met', 'not_met')"
                " ORDER BY conversation_id, idx",
                (run_id,),
            )
            for n, key in enumerate(keys[:8]):
                await store.add_review(*key, "alice", rv.FLIP if n % 3 == 0 else rv.FLAG, at=AT + n)
            for n, key in enumerate(keys[4:12]):
                await store.add_review(
                    *key, "bob", rv.FLIP if n % 2 else rv.FLAG, note="check the dose", at=AT + 20 + n
                )
            return run_id

    return db, asyncio.run(make())


def opened(run_id: int, *keys: str, until=None):
    """The run opened, ``keys`` pressed, then ``until`` waited for."""
    start = browse(run_id)

    async def run_before(pilot) -> None:
        await start(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        if until is not None:
            await wait_for(pilot, lambda: until(pilot.app))
        await pilot.pause(0.2)

    return run_before


def review_shown(app) -> bool:
    return app.screen.query(ReviewSummary) and app.screen.query_one(ReviewSummary).display


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_review_summary(snap_compare, reviewed_db, size):
    db, run_id = reviewed_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=opened(run_id, until=review_shown))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_list_filtered_to_flagged(snap_compare, reviewed_db, size):
    db, run_id = reviewed_db
    assert snap_compare(
        browser_app(db),
        terminal_size=size,
        run_before=opened(run_id, "v", until=lambda app: app.screen.conversation_list.loaded),
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_note_question(snap_compare, reviewed_db, size):
    db, run_id = reviewed_db
    assert snap_compare(
        browser_app(db),
        terminal_size=size,
        run_before=opened(
            run_id, "2", "enter", "j", "j", "j", "f", *"dose", until=lambda app: isinstance(app.screen, ReviewQuestion)
        ),
    )


def third_flagged(app) -> bool:
    verdicts = app.screen.query("VerdictList")
    return bool(verdicts) and any("tester" in note.plain for note in verdicts.first().items[2].notes)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_conversation_flipped_and_flagged_by_keyboard(snap_compare, reviewed_db, tmp_path, size):
    """The third criterion of the second conversation flipped (w) and flagged (f, a note, enter)."""
    db, run_id = reviewed_db
    copy = tmp_path / "hbtui.sqlite"  # the module's database stays as the other pictures need it
    copy.write_bytes(db.read_bytes())
    assert snap_compare(
        browser_app(copy),
        terminal_size=size,
        run_before=opened(run_id, "2", "j", "enter", "j", "j", "j", "w", "f", *"dose", "enter", until=third_flagged),
    )
