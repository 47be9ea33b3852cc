"""The screens' typed handle on the app: ``self.app`` is an :class:`HBTuiApp` to the type checker.

Textual types ``MessagePump.app`` as ``App[object]``; its own idiom for a typed handle is
``getters.app(AppClass)``. Declared here once, under TYPE_CHECKING: at run time ``self.app`` stays
Textual's own (no isinstance check on every access), and the app module, which opens these
screens, is not imported by them. Every screen of the app derives from one of these two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from textual.screen import ModalScreen, Screen

if TYPE_CHECKING:
    from textual import getters

    from hbtui.tui.app import HBTuiApp

ResultT = TypeVar("ResultT")


class AppScreen(Screen):
    """A full screen of hbtui."""

    if TYPE_CHECKING:
        app = getters.app(HBTuiApp)


class AppModal(ModalScreen[ResultT]):
    """A dialog of hbtui, dismissed with a ``ResultT``."""

    if TYPE_CHECKING:
        app = getters.app(HBTuiApp)
