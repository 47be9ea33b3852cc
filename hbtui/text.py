"""Making model and dataset text safe to show: it is data, never markup or terminal control."""

from __future__ import annotations

import re

# C0 and C1 control characters except tab and newline, and DEL. ESC (0x1b) starts ANSI and OSC
# sequences; without it they are inert text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


_EVERY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _symbol(match: re.Match[str]) -> str:
    return chr(0x2400 + ord(match.group())) if ord(match.group()) < 0x20 else "\ufffd"


def visible_controls(text: str) -> str:
    """Control characters as visible symbols (ESC → ␛), so an escape sequence shows as text."""
    return _CONTROL.sub(_symbol, text)


def visible_line(text: str) -> str:
    """One line exactly as it is, with every control character visible, newlines and tabs too:
    a message that names a file or a prompt_id cannot start a line of its own."""
    return _EVERY_CONTROL.sub(_symbol, text)


def one_line(text: str, width: int = 120) -> str:
    """A single display line: controls made visible, whitespace folded, cut with an ellipsis."""
    flat = " ".join(visible_controls(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def middle_cut(text: str, width: int) -> str:
    """One line cut in the middle: run names differ at their end (the time) as much as their start."""
    flat = one_line(text, 10_000)
    if len(flat) <= width:
        return flat
    head = (width - 1) // 2
    return flat[:head] + "…" + flat[len(flat) - (width - 1 - head) :]
