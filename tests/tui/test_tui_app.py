"""The app shell, runs list and configuration screen, driven by Textual's pilot against the
test server (its own process) and real SQLite files."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from contextlib import asynccontextmanager

import pytest
from textual.widgets import DataTable, Input, Select, Static

from hbtui.core import scoring
from hbtui.core.settings.config import Settings
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.screens.continue_run import ContinueRunModal
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import make_record, offline_settings, run_engine, settings_for, write_jsonl
from tests.support.screen_text import screen_lines
from tests.support.server_process import FakeServer
from tests.support.tui import screen_text, told, wait_for

KEY = "fake-VISIBLEKEYMARKER-0123456789"


def make_app(db, **values) -> HBTuiApp:
    return HBTuiApp(settings=offline_settings(db_path=str(db), **values), env_file=None)


async def test_opens_on_the_configuration_screen_when_the_database_is_empty(tmp_path):
    app = make_app(tmp_path / "empty.sqlite")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the configuration screen")
        await pilot.press("escape")  # back lands on the (empty) runs list, never past it
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)
        assert "No runs yet" in screen_text(app)
        welcome = " ".join(screen_text(app).split())
        assert (
            'No endpoint of your own? Choose "local demo model" as the endpoint there (or run `hbtui demo`)' in welcome
        )


async def test_opens_on_the_runs_list_with_a_finished_run(finished_run_db):
    app = make_app(finished_run_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, what="one row")
        text = screen_text(app)
        assert "small-run" in text and "finished" in text and "0.625" in text
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="n opens the configuration")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="m opens the monitor")
        await wait_for(pilot, lambda: app.screen.view is not None and app.screen.view.status == "finished")


async def test_a_run_configured_on_screen_runs_to_the_end_in_the_monitor(server, small_dataset, tmp_path):
    app = make_app(tmp_path / "runs" / "hbtui.sqlite")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        base_url = screen.query_one("#field-base_url", Input)
        base_url.focus()
        await pilot.press(*server.base_url)  # typed, as a person would
        screen.query_one("#field-model_test", Input).value = "test-model"
        screen.query_one("#field-model_grader", Input).value = "grader-model"
        screen.query_one("#field-subset", Select).value = "file"
        screen.query_one("#field-data_path", Input).value = str(small_dataset)
        screen.query_one("#field-run_name", Input).value = "from-the-form"
        await pilot.pause()
        assert base_url.value == server.base_url
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the monitor")
        monitor = app.screen
        await wait_for(
            pilot,
            lambda: monitor.view is not None and monitor.view.status == "finished",
            timeout=20,
            what="the run to finish",
        )
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "finished" in text and "final score 0.625" in text
        assert "3/3" in text and "8/8" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
    async with await Store.open(tmp_path / "runs" / "hbtui.sqlite") as store:
        run = await store.resolve_run("from-the-form")
    assert run.status == "finished" and run.score == 0.625


async def test_a_bad_value_is_marked_next_to_its_field(tmp_path, small_dataset):
    app = make_app(tmp_path / "db.sqlite", base_url="http://127.0.0.1:9/v1", model_test="a", model_grader="b")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        concurrency = screen.query_one("#field-concurrency", Input)
        message = screen.query_one("#message-concurrency", Static)
        concurrency.value = "0"
        await pilot.pause()
        assert "0 is outside 1 to 4,096" in str(message.render()) and message.display
        concurrency.value = "many"
        await pilot.pause()
        assert "'many' is not a whole number" in str(message.render())
        concurrency.value = "4"
        await pilot.pause()
        assert not message.display
        screen.query_one("#field-base_url", Input).value = "localhost:8080"
        screen.query_one("#field-subset", Select).value = "file"
        screen.query_one("#field-data_path", Input).value = str(small_dataset) + ".missing"
        template = tmp_path / "template.txt"
        template.write_text("no placeholders here")
        screen.query_one("#field-grader_template", Input).value = str(template)
        await pilot.pause()
        assert "not an http(s) URL" in str(screen.query_one("#message-base_url", Static).render())
        assert "no such file" in str(screen.query_one("#message-data_path", Static).render())
        assert "<<conversation>> is missing" in str(screen.query_one("#message-grader_template", Static).render())
        await pilot.press("ctrl+s")  # refused: nothing starts while a field is wrong
        await pilot.pause()
        assert isinstance(app.screen, ConfigScreen)
        assert "fix the marked fields" in screen_text(app)
        screen.query_one("#field-base_url", Input).value = "http://127.0.0.1:9/v1"
        screen.query_one("#field-data_path", Input).value = str(small_dataset)
        await pilot.pause()
        assert "fix the marked fields" in screen_text(app)  # the template is still wrong
        screen.query_one("#field-grader_template", Input).value = ""
        await pilot.pause()
        text = screen_text(app)
        assert "fix the marked fields" not in text and "all fields are valid now" in text


async def test_a_preset_keeps_whole_paths(tmp_path, small_dataset, monkeypatch):
    monkeypatch.chdir(small_dataset.parent)
    app = make_app(tmp_path / "db.sqlite", base_url="http://127.0.0.1:9/v1", model_test="a", model_grader="b")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        screen.query_one("#field-subset", Select).value = "file"
        screen.query_one("#field-data_path", Input).value = small_dataset.name  # relative to where hbtui runs
        await pilot.pause()
        values = screen.preset_values()
        assert values["data_path"] == str(small_dataset.resolve()) and "api_key" not in values


async def test_the_api_key_never_appears_on_screen(server, tmp_path):
    app = make_app(
        tmp_path / "db.sqlite",
        base_url=server.base_url,
        api_key=KEY,
        model_test="test-model",
        model_grader="grader-model",
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        assert app.screen.query_one("#field-api_key", Input).value == KEY  # held, to be used
        assert "VISIBLEKEYMARKER" not in screen_text(app)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "json_schema" in screen_text(app), what="the check results")
        text = screen_text(app)
        assert "VISIBLEKEYMARKER" not in text and "✓" in text


def app_with_a_wrong_key(tmp_path, guarded: FakeServer) -> HBTuiApp:
    """The app on an empty database, its form set for ``guarded`` with a key it refuses."""
    return make_app(
        tmp_path / "db.sqlite",
        base_url=guarded.base_url,
        api_key="fake-wrong-key",
        model_test="test-model",
        model_grader="grader-model",
    )


async def test_check_connection_reports_a_rejected_key_and_an_unknown_model(tmp_path):
    with FakeServer(api_key="fake-right") as guarded:
        app = app_with_a_wrong_key(tmp_path, guarded)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
            await pilot.press("ctrl+t")
            await wait_for(pilot, lambda: "401: key rejected" in screen_text(app), what="401 reported")
            screen = app.screen
            screen.query_one("#field-api_key", Input).value = "fake-right"
            screen.query_one("#field-model_test", Input).value = "no-such-model"
            await pilot.pause()
            # The 401 shown is about the key typed before: the result says it is out of date.
            text = screen_text(app)
            assert "401: key rejected" in text and "out of date: api key, model changed" in text, text
            await pilot.press("ctrl+t")
            await wait_for(
                pilot, lambda: "model no-such-model not served" in screen_text(app), what="unknown model reported"
            )
            assert "served: test-model, grader-model" in screen_text(app)
            assert "out of date" not in screen_text(app)
            screen.query_one("#field-model_test", Input).value = "test-model"
            await pilot.pause()
            assert "out of date: model changed" in screen_text(app)


async def test_help_lists_the_keys_and_the_palette_offers_every_action(finished_run_db):
    app = make_app(finished_run_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        runs = app.screen
        titles = {command.title for command in app.get_system_commands(runs)}
        assert {"Open", "Monitor", "New run", "Refresh", "Help"} <= titles
        assert "Back" not in titles  # the runs list is the root: nothing to go back to
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
        text = screen_text(app)
        assert "New run" in text and "Monitor" in text and "Quit" in text
        # Headed once by where the keys work, not "screen" and "app" on every row (issue 25, item 11).
        assert text.count("on this screen") == 1  # "everywhere" heads the app's keys, below
        assert not any(line.rstrip().endswith(" screen") for line in text.splitlines())
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is not runs, what="the run")
        assert "Back" in {command.title for command in app.get_system_commands(app.screen)}


async def test_text_from_the_database_is_shown_as_data(server, small_dataset, tmp_path):
    db = tmp_path / "db.sqlite"
    await run_engine(settings_for(server, db), small_dataset, name="[bold]loud[/bold] \x1b[31mred")
    app = make_app(db)
    async with app.run_test(size=(120, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.query_one(DataTable).row_count)
        assert "[bold]loud[/bold] ␛[31mred" in screen_text(app)  # whole at 120 columns, as text
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        await pilot.pause(0.2)
        assert "[bold]loud[/bold] ␛[31mred" in screen_text(app)


async def test_quitting_during_a_run_asks_then_stops_it_resumably(server, small_dataset, tmp_path):
    server.control(latency_ms=300)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)
    async with monitor_of_a_run_here(settings, small_dataset, "slow") as (app, pilot, _, run_id):
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the confirmation")
        await pilot.press("n")  # keep running
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen))
        assert app.live_runs
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=15, what="the app to quit")
    with sqlite3.connect(db) as connection:
        status, owner = connection.execute("SELECT status, owner FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert status == "interrupted" and owner is None


async def test_a_monitor_of_an_unknown_run_ends_with_a_message(finished_run_db):
    app = HBTuiApp(settings=offline_settings(db_path=str(finished_run_db)), env_file=None, monitor_run="no-such-run")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: not app.is_running, what="the app to stop")
    assert app.return_code == 2


@asynccontextmanager
async def monitor_of_a_run_here(settings, data, name: str, size: tuple[int, int] = (80, 24), start: bool = True):
    """A run planned from ``data``, its monitor open over the runs list and, with ``start``, the run
    driven by the app's process: (app, pilot, monitor, run id)."""
    run_id = await plan_only(settings, data, name)
    app = HBTuiApp(settings=settings, env_file=None, monitor_run=name)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        monitor = app.screen
        if start:
            await app.start_run(run_id, settings)
        yield app, pilot, monitor, run_id


async def test_the_monitor_cancels_a_run_of_this_process_after_asking(server, small_dataset, tmp_path):
    server.control(latency_ms=300)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)
    async with monitor_of_a_run_here(settings, small_dataset, "to-cancel", (80, 24)) as (app, pilot, monitor, _):
        await pilot.press("p")
        await wait_for(pilot, lambda: monitor.view.status == "paused", what="paused")
        await wait_for(
            pilot,
            lambda: "– (paused)" in screen_text(app).split("calls/s", 1)[-1][:20],
            what="no rate of before shown while paused",
        )
        await pilot.press("p")
        await wait_for(pilot, lambda: monitor.view.status == "running", what="running again")
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: monitor.view.status == "cancelled", timeout=10, what="cancelled")
        assert not app.live_runs


async def test_the_monitor_interval_is_drawn_from_the_scores_it_shows(server, tmp_path):
    """Never an interval of older scores passed off as current, during the run or after a cancel."""
    server.control(latency_ms=60)
    records = [
        make_record(f"c{i}", [(f"[[MET]] a {i}", 3, ["axis:accuracy"]), ("[[NOT_MET]] b", 2 + i % 3, [])])
        for i in range(40)
    ]
    data = write_jsonl(tmp_path / "forty.jsonl", records)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db, concurrency=2)
    async with monitor_of_a_run_here(settings, data, "interval", (100, 30)) as (app, pilot, monitor, run_id):
        shown: list[str] = []
        while monitor.view is None or len(monitor.view.scores) < 6:
            score_panel = str(monitor.query_one("#monitor-score", Static).render())
            shown.append(" ".join(score_panel.split()))
            await pilot.pause(0.05)
        for text in shown:  # an interval is either current or says what it was drawn from
            n = int(text.split("over ")[1].split()[0].replace(",", ""))
            if "CI –" in text:
                assert n < 2, text
            elif "computing" not in text:
                interval_n = int(text.split("(of ")[1].split(",")[0]) if "(of " in text else n
                assert interval_n >= 2, text
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: monitor.view.status == "cancelled", timeout=10, what="cancelled")
        async with await Store.open(db) as store:
            scores = await store.conversation_scores(run_id)
        expected = scoring.metric(scores).ci95
        await wait_for(
            pilot,
            lambda: (
                f"95% CI {expected[0]:.3f}–{expected[1]:.3f}"
                in " ".join(str(monitor.query_one("#monitor-score", Static).render()).split())
            ),
            what="the final interval",
        )
        assert "updating" not in str(monitor.query_one("#monitor-score", Static).render())


async def test_quitting_with_a_worker_still_unwinding_closes_the_store(finished_run_db):
    """A worker that takes a moment to stop once cancelled: quitting waits for it, then closes
    the store (its thread would otherwise keep the process alive)."""
    unwound = []

    async def linger() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)
            unwound.append(True)
            raise

    app = make_app(finished_run_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        app.run_worker(linger(), group="linger")
        store = app.store
        await pilot.pause()
    assert unwound == [True] and app.store is None
    with pytest.raises(ValueError):  # aiosqlite's "no active connection": closed
        await store.get_run(1)


def test_an_unexpected_error_is_one_line_and_a_log_without_locals(tmp_path):
    """Textual's default handler prints a traceback with local variables; ours must not."""
    import subprocess
    import sys

    secret = "fake-LOCAL-SECRET-0042"
    script = tmp_path / "broken_app.py"
    script.write_text(f"""
from hbtui.core.settings.config import Settings
from hbtui.tui.app import HBTuiApp

class Broken(HBTuiApp):
    CSS_PATH = []

    async def on_mount(self):
        api_key = {secret!r}
        raise RuntimeError("boom")

Broken(Settings(db_path={str(tmp_path / "db.sqlite")!r}), env_file=None).run(headless=True)
""")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert "hbtui: internal error: RuntimeError: boom" in output
    assert secret not in output and "Traceback" not in output
    log = (tmp_path / "hbtui-crash.log").read_text()
    assert "RuntimeError: boom" in log and secret not in log


async def plan_only(settings, data, name):
    """A run planned and never driven: what a `hbtui run` killed before its first call leaves."""
    from hbtui.core.dataset import load_jsonl
    from hbtui.services import plan_run

    async with await Store.open(settings.db_path) as store:
        return await plan_run(store, settings, load_jsonl(data), name=name)


async def test_continue_resumes_a_stopped_run_from_the_runs_list(server, small_dataset, tmp_path):
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)
    run_id = await plan_only(settings, small_dataset, "stopped")
    with sqlite3.connect(db) as connection:  # as a Ctrl-C leaves it
        connection.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
    # The app's own settings name no endpoint: the run's stored ones are used.
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        assert "Continue" in {command.title for command in app.get_system_commands(app.screen)}
        assert "Continue" in screen_text(app)  # in the footer at 80 columns
        await pilot.press("c")
        await wait_for(
            pilot, lambda: "Continue this interrupted run? (run 1 stopped" in screen_text(app), what="the question"
        )
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the monitor")

        def finished() -> bool:
            with sqlite3.connect(db) as connection:
                return connection.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0] == "finished"

        await wait_for(pilot, finished, timeout=20, what="the run to finish")
        await wait_for(pilot, lambda: not app.drivers_going(), what="its process to end")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await plan_only(settings, small_dataset, "second")  # home and end move the cursor, as g and G
        await pilot.press("r")
        await wait_for(pilot, lambda: app.screen.table.row_count == 2)
        await pilot.press("end")
        assert app.screen.selected_run_id() == run_id
        await pilot.press("home")
        assert app.screen.selected_run_id() != run_id
        await pilot.press("G")
        await pilot.press("c")  # finished, nothing failed: nothing to do, no monitor
        await pilot.pause(0.2)
        assert isinstance(app.screen, RunsScreen)
    with sqlite3.connect(db) as connection:
        (score,) = connection.execute("SELECT score FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert score == 0.625


async def test_continue_leaves_a_run_of_another_process_alone(server, small_dataset, tmp_path):
    import os
    import time

    db = tmp_path / "db.sqlite"
    run_id = await plan_only(settings_for(server, db), small_dataset, "elsewhere")
    with sqlite3.connect(db) as connection:  # a live heartbeat of a live process
        connection.execute(
            "UPDATE runs SET status = 'running', heartbeat_at = ?, owner = ? WHERE id = ?",
            (time.time() + 3600, f"{os.uname().nodename}:{os.getpid()}", run_id),
        )
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        assert "running" in screen_text(app)
        await pilot.press("c")
        await pilot.pause(0.2)
        assert isinstance(app.screen, RunsScreen) and not app.live_runs and not app.detached_runs
        assert any("press m to monitor" in str(note.message) for note in app._notifications)


async def test_pause_and_cancel_are_offered_only_while_this_process_drives_the_run(server, small_dataset, tmp_path):
    server.control(latency_ms=200)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)
    async with monitor_of_a_run_here(settings, small_dataset, "offered", start=False) as (app, pilot, monitor, run_id):
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "Pause" not in text and "Cancel run" not in text  # nobody drives it
        titles = {command.title for command in app.get_system_commands(monitor)}
        assert "Pause or resume" not in titles and "Browse results" in titles
        await app.start_run(run_id, settings)
        await wait_for(pilot, lambda: "Pause or resume" in screen_text(app), what="p in the footer")
        assert "Cancel run" in screen_text(app)
        await wait_for(pilot, lambda: monitor.view.status == "finished", timeout=20, what="the end")
        await wait_for(pilot, lambda: "Pause or resume" not in screen_text(app), what="p gone from the footer")
        await pilot.press("p")  # refused quietly: no engine to pause
        await pilot.pause(0.1)
        assert not any("has ended" in str(note.message) for note in app._notifications)


async def test_a_failed_run_shows_its_whole_error_on_the_monitor(small_dataset, tmp_path):
    db = tmp_path / "db.sqlite"
    down = type("Down", (), {"base_url": "http://127.0.0.1:9/v1"})()
    settings = settings_for(down, db, max_attempts=1)
    run_id = await plan_only(settings, small_dataset, "doomed")
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await app.start_run(run_id, settings)
        app.open_monitor(run_id)
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen))
        monitor = app.screen
        await wait_for(pilot, lambda: monitor.view is not None and monitor.view.status == "failed", what="failed")
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "cannot reach http://127.0.0.1:9/v1" in text
        # What to do about it, with the flag that moves a run to another endpoint.
        assert f"hbtui resume {run_id} --base-url URL" in " ".join(text.split())
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("c")  # continue it here: why it stopped, and its endpoint to change first
        await wait_for(pilot, lambda: isinstance(app.screen, ContinueRunModal))
        question = " ".join(" ".join(screen_lines(app)).replace("│", " ").split())  # the dialog's text, unboxed
        assert "It stopped on: connection: cannot reach" in question and "Base URL" in question, question
        await pilot.press("escape")
    # A long error stored by another process: all of it, wrapped, as text.
    long_error = "auth: [bold]Incorrect[/bold] API key \x1b[31m provided. " + "word " * 40 + "THE-END"
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET error = ? WHERE id = ?", (long_error, run_id))
    app = HBTuiApp(settings=Settings(db_path=str(db)), env_file=None, monitor_run=str(run_id))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        await pilot.pause(0.3)
        failure = app.screen.query_one("#monitor-failure", Static)
        assert failure.display and failure.size.height >= 3
        text = screen_text(app)
        assert "run failed:" in text and "[bold]Incorrect[/bold]" in text and "␛[31m" in text
        assert "THE-END" in text
        assert (
            f"set the key (API_KEY, or GRADER_API_KEY, in .env or the environment), then: hbtui resume {run_id}"
            in " ".join(text.split())
        )


async def test_the_app_collects_young_garbage_less_often_while_it_runs_and_puts_the_setting_back(finished_run_db):
    import gc

    from hbtui.tui.app import GC_YOUNG_THRESHOLD

    before = gc.get_threshold()
    app = make_app(finished_run_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before


async def test_a_run_listed_from_the_demo_database_is_continued_there_not_in_the_settings_one(
    server, small_dataset, tmp_path
):
    # The app lists the demo's database after a demo (app.store_for_a_run); its settings still
    # name the user's. Run 1 of the demo's file is the one continued, not a run 1 of the other.
    demo_db, own_db = tmp_path / "runs" / "demo.sqlite", tmp_path / "runs" / "hbtui.sqlite"
    run_id = await plan_only(settings_for(server, demo_db), small_dataset, "demo-run")
    with sqlite3.connect(demo_db) as connection:
        connection.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
    app = make_app(own_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the empty database's welcome")
        demo = await app.store_for_a_run(str(demo_db))
        assert await app.store_for_a_run() is demo  # a regrade is planned beside its source
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("r")
        await wait_for(pilot, lambda: app.screen.table.row_count == 1, what="the demo's run listed")
        await pilot.press("c")
        await wait_for(pilot, lambda: "Continue this interrupted run?" in screen_text(app), what="the question")
        await pilot.press("y")

        def finished() -> bool:
            with sqlite3.connect(demo_db) as connection:
                return connection.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0] == "finished"

        await wait_for(pilot, finished, timeout=20, what="the demo's run to finish")
        await wait_for(pilot, lambda: not app.drivers_going(), what="its process to end")
    assert not own_db.exists()


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_an_app_shut_down_while_its_configuration_screen_is_built_ahead_ends_quietly(
    server, small_dataset, tmp_path, turns
):
    """The runs list builds the configuration screen off screen a moment after it shows; a
    shutdown (a signal, a test's teardown: no exit asked) that takes the widgets away meanwhile is
    no internal error. The loop turns let the build reach each of its steps first."""
    db = tmp_path / "db.sqlite"
    await plan_only(settings_for(server, db), small_dataset, "listed")  # the app opens on the runs list
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        app.prebuild_config()
        for _ in range(turns):
            await asyncio.sleep(0)
    assert app.return_code in (None, 0)


async def test_a_run_continued_from_the_list_reads_as_starting_not_as_ended_until_its_process_takes_it(
    server, small_dataset, tmp_path, monkeypatch
):
    # The process the app starts waits 2 s before Python starts: the moment before it takes the
    # run lasts that long, however fast this machine is.
    slow_python = tmp_path / "slow-python"
    slow_python.write_text(f'#!/bin/sh\nsleep 2\nexec "{sys.executable}" "$@"\n')
    slow_python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(slow_python))
    db = tmp_path / "db.sqlite"
    run_id = await plan_only(settings_for(server, db), small_dataset, "stopped")
    with sqlite3.connect(db) as connection:  # as a Ctrl-C leaves it
        connection.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen))
        monitor = app.screen
        shown: list[str] = []

        def seen(*statuses: str) -> bool:
            if monitor.view is not None:
                shown.append(monitor.view.status)
            return monitor.view is not None and monitor.view.status in statuses

        await wait_for(pilot, lambda: seen("starting"), timeout=30, what="the run read as starting")
        await wait_for(pilot, lambda: seen("running", "finished"), timeout=30, what="its process to take the run")
        assert "interrupted" not in shown and "starting" in shown, shown
        await wait_for(pilot, lambda: not app.drivers_going(), timeout=30, what="its process to end")


async def test_start_after_a_failed_check_asks_first_naming_what_failed(tmp_path, small_dataset):
    """Issue 25, item 5: after ctrl+t found the key rejected, ctrl+s started the run anyway and
    the confirmation said nothing; a run then failed in every conversation."""
    with FakeServer(api_key="fake-right") as guarded:
        app = app_with_a_wrong_key(tmp_path, guarded)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
            form = app.screen
            form.query_one("#field-subset", Select).value = "file"
            form.query_one("#field-data_path", Input).value = str(small_dataset)
            await pilot.press("ctrl+t")
            await wait_for(pilot, lambda: "401: key rejected" in screen_text(app), what="401 reported")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the question")
            assert "The last connection check failed" in app.screen.question
            assert "key rejected" in app.screen.question
            await pilot.press("n")
            await wait_for(pilot, lambda: app.screen is form and told(app, "not started"))
            assert guarded.stats()["requests"] <= 3, "the check's few requests, and no run"
            # Once a checked field changes, the old check no longer stands: no question.
            # (Not started here: a started run goes on in a process of its own.)
            assert form._failed_check_standing() is not None
            form.query_one("#field-api_key", Input).value = "fake-right"
            await pilot.pause()
            assert form._failed_check_standing() is None
