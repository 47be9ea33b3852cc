"""Measures, asserts nothing: `hbtui run` (its own process, start to exit) against a test server
that enforces a provider's rate limit, printing the share of the permitted rate it reached and
the share of its requests that were refused.

The server limits one model (the model under test is the grader too, so every call counts
against one limit) to RPM requests a minute, as OpenAI does: a token bucket refilled at RPM/60 a
second holding one second of it, optionally a TPM bucket of prompt plus max tokens, and (unless
--no-headers) the x-ratelimit-* headers on every answer; a 429 with Retry-After otherwise.

    .venv/bin/python bench/bench_limits.py                         # 60 records, 1,800 RPM, 200 ms
    .venv/bin/python bench/bench_limits.py --no-headers
    .venv/bin/python bench/bench_limits.py --tpm 250000 --concurrency 64

"Rate" is the answers over the server's time from the first request to the last answer, as a
share of RPM/60 (or, when a TPM binds first, of the requests that TPM lets through).
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

from bench.bench_engine import DATA
from tests.support.server_process import FakeServer


def one_run(concurrency: int, rpm: float, tpm: float | None, headers: bool, latency_ms: float, limit: int) -> dict:
    config = {"latency_ms": latency_ms, "rate_limit": {"rpm": rpm, "tpm": tpm, "headers": headers}}
    with FakeServer(config=config) as server, tempfile.TemporaryDirectory() as tmp:
        env = dict(
            os.environ,
            BASE_URL=server.base_url,
            MODEL_TEST="test-model",
            MODEL_GRADER="test-model",
            CONCURRENCY=str(concurrency),
            GRADER_TEMPLATE="builtin",  # the prompt is not what is measured: nothing to download
            HBTUI_DB=str(Path(tmp) / "bench.sqlite"),
            HBTUI_CACHE=str(Path(tmp) / "cache"),
        )
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "hbtui", "run", "--data", str(DATA), "--limit", str(limit), "--name", "limits"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        stats = server.stats()
    answered = stats["by_status"].get("200", 0)
    span = (stats["last_answer_at"] or 0) - (stats["first_request_at"] or 0)
    return {
        "exit": done.returncode,
        "wall": wall,
        "answered": answered,
        "requests": stats["requests"],
        "refused": stats["rate_refused"],
        "rate": answered / span if span > 0 else 0.0,
        "token_rate": stats["rate_tokens_taken"] / span if span > 0 else 0.0,
        "tail": done.stdout.strip().splitlines()[-3:] + done.stderr.strip().splitlines()[-2:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[8, 64, 256])
    parser.add_argument("--rpm", type=float, default=1800)
    parser.add_argument("--tpm", type=float, default=None)
    parser.add_argument("--no-headers", action="store_true")
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--limit", type=int, default=60, help="records of the main subset")
    args = parser.parse_args()
    headers = not args.no_headers
    print(
        f"limit {args.rpm:,.0f} RPM"
        + (f", {args.tpm:,.0f} TPM" if args.tpm else "")
        + f", {'with' if headers else 'without'} headers, {args.latency_ms:g} ms, {args.limit} records;"
        f" load {os.getloadavg()[0]:.2f}"
    )
    print("| concurrency | exit | answers | requests | answers/s | share of RPM | share of TPM | refused | wall s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for concurrency in args.concurrency:
        result = one_run(concurrency, args.rpm, args.tpm, headers, args.latency_ms, args.limit)
        permitted = args.rpm / 60
        tokens = f"{result['token_rate'] / (args.tpm / 60):.1%}" if args.tpm else "–"
        print(
            f"| {concurrency} | {result['exit']} | {result['answered']} | {result['requests']} | {result['rate']:.1f}"
            f" | {result['rate'] / permitted:.1%} | {tokens} | {result['refused'] / max(result['requests'], 1):.1%}"
            f" | {result['wall']:.1f} |",
            flush=True,
        )
        if result["exit"] != 0:
            print("   " + "\n   ".join(result["tail"]))


if __name__ == "__main__":
    main()
