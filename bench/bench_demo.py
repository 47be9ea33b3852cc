"""Measures, asserts nothing: `hbtui demo` end to end, as a user runs it after the one-time build:
process start to exit, the records answered and graded by SmolLM2-135M on llama.cpp's server on
this machine's CPU, and what the grader's calls cost (tokens, re-asked verdicts).

    .venv/bin/python bench/bench_demo.py                                    # the demo's 5 records
    .venv/bin/python bench/bench_demo.py --data ../shared/healthbench/healthbench_main_subset.jsonl

The local model must be installed first (`bash scripts/build_llama_server.sh`); the data is the
main subset (``--data``, or the cached official file). Run it on a quiet machine: the model is
CPU-bound and any other load shows in the time.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT.parent / "shared" / "healthbench" / "healthbench_main_subset.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(MAIN) if MAIN.exists() else None, help="a HealthBench JSONL file")
    parser.add_argument("--limit", type=int, default=5, help="records (the demo's default: 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs" / "hbtui.sqlite"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_"))}
        env["HBTUI_DB"] = str(db)
        command = [sys.executable, "-m", "hbtui", "demo", "--headless", "--limit", str(args.limit)]
        command += ["--data", args.data] if args.data else []
        started = time.monotonic()
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
        with sqlite3.connect(db.parent / "demo.sqlite") as conn:
            conversations, replies = conn.execute(
                "SELECT count(*), sum(status = 'generated') FROM conversations"
            ).fetchone()
            verdicts, met, errors, requests, completion = conn.execute(
                "SELECT count(*), sum(status = 'met'), sum(status = 'error'), sum(attempts),"
                " sum(completion_tokens) FROM verdicts"
            ).fetchone()
            explanation = conn.execute("SELECT avg(length(explanation)) FROM verdicts").fetchone()[0] or 0
            reply_s, reply_prompt, reply_out = conn.execute(
                "SELECT sum(latency_ms) / 1000, sum(prompt_tokens), sum(completion_tokens) FROM conversations"
            ).fetchone()
            grade_s, grade_prompt = conn.execute(
                "SELECT sum(latency_ms) / 1000, sum(prompt_tokens) FROM verdicts"
            ).fetchone()
    print(f"hbtui demo, {args.limit} records: exit {done.returncode} in {wall:.1f} s (process start to exit)")
    print(f"  replies {replies}/{conversations}; verdicts {verdicts} ({met} met, {errors} errors)")
    print(f"  grader requests {requests} for {verdicts} verdicts (re-asked: {requests - verdicts})")
    print(f"  grader completion tokens {completion} ({completion / max(verdicts, 1):.0f} a verdict);")
    print(f"  explanations {explanation:.0f} characters on average")
    print(f"  replies: {reply_s:.0f} s of calls, {reply_prompt} prompt and {reply_out} completion tokens")
    print(f"  verdicts: {grade_s:.0f} s of calls (several at once), {grade_prompt} prompt tokens")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
