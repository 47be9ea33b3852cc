"""Pictures of the compare screen and of a pair's two replies, at 80x24 and 120x40, on two fixed
synthetic runs that share their records and differ in their answers.

Regenerate with `pytest tests/tui/test_tui_snapshots_compare.py --snapshot-update` and read the SVGs
in __snapshots__ before committing them.
"""

from __future__ import annotations

import asyncio

import pytest

from hbtui.store import Store
from hbtui.tui.screens.compare import CompareScreen
from hbtui.tui.screens.pair import PairScreen
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for

SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def snapshot_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("snap") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            await synthesize_run(store, conversations=60, criteria_per=10, seed=3, name="synthetic-a")
            await synthesize_run(store, conversations=60, criteria_per=10, seed=3, name="synthetic-b", answers_seed=5)

    asyncio.run(make())
    return db


def compared(*keys: str, pair: bool = False):
    async def run_before(pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
        await app.push_screen(await CompareScreen.read(app.store, 1, 2))
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.completed)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        if pair:
            await wait_for(pilot, lambda: isinstance(app.screen, PairScreen))
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_summary(snap_compare, snapshot_db, size):
    assert snap_compare(browser_app(snapshot_db), terminal_size=size, run_before=compared())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_moved_list(snap_compare, snapshot_db, size):
    assert snap_compare(browser_app(snapshot_db), terminal_size=size, run_before=compared("2", "j"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_pair_of_replies(snap_compare, snapshot_db, size):
    """The conversation that moved most: stacked at 80 columns, side by side at 120."""
    assert snap_compare(browser_app(snapshot_db), terminal_size=size, run_before=compared("2", "enter", pair=True))
