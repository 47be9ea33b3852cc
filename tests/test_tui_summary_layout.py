"""The summary's breakdowns at 80, 120 and 160 columns: each table gets the width it needs, so
no column is cut to `sco…` (issue 13, defect 2)."""

from __future__ import annotations

import pytest

from hbtui.store import Store
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.breakdown import ScoreBreakdown
from tests.support.browser_harness import browser_app, wait_for
from tests.support.synth import synthesize_run


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
        await wait_for(pilot, lambda: screen.report is not None and all(b.rows for b in screen.query(ScoreBreakdown)))
        await pilot.pause()
        for breakdown in screen.query(ScoreBreakdown):
            table = breakdown.content
            needed = app.console.measure(table).maximum
            assert needed <= breakdown.content_region.width, (breakdown.id, needed, breakdown.content_region.width)
