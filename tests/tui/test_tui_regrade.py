"""Retrying what failed from the browser: the key, the question, the run driven here again."""

import asyncio
import os
import sqlite3
import sys

from hbtui.tui.screens.monitor import MonitorScreen
from tests.conftest import run_engine, settings_for
from tests.support.browser_harness import browser_app
from tests.support.tui import screen_text, wait_for
from tests.tui.test_tui_browser import open_run


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
        await open_run(pilot, 1)
        await pilot.press("R")
        await wait_for(pilot, lambda: "Retry the 8 criteria" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the monitor")
        await wait_for(pilot, lambda: not app.drivers_going(), timeout=20, what="the run to finish")
    with sqlite3.connect(db) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM verdicts GROUP BY status"))
        status, score = conn.execute("SELECT status, score FROM runs").fetchone()
    assert statuses == {"met": 5, "not_met": 3}
    assert status == "finished" and abs(score - 0.625) < 1e-12


async def test_a_list_made_stale_by_a_retry_opens_safely_and_reloads(server, small_dataset, tmp_path):
    """Filter on errors, fix them elsewhere, then open: the chosen conversation opens, no crash."""
    from tests.tui.test_tui_browser import open_conversation

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
            sys.executable,
            "-m",
            "hbtui",
            "regrade-errors",
            "stale",
            "--db",
            str(db),
            env={**os.environ, "BASE_URL": server.base_url, "MODEL_TEST": "test-model", "MODEL_GRADER": "grader-model"},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert await proc.wait() == 0
        conversation = await open_conversation(pilot, screen)
        assert conversation.conversation_ids == [conversation.detail.summary.id]
        assert "met" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.total == 0, what="the list to reload (no errors left)")


async def test_a_grades_the_replies_again_as_a_new_run_from_the_browser(server, small_dataset, tmp_path):
    """`a` on a run: the dialog, another prompt typed in, a new linked run graded here, no generation."""
    from textual.widgets import Input

    from hbtui.tui.screens.regrade import RegradeModal

    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db)
    await run_engine(settings, small_dataset, name="source")
    server.reset_stats()
    app = browser_app(db)
    app.settings = settings
    async with app.run_test(size=(80, 24)) as pilot:
        await open_run(pilot, 1)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RegradeModal), what="the dialog")
        assert "Grade the replies of run 1 source again" in screen_text(app)
        # ctrl+e from where the dialog opens (a text field, which binds ctrl+e itself): the reference's grader
        await pilot.press("ctrl+e")
        assert app.screen.query_one("#regrade-temperature_grader", Input).value == "0.5"
        assert app.screen.query_one("#regrade-system_message_grader", Input).value == "You are a helpful assistant."
        await pilot.press("escape")
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RegradeModal), what="the dialog again")
        app.screen.query_one("#regrade-temperature_grader", Input).value = "hot"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Temperature: 'hot' is not a number" in screen_text(app), what="the problem")
        app.screen.query_one("#regrade-temperature_grader", Input).value = "0.3"
        mine = tmp_path / "mine.txt"  # another prompt than the run's, whichever the session's default is
        mine.write_text("Judge it.\n<<conversation>>\n<<rubric_item>>\nAnswer with criteria_met.")
        app.screen.query_one("#regrade-grader_template", Input).value = str(mine)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the monitor")
        await wait_for(pilot, lambda: not app.drivers_going(), timeout=20, what="the regrade to finish")
    stats = server.stats()
    assert stats["generation"] == 0 and stats["grader"] == 8
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, status, source_run_id, settings_json FROM runs ORDER BY id").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(1, "finished", None), (2, "finished", 1)]
    import json

    assert json.loads(rows[1][3])["grader_template"] == str(tmp_path / "mine.txt")
    assert json.loads(rows[1][3])["temperature_grader"] == 0.3
