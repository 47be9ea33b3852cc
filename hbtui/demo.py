"""`hbtui demo`: a whole run on this machine with no endpoint of one's own.

The local model (llama.cpp's server and SmolLM2-135M, installed once) answers and grades a few
records of the main subset, with the default grader prompt like any run. Its runs live in their
own database, named ``demo-...``, so that a meaningless score never sits among real results.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.config import Settings
from hbtui.dataset import Dataset, DatasetError, DownloadFailed, load_jsonl, load_subset
from hbtui.local_model import LocalModel, install

if TYPE_CHECKING:
    from hbtui.llama_server import LlamaServer

DEMO_DB_NAME = "demo.sqlite"  # beside the user's database: runs/demo.sqlite by default
MODEL_ALIAS = "smollm2-135m-demo"
DEFAULT_LIMIT = 5
# 4 slots of 8,192 tokens (SmolLM2's trained context): the longest main conversations, their
# replies and the grader prompt around them fit one slot; the KV cache takes about 750 MB.
SLOTS = 4
SLOT_CONTEXT = 8192
# Short answers keep 5 records within minutes on 2 cores; a cut reply is graded, and flagged.
MAX_TOKENS_TEST = 192
MAX_TOKENS_GRADER = 192
# A grader call waits behind the others on a laptop's CPU.
TIMEOUT_SECONDS = 600.0
STARTUP_SECONDS = 120.0
DISCLAIMER = (
    "SmolLM2-135M is a tiny model that answers and grades here to show hbtui's flow:"
    " its scores mean nothing about any model"
)


def demo_settings(settings: Settings, base_url: str, db_path: str) -> Settings:
    """The user's cache and grader prompt, and nothing of their endpoints."""
    return replace(
        Settings(),
        cache_dir=settings.cache_dir,
        grader_template=settings.grader_template,
        base_url=(base_url,),
        model_test=MODEL_ALIAS,
        model_grader=MODEL_ALIAS,
        max_tokens_test=MAX_TOKENS_TEST,
        max_tokens_grader=MAX_TOKENS_GRADER,
        concurrency=SLOTS,
        timeout=TIMEOUT_SECONDS,
        db_path=db_path,
    )


def server_options() -> dict:
    threads = max(1, min(4, os.cpu_count() or 1))
    return {
        "threads": threads,
        "ctx_size": SLOTS * SLOT_CONTEXT,
        "startup_timeout": STARTUP_SECONDS,
        "extra_args": ["--parallel", str(SLOTS), "--alias", MODEL_ALIAS],
    }


def demo_db_beside(db_path: str) -> str:
    """The demo's database, for `hbtui demo` and the app's alike: beside the user's own
    (runs/demo.sqlite by runs/hbtui.sqlite)."""
    return str(Path(db_path).parent / DEMO_DB_NAME)


def start_server(local: LocalModel) -> LlamaServer:
    """The local model's server, started (blocking until it answers); the caller stops it."""
    from hbtui.llama_server import LlamaServer

    return LlamaServer(local.binary, local.model, **server_options()).start()


def demo_dataset(data: str | None, cache_dir: str, progress) -> Dataset:
    """The records the user points to, else the official main subset (downloaded once)."""
    if data:
        return load_jsonl(data)
    try:
        return load_subset("main", cache_dir, progress)
    except DownloadFailed as exc:
        # The download's own advice names the app's screen too: the demo's is said here instead.
        raise DatasetError(
            f"the main subset could not be downloaded: {exc.cause}; connect to the network once, or"
            " give a local copy of it: hbtui demo --data PATH"
        ) from None


def demo_name() -> str:
    return "demo-" + datetime.now().strftime("%Y%m%d-%H%M%S")


def install_local_model(cache_dir: str, say) -> LocalModel:
    try:
        return install(cache_dir, progress=lambda line: say(f"hbtui: {line}"))
    except KeyboardInterrupt:
        say("hbtui: install interrupted; nothing half-built was kept", error=True)
        raise


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.cli import EXIT_INCOMPLETE, EXIT_OK

    code, run_id, run_settings = asyncio.run(drive_demo(args, settings))
    if code in (EXIT_OK, EXIT_INCOMPLETE) and not args.headless:
        # After the run's event loop has ended: the app runs one of its own.
        from hbtui.tui.app import HBTuiApp

        app = HBTuiApp(settings=run_settings, env_file=None, monitor_run=str(run_id))
        app.run(mouse=not args.no_mouse)
    return code


async def drive_demo(args: argparse.Namespace, settings: Settings) -> tuple[int, int, Settings]:
    """Install what is missing, start the model's server, and drive a run on it to its end."""
    from hbtui.cli import _download_progress, drive, say
    from hbtui.grading import load_template
    from hbtui.llama_server import LlamaServer
    from hbtui.services import plan_run
    from hbtui.store import Store

    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    if limit < 1:
        raise DatasetError(f"--limit {limit}: give at least 1 record")
    # What needs the network besides the install comes first: a missing file stops at once.
    dataset = demo_dataset(args.data, settings.cache_dir, _download_progress)
    load_template(settings.grader_template, settings.cache_dir)
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
    say(f"hbtui: {DISCLAIMER}. For a real run, set BASE_URL, MODEL_TEST and MODEL_GRADER (see README) and run `hbtui`.")
    return code, run_id, run_settings
