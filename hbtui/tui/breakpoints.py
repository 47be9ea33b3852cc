"""Screens that lay out differently on narrow and wide terminals.

Textual sets a screen's breakpoint class (-narrow, -wide) on its first resize, which comes after
its first layout: a screen opened at 80 columns was laid out wide, drawn, restyled narrow and
laid out again, doubling the time from a key press to the settled screen. Setting the class
as the screen composes gives the first layout the right styles.
"""

from __future__ import annotations

from textual.screen import Screen

NARROW, WIDE = "-narrow", "-wide"
WIDE_FROM_COLUMNS = 120


class ResponsiveScreen(Screen):
    """A screen with -narrow below 120 columns and -wide from there, right from its first frame.

    Subclasses call ``apply_breakpoint()`` first thing in ``compose``.
    """

    HORIZONTAL_BREAKPOINTS = [(0, NARROW), (WIDE_FROM_COLUMNS, WIDE)]

    def apply_breakpoint(self) -> None:
        wide = self.app.size.width >= WIDE_FROM_COLUMNS
        self.set_class(wide, WIDE, update=False)
        self.set_class(not wide, NARROW, update=False)
