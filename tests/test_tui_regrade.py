"""Retrying what failed from the browser: the key, the question, the run driven here again."""

import asyncio
import os
import sqlite3
import sys

from hbtui.tui.screens.monitor import MonitorScreen
from tests.conftest import run_engine, settings_for
from tests.support.browser_harness import browser_app
from tests.support.tui import screen_text, wait_for
from tests.test_tui_browser import open_run


async def test_R_retries_failed_criteria_from_the_browser(server, small_dataset, tmp_path):
    db = tmp_path / "runs" / "hbtui.sqlite"
    server.control(grader_format="broken")  # every verdict unparseable: all criteria fail
    settings = settings_for(server, db, grader_parse_attempts=1)
    await run_engine(settings, small_dataset, name="errors")
    server.control(grader_format="json")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM verdicts WHERE status = 'error'").fetchone()[0] == 8

    app = browser_app(db)
    app.settings = settings
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_run(pilot, 1)
        await pilot.press("R")
        await wait_for(pilot, lambda: "Retry the 8 criteria" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the monitor")
        await wait_for(pilot, lambda: not app.live_runs, timeout=20, what="the run to finish")
    with sqlite3.connect(db) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM verdicts GROUP BY status"))
        status, score = conn.execute("SELECT status, score FROM runs").fetchone()
    assert statuses == {"met": 5, "not_met": 3}
    assert status == "finished" and abs(score - 0.625) < 1e-12


async def test_a_list_made_stale_by_a_retry_opens_safely_and_reloads(server, small_dataset, tmp_path):
    """Filter on errors, fix them elsewhere, then open: the chosen conversation opens, no crash."""
    from tests.test_tui_browser import open_conversation

    db = tmp_path / "runs" / "hbtui.sqlite"
    server.control(grader_format="broken")
    settings = settings_for(server, db, grader_parse_attempts=1)
    await run_engine(settings, small_dataset, name="stale")
    server.control(grader_format="json")
    app = browser_app(db)
    app.settings = settings
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_run(pilot, 1)
        await pilot.press("2", "e")
        await wait_for(pilot, lambda: screen.total == 3, what="the errors filter")
        # another process retries the errors while this list is on screen
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hbtui", "regrade-errors", "stale", "--db", str(db),
            env={**os.environ, "BASE_URL": server.base_url, "MODEL_TEST": "test-model", "MODEL_GRADER": "grader-model"},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        assert await proc.wait() == 0
        conversation = await open_conversation(pilot, screen)
        assert conversation.conversation_ids == [conversation.detail.summary.id]
        assert "met" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.total == 0, what="the list to reload (no errors left)")
