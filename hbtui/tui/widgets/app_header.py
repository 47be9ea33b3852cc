"""The header of every full screen: Textual's, with a glyph every font has and the database named.

The app lists the runs of one database at a time (the user's, or the demo's beside it), so the
title always says which, as k9s names its context: ``hbtui · runs/hbtui.sqlite``. Textual's own
icon, ``⭘``, is a missing glyph in the browser's fonts under ``hbtui serve``.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import Header

ICON = "≡"  # opens the command palette, as Textual's icon does


class AppHeader(Header):
    def __init__(self) -> None:
        super().__init__(icon=ICON)


def database_label(path: str | Path) -> str:
    """A database's path as short as it stays clear: relative to the working folder when inside
    it (unless that is ``/``), else with the home folder as ``~``."""
    resolved = Path(path).expanduser().resolve()
    here = Path.cwd().resolve()
    if here != Path(here.anchor) and resolved.is_relative_to(here):
        return str(resolved.relative_to(here))
    home = Path(os.path.expanduser("~")).resolve()
    if resolved.is_relative_to(home):
        return str(Path("~") / resolved.relative_to(home))
    return str(resolved)
