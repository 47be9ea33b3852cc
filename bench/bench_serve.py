"""How soon the served app's first screen shows in a real browser.

Run by hand: `.venv/bin/python bench/bench_serve.py [--tabs 5] [--conversations 5000]`.
Prints figures, asserts nothing. Needs the browser tier's packages (`pip install -e '.[browser]'`)
and Debian's `chromium`.

`hbtui serve` runs as a user starts it, over a database holding one run. For each tab: from
`page.goto(printed URL)` (a fresh browser context: no cookie yet, so the secret's redirect is
included) to the runs list on the page's terminal, as read back from what the page received
(the canvas draws it within a frame of that). Each tab starts its own app process, as in use.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyte
from playwright.sync_api import sync_playwright

from hbtui.store import Store
from tests.support.served import ServedApp, TerminalReplay, wait_for_text
from tests.support.synth import synthesize_run

RUN_NAME = "bench-serve"


def make_database(folder: Path, conversations: int) -> Path:
    db = folder / "hbtui.sqlite"

    async def make() -> None:
        async with await Store.open(db) as store:
            await synthesize_run(store, conversations=conversations, criteria_per=12, seed=1, name=RUN_NAME)

    asyncio.run(make())
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=5000)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("bench_serve: no chromium on PATH (apt-get install chromium)")
    folder = Path(tempfile.mkdtemp(prefix="hbtui-bench-serve-"))
    try:
        db = make_database(folder, args.conversations)
        with ServedApp(db) as served, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            seconds = []
            for _ in range(args.tabs):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                page = context.new_page()
                replay = TerminalReplay(pyte)
                page.on("websocket", replay.attach)
                started = time.perf_counter()
                page.goto(served.url)
                wait_for_text(page, replay, RUN_NAME)
                seconds.append(time.perf_counter() - started)
                context.close()  # the tab's app process ends with it
            browser.close()
        print(
            f"first screen (the runs list) after opening the URL, {args.tabs} fresh tabs,"
            f" {args.conversations:,} conversations in the run:"
        )
        print("  " + "  ".join(f"{s:.2f} s" for s in seconds))
        print(f"  median {statistics.median(seconds):.2f} s, worst {max(seconds):.2f} s (goal: within 3 s)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
