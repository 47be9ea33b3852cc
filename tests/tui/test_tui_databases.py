"""Which database the app lists (issue 25, item 3): the header always names it, and after the
in-app demo, whose runs are kept in runs/demo.sqlite, `b` on the runs list goes back to the
user's own runs and forth again."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from hbtui.core.settings.config import Settings
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.runs import RunsScreen
from hbtui.tui.widgets.app_header import ICON, AppHeader, database_label
from tests.support.synth import synthesize_run
from tests.support.tui import told, wait_for


async def make_run(db: Path, name: str) -> None:
    async with await Store.open(db) as store:
        await synthesize_run(store, conversations=2, criteria_per=2, seed=1, name=name)


def listed_names(app) -> list[str]:
    table = app.screen.query_one("#runs-table", DataTable)
    return [" ".join(str(cell) for cell in table.get_row_at(i)) for i in range(table.row_count)]


def test_a_database_is_named_from_the_working_folder_or_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert database_label(tmp_path / "runs" / "hbtui.sqlite") == "runs/hbtui.sqlite"
    assert database_label("runs/demo.sqlite") == "runs/demo.sqlite"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path / "home")
    assert database_label(tmp_path / "elsewhere.sqlite") == str(tmp_path / "elsewhere.sqlite")
    monkeypatch.chdir("/")
    assert database_label(tmp_path / "home" / "runs" / "x.sqlite") == "~/runs/x.sqlite"


async def test_the_header_names_the_database_and_b_goes_to_the_demos_runs_and_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    await make_run(runs / "hbtui.sqlite", "my-own-run")
    await make_run(runs / "demo.sqlite", "demo-run")
    app = HBTuiApp(Settings(db_path=str(runs / "hbtui.sqlite")), env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and listed_names(app), what="the runs")
        header = app.screen.query_one(AppHeader)
        assert header.icon == ICON
        assert app.title == "hbtui · runs/hbtui.sqlite"
        assert any("my-own-run" in row for row in listed_names(app))
        await pilot.press("b")
        await wait_for(pilot, lambda: any("demo-run" in row for row in listed_names(app)), what="the demo's runs")
        assert app.title == "hbtui · runs/demo.sqlite" and not app.own_database
        assert not any("my-own-run" in row for row in listed_names(app))
        await pilot.press("b")
        await wait_for(pilot, lambda: any("my-own-run" in row for row in listed_names(app)), what="the user's runs")
        assert app.title == "hbtui · runs/hbtui.sqlite" and app.own_database


async def test_b_without_demo_runs_says_so_and_stays(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    await make_run(tmp_path / "runs" / "hbtui.sqlite", "my-own-run")
    app = HBTuiApp(Settings(db_path=str(tmp_path / "runs" / "hbtui.sqlite")), env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and listed_names(app), what="the runs")
        await pilot.press("b")
        await wait_for(pilot, lambda: told(app, "no demo runs yet (runs/demo.sqlite)"), what="why nothing changed")
        assert app.own_database and app.title == "hbtui · runs/hbtui.sqlite"
        assert not (tmp_path / "runs" / "demo.sqlite").exists(), "nothing was created"
