"""How fast the results browser opens and moves through a run of 60,000 verdicts.

Run by hand: `.venv/bin/python bench/bench_browser.py [--conversations 5000] [--criteria 12]`.
Prints figures, asserts nothing. Targets: opening under 0.5 s, a key to the next screen
under 50 ms, a page of the list well under that; a search over criteria and explanations under
200 ms (a run's first search indexes it, timed apart), the criteria view opening under 300 ms,
every key of the browser within 50 ms (median).

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


from textual.widgets import OptionList

from bench.frame_timer import FrameTimer
from hbtui.store import ConversationFilter, Store
from hbtui.store.search import SORT_CHOICES
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.criteria import CriteriaScreen, CriteriaTable
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.key_bar import KeyBar
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
        await browse_keys(app, timer, screen, db, run_id)


SEARCH_WORDS = ("fabricated", "satisfy", "jargon", "tick bite", "emergency care")


async def browse_keys(app, timer: FrameTimer, screen: RunScreen, db: Path, run_id: int) -> None:
    """Search everything, the sort picker and the filter menu (issue 13), read and on screen."""
    timed, key, laid_out = timer.timed, timer.key, timer.laid_out
    lst = screen.conversation_list
    async with await Store.open(db) as store:
        # A run is indexed for search when it is first searched (hbtui.store.search_index).
        verdicts = await store.search_index_behind(run_id)
        started = time.perf_counter()
        flt = ConversationFilter(text=SEARCH_WORDS[0])
        await store.search_matches(run_id, SEARCH_WORDS[0])
        await store.count_conversations(run_id, flt)
        await store.conversation_page(run_id, flt, limit=200)
        print(f"first search read, indexing the run's {verdicts:,} verdicts first: {ms(time.perf_counter() - started)}")
        reads = []
        for word in SEARCH_WORDS:
            started = time.perf_counter()
            flt = ConversationFilter(text=word)
            await store.search_matches(run_id, word)
            await store.count_conversations(run_id, flt)
            await store.conversation_page(run_id, flt, limit=200)
            reads.append(time.perf_counter() - started)
    print(
        f"search read (where it matched, the count, page 1) x{len(reads)}: median {ms(statistics.median(reads))},"
        f" max {ms(max(reads))}"
    )
    searches = []
    for word in SEARCH_WORDS:
        await timed(key("slash"), lambda: app.focused is not None and app.focused.id == "search-input")
        field = app.focused
        field.value = word
        searches.append(
            await timed(
                key("enter"),
                lambda word=word: screen.filter.text == word and screen.matches is not None and app.focused is lst,
            )
        )
    print(
        f"/ word enter -> matches listed and counted x{len(searches)}: median {ms(statistics.median(searches))},"
        f" max {ms(max(searches))}"
    )
    steps = [
        await timed(key("greater_than_sign"), lambda target=target: lst.cursor == target) for target in range(1, 9)
    ]
    print(f"> (next match in the list) x8: median {ms(statistics.median(steps))}, max {ms(max(steps))}")
    await timed(key("x"), lambda: screen.filter == ConversationFilter() and lst.row(0) is not None)

    opens, sorts = [], []
    for index, sort in enumerate(SORT_CHOICES):
        opens.append(await timed(key("s"), lambda: isinstance(app.screen, PickerModal)))
        picker = app.screen
        picker.query_one(OptionList).highlighted = index
        sorts.append(
            await timed(
                key("enter"), lambda sort=sort: screen.sort == sort and lst.row(0) is not None and app.screen is screen
            )
        )
        print(f"  sort {sort:<10} picked -> list page 1 on screen: {ms(sorts[-1])}")
    print(f"s -> sort picker on screen x{len(opens)}: median {ms(statistics.median(opens))}, max {ms(max(opens))}")
    print(f"enter in the sort picker -> sorted list: median {ms(statistics.median(sorts))}, max {ms(max(sorts))}")
    menus = []
    for _ in range(5):
        menus.append(await timed(key("f"), lambda: isinstance(app.screen, PickerModal) and laid_out(app.screen)))
        await timed(key("escape"), lambda: app.screen is screen)
    print(f"f -> filter menu on screen x5: median {ms(statistics.median(menus))}, max {ms(max(menus))}")

    def criteria_shown() -> bool:
        shown = app.screen
        return isinstance(shown, CriteriaScreen) and shown.loaded and laid_out(shown.query_one(CriteriaTable))

    views = []
    for _ in range(5):
        views.append(await timed(key("V"), criteria_shown))
        await timed(key("escape"), lambda: app.screen is screen)
    view = await timed(key("V"), criteria_shown)
    criteria = app.screen
    print(
        f"V -> criteria view on screen ({len(criteria.stats):,} distinct criteria): first {ms(views[0])}, then median"
        f" {ms(statistics.median([*views[1:], view]))} (read again only when the database changed), max"
        f" {ms(max([*views, view]))}"
    )
    table = criteria.query_one(CriteriaTable)
    moves = [await timed(key(name), lambda: laid_out(table)) for name in "jjjjkkGg"]
    print(f"j/k/G/g in the criteria view: median {ms(statistics.median(moves))}, max {ms(max(moves))}")
    behind = []
    for _ in range(3):
        behind.append(await timed(key("enter"), conversation_shown_on(app, laid_out)))
        await timed(key("escape"), lambda: app.screen is criteria)
    print(f"enter -> the conversations behind a criterion: median {ms(statistics.median(behind))}")
    await timed(key("escape"), lambda: app.screen is screen)
    await conversation_keys(app, timer, screen)


async def conversation_keys(app, timer: FrameTimer, screen: RunScreen) -> None:
    """In a conversation: the ideal completion, the copy keys, and > through a search's matches."""
    timed, key, laid_out = timer.timed, timer.key, timer.laid_out
    lst = screen.conversation_list
    await timed(key("slash"), lambda: app.focused is not None and app.focused.id == "search-input")
    app.focused.value = "fabricated"
    await timed(key("enter"), lambda: screen.matches is not None and app.focused is lst)
    await timed(key("enter"), conversation_shown_on(app, laid_out))
    conversation = app.screen
    verdicts = conversation.query_one(VerdictList)
    ideal = conversation.query_one("#ideal")
    shows = []
    for _ in range(4):
        shows.append(await timed(key("i"), lambda: ideal.display and laid_out(ideal)))
        await timed(key("i"), lambda: not ideal.display)
    print(f"i -> ideal completion on screen x4: median {ms(statistics.median(shows))}, max {ms(max(shows))}")
    bar = conversation.query_one(KeyBar)
    for name in "TPIM":
        copies = []
        for _ in range(3):
            bar.status = ""  # each copy's confirmation from an empty bar
            copies.append(await timed(key(name), lambda: bar.status.startswith("copied")))
        print(f"{name} (copy) -> said on the key bar x3: median {ms(statistics.median(copies))}")
    matches = []
    for _ in range(10):
        before = (conversation.index, verdicts.selected)
        matches.append(
            await timed(
                key("greater_than_sign"),
                lambda before=before: conversation.loaded and (conversation.index, verdicts.selected) != before,
            )
        )
    print(
        f"> (next criterion matching the search) x10: median {ms(statistics.median(matches))}, max {ms(max(matches))}"
    )
    await timed(key("escape"), lambda: app.screen is screen)
    await timed(key("x"), lambda: screen.filter.text is None)


def conversation_shown_on(app, laid_out):
    def shown() -> bool:
        screen = app.screen
        return isinstance(screen, ConversationScreen) and screen.loaded and laid_out(screen.query_one("#messages"))

    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--criteria", type=int, default=12)
    parser.add_argument("--pages", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(bench(args.conversations, args.criteria, args.pages))


if __name__ == "__main__":
    main()
