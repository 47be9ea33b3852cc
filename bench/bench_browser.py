"""How fast the results browser opens and moves through a run of 60,000 verdicts.

Run by hand: `.venv/bin/python bench/bench_browser.py [--conversations 5000] [--criteria 12]`.
Prints figures, asserts nothing. Targets: opening under 0.5 s, a key to the next screen
under 50 ms, a page of the list well under that.

The app runs headless (Textual's test driver) at 80x24, so the figures include Textual's own
layout and compositing but not a terminal's drawing. Each time runs from the key sent to the
first frame composed that shows the new state (read as that frame goes out, so the time a
poll would take to notice is not counted).
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


from bench.frame_timer import FrameTimer
from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run


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
    print(
        f"synthesized {conversations:,} conversations x {criteria} criteria "
        f"({conversations * criteria:,} verdicts) in {time.perf_counter() - started:.2f} s -> {db}"
    )

    app = browser_app(db)
    print(
        f"app: {type(app).__name__}, 80x24, headless; times are key sent -> first frame composed that shows the new state"
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.store is not None and len(app.screen_stack) >= 2)
        await pilot.pause()
        timer = FrameTimer(app)
        timed, key, laid_out = timer.timed, timer.key, timer.laid_out

        def conversation_shown() -> bool:
            shown = app.screen
            return isinstance(shown, ConversationScreen) and shown.loaded and laid_out(shown.query_one("#messages"))

        # ---- open, as enter on the runs list does: read the run, then show it in one layout ----
        def run_shown() -> bool:
            shown = app.screen
            return (
                isinstance(shown, RunScreen)
                and shown.report is not None
                and shown.conversation_list.loaded
                and laid_out(shown.query_one("#run-summary"))
            )

        opens = []
        for _ in range(5):
            opens.append(await timed(lambda: app.open_run(run_id), run_shown))
            app.pop_screen()
            await pilot.pause(0.1)
        opened = await timed(lambda: app.open_run(run_id), run_shown)
        screen = app.screen
        print(
            f"open run (summary and list page 1 on screen): first {ms(opens[0])}, then median "
            f"{ms(statistics.median([*opens[1:], opened]))}, max {ms(max([*opens[1:], opened]))}"
        )
        lst = screen.conversation_list
        summary = screen.query_one("#summary-scroll")
        first = await timed(key("2"), lambda: app.focused is lst and laid_out(lst))
        switches = []
        for _ in range(6):
            await timed(key("1"), lambda: laid_out(summary))
            switches.append(await timed(key("2"), lambda: app.focused is lst and laid_out(lst)))
        print(
            f"key 2 -> conversation list on screen: first {ms(first)}, then median {ms(statistics.median(switches))},"
            f" max {ms(max(switches))}"
        )

        times = []
        for _ in range(pages):
            before = lst.cursor
            times.append(
                await timed(
                    key("pagedown"), lambda before=before: lst.cursor > before and lst.row(lst.cursor) is not None
                )
            )
        print(
            f"pagedown x{pages} (page fetches included): median {ms(statistics.median(times))}, "
            f"max {ms(max(times))}, now at row {lst.cursor + 1:,}"
        )
        print(
            f"G -> last row on screen:                                       "
            f"{ms(await timed(key('G'), lambda: lst.row(lst.total - 1) is not None and lst.cursor == lst.total - 1))}"
        )
        print(
            f"g -> first row on screen:                                      "
            f"{ms(await timed(key('g'), lambda: lst.row(0) is not None and lst.cursor == 0))}"
        )

        opens = []
        for _ in range(8):  # several samples: one can land on a garbage collection or a busy core
            opens.append(await timed(key("enter"), conversation_shown))
            await timed(key("escape"), lambda: laid_out(lst))
        await timed(key("enter"), conversation_shown)
        print(f"enter -> conversation screen on screen: median {ms(statistics.median(opens))}, max {ms(max(opens))}")
        conversation = app.screen
        steps = []
        for _ in range(10):
            index = conversation.index + 1
            steps.append(await timed(key("n"), lambda index=index: conversation.loaded and conversation.index == index))
        print(f"n (next conversation) x10: median {ms(statistics.median(steps))}, max {ms(max(steps))}")
        jumps = []
        verdicts = conversation.query_one(VerdictList)
        for name in "jjjjkkjjkk":
            target = verdicts.selected + (1 if name == "j" else -1)
            jumps.append(await timed(key(name), lambda target=target: verdicts.selected == target))
        print(f"j/k within a conversation: median {ms(statistics.median(jumps))}, max {ms(max(jumps))}")
        back = await timed(key("escape"), lambda: laid_out(lst))
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
