"""The runs list's actions on a run (issue 13): export with a path asked, rename, delete with a
confirmation (refused, saying which, while a regrade uses the run's replies), search and filter.
Pilot tests at 80x24 and 120x40; pictures of the questions and of a search."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from textual.widgets import Input

from hbtui import cli
from hbtui.core.settings.config import Settings
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.screens.run_actions import AskTextModal
from hbtui.tui.screens.runs import RunsScreen
from hbtui.tui.widgets.key_bar import KeyBar
from tests.conftest import small_records, user_folder, write_jsonl
from tests.support.tui import screen_text, told, wait_for

SIZES = [(80, 24), (120, 40)]
CREATED = 1767225600.0  # 2026-01-01 00:00 UTC


@pytest.fixture
def two_runs(tmp_path, monkeypatch, server) -> Path:
    """A run (1, "first") and its regrade (2, "again"), at fixed times, in a user's folder."""
    user_folder(tmp_path, monkeypatch, server)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    assert cli.main(["run", "--data", str(data), "--name", "first"]) == cli.EXIT_OK
    assert cli.main(["regrade", "first", "--name", "again"]) == cli.EXIT_OK
    db = tmp_path / "runs" / "hbtui.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET created_at = ?, finished_at = ?", (CREATED, CREATED + 60))
        conn.execute("UPDATE runs SET settings_json = json_set(settings_json, '$.base_url', 'http://127.0.0.1:1/v1')")
    yield db
    monkeypatch.undo()
    time.tzset()


def app_on(db: Path) -> HBTuiApp:
    return HBTuiApp(settings=Settings(db_path=str(db)), env_file=None)


async def on_the_list(pilot, app, rows: int = 2) -> RunsScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == rows)
    return app.screen


async def on_run(pilot, screen: RunsScreen, run_id: int) -> None:
    screen.table.move_cursor(row=screen.table.get_row_index(str(run_id)))
    await pilot.pause()


async def asked_and_answered(pilot, app, key: str, answer: str) -> str:
    """Press ``key``, answer its one-line question; returns what the question offered."""
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, AskTextModal))
    field = app.screen.query_one(Input)
    offered, field.value = field.value, answer
    await pilot.press("enter")
    return offered


def notified(app, text: str) -> bool:
    """A toast says ``text`` (a toast wraps its lines: the screen's text would split it)."""
    return any(text in str(note.message) for note in app._notifications)


def listed(screen: RunsScreen) -> list[str]:
    return [str(key.value) for key in screen.table.rows]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_export_asks_for_a_path_and_writes_the_format_its_suffix_names(two_runs, tmp_path, size):
    app = app_on(two_runs)
    async with app.run_test(size=size) as pilot:
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 1)
        offered = await asked_and_answered(pilot, app, "e", str(tmp_path / "first.csv"))
        assert offered.endswith("runs/first.jsonl")
        await wait_for(pilot, lambda: (tmp_path / "first.csv").exists() and told(app, "wrote"))
        assert (tmp_path / "first.csv").read_text().startswith("position,repeat,prompt_id")
        assert told(app, "wrote 8 verdicts of run 1")
        await asked_and_answered(pilot, app, "e", str(tmp_path / "first.txt"))
        await wait_for(pilot, lambda: notified(app, "end the file name with .jsonl or .csv"))


async def test_export_onto_a_file_that_exists_asks_first_and_keeps_it_unless_told(two_runs, tmp_path):
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text("an earlier export\n")
    app = app_on(two_runs)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 1)
        await asked_and_answered(pilot, app, "e", str(earlier))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        assert "exists. Replace it" in app.screen.question
        await pilot.press("n")
        await wait_for(pilot, lambda: told(app, "kept as it was"))
        assert earlier.read_text() == "an earlier export\n"
        await asked_and_answered(pilot, app, "e", str(earlier))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: told(app, "wrote 3 conversations of run 1"))
        assert earlier.read_text().startswith('{"prompt_id"')


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_rename_from_the_list(two_runs, size):
    app = app_on(two_runs)
    async with app.run_test(size=size) as pilot:
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 1)
        assert await asked_and_answered(pilot, app, "E", "baseline") == "first"
        await wait_for(pilot, lambda: "baseline" in screen_text(app))
        with sqlite3.connect(two_runs) as conn:
            assert conn.execute("SELECT name FROM runs WHERE id = 1").fetchone()[0] == "baseline"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_delete_confirms_refuses_a_reused_run_saying_which_then_deletes_and_removes_the_folder(two_runs, size):
    with sqlite3.connect(two_runs) as conn:
        folders = dict(conn.execute("SELECT id, folder FROM runs"))
    app = app_on(two_runs)
    async with app.run_test(size=size) as pilot:
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 1)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        assert "Delete run 1 (first)?" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal) and "folder" in screen_text(app))
        await pilot.press("y")
        await wait_for(pilot, lambda: notified(app, "graded again by run 2 (again)"), what="the refusal")
        assert listed(screen) == ["2", "1"] and Path(folders[1]).is_dir()
        await on_run(pilot, screen, 2)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal) and "folder" in screen_text(app))
        await pilot.press("y")
        await wait_for(pilot, lambda: listed(screen) == ["1"], what="run 2 gone from the list")
        assert not Path(folders[2]).exists()
        await wait_for(pilot, lambda: told(app, "deleted"))
        # Issue 25, item 11: the bar no longer says what came before the answer.
        assert "deleting run 2" not in str(screen.query_one(KeyBar).render())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_search_and_filter_the_runs_list(two_runs, size):
    with sqlite3.connect(two_runs) as conn:
        conn.execute("UPDATE runs SET status = 'cancelled' WHERE id = 1")
    app = app_on(two_runs)
    async with app.run_test(size=size) as pilot:
        screen = await on_the_list(pilot, app)
        store, reads = app.store, []
        list_runs = store.list_runs

        async def counted():
            reads.append(1)
            return await list_runs()

        store.list_runs = counted
        await pilot.press("slash")
        await pilot.press(*"agai")
        await wait_for(pilot, lambda: listed(screen) == ["2"])
        assert "1 of 2 runs: search 'agai'" in screen_text(app)
        assert len(reads) <= 1  # the runs read are narrowed as typed: no query a key (one timer tick at most)
        store.list_runs = list_runs
        await pilot.press("escape")
        await wait_for(pilot, lambda: listed(screen) == ["2", "1"])
        assert screen.table.has_focus
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("down", "down", "enter")  # every run, with errors, cancelled, finished
        await wait_for(pilot, lambda: listed(screen) == ["1"])
        assert "1 of 2 runs: status cancelled" in screen_text(app)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_delete_question(snap_compare, two_runs, size):
    app = app_on(two_runs)

    async def asked(pilot):
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 2)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=asked)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_search_of_the_runs_list(snap_compare, two_runs, size):
    app = app_on(two_runs)

    async def searched(pilot):
        screen = await on_the_list(pilot, app)
        await pilot.press("slash", *"again")
        await wait_for(pilot, lambda: listed(screen) == ["2"])
        screen.query_one("#runs-search", Input).cursor_blink = False
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=searched)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_export_question_is_centred_like_every_dialog(snap_compare, two_runs, size):
    """The path asked for in the middle of the screen, as the delete and quit questions are (it
    was drawn at the top left, over the title)."""
    from hbtui.tui.screens.run_actions import AskTextModal

    app = app_on(two_runs)

    async def asked(pilot):
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 2)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, AskTextModal))
        field = app.screen.query_one(Input)
        field.value, field.cursor_blink = "runs/again.jsonl", False  # the same on every machine
        await pilot.pause(0.2)
        dialog = app.screen.query_one(".dialog")
        assert dialog.region.x > 0 and dialog.region.y > 0  # not in the corner

    assert snap_compare(app, terminal_size=size, run_before=asked)


async def test_an_export_path_that_cannot_even_be_looked_at_is_refused_in_a_toast(two_runs, tmp_path):
    """A file name longer than the system allows: checking whether it exists fails too, which
    must end as the export's error, not take the app down."""
    app = app_on(two_runs)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_the_list(pilot, app)
        await on_run(pilot, screen, 1)
        await asked_and_answered(pilot, app, "e", str(tmp_path / ("x" * 300 + ".csv")))
        await wait_for(pilot, lambda: notified(app, "export of run 1"))
        assert isinstance(app.screen, RunsScreen)
