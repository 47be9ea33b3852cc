"""`hbtui pause`, `unpause` and `cancel`: asked of the process driving a run, through the database."""

from __future__ import annotations

import argparse
import asyncio
import time

from hbtui.cli.common import EXIT_OK, UsageError, say
from hbtui.core.batch_files import BatchFiles
from hbtui.core.invocation import invoked_as
from hbtui.core.settings.config import Settings
from hbtui.core.verdicts import CANCELLED, INTERRUPTED, PAUSED, RUNNING
from hbtui.store import Store

CONTROL_PATIENCE_SECONDS = 5.0  # how long `hbtui pause` waits to see the driver apply it


async def cmd_control(args: argparse.Namespace, settings: Settings, control: str | None) -> int:
    """Ask the process driving a run, on this host or another, to pause, go on or stop. The
    request goes through the database; the driver reads it at least once a second and shows
    what it applied in its heartbeat, which this waits a few seconds to see."""
    verb = args.command
    async with await Store.open(settings.db_path, create=False) as store:
        run = await store.resolve_run(args.run)
        shown = run.shown_status()
        if BatchFiles.online_of(run.plan) is not None:  # its batches are the provider's to stop
            from hbtui.cli.batch import control_batch_run

            return await control_batch_run(store, run, settings, control, verb)
        if run.status != RUNNING:
            raise UsageError(f"run {run.id} is {shown}: there is nothing to {verb}")
        if shown == INTERRUPTED:
            raise UsageError(
                f"run {run.id}'s driver ({run.owner_shown or 'unknown'}) is gone, or silent past its heartbeat:"
                f" nothing runs to {verb} ({invoked_as()} resume {run.id} continues the run)"
            )
        if not await store.request_control(run.id, control):
            raise UsageError(f"run {run.id} ended meanwhile, or is being cancelled: nothing to {verb}")
        say(f"run {run.id}: {verb} asked of its driver ({run.owner_shown})")
        deadline = time.monotonic() + CONTROL_PATIENCE_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            now = await store.get_run(run.id)
            if control == CANCELLED and now.status != RUNNING:
                say(f"run {run.id} is {now.status}")
                return EXIT_OK
            if control != CANCELLED and bool((now.live or {}).get("paused")) == (control == PAUSED):
                say(
                    f"run {run.id} is {'paused: its calls in flight finish, no new one starts' if control else 'going on'}"
                )
                return EXIT_OK
        if control == CANCELLED:
            say(f"run {run.id} stops once its calls in flight are answered (they are paid for, and kept)")
        else:
            say(
                f"its driver has not shown it yet (its heartbeat comes every few seconds); `hbtui runs` shows"
                f" run {run.id} as {'paused' if control else 'running'} once it has"
            )
        return EXIT_OK
