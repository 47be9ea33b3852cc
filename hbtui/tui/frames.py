"""A key whose result is read from the database draws that result in its first frame
(``hold_frames``), unless the read is slow.

This module also held ``FrameTimer``, which replaced Textual's frame timer (private
``Timer._run`` and ``Screen._update_timer``): after a late frame, Textual 8.2.8's timer skips one
grid point too far (its pull request 5465), so the next frame may wait 17 to 33 ms where 17 would
do. Measured with ``bench/bench_browser.py`` and its ``--textual-frames`` at e53123b (5 runs each,
alternated, 2026-12-06): over 34 keys the median difference was 0.3 ms, 7 keys faster by more
than 3 ms and 10 slower, all within the run-to-run noise; only ``/`` search was faster in 4 runs
of 5 (median 58 against 72 ms), and ``hold_frames`` below already draws a search in one frame.
The deepest override for no measured gain: removed (docs/development.md).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from textual.app import App


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
