"""A failed run continued from the app with another way to reach its models (issue 25, item 5):
`c` used only to suggest a flag of `hbtui resume`; now its endpoint, key and concurrency can be
changed there, and the run continues in a process of its own with them."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

from textual.widgets import Input, Static

from hbtui.core.dataset import load_jsonl
from hbtui.services import plan_run
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.continue_run import ContinueRunModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings, settings_for
from tests.engine.test_detached import SECRET
from tests.support.tui import wait_for


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


async def failed_run(db: Path, server, data: Path) -> int:
    """A run planned for an endpoint that went away, stopped as failed on it."""
    settings = settings_for(server, db, base_url=(dead_url(),), concurrency=1, grader_template="builtin")
    async with await Store.open(db) as store:
        run_id = await plan_run(store, settings, load_jsonl(data), name="stranded")
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE runs SET status = 'failed', error = 'connection: unreachable: connection refused' WHERE id = ?",
            (run_id,),
        )
    return run_id


def status_of(db: Path, run_id: int) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]


async def test_c_on_a_failed_run_changes_its_endpoint_and_key_and_it_finishes(tmp_path, keyed_server, small_dataset):
    db = tmp_path / "runs" / "hbtui.sqlite"
    run_id = await failed_run(db, keyed_server, small_dataset)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ContinueRunModal), what="the continue dialog")
        modal = app.screen
        assert "It stopped on: connection: unreachable" in str(modal.query_one(Static).render())
        box = modal.query_one("#continue-run").region  # centred, as every dialog is
        assert abs(box.x - (100 - box.right)) <= 1 and box.y > 0
        # A value that cannot be: said in the dialog, which stays.
        modal.query_one("#continue-concurrency", Input).value = "0"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is modal and "CONCURRENCY" in str(modal.query_one("#continue-problem", Static).render())
        modal.query_one("#continue-concurrency", Input).value = "2"
        modal.query_one("#continue-base_url", Input).value = keyed_server.base_url
        modal.query_one("#continue-api_key", Input).value = SECRET
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the run's monitor")
        await wait_for(pilot, lambda: status_of(db, run_id) == "finished", timeout=60, what="the run finished")
    with sqlite3.connect(db) as conn:
        (settings,) = conn.execute("SELECT settings_json FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert keyed_server.base_url in settings and SECRET not in settings  # moved; the key never stored
    assert keyed_server.stats()["requests"] > 0


async def test_a_session_key_is_not_sent_to_a_host_typed_there(tmp_path, server, small_dataset):
    """A key left blank is the session's only for the endpoint it was configured for."""
    from hbtui.tui.screens.continue_run import reach_settings

    db = tmp_path / "runs" / "hbtui.sqlite"
    run_id = await failed_run(db, server, small_dataset)
    session = offline_settings(db_path=str(db), base_url=(server.base_url,), api_key=("session-key",))
    async with await Store.open(db) as store:
        run = await store.get_run(run_id)
    elsewhere = reach_settings(run, session, {"base_url": "http://127.0.0.9:1/v1"}, str(db))
    assert elsewhere.api_key is None
    same = reach_settings(run, session, {"base_url": server.base_url}, str(db))
    assert same.api_key == ("session-key",)
