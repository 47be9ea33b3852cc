"""`hbtui demo`: a whole run on this machine with no endpoint of one's own.

The local model (llama.cpp's server and SmolLM2-135M, installed once) answers and grades a few
records of the main subset, with the default grader prompt like any run. Its runs live in their
own database, named ``demo-...``, so that a meaningless score never sits among real results.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.core.dataset import Dataset, DatasetError, DownloadFailed, load_jsonl, load_subset
from hbtui.core.settings.config import Settings
from hbtui.local import DEMO_MODEL_ALIAS
from hbtui.local.model import LocalModel, install

if TYPE_CHECKING:
    from hbtui.local.llama_server import LlamaServer

DEMO_DB_NAME = "demo.sqlite"  # beside the user's database: runs/demo.sqlite by default
MODEL_ALIAS = DEMO_MODEL_ALIAS
DEFAULT_LIMIT = 5
# 4 slots of 8,192 tokens (SmolLM2's trained context): the longest main conversations, their
# replies and the grader prompt around them fit one slot; the KV cache takes about 750 MB.
SLOTS = 4
SLOT_CONTEXT = 8192
# Short answers keep 5 records within minutes on 2 cores; a cut reply is graded, and flagged. The
# reply is in every grader prompt of its conversation: 128 rather than 192 took the demo from
# 100 s to 92 s here (bench/bench_demo.py).
MAX_TOKENS_TEST = 128
MAX_TOKENS_GRADER = 192
# The tiny model's explanations ran on to the token budget, and the cut-off verdict was asked
# again with twice the budget: some 25 s of CPU per grader call. Bounded in the verdict's schema
# (llama.cpp's grammar holds it), each verdict ends within a few dozen tokens; 100 characters
# (160 before) still hold a sentence, and took about 2 s off the demo (bench/bench_demo.py).
EXPLANATION_CHARS = 100
# A grader call waits behind the others on a laptop's CPU.
TIMEOUT_SECONDS = 600.0
STARTUP_SECONDS = 120.0
DISCLAIMER = (
    "SmolLM2-135M is a tiny model that answers and grades here to show hbtui's flow:"
    " its scores mean nothing about any model"
)


OWN_WORDING_NOTE = (
    "the reference grader prompt is not cached and could not be fetched (offline?): the demo grades"
    " with hbtui's own wording (GRADER_TEMPLATE=builtin), its grades mean nothing anyway"
)


def demo_template(settings: Settings, say: Callable[[str], None]) -> str:
    """The grader prompt the demo grades with: the user's own file or builtin, else the
    reference's when it is cached or can be fetched, else hbtui's own wording, said so through
    ``say``, so that ``hbtui demo --data FILE`` works on a machine offline since its install."""
    from hbtui.core.grading import TemplateError, load_template

    try:
        load_template(settings.grader_template, settings.cache_dir)
    except TemplateError:
        if settings.grader_template != "reference":  # a file of the user's that is wrong: theirs to fix
            raise
        say(OWN_WORDING_NOTE)
        return "builtin"
    return settings.grader_template


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
        grader_explanation_chars=EXPLANATION_CHARS,
        # Each conversation's criteria on the llama.cpp slot that holds their shared prefix (id_slot),
        # with twice the slots in flight, so that every slot has a conversation's criteria queued:
        # 115 s -> 100 s here; one conversation at a time on a slot (hbtui.engine.grader_slots),
        # 108 s -> 88 s. llama.cpp processes prompts at some 300 tokens/s on this CPU, and a
        # grader prompt is some 500 tokens, 290 of them the prefix.
        grader_slots=SLOTS,
        grader_concurrency=2 * SLOTS,
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
    from hbtui.local.llama_server import LlamaServer

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
