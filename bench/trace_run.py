"""`hbtui` run in this process, with where its time went printed to stderr at the end: each phase
from the process's start to its exit, in wall time, CPU of the whole process (the threads that
import aiohttp and numpy, the bootstrap's and SQLite's included) and CPU of the main thread.

    .venv/bin/python bench/trace_run.py run --data FILE ...   # what `hbtui run --data FILE ...` does
    .venv/bin/python bench/bench_engine.py --trace            # the same, in the benchmark's runs

The phases are marked by wrapping the functions that end them, so a phase's name says what
ended it. Nothing here changes what the command does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

STARTED = (time.perf_counter(), time.process_time(), time.thread_time())
MARKS: list[tuple[str, float, float, float]] = []


def mark(name: str) -> None:
    MARKS.append((name, time.perf_counter(), time.process_time(), time.thread_time()))


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hbtui import cli
from hbtui.cli import common as cli_common
from hbtui.cli import runs as cli_runs
from hbtui.client.chat import ChatClient
from hbtui.core.blas_threads import hold_blas_to_one_thread
from hbtui.engine import driver, run_finish
from hbtui.engine.finish_ahead import FinishAhead
from hbtui.store import Store

mark("imports")


def after(module, name: str, label: str, before: str | None = None) -> None:
    """Mark ``label`` when ``module.name`` returns (and ``before`` when it is called)."""
    function = getattr(module, name)

    async def marked_async(*args, **kwargs):
        if before:
            mark(before)
        result = await function(*args, **kwargs)
        mark(label)
        return result

    def marked(*args, **kwargs):
        result = function(*args, **kwargs)
        mark(label)
        return result

    is_async = function.__code__.co_flags & 0x80  # CO_COROUTINE
    setattr(module, name, marked_async if is_async else marked)


after(cli_common, "load_jsonl", "dataset read")
# A run of the model under test: its first calls go out while its plan is stored, so "plan
# stored" comes after "first request" (a run of the records' own completions is planned first).
after(cli_runs, "start_run", "run created, plan in memory")
after(Store, "create_run", "plan stored")
after(FinishAhead, "finish", "last conversations read", before="calls done, writes flushed")
after(driver, "settle", "report computed")
after(run_finish, "write_run_folder", "run folder written", before="status stored")
complete = ChatClient.complete


async def first_marked(self, *args, **kwargs):
    if not any(name == "first request" for name, *_ in MARKS):
        mark("first request")
    return await complete(self, *args, **kwargs)


ChatClient.complete = first_marked


def main() -> int:
    hold_blas_to_one_thread()  # as hbtui.cli.entry does
    code = cli.main(sys.argv[1:])
    mark("summary printed, exit")
    previous = STARTED
    print(f"trace: {'phase (ended by)':32} {'wall':>6} {'CPU':>6} {'main':>6}", file=sys.stderr)
    for name, *clocks in MARKS:
        wall, cpu, main_cpu = (now - then for now, then in zip(clocks, previous))
        print(f"trace: {name:32} {wall:6.3f} {cpu:6.3f} {main_cpu:6.3f}", file=sys.stderr)
        previous = tuple(clocks)
    total_wall, total_cpu, _ = (now - then for now, then in zip(MARKS[-1][1:], STARTED))
    print(f"trace: {'total':32} {total_wall:6.3f} {total_cpu:6.3f}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
