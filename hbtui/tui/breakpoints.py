"""Screens that lay out differently on narrow and wide terminals.

Textual sets a screen's breakpoint class (-narrow, -wide) on its first resize, which comes after
its first layout: a screen opened at 80 columns was laid out wide, drawn, restyled narrow and
laid out again, doubling the time from a key press to the settled screen. Setting the class
as the screen composes gives the first layout the right styles.
"""

from __future__ import annotations

from hbtui.tui.handle import AppScreen

NARROW, WIDE = "-narrow", "-wide"
WIDE_FROM_COLUMNS = 120


class ResponsiveScreen(AppScreen):
    """A screen whose breakpoint class is right from its first frame (-narrow below 120 columns,
    -wide from there, unless the subclass sets other HORIZONTAL_BREAKPOINTS).

    Subclasses call ``apply_breakpoint()`` first thing in ``compose``.
    """

    HORIZONTAL_BREAKPOINTS = [(0, NARROW), (WIDE_FROM_COLUMNS, WIDE)]

    def apply_breakpoint(self) -> None:
        # As Textual picks it on a resize: the class of the largest threshold the width reaches.
        width = self.app.size.width
        breakpoints = sorted(self.HORIZONTAL_BREAKPOINTS)
        chosen = max((threshold, name) for threshold, name in breakpoints if width >= threshold)[1]
        for _, name in breakpoints:
            self.set_class(name == chosen, name, update=False)
