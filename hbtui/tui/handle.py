"""The screens' typed handle on the app: ``self.app`` is an :class:`HBTuiApp` to the type checker.

Textual types ``MessagePump.app`` as ``App[object]``; its own idiom for a typed handle is
``getters.app(AppClass)``. Declared here once, under TYPE_CHECKING: at run time ``self.app`` stays
Textual's own (no isinstance check on every access), and the app module, which opens these
screens, is not imported by them. Every screen of the app derives from one of these two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from textual import events, on
from textual.screen import ModalScreen, Screen

if TYPE_CHECKING:
    from textual import getters

    from hbtui.tui.app import HBTuiApp

ResultT = TypeVar("ResultT")


class AppScreen(Screen):
    """A full screen of hbtui."""

    if TYPE_CHECKING:
        app = getters.app(HBTuiApp)

    def say(self, message: str) -> None:
        """A short confirmation or answer to a key, on the key bar where it covers nothing; toasts
        (``notify``) are for what needs attention: errors, refusals, a run that ended."""
        from hbtui.tui.widgets.key_bar import KeyBar

        bars = self.query(KeyBar)
        if bars and bars.first().holds(message):
            bars.first().show_status(message)
            return
        # Cut to the bar's width, it lost what mattered ("... it does within…"): a toast says it
        # whole, and the bar no longer says what came before ("deleting run 9…" under "deleted").
        if bars:
            bars.first().clear_status()
        self.notify(message, markup=False)

    _resumed_before = False

    @on(events.ScreenResume)
    def _styled_as_mounted(self, event: events.ScreenResume) -> None:
        # Shown for the first time, the screen was styled as it mounted, a moment ago: Textual's
        # restyle of every widget on resume would compute the same styles again, a tenth of the
        # time from a key to the screen (opening a run, a conversation). Handlers of the screen's
        # classes run before Screen's, which reads the flag; later resumes restyle as usual.
        if not self._resumed_before:
            self._resumed_before = True
            event.refresh_styles = False


class AppModal(ModalScreen[ResultT]):
    """A dialog of hbtui, dismissed with a ``ResultT``."""

    if TYPE_CHECKING:
        app = getters.app(HBTuiApp)
