"""Repeats grouped (K on a run made with --repeats 3, by the real engine against the fake
server): each prompt with its three scores and their spread, opened on any repeat."""

from __future__ import annotations

import asyncio

import pytest

from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.repeats import RepeatsScreen
from hbtui.tui.widgets.line_table import LineTable
from tests.conftest import run_engine, settings_for
from tests.support.browse import open_run
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.tui import wait_for


@pytest.fixture
def repeats_db(server, small_dataset, tmp_path):
    db = tmp_path / "hbtui.sqlite"
    run_id, _status = asyncio.run(run_engine(settings_for(server, db), small_dataset, repeats=3, name="thrice"))
    return db, run_id


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_each_prompt_shows_its_repeats_scores_and_spread_and_opens_any(repeats_db, size):
    db, run_id = repeats_db
    async with await Store.open(db) as store:
        groups = await store.repeat_groups(run_id)
        rows = await store.conversation_page(run_id, limit=100)
    assert len(groups) == 3 and all(len(g.conversations) == 3 for g in groups)
    by_id = {r.id: r for r in rows}
    for g in groups:
        assert len({by_id[c].prompt_id for c in g.conversations}) == 1
        assert [by_id[c].repeat for c in g.conversations] == [0, 1, 2]
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        await open_run(pilot, run_id)
        await pilot.press("K")
        await wait_for(pilot, lambda: isinstance(app.screen, RepeatsScreen))
        view = app.screen
        table = view.query_one(LineTable)
        spreads = [g.spread for g in table.rows]
        assert spreads == sorted(spreads, key=lambda s: -(s or 0))  # least stable first
        first = table.current
        text = screen_text(app)
        assert "3 prompts × 3" in text
        assert " ".join(f"{s:5.2f}" for s in first.scores) in text
        await pilot.press("3")  # the third repeat of the prompt under the cursor
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        conversation = app.screen
        assert conversation.detail.summary.id == first.conversations[2]
        await pilot.press("N")  # n/N step through the prompt's repeats
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 1)
        assert conversation.detail.summary.id == first.conversations[1]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is view)
        await pilot.press("s")
        assert view.sort == "mean"


async def test_a_run_without_repeats_says_how_to_get_them(finished_run_db):
    app = browser_app(finished_run_db)
    async with app.run_test(size=(80, 24)) as pilot:
        async with await Store.open(finished_run_db) as store:
            run = await store.resolve_run("small-run")
        screen = await open_run(pilot, run.id)
        await pilot.press("K")
        await pilot.pause()
        assert app.screen is screen and "--repeats K" in str(screen.query_one("KeyBar").render())


async def test_the_help_lists_the_keys_of_the_repeats_the_run_has(repeats_db):
    from hbtui.tui.screens.help import HelpModal

    db, run_id = repeats_db
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_run(pilot, run_id)
        await pilot.press("K")
        await wait_for(pilot, lambda: isinstance(app.screen, RepeatsScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
        described = [description for _keys, description, _where in app.screen.rows]
        assert [d for d in described if d.startswith("Open repeat")] == [
            "Open repeat 1",
            "Open repeat 2",
            "Open repeat 3",
        ]
