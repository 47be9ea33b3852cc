"""Heavy modules imported in a thread while the process has something else to wait for.

aiohttp (0.15-0.2 s of CPU) is needed by a run's first request and numpy (0.1 s) by its report:
each imported on the critical path was a slice of `hbtui run`'s wall time. A later `import` of
the module in the meantime waits for this one (Python's import lock sees to that).
"""

from __future__ import annotations

import importlib
import sys
import threading


def import_in_background(*modules: str) -> None:
    """Start importing ``modules``, in order, in a thread, unless all are loaded already. Not a
    daemon: the interpreter never exits in the middle of an import."""
    missing = [module for module in modules if module not in sys.modules]
    if missing:
        threading.Thread(target=_import_quietly, args=missing, name=f"hbtui-load-{missing[0]}").start()


def _import_quietly(*modules: str) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - said where it matters: the import where it is used fails there
            pass  # (a thread's error would be a traceback on stderr, which hbtui never prints)
