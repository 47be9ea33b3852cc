"""The floor under bench_engine's wall scenario: the same calls, made by the barest client.

A loop of aiohttp requests, nothing else: no database, no parsing, no scoring, no run folder. Each
of the main subset's 738 conversations is one request to the model under test, then, once it is
answered, one request per rubric criterion to the grader (the builtin grader prompt, so each body
is the size hbtui sends), 256 in flight, against the same test server at 200 ms. Timed from the
first request to the last answer, in a process that has aiohttp imported and its data ready.

What it shows: how close to calls × latency / concurrency + 2 × latency this machine and this
server let any client come; hbtui's calls phase (bench_engine --trace, "calls done") is measured
against it, and its start-up and finish come on top.

    .venv/bin/python bench/bench_floor.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hbtui.core.dataset import load_jsonl
from hbtui.core.grading import fill_template, load_template, render_conversation
from tests.support.server_process import FakeServer

DATA = ROOT.parent / "shared" / "healthbench" / "healthbench_main_subset.jsonl"
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


async def run_once(url: str, work: list[tuple[bytes, list[bytes]]]) -> tuple[float, int]:
    slots = asyncio.Semaphore(IN_FLIGHT)
    headers = {"Content-Type": "application/json"}
    calls = 0
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT + 8)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call(body: bytes) -> None:
            nonlocal calls
            async with slots, session.post(url, data=body, headers=headers) as response:
                await response.read()
            calls += 1

        async def conversation(generate: bytes, grades: list[bytes]) -> None:
            await call(generate)
            await asyncio.gather(*(call(body) for body in grades))

        started = time.perf_counter()
        await asyncio.gather(*(conversation(generate, grades) for generate, grades in work))
        return time.perf_counter() - started, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    work = bodies(args.data)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    walls = []
    for _ in range(args.runs):
        with FakeServer(config={"latency_ms": LATENCY_MS}) as server:
            wall, calls = asyncio.run(run_once(f"{server.base_url}/chat/completions", work))
        bound = calls * LATENCY_MS / 1000 / IN_FLIGHT + 2 * LATENCY_MS / 1000
        walls.append(wall)
        share = f"{bound / wall:.0%} of the bound {bound:.2f} s"
        print(f"  {calls} calls, {IN_FLIGHT} in flight at {LATENCY_MS} ms: {wall:.2f} s, {share}")
    print(f"  => the barest client: {min(walls):.2f}–{max(walls):.2f} s from its first request to its last answer")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
