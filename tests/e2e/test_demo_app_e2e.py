"""The app's "local demo model" end to end: the real installer finds the model the tier's set-up
installed, llama.cpp's server answers and grades, and the app shows the run in the demo's database."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Select

from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import DEMO_CHOICE, ConfigScreen
from hbtui.tui.screens.monitor import MonitorScreen
from tests.conftest import MAIN_SUBSET, needs_shared, offline_settings
from tests.e2e.llama import llama_paths
from tests.support.tui import wait_for

pytestmark = [pytest.mark.e2e, needs_shared]


async def test_the_demo_choice_runs_one_record_on_llama_server_and_shows_it(tmp_path):
    if llama_paths() is None:
        pytest.skip("llama-server and SmolLM2 are not built: run scripts/build_llama_server.sh")
    runs = tmp_path / "runs"
    app = HBTuiApp(settings=offline_settings(db_path=str(runs / "hbtui.sqlite")), env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        screen.query_one("#field-endpoint", Select).value = DEMO_CHOICE
        screen.query_one("#field-subset", Select).value = "file"
        screen.query_one("#field-data_path", Input).value = str(MAIN_SUBSET)
        screen.query_one("#field-limit", Input).value = "1"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=300, what="the demo's monitor")
        monitor = app.screen
        await wait_for(
            pilot,
            lambda: monitor.view is not None and monitor.view.status in ("finished", "incomplete"),
            timeout=1500,
            what="the demo run to end",
        )
        await wait_for(pilot, lambda: not app.live_runs, timeout=60, what="the server to stop with the run")
        assert app.store is not None and Path(app.store.path) == runs / "demo.sqlite"
    async with await Store.open(runs / "demo.sqlite") as store:
        (run,) = await store.list_runs()
    assert run.name.startswith("demo-") and run.settings["grader_template"] == "reference"
    assert not (runs / "hbtui.sqlite").exists()
