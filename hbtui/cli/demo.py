"""`hbtui demo`: install the local model, drive a few records on it, then open the app on the run."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import replace

from hbtui.core.dataset import DatasetError
from hbtui.core.settings.config import Settings
from hbtui.local.demo import (
    DEFAULT_LIMIT,
    DISCLAIMER,
    SLOT_CONTEXT,
    SLOTS,
    demo_dataset,
    demo_db_beside,
    demo_name,
    demo_settings,
    demo_template,
    install_local_model,
    server_options,
)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.cli.common import EXIT_INCOMPLETE, EXIT_OK

    code, run_id, run_settings = asyncio.run(drive_demo(args, settings))
    if code in (EXIT_OK, EXIT_INCOMPLETE) and not args.headless:
        # After the run's event loop has ended: the app runs one of its own.
        from hbtui.tui.app import HBTuiApp

        app = HBTuiApp(settings=run_settings, env_file=None, monitor_run=str(run_id))
        app.run(mouse=not args.no_mouse)
    return code


async def drive_demo(args: argparse.Namespace, settings: Settings) -> tuple[int, int, Settings]:
    """Install what is missing, start the model's server, and drive a run on it to its end."""
    from hbtui.cli.common import _download_progress, invoked_as, say
    from hbtui.cli.runs import drive
    from hbtui.local.llama_server import LlamaServer
    from hbtui.services import plan_run
    from hbtui.store import Store

    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    if limit < 1:
        raise DatasetError(f"--limit {limit}: give at least 1 record")
    # What needs the network besides the install comes first: a missing file stops at once.
    dataset = demo_dataset(args.data, settings.cache_dir, _download_progress)
    settings = replace(settings, grader_template=demo_template(settings, lambda line: say(f"hbtui: {line}")))
    local = install_local_model(settings.cache_dir, say)
    db_path = args.db or demo_db_beside(settings.db_path)  # as the app's demo: beside the user's database
    say(f"hbtui: {DISCLAIMER}.")
    say(
        f"hbtui: starting llama-server ({SLOTS} slots of {SLOT_CONTEXT} tokens); {limit} record"
        f"{'' if limit == 1 else 's'}, answered and graded on this machine's CPU: a few minutes"
    )
    started = time.monotonic()
    with LlamaServer(local.binary, local.model, **server_options()) as server:
        run_settings = demo_settings(settings, server.base_url, db_path)
        async with await Store.open(db_path) as store:
            run_id = await plan_run(store, run_settings, dataset, limit=limit, seed=args.seed, name=demo_name())
            run = await store.get_run(run_id)
            code = await drive(store, run, run_settings, prices={})
    say(f"hbtui: the demo took {time.monotonic() - started:.0f} s here; its runs are kept in {db_path}.")
    say(
        f"hbtui: {DISCLAIMER}. For a real run, set BASE_URL, MODEL_TEST and MODEL_GRADER (see README)"
        f" and run {invoked_as()}."
    )
    return code, run_id, run_settings
