"""The configuration screen's "local demo model": what `hbtui demo` does, inside the app.

The first use installs the local model (minutes: llama.cpp's server is built) in a thread the
user can cancel; the installer keeps nothing half-built. Then the model's server starts on a
free loopback port, and the run is planned in the demo's own database beside the user's, named
``demo-...``, and driven by the app, which stops the server when the run ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hbtui.core.dataset import Dataset
from hbtui.local import demo
from hbtui.services import plan_run

if TYPE_CHECKING:
    from hbtui.tui.app import HBTuiApp

CHOSEN = (
    "local demo model: SmolLM2-135M on this machine, installed once (llama.cpp's server is built: about"
    f" {{minutes}} minutes); its runs are kept apart in {{db}}. {demo.DISCLAIMER}. ctrl+s starts"
)


def chosen_text(db_path: str) -> str:
    from hbtui.local.model import build_minutes

    return CHOSEN.format(minutes=build_minutes(), db=demo.demo_db_beside(db_path))


async def start_demo(
    app: HBTuiApp, dataset: Dataset, values: dict[str, Any], say: Callable[[str], None], cancel: threading.Event
) -> int:
    """Install (unless installed), start the server, plan and start the run; its id."""
    from hbtui.local.model import install

    notes: list[str] = []  # offline, the reference prompt gives way to hbtui's own wording
    template = await asyncio.to_thread(demo.demo_template, app.settings, notes.append)
    for note in notes:
        app.notify(note, title="local demo model", timeout=15, markup=False)
    settings = replace(app.settings, grader_template=template)

    def progress(line: str) -> None:  # from the install's thread
        try:
            app.call_from_thread(say, f"{line} (ctrl+x cancels)")
        except RuntimeError:  # the app is closing: the install is being cancelled, nothing to show
            pass

    local = await asyncio.to_thread(install, settings.cache_dir, progress, cancel)
    say("starting the local model's server…")
    server = await asyncio.to_thread(demo.start_server, local)
    try:
        run_settings = demo.demo_settings(settings, server.base_url, demo.demo_db_beside(settings.db_path))
        store = await app.store_for_a_run(run_settings.db_path)
        run_id = await plan_run(
            store,
            run_settings,
            dataset,
            limit=values["limit"] or demo.DEFAULT_LIMIT,
            seed=values["seed"],
            name=demo.demo_name(),
        )
        await app.start_run(run_id, run_settings, when_done=server.stop)
    except BaseException:
        await asyncio.to_thread(server.stop)
        raise
    return run_id
