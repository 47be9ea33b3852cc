"""A regrade served from the verdict cache, end to end as a user runs it (process start to exit).

Makes a source run with the project's test server (all 738 real main records x 7 repeats:
61,649 verdicts, a minute or two), then times `hbtui regrade` of it with the same grader: every
verdict comes from the cache, no call is made. Goal: under 5 s. Prints figures, asserts nothing.

    .venv/bin/python bench/bench_regrade.py [--repeats 7] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import json
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


def hbtui(folder: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTUI_", "BASE_URL", "MODEL_", "GRADER_"))}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "hbtui", *args],
        cwd=folder,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - started, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    if not DATA.exists():
        sys.exit(f"needs the real records at {DATA}")
    with FakeServer() as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / ".env").write_text(
            f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n"
            f"CONCURRENCY={args.concurrency}\nGRADER_TEMPLATE=builtin\n"
        )
        seconds, done = hbtui(folder, "run", "--data", str(DATA), "--repeats", str(args.repeats), "--name", "source")
        if done.returncode != 0:
            sys.exit(f"the source run failed: {done.stderr.strip()}")
        made = server.stats()["requests"]
        print(f"source run: {made:,} calls in {seconds:.1f} s")
        server.reset_stats()
        seconds, done = hbtui(folder, "regrade", "source", "--name", "again")
        if done.returncode != 0:
            sys.exit(f"the regrade failed: {done.stderr.strip()}")
        with sqlite3.connect(folder / "runs" / "hbtui.sqlite") as conn:
            total, cached = conn.execute("SELECT count(*), sum(from_cache) FROM verdicts WHERE run_id = 2").fetchone()
            same = conn.execute(
                "SELECT count(*) FROM verdicts a JOIN conversations ca ON ca.id = a.conversation_id"
                " JOIN conversations cb ON cb.run_id = 2 AND cb.position = ca.position"
                " JOIN verdicts b ON b.conversation_id = cb.id AND b.idx = a.idx"
                " WHERE a.run_id = 1 AND a.status = b.status"
            ).fetchone()[0]
            scores = conn.execute("SELECT score FROM runs ORDER BY id").fetchall()
        print(f"regrade with the same grader, process start to exit: {seconds:.2f} s (goal under 5 s)")
        print(
            f"  {total:,} verdicts, {cached:,} from the cache, {server.stats()['requests']} calls;"
            f" {same:,} verdicts equal to the source's; scores {json.dumps([s for (s,) in scores])}"
        )


if __name__ == "__main__":
    main()
