"""When a screen draws its next frame: as soon as it has something to draw, at most 60 times a
second (Textual's ``TEXTUAL_FPS``), and no later; and, for a key whose result is read first, not
before that result is in (``hold_frames``).

Textual paces a screen's frames with an interval timer on a fixed grid. When a tick comes late
(the timer waited, paused, for the screen to have something to draw, which is how every key
begins), Textual 8.2.8's timer skips to the grid point *after* the next one: the frame after a
late one waits 17 to 33 ms, where it should wait at most 17. That is most keys of this app:
a key draws a first frame at once (a field closes, the focus moves) and its result, read from
the database a few milliseconds later, waited for a frame slot another 17 ms away. Measured on
``/`` search with 5,000 conversations: the matches were read 19.5 ms after Enter and drawn at
42 ms, the timer idle from 19.5 to 35.

:class:`FrameTimer` keeps the pace by the time since the last frame instead: a frame may start
one period after the previous one started, and starts at once when that time has passed. It is
the screen's update timer for every screen of the app (:class:`PromptFrames`, mixed into
``handle.AppScreen`` and ``handle.AppModal``). It overrides Textual internals (``Timer._run``,
``Screen._update_timer``), which is one reason Textual is pinned exactly (see docs/development.md).

Upstream: no Textual issue reports the skip that we found; it came with Textual pull request 5465
("Fix busy loop on lagging timer", https://github.com/Textualize/textual/pull/5465), whose
``count = int((now - start) / _interval + 1)`` lands one grid point too far. Kept because it is
measured (docs/benchmarks.md, "The frame timer"): without it, keys whose result is read from the
database wait a frame more. tests/test_textual_overrides.py fails when Textual's own timer keeps
the pace, and this module can go.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from textual._time import get_time, sleep
from textual.app import App
from textual.screen import UPDATE_PERIOD, Screen
from textual.timer import EventTargetGone, Timer


class FrameTimer(Timer):
    """A repeating timer whose ticks are at least one interval apart, start to start, and come
    as soon as they may once it is resumed."""

    async def _run(self) -> None:
        last_tick = float("-inf")
        count = 0
        while self._repeat is None or count < self._repeat:
            await self._active.wait()
            if self._reset:  # the interval starts again from now
                self._reset = False
                last_tick = get_time()
            wait = last_tick + self._interval - get_time()
            if wait > 0:
                await sleep(wait)
                await self._active.wait()  # paused while it slept: wait to be resumed again
            last_tick = get_time()
            count += 1
            try:
                await self._tick(next_timer=last_tick, count=count)
            except EventTargetGone:
                break


# A mixin, placed before Textual's screen class: as a Screen subclass of its own it would also
# carry Screen's default CSS ahead of ModalScreen's, and a dialog would lose its see-through
# background (caught by the snapshot tests).
if TYPE_CHECKING:
    _ScreenMixin = Screen
else:
    _ScreenMixin = object


class PromptFrames(_ScreenMixin):
    """Mixed into a screen class: its frames are paced by :class:`FrameTimer`."""

    _frame_timer: FrameTimer | None = None

    @property
    def _update_timer(self) -> Timer:  # Textual's own property, made with its own Timer
        timer = self._frame_timer
        if timer is None:
            timer = self._frame_timer = FrameTimer(
                self, UPDATE_PERIOD, name="screen_update", callback=self._on_timer_update, pause=True
            )
            timer._start()
            self._timers.add(timer)
        return timer


def hold_frames(app: App, at_most: float) -> Callable[[], None]:
    """Hold the app's frames back until the returned function is called, or ``at_most`` seconds
    have passed: a key whose result is read from the database then draws that result in its first
    frame, rather than a half-way state first (a field closed over the old list), which cost the
    result a frame's drawing and up to a frame's wait. The limit keeps a slow read (a run's first
    search indexes it) from leaving the screen still: the half-way state shows then, as before."""
    held = ExitStack()
    held.enter_context(app.batch_update())
    limit = app.set_timer(at_most, held.close, name="frames held")

    def release() -> None:
        limit.stop()
        held.close()  # a second close does nothing

    return release
