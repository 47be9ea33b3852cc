"""hbtui as the user invoked it, for the commands printed as next steps (`hbtui resume 7`): a
command printed must run as printed, in the shell the user typed the first one in."""

from __future__ import annotations

import os
import shutil
import sys

# A process the app starts (a detached driver, `python -m hbtui _drive`) prints the commands as the
# user invoked the app: the app hands its own invocation down under this name.
INVOKED_AS_VARIABLE = "_HBTUI_INVOKED_AS"


def invoked_as() -> str:
    """``hbtui`` when that name runs this very script (or it ran as ``python -m hbtui``), else
    the path the user typed (``.venv/bin/hbtui`` in a venv not activated)."""
    handed_down = os.environ.get(INVOKED_AS_VARIABLE)
    if handed_down:
        return handed_down
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) != "hbtui":
        return "hbtui"  # python -m hbtui: which python is not known here; the name is what docs use
    found = shutil.which("hbtui")
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return "hbtui"
    return argv0
