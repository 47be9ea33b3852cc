"""Pictures of the runs list, the configuration screen and the monitor of a finished run, at
80x24 (an SSH session) and 160x48. Deterministic: fixed times, latencies, names and URLs.

Update after an intended change with ``pytest tests/tui/test_tui_snapshots_app.py --snapshot-update``
and look at the SVGs in __snapshots__ before committing them.
"""

from __future__ import annotations

import sqlite3
import time

import pytest
from textual.widgets import Input

from hbtui.core.settings.config import Settings
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.runs import RunsScreen

CREATED = 1767225600.0  # 2026-01-01 00:00 UTC
SIZES = [(80, 24), (160, 48)]


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def frozen_run_db(finished_run_db):
    """The finished small run with every clock reading and latency fixed."""
    with sqlite3.connect(finished_run_db) as db:
        db.execute(
            "UPDATE runs SET created_at = ?, finished_at = ?, heartbeat_at = NULL, live_json = NULL",
            (CREATED, CREATED + 75),
        )
        db.execute("UPDATE conversations SET latency_ms = 120 + position, generated_at = ?", (CREATED + 10,))
        db.execute("UPDATE verdicts SET latency_ms = 40 + idx * 10, graded_at = ?", (CREATED + 20,))
    return finished_run_db


async def settle(pilot, condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the screen never settled"
        await pilot.pause(0.05)
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await pilot.pause(0.2)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_runs_list(snap_compare, frozen_run_db, size):
    app = HBTuiApp(settings=Settings(db_path=str(frozen_run_db)), env_file=None)

    async def ready(pilot):
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)

    assert snap_compare(app, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_configuration_screen(snap_compare, tmp_path, size):
    settings = Settings(
        db_path=str(tmp_path / "empty.sqlite"),
        base_url="http://127.0.0.1:8080/v1",
        api_key="fake-never-shown-12",
        model_test="llama-3.1-8b",
        model_grader="gpt-4.1",
        reasoning_grader="low",
        concurrency=16,
    )
    app = HBTuiApp(settings=settings, env_file=None)

    async def ready(pilot):
        await settle(pilot, lambda: isinstance(app.screen, ConfigScreen))
        app.screen.query_one("#field-concurrency", Input).value = "0"  # one field marked wrong
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_of_a_finished_run(snap_compare, frozen_run_db, size):
    app = HBTuiApp(settings=Settings(db_path=str(frozen_run_db)), env_file=None, monitor_run="small-run")

    async def ready(pilot):
        await settle(
            pilot,
            lambda: (
                isinstance(app.screen, MonitorScreen) and app.screen.view is not None and app.screen.metric is not None
            ),
        )

    assert snap_compare(app, terminal_size=size, run_before=ready)
