"""hbtui's call rate against simple-evals' on the same server: all 738 records of the main
subset, each harness in a process of its own, from its start to its exit. Measures; asserts
nothing.

simple-evals runs as its command runs HealthBench: `HealthBenchEval` of the reference's files at
652c89d (../shared/reference/652c89d, imported by path, as the tests import them) with its own
`ChatCompletionSampler` (the `openai` package) for both models, over 120 threads (its
`n_threads` default) for the conversations, each grading its criteria over a pool of its own
(simple-evals' `common.map_with_progress`, a `ThreadPool`, whose default is the CPU count). The
reference's `common` is not among those files: the child process defines that map as
simple-evals defines it (a thread pool's `imap`), and stubs what only makes its HTML report.
hbtui runs `hbtui run` at 512 in flight (or ``--concurrency``). Both against the project's test
server at a latency given (200 ms by default) in a process of its own; the server counts the calls.

    .venv/bin/python bench/bench_reference_rate.py [--runs 2] [--latency-ms 200] [--limit N]
                                                   [--concurrency 512]

It also prints the bound on hbtui's side: no client with that many calls in flight can go faster
than calls / (calls x latency / in flight + 2 x latency), the second term being the one
generate-then-grade chain that cannot overlap anything. simple-evals is held by its CPU (its
threads share one interpreter), hbtui by that bound; so on a quicker machine simple-evals gains
and the ratio the bound allows falls, which the last line shows.

It needs the dev dependencies (openai) and ../shared (the data and the reference's files).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_engine import DATA, bound_seconds
from tests.support.server_process import FakeServer

REFERENCE = ROOT.parent / "shared" / "reference" / "652c89d"

# The child that runs simple-evals: the reference's eval and sampler, and simple-evals' map.
SIMPLE_EVALS_CHILD = r"""
import os, sys, types
from pathlib import Path
from multiprocessing.pool import ThreadPool
sys.path.insert(0, {root!r})
from tests.support.reference_modules import reference_modules

def map_with_progress(f, xs, num_threads=os.cpu_count() or 10, pbar=True):
    # As simple-evals' common.map_with_progress maps (without its progress bar).
    with ThreadPool(min(num_threads, len(xs))) as pool:
        return list(pool.imap(f, xs))

with reference_modules(Path({reference!r}), "sampler.chat_completion_sampler", "healthbench_eval") as (sampling, ref):
    ref.common.map_with_progress = map_with_progress
    ref.bf = types.SimpleNamespace(BlobFile=lambda path, mode: open(path, mode))
    # The test server's usage has no *_tokens_details objects, which OpenAI sends and the
    # reference indexes: read as absent.
    ref.get_usage_dict = lambda usage: {{}}
    system = sampling.OPENAI_SYSTEM_MESSAGE_API  # as simple_evals.py makes both samplers
    test = sampling.ChatCompletionSampler(model="test-model", system_message=system, max_tokens=2048)
    grader = sampling.ChatCompletionSampler(model="grader-model", system_message=system, max_tokens=2048)
    evaluation = ref.HealthBenchEval(grader_model=grader, num_examples={limit}, n_threads=120, input_path={data!r})
    result = evaluation(test)
    print("overall_score", result.metrics["overall_score"] if result.metrics else None)
"""


def timed(command: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return wall


def simple_evals(server: FakeServer, tmp: str, limit: int | None) -> tuple[float, int]:
    child = SIMPLE_EVALS_CHILD.format(root=str(ROOT), reference=str(REFERENCE), data=str(DATA), limit=limit)
    env = dict(os.environ, OPENAI_API_KEY="bench-key", OPENAI_BASE_URL=server.base_url)
    server.reset_stats()
    wall = timed([sys.executable, "-c", child], env, tmp)
    return wall, server.stats()["requests"]


def hbtui(server: FakeServer, tmp: str, limit: int | None, run: int, concurrency: int) -> tuple[float, int]:
    env = dict(
        os.environ,
        BASE_URL=server.base_url,
        MODEL_TEST="test-model",
        MODEL_GRADER="grader-model",
        GRADER_TEMPLATE="builtin",  # the prompt is not what is measured: nothing to download
        CONCURRENCY=str(concurrency),
        TIMEOUT="60",
        HBTUI_CACHE=str(Path(tmp) / "cache"),
    )
    for key in ("API_KEY", "GRADER_API_KEY", "GRADER_BASE_URL", "GRADER_CONCURRENCY"):
        env.pop(key, None)
    command = [sys.executable, "-m", "hbtui", "run", "--data", str(DATA), "--db", str(Path(tmp) / f"{run}.sqlite")]
    if limit is not None:
        command += ["--limit", str(limit)]
    server.reset_stats()
    wall = timed(command, env, tmp)
    return wall, server.stats()["requests"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="runs of each harness, alternated")
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--limit", type=int, default=None, help="records (default: all 738)")
    parser.add_argument("--concurrency", type=int, default=512, help="hbtui's calls in flight")
    args = parser.parse_args()
    if not (DATA.exists() and (REFERENCE / "sampler" / "chat_completion_sampler.py").exists()):
        raise SystemExit(f"needs {DATA} and {REFERENCE} (../shared)")
    rates: dict[str, list[float]] = {"simple-evals": [], "hbtui": []}
    calls = 0
    with FakeServer(config={"latency_ms": args.latency_ms}) as server, tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for name in rates:
                if name == "simple-evals":
                    wall, calls = simple_evals(server, tmp, args.limit)
                else:
                    wall, calls = hbtui(server, tmp, args.limit, run, args.concurrency)
                rates[name].append(calls / wall)
                print(f"{name:<12} run {run + 1}: {calls:,} calls in {wall:.2f} s = {calls / wall:,.0f} calls/s")
    load = os.getloadavg()[0]
    low = min(rates["hbtui"]) / max(rates["simple-evals"])
    high = max(rates["hbtui"]) / min(rates["simple-evals"])
    print(
        f"=> latency {args.latency_ms:g} ms; simple-evals {min(rates['simple-evals']):,.0f}-"
        f"{max(rates['simple-evals']):,.0f} calls/s (120 threads), hbtui {min(rates['hbtui']):,.0f}-"
        f"{max(rates['hbtui']):,.0f} calls/s ({args.concurrency} in flight): {low:.1f}-{high:.1f}x; load {load:.1f}"
    )
    bound = calls / bound_seconds(calls, args.latency_ms, args.concurrency)  # calls a second
    print(
        f"   the bound at {args.concurrency} in flight: {bound:,.0f} calls/s for any client, "
        f"{bound / max(rates['simple-evals']):.1f}-{bound / min(rates['simple-evals']):.1f}x simple-evals' rate here"
    )


if __name__ == "__main__":
    main()
