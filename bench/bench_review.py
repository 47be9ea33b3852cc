"""How fast a review shows: a flip's new reviewed score on screen, in a run of 60,000 verdicts.

Run by hand: `.venv/bin/python bench/bench_review.py [--conversations 5000] [--criteria 12]`.
Prints figures, asserts nothing. Target: flipping a verdict (w) shows the new reviewed score of
the conversation and of the run within one frame: the first frame composed after the key shows
it (counted), and the time to it is set beside 1/60 s (16.7 ms, Textual's frame at 60 fps).

The app runs headless (Textual's test driver) at 80x24, as bench_browser.py runs it. Each time
runs from the key sent, through the review written to the database (a commit), to the first
frame composed whose header shows the new score (read as that frame goes out). Also timed: the
list's review filter (v) and `show --reviewed`'s computation, on a run with reviews.
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


from bench.bench_browser import ms, until
from bench.frame_timer import FrameTimer
from hbtui.analysis.review_report import review_of_run, run_review
from hbtui.core import reviews as rv
from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run

FRAME = 1 / 60


def shows_new_score(title: str, before: str) -> bool:
    return "reviewed" in title and title != before


class FrameCounter:
    """Counts the frames composed from a mark to the first one that shows a state: 1 when the
    first frame after the key already shows it (no frame went out with the old score)."""

    def __init__(self, app) -> None:
        self.frames = 0
        self.condition = None
        self.shown_at_frame: int | None = None
        display = app._display

        def on_frame(screen, renderable):
            if renderable is not None:
                self.frames += 1
                if self.shown_at_frame is None and self.condition is not None and self.condition():
                    self.shown_at_frame = self.frames
            return display(screen, renderable)

        app._display = on_frame

    def mark(self, condition) -> int:
        self.condition, self.shown_at_frame = condition, None
        return self.frames


async def bench(conversations: int, criteria: int, flips: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="hbtui-bench-review-"))
    try:
        await measure(folder, conversations, criteria, flips)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def seed_reviews(db: Path, run_id: int, count: int) -> None:
    """``count`` reviews spread over the run by two reviewers, as a review under way has them."""
    async with await Store.open(db) as store:
        keys = await store._all(
            "SELECT conversation_id, idx FROM verdicts WHERE run_id = ? AND status IN ('met', 'not_met')"
            " ORDER BY conversation_id, idx",
            (run_id,),
        )
        step = max(1, len(keys) // count)
        for n, key in enumerate(keys[::step][:count]):
            await store.add_review(*key, "alice" if n % 2 else "bob", rv.FLIP if n % 3 == 0 else rv.FLAG)


async def measure(folder: Path, conversations: int, criteria: int, flips: int) -> None:
    db = folder / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=conversations, criteria_per=criteria, seed=0)
    await seed_reviews(db, run_id, 500)
    print(f"synthesized {conversations:,} conversations x {criteria} criteria, 500 reviews by two reviewers -> {db}")

    async with await Store.open(db) as store:
        started = time.perf_counter()
        review = await run_review(store, run_id)
        print(
            f"both reports computed (bootstraps of each, reviewers, agreement): "
            f"{ms(time.perf_counter() - started)} (reviewed {review.reviewed.score:.4f}, graded {review.graded.score:.4f})"
        )
        run = await store.get_run(run_id)
        times = []
        for _ in range(3):
            started = time.perf_counter()
            await review_of_run(store, run, asked=True)
            times.append(time.perf_counter() - started)
        print(
            "show --reviewed's computation (the reviewed report and its bootstrap, the graded one as the run"
            f" keeps it, reviewers, agreement), x3: {', '.join(ms(t) for t in times)}"
        )

    app = browser_app(db)
    print(f"app: {type(app).__name__}, 80x24, headless; times are key sent -> first frame showing the new state")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.store is not None and len(app.screen_stack) >= 2)
        timer = FrameTimer(app)
        timed, key, laid_out = timer.timed, timer.key, timer.laid_out
        counter = FrameCounter(app)

        def run_shown() -> bool:
            shown = app.screen
            return isinstance(shown, RunScreen) and laid_out(shown.query_one("#run-summary"))

        await timed(lambda: app.open_run(run_id), run_shown)
        screen = app.screen
        await until(lambda: screen.conversation_list.loaded)
        await timed(key("2"), lambda: laid_out(screen.conversation_list))

        filters = []
        for _ in range(8):  # flagged, flipped, not yet reviewed, none; twice
            before = screen.filter.review
            filters.append(
                await timed(
                    key("v"),
                    lambda before=before: screen.filter.review != before and screen.conversation_list.loaded,
                )
            )
        print(
            f"v (review filter) on {conversations:,} conversations: median {ms(statistics.median(filters))},"
            f" max {ms(max(filters))}"
        )

        for _ in range(3):  # to "not yet reviewed": conversations with graded verdicts (some are pending)
            before = screen.filter.review
            await timed(
                key("v"), lambda before=before: screen.filter.review != before and screen.conversation_list.loaded
            )
        await timed(key("enter"), lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        conversation = app.screen
        await until(lambda: conversation.ledger is not None)
        await pilot.pause()
        title = conversation.query_one("#conversation-title")
        verdicts = conversation.query_one(VerdictList)

        def title_text() -> str:
            return str(title.content)

        times, frames = [], []
        for n in range(flips):
            await timed(key("j"), lambda n=n: verdicts.selected == n % len(verdicts.items))
            if verdicts.current is None or verdicts.current.verdict.status not in ("met", "not_met"):
                continue
            for name in ("w", "u"):  # flip, then undo it: the score changes both times
                before = title_text()
                start = counter.mark(lambda before=before: shows_new_score(title_text(), before))
                times.append(await timed(key(name), lambda before=before: shows_new_score(title_text(), before)))
                frames.append((counter.shown_at_frame or 0) - start)
        median = statistics.median(times)
        print(
            f"w/u (flip, undo) -> new reviewed score in the header, x{len(times)}: median {ms(median)},"
            f" max {ms(max(times))}; one frame is {ms(FRAME)}"
        )
        print(
            f"frames composed from the key to the one showing the new score: {sorted(set(frames))}"
            f" (1 = the first frame after the key shows it), {frames.count(1)} of {len(frames)};"
            f" under {ms(FRAME)}: {sum(t <= FRAME for t in times)} of {len(times)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--criteria", type=int, default=12)
    parser.add_argument("--flips", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(bench(args.conversations, args.criteria, args.flips))


if __name__ == "__main__":
    main()
