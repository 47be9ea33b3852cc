"""Words that say what they count (issue 13, defect 7): failed attempts that were not all
retried, a grader's tries against the requests they took, penalties as a count rather than
points, and keys named by what they do."""

from __future__ import annotations

import asyncio

import pytest

from hbtui.store import Store
from hbtui.tui.monitor_data import MonitorView
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.verdict_list import requests_sent
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


def test_failed_attempts_do_not_claim_a_retry():
    view = MonitorView(run_id=1, name="run", status="finished", retried_by_kind={"timeout": 2})
    text = MonitorScreen(1)._errors(view).plain
    assert "failed attempts" in text and "retried" not in text


def test_a_graders_tries_and_its_requests_are_not_both_called_attempts():
    assert requests_sent(8) == "8 requests to the grader, retries included"
    assert requests_sent(1) == "1 request to the grader"


@pytest.fixture(scope="module")
def run_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("wording") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            return await synthesize_run(store, conversations=60, criteria_per=12, seed=3)

    return db, asyncio.run(make())


async def open_run(app, pilot, run_id: int) -> RunScreen:
    await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
    screen = RunScreen(run_id)
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.conversation_list.loaded and screen.report is not None)
    return screen


async def test_keys_penalties_and_grader_errors_read_as_what_they_are(run_db):
    db, run_id = run_db
    app = browser_app(db)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_run(app, pilot, run_id)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
        help_text = screen_text(app)
        assert "Filter by theme" in help_text and "Filter by score" in help_text
        await pilot.press("escape", "2", "p")  # the conversations with a triggered penalty
        await pilot.pause(0.2)
        rows = [line for line in screen_text(app).splitlines() if "×" in line]
        assert rows and not any(" -1 " in row or " -2 " in row for row in rows)
        await pilot.press("x", "e", "enter")  # the first conversation with a grader error
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        await pilot.press("e")
        await pilot.pause(0.2)
        assert "requests to the grader, retries" in screen_text(app)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
        assert "Next missed criterion" in screen_text(app)


async def test_confirmations_go_to_the_key_bar_not_toasts_over_the_rubric(run_db):
    """At 80 columns a toast covered half of the rubric, and several stacked (issue 13,
    defect 10): a short confirmation takes the key bar's place for a moment instead."""
    db, run_id = run_db
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_run(app, pilot, run_id)
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        await pilot.press("y", "c")
        await pilot.pause(0.2)
        lines = screen_text(app).splitlines()
        assert "copied the selected criterion's explanation" in lines[-1]
        assert "? Help" in lines[-1] and "q Quit" in lines[-1]  # the app's keys stay
        assert not app._notifications, [n.message for n in app._notifications]
        app.screen.query_one(KeyBar).clear_status()
        await pilot.pause()
        assert "n Next conversation" in screen_text(app).splitlines()[-1]


async def test_a_message_too_long_for_the_key_bar_is_said_whole_in_a_toast(run_db):
    """Cut to the bar's width a message lost its end, often what mattered (a new user's trial:
    'asked … to pause run 2: it does within…'): it is said whole where it fits nowhere else."""
    db, run_id = run_db
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_run(app, pilot, run_id)
        long = "asked vm:2083:2501189 to pause run 2: it does within a second; the calls in flight finish"
        app.screen.say(long)
        await pilot.pause()
        assert [str(n.message) for n in app._notifications] == [long]
        assert long[:20] not in screen_text(app).splitlines()[-1]  # the key bar keeps its keys
        app.screen.say("copied the reply")
        await pilot.pause()
        assert "copied the reply" in screen_text(app).splitlines()[-1] and len(app._notifications) == 1


async def test_a_message_longer_than_the_bar_ever_shows_goes_to_a_toast_on_a_wide_terminal(run_db):
    db, run_id = run_db
    app = browser_app(db)
    async with app.run_test(size=(300, 40)) as pilot:
        await open_run(app, pilot, run_id)
        long = "a message of many words, " * 10  # 250 characters: more than the bar ever shows
        app.screen.say(long)
        await pilot.pause()
        assert [str(n.message) for n in app._notifications] == [long]
