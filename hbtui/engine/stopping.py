"""Ctrl-C, kill and hangup for a headless command that drives a run: the first signal stops the
run cleanly (what completed is saved, the run is left interrupted and resumable), a second one
quits at once. One handler for `hbtui run` and its kin and for `hbtui meta-eval`."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from hbtui.core.verdicts import INTERRUPTED

# Signals that stop a headless run cleanly (interrupted, resumable): Ctrl-C, kill, and the hangup
# of a terminal or SSH session that went away under a run started without nohup or tmux.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# A run the app started, driven in a session of its own: the hangup of the terminal or SSH session
# the app ran in must not stop it (it is ignored), a deliberate kill still does.
DETACHED_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_AT_ONCE = 130  # a second signal: the shell's status for a process ended by SIGINT
STOPPING = "\nstopping: saving what completed (Ctrl-C again to quit at once)"


async def drive_until_stopped(
    work: Coroutine[Any, Any, str], stop_signals: Iterable[signal.Signals], say: Callable[[str], None]
) -> str:
    """The status ``work`` (a driver's execute) ends with; interrupted when a stop signal
    cancelled it and it let the cancellation out (a driver that catches it says its own)."""
    loop = asyncio.get_running_loop()
    runner = asyncio.ensure_future(work)
    stop_signals = tuple(stop_signals)
    stops = 0

    def stop() -> None:
        nonlocal stops
        stops += 1
        if stops > 1:
            os._exit(EXIT_AT_ONCE)  # at once: not even the interpreter's teardown
        try:
            say(STOPPING)
        except OSError:
            pass  # the terminal is gone (SIGHUP): stop all the same
        runner.cancel()  # the driver flushes its writes and marks the run interrupted

    for signum in stop_signals:
        loop.add_signal_handler(signum, stop)
    try:
        return await runner
    except asyncio.CancelledError:
        if not stops:  # this command itself was cancelled, not stopped by a signal
            raise
        return INTERRUPTED
    finally:
        for signum in stop_signals:
            loop.remove_signal_handler(signum)
