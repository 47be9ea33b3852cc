"""The runs list (issue 13, defect 3): n as scored/planned, a run with gaps marked by its status
and an errors count, a date that can be read, and sideways scrolling that keeps the run's name."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from hbtui.render.report import render_runs
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.runs import COLUMNS, RunsScreen
from tests.conftest import offline_settings
from tests.support.screen_text import screen_lines
from tests.support.synth import FIXED_TIME, synthesize_run
from tests.support.tui import wait_for

DATE = time.strftime("%Y-%m-%d %H:%M", time.localtime(FIXED_TIME))


async def runs_db(tmp_path):
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        whole = await synthesize_run(
            store, conversations=12, criteria_per=3, seed=1, name="whole-run-gpt-4.1-mini-2026-11-30-16-00"
        )
        gaps = await synthesize_run(store, conversations=12, criteria_per=3, seed=2, name="run-with-gaps")
        unscored = await synthesize_run(store, conversations=12, criteria_per=3, seed=3, name="not-scored-yet")
    with sqlite3.connect(db) as conn:
        # A run the engine left with gaps: two verdicts failed and one reply never came.
        (body,) = conn.execute("SELECT report_json FROM runs WHERE id = ?", (gaps,)).fetchone()
        report = json.loads(body)
        report["criteria"]["errors"], report["conversations"]["excluded"] = 2, 1
        conn.execute("UPDATE runs SET status = 'incomplete', report_json = ? WHERE id = ?", (json.dumps(report), gaps))
        conn.execute("UPDATE runs SET report_json = NULL, score = NULL WHERE id = ?", (unscored,))
    return db, whole, gaps, unscored


async def read_runs(db):
    async with await Store.open(db) as store:
        return await store.list_runs()


def row_of(lines: list[str], name: str) -> str:
    return next(line for line in lines if name in line)


async def test_runs_list_shows_scored_of_planned_errors_and_the_date(tmp_path):
    db, _, _, _ = await runs_db(tmp_path)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 3)
        lines = screen_lines(app)
        header = lines[1].split()
        assert header[:6] == ["id", "name", "status", "score", "n", "errors"]
        assert "incomplete" in row_of(lines, "run-with-gaps")
        # A run without a report (stopped, or going) counts its conversations scored so far, as
        # `show` does: the lists disagreed with it (0/50 here, "-" in `hbtui runs`, 10 in show).
        with sqlite3.connect(db) as conn:
            (scored,) = conn.execute(
                "SELECT count(*) FROM conversations c JOIN runs r ON r.id = c.run_id"
                " WHERE r.name = 'not-scored-yet' AND c.score IS NOT NULL"
            ).fetchone()
        assert 0 < scored < 12 and f" {scored}/12 " in row_of(lines, "not-scored-yet")
        assert f" {scored}/12 " in row_of(render_runs(await read_runs(db)).splitlines(), "not-scored-yet")
        assert "/12 " in row_of(lines, "whole-run")
        assert DATE in row_of(lines, "whole-run")  # whole at 80 columns, before any scrolling
        for _ in range(6):
            await pilot.press("right")
        await pilot.pause()
        scrolled = screen_lines(app)
        row = row_of(scrolled, "whole-run")  # the id and name stay while the rest moves
        assert "synth-test-model" in row and "finished" not in row
        await pilot.press(*["left"] * 6)
        await pilot.pause()
        assert "finished" in row_of(screen_lines(app), "whole-run")


async def test_a_run_with_gaps_counts_its_errors(tmp_path):
    db, _, gaps, _ = await runs_db(tmp_path)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 3)
        table = app.screen.table
        cells = [cell.plain for cell in table.get_row(str(gaps))]
        assert cells[COLUMNS.index("errors")] == "3" and cells[COLUMNS.index("status")] == "incomplete"


async def test_a_failed_run_says_why_in_a_few_words_in_its_errors_column(tmp_path, small_dataset):
    """Issue 25, item 9: a run stopped on a refused key has no count of errors; the list says the
    reason instead, in the words its status column leaves room for."""
    from tests.conftest import run_engine, settings_for
    from tests.support.server_process import FakeServer

    db = tmp_path / "db.sqlite"
    with FakeServer(api_key="fake-right") as server:
        _, status = await run_engine(settings_for(server, db, api_key="fake-wrong", concurrency=2), small_dataset)
    assert status == "failed"
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        cells = [cell.plain for cell in app.screen.table.get_row("1")]
    assert cells[COLUMNS.index("status")].startswith("failed")
    assert cells[COLUMNS.index("errors")] == "key refused"


@pytest.mark.parametrize("size, whole", [((120, 40), True), ((80, 24), False)], ids=["120x40", "80x24"])
async def test_a_name_takes_the_room_a_wide_terminal_has_and_the_header_says_there_is_more(tmp_path, size, whole):
    """Issue 25, item 9: at 120 columns a name was cut in the middle at 20 characters
    (first-40-…ake-grader) while other columns kept room they did not use; and the horizontal
    scrollbar, one line high, read as a stray glyph."""
    db, _, _, _ = await runs_db(tmp_path)
    name = "whole-run-gpt-4.1-mini-2026-11-30-16-00"  # 39 characters
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 3)
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert (name in shown) is whole, shown
        if not whole:
            assert "whole-run…1-30-16-00" in shown  # cut in the middle, at 20
        table = app.screen.table
        assert table.styles.scrollbar_size_horizontal == 0
        assert ("← → more columns" in app.screen.sub_title) is (table.max_scroll_x > 0)
        await pilot.resize_terminal(80 if whole else 120, 30)
        await wait_for(pilot, lambda: (name in "\n".join(screen_lines(app))) is not whole, what="the names again")
