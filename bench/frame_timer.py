"""Time from a key press to the first frame that shows its result, for the app benchmarks.

Headless, Textual's compositor still builds every frame and hands it to the driver; the timer
wraps that hand-over and reads the condition as each frame goes out, so the frame it stops on
is one that shows the state tested. (Polling the condition from a task instead adds the time
the task waits for the busy loop, up to a frame more.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from textual import events
from textual.app import App
from textual.keys import key_to_character
from textual.widget import Widget


class FrameTimer:
    def __init__(self, app: App) -> None:
        self.app = app
        self._condition: Callable[[], bool] | None = None
        self._at: float | None = None
        display = app._display

        def on_frame(screen, renderable):
            if renderable is not None and self._at is None and self._condition is not None and self._condition():
                self._at = time.perf_counter()
            return display(screen, renderable)

        app._display = on_frame

    async def timed(self, action: Callable[[], object], condition: Callable[[], bool], timeout: float = 10.0) -> float:
        """Seconds from calling ``action`` to the first frame composed while ``condition`` holds."""
        self._condition, self._at = condition, None
        started = time.perf_counter()
        result = action()
        if asyncio.iscoroutine(result) or hasattr(result, "__await__"):
            await result
        deadline = started + timeout
        while self._at is None:
            if time.perf_counter() > deadline:
                self._condition = None
                raise TimeoutError("no frame showed the expected state")
            await asyncio.sleep(0.0005)
        self._condition = None
        return self._at - started

    def key(self, name: str) -> Callable[[], None]:
        """An action that sends ``name`` as the terminal would (through the driver, not the pilot):
        a printable key with its character (">" for greater_than_sign), which bindings match on."""
        return lambda: self.app._driver.send_message(events.Key(name, key_to_character(name)))

    def laid_out(self, widget: Widget) -> bool:
        """The widget has a place on the current screen: the layout that shows it has run."""
        return widget.is_attached and widget.screen is self.app.screen and bool(widget.region)
