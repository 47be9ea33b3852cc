"""Heavy modules imported in a thread while the process has something else to wait for.

aiohttp (0.15-0.2 s of CPU) is needed by a run's first request and numpy (0.1 s) by its report:
each imported on the critical path was a slice of `hbtui run`'s wall time. A later `import` of
the module in the meantime waits for this one (Python's import lock sees to that).
"""

from __future__ import annotations

import importlib
import sys
import threading


def import_in_background(module: str) -> None:
    """Start importing ``module`` in a thread, unless it is loaded or loading already. Not a
    daemon: the interpreter never exits in the middle of an import."""
    if module in sys.modules:
        return
    threading.Thread(target=_import_quietly, args=(module,), name=f"hbtui-load-{module}").start()


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - said where it matters: the import where it is used fails there
        pass  # (a thread's error would be a traceback on stderr, which hbtui never prints)
