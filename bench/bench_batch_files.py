"""Batch files planned and imported at full size, as a user runs them: the 738 records of the main
subset x 7 repeats (5,166 conversations, 61,649 criteria: 66,815 requests), each command a
process of its own, from its start to its exit, with its peak memory. Measures; asserts nothing.

1. `hbtui run --batch-files DIR --repeats 7`: the run planned and generate-requests.jsonl written
   (5,166 requests);
2. `hbtui batch import RUN FILE` of an output answering all of them (written here, as an engine
   would, without a model): 5,166 replies stored and the grader's 61,649 requests written
   (grade-requests.jsonl and grade-requests-2.jsonl, past 50,000 lines).

    .venv/bin/python bench/bench_batch_files.py [--runs 2] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "healthbench" / "healthbench_main_subset.jsonl"


def timed(command: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, str]:
    """(wall seconds, peak MiB, stdout) of one process."""
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    out = child.stdout.read() if child.stdout else ""
    err = child.stderr.read() if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[2:5]} failed:\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, out


def answers(requests: Path, output: Path) -> int:
    """An engine's output for every request of ``requests``: a short reply each, with its usage."""
    count = 0
    with requests.open(encoding="utf-8") as lines, output.open("w", encoding="utf-8") as out:
        for text in lines:
            custom_id = json.loads(text)["custom_id"]
            body = {
                "id": f"chatcmpl-{count}",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"Reply {count}."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 4, "total_tokens": 104},
            }
            entry = {
                "id": f"b-{count}",
                "custom_id": custom_id,
                "response": {"status_code": 200, "request_id": "r", "body": body},
                "error": None,
            }
            out.write(json.dumps(entry) + "\n")
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_", "HBTUI_DB"))}
    env.update(MODEL_TEST="test-model", MODEL_GRADER="grader-model", GRADER_TEMPLATE="builtin")
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            env["HBTUI_CACHE"] = str(Path(tmp) / "cache")
            hbtui = [sys.executable, "-m", "hbtui"]
            plan = [*hbtui, "run", "--data", str(DATA), "--repeats", str(args.repeats), "--batch-files", "files"]
            wall, peak, _ = timed(plan, env, tmp)
            generate = Path(tmp) / "files" / "generate-requests.jsonl"
            lines = sum(1 for _ in generate.open())
            print(f"run {run + 1}: run --batch-files {wall:.2f} s, peak {peak:.0f} MiB ({lines:,} requests written)")
            answered = answers(generate, Path(tmp) / "generated.jsonl")
            wall, peak, _ = timed([*hbtui, "batch", "import", "1", "generated.jsonl"], env, tmp)
            grade = sorted((Path(tmp) / "files").glob("grade-requests*.jsonl"))
            graded = sum(sum(1 for _ in path.open()) for path in grade)
            print(
                f"run {run + 1}: batch import {wall:.2f} s, peak {peak:.0f} MiB ({answered:,} replies stored,"
                f" {graded:,} grader requests written in {len(grade)} files)"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
