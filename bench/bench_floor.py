"""The floor under bench_engine's wall scenario: the same calls, made by the barest client.

A loop of requests through hbtui's own connection pool (hbtui.client.http1; `--client aiohttp`
for aiohttp's, which the chat calls used before), nothing else: no database, no parsing, no scoring, no run folder. Each
of the main subset's 738 conversations is one request to the model under test, then, once it is
answered, one request per rubric criterion to the grader (the builtin grader prompt, so each body
is the size hbtui sends), 256 in flight, against the same test server at 200 ms. Timed from the
first request to the last answer, in a process that has aiohttp imported and its data ready.

What it shows: how close to calls × latency / concurrency + 2 × latency this machine and this
server let any client come; hbtui's calls phase (bench_engine --trace, "calls done") is measured
against it, and its start-up and finish come on top.

    .venv/bin/python bench/bench_floor.py --runs 3 [--client http1|aiohttp] [--in-flight 256]

Each run prints its CPU per call too (the process's, over the calls), on uvloop as `hbtui run`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_engine import DATA, bound_seconds
from hbtui.client.http1 import HttpPool
from hbtui.core.dataset import load_jsonl
from hbtui.core.grading import fill_template, load_template, render_conversation
from tests.support.server_process import FakeServer

LATENCY_MS, IN_FLIGHT = 200, 256


def bodies(data: Path) -> list[tuple[bytes, list[bytes]]]:
    """(the generation request, the grading requests) of each conversation, encoded."""
    template = load_template("builtin")
    out = []
    for record in load_jsonl(data).records:
        prompt = [dict(message) for message in record.prompt]
        generate = {"model": "test-model", "messages": prompt, "temperature": 0.0, "max_tokens": 2048}
        rendered = render_conversation([*prompt, {"role": "assistant", "content": "a reply " * 60}])
        grades = [
            {
                "model": "grader-model",
                "messages": [{"role": "user", "content": fill_template(template, rendered, c.points, c.criterion)}],
                "temperature": 0.0,
                "max_tokens": 2048,
            }
            for c in record.rubrics
        ]
        out.append((json.dumps(generate).encode(), [json.dumps(g).encode() for g in grades]))
    return out


async def run_once(
    url: str, work: list[tuple[bytes, list[bytes]]], client: str, in_flight: int
) -> tuple[float, float, int]:
    """(wall, CPU of this process, calls) from the first request to the last answer."""
    slots = asyncio.Semaphore(in_flight)
    headers = {"Content-Type": "application/json"}
    calls = 0

    async def calls_through(post) -> tuple[float, float, int]:
        async def call(body: bytes) -> None:
            nonlocal calls
            async with slots:
                await post(body)
            calls += 1

        async def conversation(generate: bytes, grades: list[bytes]) -> None:
            await call(generate)
            await asyncio.gather(*(call(body) for body in grades))

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(conversation(generate, grades) for generate, grades in work))
        return time.perf_counter() - started, time.process_time() - cpu, calls

    if client == "aiohttp":
        import aiohttp

        connector = aiohttp.TCPConnector(limit=in_flight + 8)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def post(body: bytes) -> None:
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()

            return await calls_through(post)
    async with HttpPool(60.0, in_flight + 8) as pool:
        return await calls_through(lambda body: pool.post(url, body, headers, limit=8 << 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--client", choices=("http1", "aiohttp"), default="http1")
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT)
    args = parser.parse_args()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    work = bodies(args.data)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    walls = []
    for _ in range(args.runs):
        with FakeServer(config={"latency_ms": LATENCY_MS}) as server:
            wall, cpu, calls = runner(
                run_once(f"{server.base_url}/chat/completions", work, args.client, args.in_flight)
            )
        bound = bound_seconds(calls, LATENCY_MS, args.in_flight)
        walls.append(wall)
        share = f"{bound / wall:.0%} of the bound {bound:.2f} s"
        print(
            f"  {args.client}: {calls} calls, {args.in_flight} in flight at {LATENCY_MS} ms: {wall:.2f} s, {share};"
            f" {calls / wall:,.0f} calls/s, CPU {cpu / calls * 1000:.3f} ms a call"
        )
    print(
        f"  => the barest client ({args.client}): {min(walls):.2f}–{max(walls):.2f} s from its first request"
        " to its last answer"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
