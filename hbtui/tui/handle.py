"""A typed handle on the app for its screens and widgets.

Textual types ``self.app`` as ``App[object]``; the screens of hbtui reach hbtui's own app (its
store, its runs, its navigation). Mixing this in before the Textual base gives the type checker
the app's real type; at run time it adds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hbtui.tui.app import HBTuiApp


class AppHandle:
    if TYPE_CHECKING:

        @property
        def app(self) -> HBTuiApp: ...
