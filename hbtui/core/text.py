"""Making model and dataset text safe to show: it is data, never markup, terminal control, bidi
override or spreadsheet formula."""

from __future__ import annotations

import re

# C0 and C1 control characters except tab and newline, and DEL. ESC (0x1b) starts ANSI and OSC
# sequences; without it they are inert text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


_EVERY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# Bidirectional controls reorder what follows them on screen ("txt.exe" after U+202E reads
# "exe.txt"), and in a name or a criterion they make the text say what it does not hold.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Zero-width characters make two names that look alike differ, or hide a word from a search.
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
# What an emoji ZWJ sequence joins (🚴‍♂️, 🤦‍♀️, 👩‍⚕️, 🏳️‍🌈): Extended_Pictographic, as far as
# the blocks below U+1F000 go, and the emoji planes after it (skin tones included).
_EMOJI = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf"
    "\u2934\u2935\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
_HIDDEN = re.compile(f"[{BIDI_CONTROLS}{ZERO_WIDTH}]")
# In running text a joiner between two emoji is drawn as one emoji: the first alternative keeps
# it (with the emoji before it), the second makes every other hidden character visible.
_HIDDEN_BUT_EMOJI_JOINER = re.compile(
    f"(?P<joined>[{_EMOJI}][{_EMOJI}\ufe0f]*\u200d(?=[{_EMOJI}]))|[{BIDI_CONTROLS}{ZERO_WIDTH}]"
)

# A spreadsheet reads a cell starting with one of these as a formula (=HYPERLINK(...) sends
# what the sheet holds elsewhere); OWASP's list.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _symbol(match: re.Match[str]) -> str:
    return chr(0x2400 + ord(match.group())) if ord(match.group()) < 0x20 else "\ufffd"


def _code_point(match: re.Match[str]) -> str:
    return match.group("joined") or f"⟨U+{ord(match.group()):04X}⟩"


def _hidden_code_point(match: re.Match[str]) -> str:
    return f"⟨U+{ord(match.group()):04X}⟩"


def visible_controls(text: str) -> str:
    """Running text (a reply, an explanation) with its controls visible: ESC as ␛, so an escape
    sequence shows as text, and a bidi control or a stray zero-width character as ⟨U+202E⟩.
    A zero-width joiner between emoji stays, as it draws one emoji."""
    return _HIDDEN_BUT_EMOJI_JOINER.sub(_code_point, _CONTROL.sub(_symbol, text))


def visible_line(text: str) -> str:
    """One line exactly as it is, with every control character visible, newlines and tabs too:
    a message that names a file or a prompt_id cannot start a line of its own. Zero-width
    characters are all visible (⟨U+200D⟩): two ids that look alike are told apart."""
    return _HIDDEN.sub(_hidden_code_point, _EVERY_CONTROL.sub(_symbol, text))


def one_line(text: str, width: int = 120) -> str:
    """A single display line: controls and zero-width characters made visible, whitespace
    folded, cut with an ellipsis."""
    flat = " ".join(_HIDDEN.sub(_hidden_code_point, _CONTROL.sub(_symbol, text)).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def middle_cut(text: str, width: int) -> str:
    """One line cut in the middle: run names differ at their end (the time) as much as their start."""
    flat = one_line(text, 10_000)
    if len(flat) <= width:
        return flat
    head = (width - 1) // 2
    return flat[:head] + "…" + flat[len(flat) - (width - 1 - head) :]


def spreadsheet_cell(cell: object) -> object:
    """A CSV cell a spreadsheet shows as it is: text that would start a formula gets a leading
    ``'`` (OWASP's advice); numbers, negative points among them, stay numbers."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START):
        return "'" + cell
    return cell
