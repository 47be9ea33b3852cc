"""A minimal App for the results browser's tests until (or besides) the real shell.

It has what the browser's screens use from the App: an open ``store``, the browser stylesheet,
and escape to go back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

import hbtui.tui
from hbtui.store import Store

BROWSER_TCSS = Path(hbtui.tui.__file__).with_name("browser.tcss")


class BrowserHarness(App):
    CSS_PATH = [BROWSER_TCSS]
    BINDINGS = [Binding("escape", "back", "Back")]

    def __init__(self, db_path: Path, first_screen: Callable[[], Screen] | None = None) -> None:
        super().__init__()
        self.db_path = db_path
        self.first_screen = first_screen
        self.store: Store | None = None

    async def on_mount(self) -> None:
        self.store = await Store.open(self.db_path)
        await self.push_screen(Screen())  # stands for the shell's runs list, the root of the stack
        if self.first_screen is not None:
            await self.push_screen(self.first_screen())

    async def on_unmount(self) -> None:
        if self.store is not None:
            await self.store.close()
            self.store = None

    def action_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()


def browser_app(db_path: Path) -> App:
    """The real shell when it can start, otherwise the harness; either way, no screen of ours yet."""
    try:
        import hbtui.tui.screens.monitor
        import hbtui.tui.screens.runs  # noqa: F401
        from hbtui.core.settings.config import Settings
        from hbtui.tui.app import HBTuiApp
    except ImportError:
        return BrowserHarness(db_path)
    return HBTuiApp(Settings(db_path=str(db_path)), env_file=None, monitor_run=None)
