"""A run through the batch API in the app: started from the form with "Batch API" on, its batches
shown in the monitor as the provider moves them along (validating, in progress, completed), and a
run left awaiting its batches continued with c from the runs list by a process of its own. Real
processes: the app under Textual's pilot, the detached drivers, and the project's test server."""

from __future__ import annotations

import re
import subprocess
import sys

from textual.widgets import Select

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.continue_run import ContinueRunModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings, settings_for, small_records, write_jsonl
from tests.support.batch_runs import batch_env, left_awaiting, rows
from tests.support.tui import screen_text, wait_for
from tests.tui.test_tui_config_form import open_form, type_into


async def test_a_batch_run_started_from_the_form_shows_its_batches_in_the_monitor(tmp_path, server):
    server.control(batch={"validating_s": 1.5, "finalizing_s": 0.05})
    db = tmp_path / "runs" / "hbtui.sqlite"
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    app = HBTuiApp(settings=settings_for(server, db, grader_template="builtin", batch_poll=0.2), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_form(pilot, app)
        type_into(form, "data_path", str(data))
        form.query_one("#field-batch", Select).value = "true"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=30, what="the monitor")
        monitor = app.screen
        # All on one screen at once: the batch as the provider has it, the look to come, the rate
        # that says why it is blank. (One frame of a whole CI run was drawn while the monitor laid
        # itself out again, so the test waits for a frame with all of them, not the first one.)
        shown = [""]

        def batch_shown() -> bool:
            shown[0] = screen_text(app)
            return all(
                words in shown[0]
                for words in ("batch 1 (generation, 3 requests): validating", "batches at the provider", "next look")
            )

        await wait_for(pilot, batch_shown, timeout=30, what="the first batch shown as the provider has it")
        # The driver's log, cut in its middle at 80 columns: its file's name stays whole.
        assert re.search(r"log /\S*…\S*\.log\b", shown[0])
        await wait_for(pilot, lambda: monitor.view.status == "finished", timeout=60, what="the run finished")
        assert "2 batches stored" in screen_text(app)
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    assert rows(db, "SELECT stage, state FROM batch_submissions ORDER BY number") == [
        ("generation", "imported"),
        ("grading", "imported"),
    ]


async def test_c_looks_at_the_batches_of_a_run_no_process_looks_at(tmp_path, server):
    db = tmp_path / "runs" / "hbtui.sqlite"
    write_jsonl(tmp_path / "data.jsonl", small_records())
    env = batch_env(server, db, BATCH_POLL="0.2", GRADER_TEMPLATE="builtin")
    server.control(batch={"validating_s": 60, "finalizing_s": 0.05})
    err = left_awaiting(tmp_path, env, "left")  # Ctrl-C: the batch goes on at the provider
    assert "awaits its batches, which go on at the provider" in err
    assert rows(db, "SELECT status FROM runs") == [("awaiting batch",)]
    server.control(batch={"validating_s": 0.3, "finalizing_s": 0.05})  # the provider gets to it

    app = HBTuiApp(settings=settings_for(server, db, grader_template="builtin"), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.pause()
        await pilot.press("c")
        await wait_for(pilot, lambda: "Look at this run's batches" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=30, what="the monitor")
        monitor = app.screen
        await wait_for(pilot, lambda: monitor.view is not None and monitor.view.status == "finished", timeout=90)
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    later = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run="latest")
    async with later.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(later.screen, MonitorScreen) and later.screen.view is not None)
        assert "batches stored" in screen_text(later)
        await pilot.press("enter")  # its results: the summary names its batches too
        await wait_for(pilot, lambda: "Batch 2 batches stored" in screen_text(later), what="the run's batches")


async def test_x_in_the_monitor_cancels_the_batches_at_the_provider(tmp_path, server):
    db = tmp_path / "runs" / "hbtui.sqlite"
    write_jsonl(tmp_path / "data.jsonl", small_records())
    server.control(batch={"validating_s": 60, "finalizing_s": 0.05})
    left_awaiting(tmp_path, batch_env(server, db, GRADER_TEMPLATE="builtin"), "x")
    app = HBTuiApp(settings=settings_for(server, db, grader_template="builtin"), env_file=None, monitor_run="x")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        # A batch at the provider has no pause: only its cancel is offered.
        await wait_for(pilot, lambda: "Cancel run" in screen_text(app), what="x offered")
        assert "Pause" not in screen_text(app)
        await pilot.press("x")
        await wait_for(pilot, lambda: "its batches at the provider?" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: rows(db, "SELECT status FROM runs") == [("cancelled",)], what="cancelled")
        await wait_for(pilot, lambda: "1 batch cancelled at the provider" in screen_text(app), what="said so")
    assert rows(db, "SELECT batch_status FROM batch_submissions") in ([("cancelling",)], [("cancelled",)])


async def test_c_on_a_run_stopped_for_want_of_a_batch_api_can_go_on_by_calls(tmp_path, server):
    db = tmp_path / "runs" / "hbtui.sqlite"
    write_jsonl(tmp_path / "data.jsonl", small_records())
    env = batch_env(server, db, GRADER_TEMPLATE="builtin")
    server.control(batch={"absent": True})  # as llama.cpp's server: no /v1/files, no /v1/batches
    failed = subprocess.run(
        [sys.executable, "-m", "hbtui", "run", "--data", "data.jsonl", "--batch", "--name", "nobatch"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 1 and "no batch API here" in failed.stderr
    app = HBTuiApp(settings=settings_for(server, db, grader_template="builtin"), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.pause()
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ContinueRunModal), what="the continue dialog")
        assert "Batch API" in screen_text(app)
        app.screen.query_one("#continue-batch", Select).value = "false"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=30, what="the monitor")
        monitor = app.screen
        await wait_for(pilot, lambda: monitor.view is not None and monitor.view.status == "finished", timeout=60)
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    assert "batch_api" not in rows(db, "SELECT plan_json FROM runs")[0][0]  # a run of calls now
