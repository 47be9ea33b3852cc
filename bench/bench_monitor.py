"""How the live monitor keeps up while results pour in, and how fast a key changes screens.

Run by hand: `.venv/bin/python bench/bench_monitor.py [--seconds 8] [--rate 1000]`.
Prints figures, asserts nothing. Targets: at least 4 repaints a second whatever the event rate,
the UI loop never stalls (timer lag well under 100 ms), a key to the next screen under 50 ms.

Two ways a monitor is fed:
1. database: a writer task commits ``--rate`` verdicts a second into a run (as another process
   running `hbtui run` would, in group commits every 0.1 s); the monitor polls the database.
2. in-process: the real engine against the test server (its own process, 5 ms latency, 128 in
   flight) started by the app; the monitor reads the engine observer's counters.

The app runs headless (Textual's test driver) at 80x24: the figures include Textual's layout
and compositing, not a terminal's drawing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.frame_timer import FrameTimer
from hbtui.core.dataset import load_jsonl
from hbtui.core.settings.config import Settings
from hbtui.services import plan_run
from hbtui.store import (
    MET,
    NOT_MET,
    ConversationOutcome,
    ConversationScore,
    PlannedConversation,
    ReplyResult,
    ResultBatch,
    Store,
    VerdictResult,
)
from hbtui.store.owners import this_owner
from hbtui.tui.app import HBTuiApp
from hbtui.tui.monitor_data import view_from_store
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.support.server_process import FakeServer

CRITERIA = 12


async def until(condition, timeout: float = 20.0) -> None:
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.001)


class LoopLag:
    """How late a 10 ms timer fires on the app's loop: a frozen screen shows up here first."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.01)
            self.lags.append((time.perf_counter() - started - 0.01) * 1000)

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc) -> None:
        self._task.cancel()

    def summary(self) -> str:
        lags = sorted(self.lags)
        return (
            f"timer lag p50 {statistics.median(lags):.1f} ms, p99 {lags[int(len(lags) * 0.99)]:.1f} ms,"
            f" max {lags[-1]:.1f} ms"
        )


def planned(conversations: int) -> list[PlannedConversation]:
    rows = []
    for position in range(conversations):
        body = json.dumps({"prompt_id": f"b{position}", "prompt": [{"role": "user", "content": f"q {position}"}]})
        rows.append(
            PlannedConversation(
                position=position,
                repeat=0,
                prompt_id=f"b{position}",
                record_body=body,
                record_sha256=f"{position:064d}",
                theme="hedging",
                example_tags=["theme:hedging"],
                preview=f"q {position}",
                criteria=[(f"criterion {j}", 5 if j % 4 else -3, ["axis:accuracy"]) for j in range(CRITERIA)],
            )
        )
    return rows


async def feed_database(db: Path, run_id: int, ids: list[int], rate: int, stop: asyncio.Event) -> int:
    """Commit ``rate`` verdicts a second in batches every 0.1 s, as the engine's writer would."""
    rng = random.Random(0)
    written = 0
    async with await Store.open(db) as store:
        owner = this_owner()  # a made-up owner reads as a process gone: the monitor took the run for ended
        lease = await store.claim_run(run_id, owner)
        conversation = 0
        idx = 0
        last_heartbeat = 0.0
        while not stop.is_set() and conversation < len(ids):
            tick = time.perf_counter()
            replies, verdicts, summaries = [], [], []
            now = time.time()
            for _ in range(rate // 10):
                conv_id = ids[conversation]
                if idx == 0:
                    replies.append(
                        ReplyResult(
                            conv_id,
                            "generated",
                            now,
                            reply="a reply",
                            finish_reason="stop",
                            attempts=1,
                            latency_ms=300.0,
                            prompt_tokens=20,
                            completion_tokens=80,
                        )
                    )
                status = MET if rng.random() < 0.6 else NOT_MET
                verdicts.append(
                    VerdictResult(
                        status,
                        conv_id,
                        idx,
                        explanation="because",
                        raw_output="{}",
                        attempts=1,
                        latency_ms=rng.uniform(40, 400),
                        prompt_tokens=300,
                        completion_tokens=20,
                        graded_at=now,
                    )
                )
                idx += 1
                if idx == CRITERIA:
                    summaries.append(ConversationScore(conv_id, ConversationOutcome(rng.uniform(-0.2, 1.0), 6, 0, 1)))
                    conversation, idx = conversation + 1, 0
                    if conversation == len(ids):
                        break
            await store.write_batch(ResultBatch(replies, verdicts, summaries))
            written += len(verdicts)
            if now - last_heartbeat > 2:
                last_heartbeat = now
                await store.heartbeat(
                    run_id,
                    lease,
                    {
                        "paused": False,
                        "call_errors": {},
                        "endpoints": {"http://bench/v1": {"in_flight": 64, "limit": 64}},
                    },
                )
            await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - tick)))
        await store.finish_run(run_id, "interrupted")
    return written


async def bench_database(seconds: float, rate: int, conversations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite"
        async with await Store.open(db) as store:
            run_id = await store.create_run(
                name="bench-db",
                dataset_name="bench.jsonl",
                dataset_path=None,
                dataset_sha256="0" * 64,
                model_test="m",
                model_grader="g",
                settings={},
                plan={},
                conversations=planned(conversations),
            )
            ids = await store.conversation_ids(run_id)
        app = HBTuiApp(settings=Settings(db_path=str(db)), env_file=None, monitor_run=str(run_id))
        async with app.run_test(size=(80, 24)) as pilot:
            await until(lambda: isinstance(app.screen, MonitorScreen))
            monitor = app.screen
            stop = asyncio.Event()
            writer = asyncio.create_task(feed_database(db, run_id, ids, rate, stop))
            await asyncio.sleep(1.0)  # past the first poll and the first heartbeat
            with LoopLag() as lag:
                paints, polls, started = monitor.refreshes, monitor.polls, time.perf_counter()
                await asyncio.sleep(seconds)
                elapsed = time.perf_counter() - started
                paints, polls = monitor.refreshes - paints, monitor.polls - polls
            stop.set()
            written = await writer
            print(
                f"database feed, {rate} verdicts/s asked ({written} written in all,"
                f" {conversations * CRITERIA} planned):"
            )
            print(
                f"  monitor repaints {paints / elapsed:.1f}/s, database polls {polls / elapsed:.1f}/s;"
                f" shown calls/s {monitor.view.calls_per_second:.0f}; {lag.summary()}"
            )
            durations = []
            for _ in range(10):
                started = time.perf_counter()
                await view_from_store(app.store, run_id)
                durations.append((time.perf_counter() - started) * 1000)
            print(f"  one database read of everything shown: median {statistics.median(durations):.1f} ms")
            await pilot.press("escape")
            await until(lambda: isinstance(app.screen, RunsScreen))
            await key_to_screen(pilot, app)


async def key_to_screen(pilot, app) -> None:
    """From the runs list: n to the configuration screen, ? to help, each and back."""
    timer = FrameTimer(app)
    runs = app.screen

    def config_shown() -> bool:
        return isinstance(app.screen, ConfigScreen) and timer.laid_out(app.screen.query_one("#field-base_url"))

    def help_shown() -> bool:
        return isinstance(app.screen, HelpModal) and timer.laid_out(app.screen.query_one("#help-table"))

    for name, shown in (("n", config_shown), ("question_mark", help_shown)):
        times = []
        for attempt in range(6):
            # The first time, a second on the runs list: the configuration screen is built ahead then.
            await pilot.pause(1.0 if attempt == 0 else 0.2)
            times.append(await timer.timed(timer.key(name), shown) * 1000)
            await timer.timed(timer.key("escape"), lambda: app.screen is runs)
        label = {"n": "n, runs list -> configuration screen", "question_mark": "?, runs list -> help"}[name]
        print(
            f"  key {label}: first {times[0]:.0f} ms, then median {statistics.median(times[1:]):.0f} ms,"
            f" max {max(times[1:]):.0f} ms"
        )


def write_dataset(path: Path, conversations: int) -> Path:
    with path.open("w") as out:
        for i in range(conversations):
            out.write(
                json.dumps(
                    {
                        "prompt_id": f"e{i}",
                        "prompt": [{"role": "user", "content": f"question {i}"}],
                        "rubrics": [
                            {"criterion": f"criterion {j}", "points": 5 if j % 4 else -3, "tags": ["axis:accuracy"]}
                            for j in range(CRITERIA)
                        ],
                        "example_tags": ["theme:hedging"],
                        "ideal_completions_data": None,
                        "canary": "bench",
                    }
                )
                + "\n"
            )
    return path


async def bench_engine(seconds: float, conversations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeServer(config={"latency_ms": 5}) as server:
        db = Path(tmp) / "bench.sqlite"
        settings = Settings(
            base_url=server.base_url,
            model_test="test-model",
            model_grader="grader-model",
            grader_template="builtin",  # throughput, not the prompt: nothing to download
            db_path=str(db),
            concurrency=128,
            timeout=30,
        )
        data = write_dataset(Path(tmp) / "bench.jsonl", conversations)
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(data), name="bench-engine")
        app = HBTuiApp(settings=settings, env_file=None)
        async with app.run_test(size=(80, 24)):
            await until(lambda: isinstance(app.screen, RunsScreen))
            live = await app.start_run(run_id, settings)
            await asyncio.sleep(1.0)
            with LoopLag() as lag:
                events, started = live.counters.events, time.perf_counter()
                await asyncio.sleep(seconds / 2)
                elapsed = time.perf_counter() - started
            print("in-process engine against the test server (128 in flight, 5 ms):")
            print(f"  runs list shown: events {(live.counters.events - events) / elapsed:.0f}/s; {lag.summary()}")
            app.open_monitor(run_id)
            await until(lambda: isinstance(app.screen, MonitorScreen))
            monitor = app.screen
            await asyncio.sleep(1.0)
            with LoopLag() as lag:
                paints, events, started = monitor.refreshes, live.counters.events, time.perf_counter()
                await asyncio.sleep(seconds)
                elapsed = time.perf_counter() - started
                paints, events = monitor.refreshes - paints, live.counters.events - events
            print(
                f"  monitor shown: events {events / elapsed:.0f}/s, monitor repaints {paints / elapsed:.1f}/s,"
                f" shown calls/s {monitor.view.calls_per_second:.0f}; {lag.summary()}"
            )
            await app.stop_runs()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=int, default=1000, help="verdicts per second written to the database")
    parser.add_argument("--conversations", type=int, default=4000, help="planned conversations (x12 criteria)")
    args = parser.parse_args()
    await bench_database(args.seconds, args.rate, args.conversations)
    await bench_engine(args.seconds, args.conversations)


if __name__ == "__main__":
    asyncio.run(main())
