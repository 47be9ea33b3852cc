"""Throughput of the engine against the test server: calls per second against the ideal
``concurrency / latency``, harness CPU per call (SQLite writes included) and peak memory.

Run by hand (not in CI):

    .venv/bin/python bench/bench_engine.py --latency-ms 200 --concurrency 256
    .venv/bin/python bench/bench_engine.py --latency-ms 0 --concurrency 32

The server runs in its own process, so the CPU figure is the harness's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hbtui.config import Settings
from hbtui.dataset import load_jsonl
from hbtui.engine import Engine, plan_run
from hbtui.store import Store
from tests.support.server_process import FakeServer

DATA = Path(__file__).resolve().parents[2] / "shared" / "healthbench" / "healthbench_main_subset.jsonl"


class CallCounter:
    """Counts calls as they complete, to measure the steady rate after the ramp-up."""

    def __init__(self) -> None:
        self.calls = 0
        self.marks: list[tuple[float, int]] = []

    def on_event(self, event) -> None:
        name = type(event).__name__
        if name in ("ReplyGenerated", "CriterionGraded", "GenerationFailed"):
            self.calls += 1


async def bench(latency_ms: float, concurrency: int, repeats: int, limit: int | None) -> None:
    with FakeServer(config={"latency_ms": latency_ms}) as server, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            base_url=server.base_url,
            model_test="test-model",
            model_grader="grader-model",
            grader_template="builtin",  # throughput, not the prompt: nothing to download
            concurrency=concurrency,
            db_path=f"{tmp}/bench.sqlite",
            timeout=60,
        )
        dataset = load_jsonl(DATA)
        async with await Store.open(settings.db_path) as store:
            run_id = await plan_run(store, settings, dataset, limit=limit, repeats=repeats, name="bench")
            run = await store.get_run(run_id)
            counter = CallCounter()
            engine = Engine(store, run, settings, [counter])
            task = asyncio.create_task(engine.execute())

            async def sample_rate() -> None:
                while not task.done():
                    counter.marks.append((time.perf_counter(), counter.calls))
                    await asyncio.sleep(0.5)

            sampler = asyncio.create_task(sample_rate())
            wall0, cpu0 = time.perf_counter(), time.process_time()
            status = await task
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            sampler.cancel()
            cursor = await store.db.execute(
                "SELECT avg(latency_ms / attempts) FROM verdicts WHERE latency_ms IS NOT NULL"
            )
            observed_ms = (await cursor.fetchone())[0]
            await cursor.close()
        stats = server.stats()
    calls = counter.calls
    # Steady rate: the middle 60% of the run, leaving out ramp-up and the tail of the last conversations.
    marks = counter.marks
    lo, hi = marks[len(marks) // 5], marks[max(len(marks) * 4 // 5, len(marks) // 5 + 1) - 1]
    steady = (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] else calls / wall
    ideal = concurrency / (latency_ms / 1000) if latency_ms else float("nan")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"latency {latency_ms:g} ms, concurrency {concurrency}: status {status}, {calls} calls in {wall:.1f} s")
    print(
        f"  calls/s overall {calls / wall:.0f}, steady {steady:.0f}; ideal {ideal:.0f}; steady/ideal "
        f"{steady / ideal:.1%}"
        if latency_ms
        else f"  calls/s overall {calls / wall:.0f}, steady {steady:.0f}"
    )
    if latency_ms:
        print(
            f"  observed mean latency per call {observed_ms:.1f} ms (server sleep {latency_ms:g} ms + HTTP round trip):"
            f" ideal at that latency {concurrency / observed_ms * 1000:.0f},"
            f" steady/that {steady / (concurrency / observed_ms * 1000):.1%}"
        )
    print(
        f"  harness CPU per call {cpu / calls * 1000:.3f} ms (SQLite writes included); peak RSS {peak_mb:.0f} MB;"
        f" server max in flight {stats['max_in_flight']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    asyncio.run(bench(args.latency_ms, args.concurrency, args.repeats, args.limit))


if __name__ == "__main__":
    main()
