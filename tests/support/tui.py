"""Helpers for pilot tests of the app: wait for a condition, read what is on screen."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable

_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.DOTALL)


def screen_text(app) -> str:
    """Everything drawn on the terminal right now, as plain text (from the SVG screenshot)."""
    svg = app.export_screenshot()
    return html.unescape("".join(_TEXT.findall(svg))).replace("\xa0", " ")


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.05)


def told(app, text: str) -> bool:
    """The app said ``text``: on the key bar, or, too long for it, whole in a toast."""
    return any(text in str(note.message) for note in app._notifications) or text in screen_text(app)
