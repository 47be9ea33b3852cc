"""A run through the batch API at full size, as a user runs it: `hbtui run --batch` of the 738
records of the main subset x 7 repeats (5,166 replies, then 61,649 verdicts in two grading
batches past 50,000 lines) against the project's test server, whose batches answer each line
through its own routes. One process from its start to its exit; its peak memory and CPU time,
and the time the provider (the test server) spent answering. Measures; asserts nothing.

The wall time is mostly the server's: it answers 66,815 lines at its batch concurrency. What
hbtui adds is its CPU: writing and uploading the files, downloading and storing the output.

    .venv/bin/python bench/bench_batch_api.py [--repeats 7] [--poll 1]
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
sys.path.insert(0, str(ROOT))

from tests.support.server_process import FakeServer

DATA = ROOT.parent / "shared" / "healthbench" / "healthbench_main_subset.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--poll", type=float, default=1.0, help="BATCH_POLL, seconds")
    parser.add_argument("--concurrency", type=int, default=64, help="the test server's lines at once")
    args = parser.parse_args()
    config = {"batch": {"validating_s": 0.5, "finalizing_s": 0.5, "concurrency": args.concurrency}}
    with FakeServer(config=config) as server, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite"
        env = dict(
            os.environ,
            BASE_URL=server.base_url,
            MODEL_TEST="test-model",
            MODEL_GRADER="grader-model",
            GRADER_TEMPLATE="builtin",
            HBTUI_CACHE=str(Path(tmp) / "cache"),
            BATCH_POLL=str(args.poll),
        )
        for key in ("API_KEY", "GRADER_API_KEY", "GRADER_BASE_URL"):
            env.pop(key, None)
        command = [
            sys.executable,
            "-m",
            "hbtui",
            "run",
            "--data",
            str(DATA),
            "--repeats",
            str(args.repeats),
            "--batch",
            "--name",
            "bench",
            "--db",
            str(db),
        ]
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        out = child.stdout.read() if child.stdout else ""
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"hbtui run --batch failed:\n{(child.stderr.read() if child.stderr else '')[-2000:]}")
        with sqlite3.connect(db) as conn:
            submissions = conn.execute(
                "SELECT number, stage, lines, submitted_at, ended_at FROM batch_submissions ORDER BY number"
            ).fetchall()
            status_row = conn.execute("SELECT status FROM runs").fetchone()
        lines = sum(row[2] for row in submissions)
        at_provider = sum((ended or 0) - (submitted or 0) for _, _, _, submitted, ended in submissions)
        cpu = usage.ru_utime + usage.ru_stime
        print(f"hbtui run --batch, {args.repeats} repeats of {DATA.name}: {status_row[0]}")
        for number, stage, count, submitted, ended in submissions:
            print(f"  batch {number} ({stage}): {count:,} lines, {ended - submitted:.1f} s from submitted to stored")
        print(
            f"wall {wall:.1f} s (the provider answering: {at_provider:.1f} s of batches); hbtui's CPU {cpu:.1f} s"
            f" ({cpu / max(lines, 1) * 1000:.3f} ms a line, {lines:,} lines); peak {usage.ru_maxrss / 1024:.0f} MiB"
        )
        print(out.strip().splitlines()[-4] if out.strip() else "")


if __name__ == "__main__":
    main()
