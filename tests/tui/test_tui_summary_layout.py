"""The summary's breakdowns at 80, 120 and 160 columns: each table gets the width it needs, so
no column is cut to `sco…` (issue 13, defect 2)."""

from __future__ import annotations

import pytest

from hbtui.store import Store
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.breakdown import ScoreBreakdown
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


@pytest.mark.parametrize("width", [80, 120, 160])
async def test_every_breakdown_column_fits(tmp_path, width):
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=40, criteria_per=8, seed=5)
    app = browser_app(db)
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
        screen = RunScreen(run_id)
        await app.push_screen(screen)
        breakdowns = lambda: [b for b in screen.query(ScoreBreakdown) if b.display]  # noqa: E731 - shown ones
        await wait_for(pilot, lambda: screen.report is not None and len(breakdowns()) == 2)
        await wait_for(pilot, lambda: all(b.rows for b in breakdowns()), what="both tables filled")
        await pilot.pause()
        assert {b.id for b in breakdowns()} == {"by-theme", "by-axis"}
        for breakdown in breakdowns():
            table = breakdown.content
            needed = app.console.measure(table).maximum
            assert needed <= breakdown.content_region.width, (breakdown.id, needed, breakdown.content_region.width)


@pytest.mark.parametrize("width", [80, 120])
async def test_the_summary_names_the_detached_drivers_log_on_one_line(tmp_path, width):
    db = tmp_path / "hbtui.sqlite"
    log = tmp_path / ("a-folder-deep-in-the-box-" * 6) / "run-1-overnight.log"  # some 200 columns
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=4, criteria_per=3, seed=5)
        await store.set_driver_log(run_id, str(log))
    app = browser_app(db)
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
        screen = RunScreen(run_id)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.report is not None)
        await pilot.pause()
        summary = screen.query_one("#run-summary")
        (line,) = [line for line in str(summary.render()).splitlines() if line.startswith("Log ")]
        assert len(line) == summary.content_region.width  # fitted: cut to the width, never wrapped
        assert line.startswith(f"Log {str(log)[:10]}") and line.endswith("/run-1-overnight.log") and "…" in line
