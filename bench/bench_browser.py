"""How fast the results browser opens and moves through a run of 60,000 verdicts.

Run by hand: `.venv/bin/python bench/bench_browser.py [--conversations 5000] [--criteria 12]`.
Prints figures, asserts nothing. Targets: opening under 0.5 s, a key to the next screen
under 50 ms, a page of the list well under that.

The app runs headless (Textual's test driver) at 80x24, so the figures include Textual's own
layout and compositing but not a terminal's drawing.
"""

from __future__ import annotations

import argparse
import shutil
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual import events  # noqa: E402

from hbtui.store import Store  # noqa: E402
from hbtui.tui.screens.conversation import ConversationScreen  # noqa: E402
from hbtui.tui.screens.run import RunScreen  # noqa: E402
from hbtui.tui.widgets.verdict_list import VerdictList  # noqa: E402
from tests.support.browser_harness import browser_app  # noqa: E402
from tests.support.synth import synthesize_run  # noqa: E402


async def until(condition, timeout: float = 10.0) -> None:
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.0005)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


async def bench(conversations: int, criteria: int, pages: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="hbtui-bench-"))
    try:
        await measure(folder, conversations, criteria, pages)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def measure(folder: Path, conversations: int, criteria: int, pages: int) -> None:
    db = folder / "hbtui.sqlite"
    started = time.perf_counter()
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=conversations, criteria_per=criteria, seed=0)
    print(f"synthesized {conversations:,} conversations x {criteria} criteria "
          f"({conversations * criteria:,} verdicts) in {time.perf_counter() - started:.2f} s -> {db}")

    app = browser_app(db)
    print(f"app: {type(app).__name__}, 80x24, headless; times are key sent -> state reached -> next frame composed")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.store is not None and len(app.screen_stack) >= 2)
        await pilot.pause()
        frames: list[float] = []
        display = app._display

        def on_frame(screen, renderable):
            # Headless, the compositor still builds every frame and hands it here (not drawn).
            if renderable is not None:
                frames.append(time.perf_counter())
            return display(screen, renderable)

        app._display = on_frame

        async def timed(action, condition) -> float:
            """From ``action`` until ``condition`` holds and a frame composed after it."""
            started = time.perf_counter()
            result = action()
            if asyncio.iscoroutine(result) or hasattr(result, "__await__"):
                await result
            await until(condition)
            reached = time.perf_counter()
            await until(lambda: frames and frames[-1] >= reached)
            return frames[-1] - started

        def key(name: str):
            return lambda: app._driver.send_message(events.Key(name, name if len(name) == 1 else None))

        # ---- open: push_screen -> summary with the report and the list's first page, composed ----
        screen = RunScreen(run_id)
        opened = await timed(lambda: app.push_screen(screen),
                             lambda: screen.report is not None and screen.conversation_list.loaded)
        print(f"open run (push_screen -> summary and list page 1 on screen):   {ms(opened)}")
        lst = screen.conversation_list
        print(f"key 2 -> conversation list on screen:                          "
              f"{ms(await timed(key('2'), lambda: app.focused is lst))}")

        times = []
        for _ in range(pages):
            before = lst.cursor
            times.append(await timed(key("pagedown"), lambda: lst.cursor > before and lst.row(lst.cursor) is not None))
        print(f"pagedown x{pages} (page fetches included): median {ms(statistics.median(times))}, "
              f"max {ms(max(times))}, now at row {lst.cursor + 1:,}")
        print(f"G -> last row on screen:                                       "
              f"{ms(await timed(key('G'), lambda: lst.row(lst.total - 1) is not None and lst.cursor == lst.total - 1))}")
        print(f"g -> first row on screen:                                      "
              f"{ms(await timed(key('g'), lambda: lst.row(0) is not None and lst.cursor == 0))}")

        opens = []
        for _ in range(8):  # several samples: one can land on a garbage collection or a busy core
            opens.append(await timed(key("enter"), lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded))
            await timed(key("escape"), lambda: app.screen is screen)
        entered = await timed(key("enter"), lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        print(f"enter -> conversation screen on screen: median {ms(statistics.median(opens))}, max {ms(max(opens))}")
        conversation = app.screen
        steps = []
        for _ in range(10):
            index = conversation.index + 1
            steps.append(await timed(key("n"), lambda: conversation.loaded and conversation.index == index))
        print(f"n (next conversation) x10: median {ms(statistics.median(steps))}, max {ms(max(steps))}")
        jumps = []
        verdicts = conversation.query_one(VerdictList)
        for name in "jjjjkkmpjk":
            jumps.append(await timed(key(name), lambda: True))
        print(f"j/k/m/p within a conversation: median {ms(statistics.median(jumps))}, max {ms(max(jumps))}")
        back = await timed(key("escape"), lambda: app.screen is screen)
        print(f"escape -> back to the list:                                    {ms(back)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--criteria", type=int, default=12)
    parser.add_argument("--pages", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(bench(args.conversations, args.criteria, args.pages))


if __name__ == "__main__":
    main()
