"""The engine measured end to end, as a user runs it: `hbtui run` in a process of its own, from
its start to its exit, against the test server (another process) at a given latency.

Three figures, each run:
  wall      the process's start to its exit, against the bound: calls × latency / concurrency
            plus one generate-then-grade chain (2 × latency), which no scheduler can beat;
  CPU/call  the hbtui process's user + system time over the HTTP calls it made (the server
            counts them), start-up, plan, SQLite writes, report and run folder included;
  peak      the hbtui process's peak resident memory (ru_maxrss).
and where the wall time went, from the timestamps the run stored: start-up and plan (process
start to the run's creation), ramp (to the first reply), the calls, the tail (the last reply to
the last verdict) and the finish (the last verdict to the exit).

Run by hand (not in CI), from the checkout with its venv:

    .venv/bin/python bench/bench_engine.py                  # both scenarios, 3 runs each
    .venv/bin/python bench/bench_engine.py --scenario wall --runs 2
    .venv/bin/python bench/bench_engine.py --scenario memory
    .venv/bin/python bench/bench_engine.py --scenario wall --trace   # and each phase of the process

``--trace`` runs the command through bench/trace_run.py, which prints each phase from the
process's start to its exit (imports, dataset read, plan, first request, calls, report, run
folder) in wall time and CPU.

Scenarios: ``wall`` is all 738 records of the main subset at 200 ms, 256 in flight; ``memory``
is the same records 7 times (--repeats 7: 5,166 conversations, ~66,800 calls) at 2 ms, 256 in
flight, for the peak memory of a large run; ``rate`` is ``wall`` at 512 in flight, hbtui's side of
bench/bench_reference_rate.py (its phases; that script gives the rate beside simple-evals').
``both`` (the default) is ``wall`` and ``memory``. The machine is shared: each figure is given as the
range of its runs, with the load average beside it.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.server_process import FakeServer

DATA = ROOT.parent / "shared" / "healthbench" / "healthbench_main_subset.jsonl"


@dataclass(frozen=True)
class Scenario:
    name: str
    latency_ms: float
    concurrency: int
    repeats: int


SCENARIOS = {
    "wall": Scenario("wall", latency_ms=200, concurrency=256, repeats=1),
    "memory": Scenario("memory", latency_ms=2, concurrency=256, repeats=7),
    # hbtui's side of bench_reference_rate.py: where the phases of its runs went.
    "rate": Scenario("rate", latency_ms=200, concurrency=512, repeats=1),
}
BOTH = ("wall", "memory")


@dataclass(frozen=True)
class Measured:
    status: int
    wall: float
    cpu: float
    peak_mib: float
    calls: int
    conversations: int
    phases: dict[str, float]
    trace: list[str]

    def bound(self, scenario: Scenario) -> float:
        return bound_seconds(self.calls, scenario.latency_ms, scenario.concurrency)


def bound_seconds(calls: int, latency_ms: float, in_flight: int) -> float:
    """The least time ``calls`` can take with ``in_flight`` at once: calls x latency / in flight,
    plus one generate-then-grade chain (2 x latency), which no scheduler can overlap."""
    latency = latency_ms / 1000
    return calls * latency / in_flight + 2 * latency


def phases_from(db: Path, started_at: float, ended_at: float) -> tuple[int, dict[str, float]]:
    """(conversations, seconds of each phase) from the run's own timestamps (wall clock)."""
    with sqlite3.connect(db) as connection:
        created, conversations = connection.execute("SELECT created_at, n_conversations FROM runs").fetchone()
        first_reply, last_reply = connection.execute(
            "SELECT min(generated_at), max(generated_at) FROM conversations"
        ).fetchone()
        last_verdict = connection.execute("SELECT max(graded_at) FROM verdicts").fetchone()[0]
    return conversations, {
        "start-up and plan": created - started_at,
        "to the first reply": first_reply - created,
        "replies": last_reply - first_reply,
        "tail (last reply to last verdict)": last_verdict - last_reply,
        "finish (report, folder, exit)": ended_at - last_verdict,
    }


def measure(scenario: Scenario, data: Path, hbtui: list[str]) -> Measured:
    with FakeServer(config={"latency_ms": scenario.latency_ms}) as server, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite"
        command = [
            *hbtui,
            "run",
            "--data",
            str(data),
            "--repeats",
            str(scenario.repeats),
            "--name",
            "bench",
            "--db",
            str(db),
        ]
        env = dict(
            os.environ,
            BASE_URL=server.base_url,
            MODEL_TEST="test-model",
            MODEL_GRADER="grader-model",
            GRADER_TEMPLATE="builtin",  # the prompt is not what is measured: nothing to download
            CONCURRENCY=str(scenario.concurrency),
            TIMEOUT="60",
            HBTUI_CACHE=str(Path(tmp) / "cache"),
        )
        for key in ("API_KEY", "GRADER_API_KEY", "GRADER_BASE_URL", "GRADER_CONCURRENCY"):
            env.pop(key, None)
        started_at, started = time.time(), time.perf_counter()
        child = subprocess.Popen(
            command, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        # wait4: this child's own usage. RUSAGE_CHILDREN's ru_maxrss is the largest of every child
        # waited for so far, so a second run in this process would report the first's peak.
        _, wait_status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        ended_at = time.time()
        child.returncode = os.waitstatus_to_exitcode(wait_status)
        errors = child.stderr.read().decode(errors="replace") if child.stderr else ""
        if child.stderr:
            child.stderr.close()
        if child.returncode != 0:
            raise SystemExit(f"hbtui run exited {child.returncode}:\n{errors[-2000:]}")
        calls = server.stats()["requests"]
        conversations, phases = phases_from(db, started_at, ended_at)
    return Measured(
        status=child.returncode,
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        peak_mib=usage.ru_maxrss / 1024,  # kilobytes on Linux
        calls=calls,
        conversations=conversations,
        phases=phases,
        trace=[line for line in errors.splitlines() if line.startswith("trace: ")],
    )


def span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{format(low, fmt)}–{format(high, fmt)}"


def report(scenario: Scenario, results: list[Measured]) -> None:
    first = results[0]
    print(
        f"\n{scenario.name}: {first.conversations} conversations, {first.calls} calls, latency"
        f" {scenario.latency_ms:g} ms, {scenario.concurrency} in flight; {len(results)} runs"
    )
    for r in results:
        bound = r.bound(scenario)
        share = f", {bound / r.wall:.0%} of the bound {bound:.2f} s" if scenario.latency_ms >= 50 else ""
        print(
            f"  wall {r.wall:6.2f} s{share}; CPU/call {r.cpu / r.calls * 1000:.3f} ms; peak {r.peak_mib:.0f} MiB"
            f" | " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in r.phases.items())
        )
        for line in r.trace:
            print(f"    {line}")
    walls = [r.wall for r in results]
    print(f"  => wall {span(walls, '.2f')} s", end="")
    if scenario.latency_ms >= 50:
        print(f" ({span([r.bound(scenario) / r.wall * 100 for r in results], '.0f')} % of the bound)", end="")
    print(
        f"; harness CPU per call {span([r.cpu / r.calls * 1000 for r in results], '.3f')} ms;"
        f" peak memory {span([r.peak_mib for r in results], '.0f')} MiB"
    )


def compile_hbtui() -> None:
    """hbtui's modules compiled to bytecode first, as an install compiles them and as Python
    caches them on a user's first run. This machine sets PYTHONDONTWRITEBYTECODE=1, under which
    an editable checkout is compiled again by every process: 0.08-0.1 s of each run's start-up
    that no user's second run pays."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "hbtui")], env=env, check=True)
    print("hbtui's bytecode compiled (python -m compileall hbtui), as an install compiles it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "both"], default="both")
    parser.add_argument("--runs", type=int, default=3, help="runs of each scenario (the machine is shared)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--trace", action="store_true", help="print each phase of the process (bench/trace_run.py)")
    args = parser.parse_args()
    hbtui = [sys.executable, str(ROOT / "bench" / "trace_run.py")] if args.trace else [sys.executable, "-m", "hbtui"]
    chosen = [SCENARIOS[name] for name in (BOTH if args.scenario == "both" else (args.scenario,))]
    compile_hbtui()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    for scenario in chosen:
        report(scenario, [measure(scenario, args.data, hbtui) for _ in range(args.runs)])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
