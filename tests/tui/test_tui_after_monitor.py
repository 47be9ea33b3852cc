"""After the monitor: the runs list comes back on the run it showed, and `hbtui monitor latest`
moves on to a run started after the one it shows has ended."""

from __future__ import annotations

import os
import socket
import time

import pytest

from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens import monitor
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


async def finished_runs(db, count: int, prefix: str = "run") -> list[int]:
    async with await Store.open(db) as store:
        return [
            await synthesize_run(store, conversations=3, criteria_per=2, name=f"{prefix}-{i}") for i in range(count)
        ]


async def start_a_run_of_another_process(db) -> int:
    """A run whose driver is alive (this test process's own pid) and has just said so."""
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=3, criteria_per=2, name="newer")
        lease = await store.claim_run(run_id, f"{socket.gethostname()}:{os.getpid()}")
        await store.heartbeat(run_id, lease, {"paused": False, "started_at": time.time()})
    return run_id


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_back_from_a_monitor_the_cursor_is_on_the_run_it_showed(tmp_path, size):
    db = tmp_path / "hbtui.sqlite"
    first, _second = await finished_runs(db, 2)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=size) as pilot:
        runs = app.screen
        assert isinstance(runs, RunsScreen)
        await wait_for(pilot, lambda: runs.table.row_count == 2, what="the two runs listed")
        runs.table.move_cursor(row=runs.table.get_row_index(str(first)))
        await pilot.pause()
        # A run started from the form: a new row appears while its monitor is shown.
        newer = (await finished_runs(db, 1, prefix="started"))[0]
        await app.push_screen(MonitorScreen(newer))
        await pilot.pause()
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is runs and runs.table.row_count == 3, what="the runs list again")
        await pilot.pause()
        assert runs.selected_run_id() == newer


async def test_monitor_latest_moves_on_to_a_run_started_after_its_own_ended(tmp_path, monkeypatch):
    monkeypatch.setattr(monitor, "POLL_ENDED_SECONDS", monitor.POLL_SECONDS)  # no 5 s wait between reads
    db = tmp_path / "hbtui.sqlite"
    (ended,) = await finished_runs(db, 1)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run="latest")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        assert app.screen.run_id == ended and app.screen.view.ended
        newer = await start_a_run_of_another_process(db)
        await wait_for(
            pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.run_id == newer, what="the newer run"
        )
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        assert app.screen.selected_run_id() == newer


async def test_a_monitor_of_a_run_named_by_id_stays_on_it(tmp_path, monkeypatch):
    monkeypatch.setattr(monitor, "POLL_ENDED_SECONDS", monitor.POLL_SECONDS)
    db = tmp_path / "hbtui.sqlite"
    (ended,) = await finished_runs(db, 1)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run=str(ended))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        screen = app.screen
        await start_a_run_of_another_process(db)
        await wait_for(pilot, lambda: screen.polls >= 3, what="a few reads after the new run")
        assert app.screen is screen and screen.run_id == ended
