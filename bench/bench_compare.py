"""How long `hbtui compare` takes for two runs of 5,000 conversations, and its screen to open.

Run by hand: `.venv/bin/python bench/bench_compare.py [--conversations 5000] [--criteria 12]`.
Prints figures, asserts nothing. Targets: the comparison (reading both runs, pairing, scoring,
every bootstrap, kappa) under 1 s, process start-up excluded; the compare screen from the key
on the runs list to the first frame that shows it under 0.5 s.

The two runs share their records (they all pair) and differ in their replies and verdicts, as a
regrade or a second model would.
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
from hbtui.analysis.compare import compare_runs
from hbtui.store import Store
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


async def measure(folder: Path, conversations: int, criteria: int, repeat: int) -> None:
    db = folder / "hbtui.sqlite"
    started = time.perf_counter()
    async with await Store.open(db) as store:
        run_a = await synthesize_run(store, conversations=conversations, criteria_per=criteria, seed=0, name="a")
        run_b = await synthesize_run(
            store, conversations=conversations, criteria_per=criteria, seed=0, name="b", answers_seed=1
        )
    print(
        f"synthesized 2 runs of {conversations:,} conversations x {criteria} criteria in "
        f"{time.perf_counter() - started:.2f} s -> {db}"
    )

    async with await Store.open(db, create=False, read_only=True) as store:
        a, b = await store.get_run(run_a), await store.get_run(run_b)
        totals = []
        for _ in range(repeat):
            started = time.perf_counter()
            result = await compare_runs(store, a, b)
            totals.append(time.perf_counter() - started)
        reads = []
        for _ in range(repeat):
            started = time.perf_counter()
            for run_id in (a.id, b.id):
                await store.comparison_conversations(run_id)
                await store.comparison_verdicts(run_id)
            reads.append(time.perf_counter() - started)
    print(
        f"pairs {result.overall.n:,}, themes {len(result.themes)}, axes {len(result.axes)}, "
        f"criteria compared {result.agreement.overall.n:,}, disagreements {len(result.agreement.disagreements):,}"
    )
    print(
        f"compare, as `hbtui compare` computes it (read both runs + pair + score + "
        f"{1 + len(result.themes) + len(result.axes)} paired bootstraps + kappa), x{repeat}: "
        f"median {ms(statistics.median(totals))}, max {ms(max(totals))}"
    )
    print(f"  of which the SQLite reads: median {ms(statistics.median(reads))}")

    from hbtui.tui.screens.compare import CompareScreen
    from hbtui.tui.screens.runs import RunsScreen

    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        while not isinstance(app.screen, RunsScreen) or app.screen.table.row_count < 2:
            await asyncio.sleep(0.01)
        await pilot.pause()
        timer = FrameTimer(app)
        runs = app.screen
        opens, completions = [], []
        for _ in range(repeat):
            runs.marked = [run_a, run_b]
            started = time.perf_counter()

            def shown() -> bool:
                screen = app.screen
                return isinstance(screen, CompareScreen) and timer.laid_out(screen.query_one("#compare-summary"))

            def complete() -> bool:
                return shown() and app.screen.completed

            opens.append(await timer.timed(timer.key("C"), shown))
            await timer.timed(lambda: None, complete)
            completions.append(time.perf_counter() - started)
            app.pop_screen()
            await pilot.pause(0.1)
    print(
        f"C on the runs list -> compare screen on screen with n, scores, difference and CI, themes, moved (80x24),"
        f" x{repeat}: first {ms(opens[0])}, median {ms(statistics.median(opens))}, max {ms(max(opens))}"
    )
    print(
        f"  -> axes and grader agreement filled in: median {ms(statistics.median(completions))}, "
        f"max {ms(max(completions))} (approximate: measured when the test loop sees it)"
    )


async def bench(conversations: int, criteria: int, repeat: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="hbtui-bench-"))
    try:
        await measure(folder, conversations, criteria, repeat)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--criteria", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(bench(args.conversations, args.criteria, args.repeat))


if __name__ == "__main__":
    main()
