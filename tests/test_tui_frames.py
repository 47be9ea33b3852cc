"""When the app's screens draw (hbtui.tui.frames): a frame one interval after the last one, or at
once after a longer wait (Textual 8.2.8's timer waited a second interval after a late frame); and a
search drawn in one frame with its results, unless they are slow to come."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import hbtui.tui.frames as frames
import hbtui.tui.screens.run as run_screen
from hbtui.tui.frames import FrameTimer
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.picker import PickerModal
from tests.support.browse import open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.tui import wait_for

INTERVAL = 1 / 60


class Clock:
    """Time that passes only when the timer sleeps or a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def get_time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


class Target:
    """What a timer ticks for (a screen, in the app)."""


class DrawingTimer(FrameTimer):
    """Each tick is a frame that takes ``drawing`` seconds, after which the screen pauses its timer
    until it has something new to draw (as Textual's screen does)."""

    def __init__(self, clock: Clock, drawing: float) -> None:
        super().__init__(Target(), INTERVAL, name="screen_update", pause=True)
        self.clock = clock
        self.drawing = drawing
        self.ticks: list[float] = []

    async def _tick(self, *, next_timer: float, count: int) -> None:
        self.ticks.append(self.clock.now)
        self.pause()
        self.clock.now += self.drawing


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The frame timer's clock, under the test's control."""
    clock = Clock()
    monkeypatch.setattr(frames, "get_time", clock.get_time)
    monkeypatch.setattr(frames, "sleep", clock.sleep)
    return clock


async def resume_at(timer: DrawingTimer, at: float | None) -> None:
    """The screen has something new to draw at ``at`` (None: now)."""
    if at is not None:
        timer.clock.now = at
    timer.resume()
    await settle()


def test_a_frame_comes_one_interval_after_the_last_or_at_once_after_a_longer_wait(clock):
    async def scenario() -> list[float]:
        timer = DrawingTimer(clock, drawing=0.006)
        timer._start()
        await resume_at(timer, None)  # a key, after a long idle: drawn at once
        await resume_at(timer, 1000.012)  # its result is read 12 ms later: one interval after the first
        await resume_at(timer, 1000.5)  # the next key, much later: at once again
        await resume_at(timer, 1000.51)  # and its result
        timer.stop()
        return timer.ticks

    ticks = asyncio.run(scenario())
    assert ticks == pytest.approx([1000.0, 1000.0 + INTERVAL, 1000.5, 1000.5 + INTERVAL])


def test_a_paused_timer_does_not_tick(clock):
    async def scenario() -> list[float]:
        timer = DrawingTimer(clock, drawing=0.001)
        timer._start()
        await settle()
        clock.now += 5.0
        await settle()
        assert timer.ticks == []  # nothing to draw: no frame
        await resume_at(timer, None)
        timer.stop()
        return timer.ticks

    assert asyncio.run(scenario()) == [1005.0]


@pytest.fixture(scope="module")
def frames_db(tmp_path_factory) -> tuple[Path, int]:
    return synthetic_db(tmp_path_factory.mktemp("frames") / "hbtui.sqlite", conversations=40, criteria_per=6, seed=4)


async def test_every_screen_of_the_app_paces_its_frames_so(frames_db):
    db, run_id = frames_db
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
        seen = [app.screen]  # the runs list
        seen.append(await open_run(pilot, run_id))
        await pilot.press("2", "s")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        seen.append(app.screen)
        await pilot.press("escape", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        seen.append(app.screen)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen not in seen)
        seen.append(app.screen)
        assert len({type(screen) for screen in seen}) == 5
        assert all(type(screen._update_timer) is FrameTimer for screen in seen), [type(s) for s in seen]


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
