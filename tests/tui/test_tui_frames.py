"""A search is drawn in one frame with its results, unless they are slow to come (hbtui.tui.frames)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import hbtui.tui.screens.run as run_screen
from tests.support.browse import open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.tui import wait_for


@pytest.fixture(scope="module")
def frames_db(tmp_path_factory) -> tuple[Path, int]:
    return synthetic_db(tmp_path_factory.mktemp("frames") / "hbtui.sqlite", conversations=40, criteria_per=6, seed=4)


async def search_frames(db: Path, run_id: int, monkeypatch, *, reads: float, held: float) -> list[tuple]:
    """What each frame of the run screen showed from Enter on a search, its reads taking ``reads``
    seconds longer and its frames held at most ``held`` seconds: (the field open, the text of the
    list's query, the match counts read)."""
    monkeypatch.setattr(run_screen, "SEARCH_FRAMES_HELD_SECONDS", held)
    app = browser_app(db)
    shown: list[tuple] = []
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_run(pilot, run_id)
        await pilot.press("2", "slash", *"fabricated")
        await pilot.pause()
        store = app.store
        search_hits = store.search_hits

        async def slow_search_hits(run_id: int, text: str):
            await asyncio.sleep(reads)
            return await search_hits(run_id, text)

        monkeypatch.setattr(store, "search_hits", slow_search_hits)
        display = app._display

        def record(to_screen, renderable) -> None:
            if renderable is not None and to_screen is screen:
                query = screen.conversation_list.query_state
                field = screen.query_one("#search-input")
                shown.append((field.has_class("-open"), query.filter.text if query else None, screen.matches))
            display(to_screen, renderable)

        app._display = record
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.matches is not None and screen.conversation_list.query_state.filter.text)
        await pilot.pause(0.05)
        app._display = display
    return shown


async def test_a_search_draws_the_field_closed_and_its_results_in_one_frame(frames_db, monkeypatch):
    db, run_id = frames_db
    shown = await search_frames(db, run_id, monkeypatch, reads=0.05, held=2.0)
    closed = [frame for frame in shown if not frame[0]]
    assert closed, shown
    _, text, matches = closed[0]
    assert text == "fabricated" and matches is not None and matches.criteria > 0, shown


async def test_a_slow_search_shows_the_field_closed_before_its_results(frames_db, monkeypatch):
    db, run_id = frames_db
    shown = await search_frames(db, run_id, monkeypatch, reads=1.0, held=0.05)
    closed = [frame for frame in shown if not frame[0]]
    assert closed and closed[0][1] is None and closed[0][2] is None, shown  # the old list, no counts yet
    assert closed[-1][1] == "fabricated" and closed[-1][2] is not None, shown
