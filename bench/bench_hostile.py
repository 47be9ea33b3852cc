"""Measures, asserts nothing: the peak memory of `hbtui run` (its own process, start to exit)
against a server whose every answer is hostile, and how long the run took to end.

    .venv/bin/python bench/bench_hostile.py                  # 50 MB, a gzip bomb, drips
    .venv/bin/python bench/bench_hostile.py --mib 200        # a larger answer

Each scenario is one conversation against tests/support/hostile_server.py, MAX_ATTEMPTS=2 and
TIMEOUT=5: a 50 MB reply sent chunked (no Content-Length to refuse it by), a 1 MB gzip that
inflates to 1 GiB, and a body dripped a byte every 0.2 s. The peak is the process's own
(tests/support/peak_rss.py), the time its wall clock.
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

from tests.conftest import make_record, write_jsonl
from tests.support.hostile_server import Behaviour, HostileServer
from tests.support.peak_rss import run_measured

DEADLINE = 120  # seconds a scenario may take before it is called a hang


def one_run(behaviour: Behaviour) -> tuple[float, float, str]:
    with HostileServer(behaviour=behaviour) as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = write_jsonl(folder / "one.jsonl", [make_record("p1", [("Advises rest", 5, ["axis:accuracy"])])])
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_", "GRADER_"))},
            "BASE_URL": server.base_url,
            "MODEL_TEST": "m",
            "MODEL_GRADER": "g",
            "GRADER_TEMPLATE": "builtin",
            "MAX_ATTEMPTS": "2",
            "TIMEOUT": "5",
            "HBTUI_DB": str(folder / "runs" / "hbtui.sqlite"),
        }
        started = time.perf_counter()
        command = [sys.executable, "-m", "hbtui", "run", "--data", str(data), "--name", behaviour.mode]
        try:
            _, peak, output = run_measured(command, env, folder, timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            return float("nan"), time.perf_counter() - started, f"still running after {DEADLINE} s: killed"
        seconds = time.perf_counter() - started
        ended = next((line for line in output.splitlines() if "too_large" in line or "timeout" in line), "")
        return peak, seconds, ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=50, help="size of the large answer, MiB")
    args = parser.parse_args()
    scenarios = [
        (f"{args.mib} MB reply", Behaviour(mode="big", size=args.mib * 1024 * 1024)),
        ("gzip bomb (1 MB -> 1 GiB)", Behaviour(mode="gzip_bomb")),
        ("body dripped, a byte / 0.2 s", Behaviour(mode="drip_body", interval=0.2)),
    ]
    print(f"{'scenario':<30} {'peak MiB':>9} {'seconds':>8}  how the call ended")
    for name, behaviour in scenarios:
        peak, seconds, ended = one_run(behaviour)
        print(f"{name:<30} {peak:>9.0f} {seconds:>8.1f}  {ended.strip()[:90]}")


if __name__ == "__main__":
    main()
