"""The numbers a person sees for a conversation, a criterion and a repeat, in every message.

The browser lists a run's conversations as #1, #2... (their position, 1-based) and a
conversation's criteria as 1, 2...; messages, log lines and exports' added columns say the same,
never a database key or a 0-based index, so what a log names can be found on screen.
"""

from __future__ import annotations


def conversation_number(position: int) -> int:
    """The conversation's number as the browser shows it (#15): its 0-based position, plus one."""
    return position + 1


def criterion_number(idx: int) -> int:
    """The criterion's number as the conversation screen lists it: its 0-based rubric index, plus one."""
    return idx + 1


def repeat_label(repeat: int, repeats: int) -> str:
    """ "repeat 1 of 2" for the first of two; nothing for a run without repeats."""
    return f"repeat {repeat + 1} of {repeats}" if repeats > 1 else ""


def conversation_label(position: int, repeat: int = 0, repeats: int = 1) -> str:
    """ "conversation #15", or "conversation #15 (repeat 2 of 3)" in a run with repeats."""
    label = f"conversation #{conversation_number(position)}"
    repeated = repeat_label(repeat, repeats)
    return f"{label} ({repeated})" if repeated else label


def criterion_label(idx: int, position: int, repeat: int = 0, repeats: int = 1) -> str:
    """ "criterion 4 of conversation #15"."""
    return f"criterion {criterion_number(idx)} of {conversation_label(position, repeat, repeats)}"
