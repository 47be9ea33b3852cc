"""Try to break a run as a user would, and count what it cost: calls made against an uninterrupted
run, rows lost, keys found in files.

Run by hand on a fresh clone (asserts nothing, prints figures, exits 0):

    .venv/bin/python bench/bench_trials.py [--records N] [--quick] [--kills N] [--only kill ...]

Everything goes through real `python -m hbtui` processes in a temporary folder holding a `.env`
(BASE_URL, a long API_KEY, the two models, CONCURRENCY=8), against the project's test server in
its own process on 127.0.0.1. The records are the real HealthBench main subset from
`../shared/healthbench/` (or `HBTUI_HEALTHBENCH_DIR`), sampled with `--limit`; synthetic records
where that folder is absent. Every trial runs the same sample, so its final replies, verdicts and
score can be compared row by row with the uninterrupted run's:

1. baseline  an uninterrupted run; its call count is the reference
2. kill      SIGKILL at random moments, `hbtui resume` after each; the server's log of when it
             wrote each answer's last byte tells the calls truly in flight at a kill from those
             answered and not yet stored
3. stop      SIGSTOP (Ctrl-Z) for 20 s; `hbtui resume` from another shell meanwhile; SIGCONT
4. takeover  stopped, then taken over "from another host"; SIGCONT; then resumed
5. lock      another process holds the database's write lock for longer than the busy timeout
6. faults    a fault storm with few attempts, then `hbtui regrade-errors` until finished
7. keys      a provider that echoes the key; every file and output is searched for it
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hbtui.core.grading import grader_prompt, load_template
from hbtui.core.settings.config import ALIASES, BY_KEY
from tests.support.fake_server import DEFAULT_CONFIG, expected_verdict
from tests.support.kills import Killed, kill_gap, stop_then_kill, written_answers
from tests.support.server_process import FakeServer

SHARED = Path(os.environ.get("HBTUI_HEALTHBENCH_DIR") or ROOT.parent / "shared" / "healthbench")
MAIN_SUBSET = SHARED / "healthbench_main_subset.jsonl"
SEED = 5
RUN = "trial"
# A key of its own, new on every invocation, so no earlier file holds it (never a real one).
KEY = "fake-proj-" + secrets.token_hex(24)
LATENCY = {"latency_ms": 50, "latency_jitter_ms": 50}
STORM = {"rate_limit": 0.15, "server_error": 0.10, "drop": 0.03, "bad_json": 0.10}
DEFAULT_PATIENCE = 15.0  # hbtui.store.rows.HEARTBEAT_STALE_SECONDS without HBTUI_HEARTBEAT_PATIENCE
LOCK_HOLDER = (
    "import sqlite3, sys, time\n"
    "c = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)\n"
    "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(float(sys.argv[2])); c.execute('COMMIT')\n"
)


# ---- a user's folder and the commands typed in it ---------------------------------------------


@dataclass
class Done:
    code: int
    out: str
    err: str


class Folder:
    """A working folder with its `.env`; `runs/` gets the database and run folders. What every
    command printed is kept in `logs/`, so the key search covers it like any other file."""

    def __init__(
        self,
        root: Path,
        name: str,
        server: FakeServer,
        data: Path,
        env: dict[str, str] | None = None,
        env_lines: tuple[str, ...] = (),
    ) -> None:
        self.path = root / name
        (self.path / "logs").mkdir(parents=True)
        self.data = data
        (self.path / ".env").write_text(
            "\n".join(
                (
                    f"BASE_URL={server.base_url}",
                    f"API_KEY={KEY}",
                    "MODEL_TEST=test-model",
                    "MODEL_GRADER=grader-model",
                    "CONCURRENCY=8",
                    # The trials are about reliability, not the prompt: hbtui's own wording needs no download.
                    "GRADER_TEMPLATE=builtin",
                    *env_lines,
                )
            )
            + "\n"
        )
        inherited = {
            k: v for k, v in os.environ.items() if k not in BY_KEY and k not in ALIASES and not k.startswith("HBTUI_")
        }
        # This checkout's hbtui, whatever else is installed; no proxy between us and 127.0.0.1.
        self.env = dict(inherited, PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", **(env or {}))
        self.commands = 0

    @property
    def db(self) -> Path:
        return self.path / "runs" / "hbtui.sqlite"

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        self.commands += 1
        stem = self.path / "logs" / f"{self.commands:02d}-{args[0]}"
        with open(f"{stem}.out", "w") as out, open(f"{stem}.err", "w") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "hbtui", *args],
                cwd=self.path,
                env=dict(self.env, **(env or {})),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        process.logs = stem  # type: ignore[attr-defined]
        return process

    def start_run(self, limit: int, name: str = RUN, *flags: str) -> subprocess.Popen:
        return self.start(
            "run", "--data", str(self.data), "--limit", str(limit), "--seed", str(SEED), "--name", name, *flags
        )

    @staticmethod
    def finish(process: subprocess.Popen, timeout: float = 600) -> Done:
        code = process.wait(timeout)
        stem = process.logs  # type: ignore[attr-defined]
        return Done(code, Path(f"{stem}.out").read_text(), Path(f"{stem}.err").read_text())

    def run(self, *args: str, timeout: float = 600) -> Done:
        return self.finish(self.start(*args), timeout)


# ---- what the database holds ------------------------------------------------------------------


def query(db: Path, sql: str, *params):
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        return conn.execute(sql, params).fetchall()


def stored_answers(db: Path) -> int:
    """Replies and verdicts committed: each an answered call that is never asked again."""
    try:
        return query(
            db,
            "SELECT (SELECT count(*) FROM verdicts WHERE status != 'pending')"
            " + (SELECT count(*) FROM conversations WHERE status != 'pending')",
        )[0][0]
    except sqlite3.Error:
        return 0  # not created yet, or its schema not yet written


def received_and_stored(db: Path, since: float, until: float) -> int:
    """Answers received between ``since`` and ``until`` (the times the client stored with them)
    and in the database now: a process's own, not those of an earlier one it recovered."""
    try:
        return query(
            db,
            "SELECT (SELECT count(*) FROM verdicts WHERE status != 'pending' AND from_cache = 0"
            " AND graded_at BETWEEN ?1 AND ?2) + (SELECT count(*) FROM conversations"
            " WHERE status != 'pending' AND generated_at BETWEEN ?1 AND ?2)",
            since,
            until,
        )[0][0]
    except sqlite3.Error:
        return 0  # not created yet, or its schema not yet written


def has_run(db: Path) -> bool:
    try:
        return db.exists() and query(db, "SELECT count(*) FROM runs")[0][0] > 0
    except sqlite3.Error:
        return False


def run_status(db: Path, name: str = RUN) -> str:
    try:
        rows = query(db, "SELECT status FROM runs WHERE name = ?", name)
    except sqlite3.Error:
        return "-"
    return rows[0][0] if rows else "-"


@dataclass
class Snapshot:
    verdicts: dict = field(default_factory=dict)  # (prompt_id, repeat, idx) -> (status, explanation)
    replies: dict = field(default_factory=dict)  # (prompt_id, repeat) -> (status, reply)
    duplicates: int = 0
    score: float | None = None


def snapshot(db: Path, name: str = RUN) -> Snapshot:
    shot = Snapshot()
    if not has_run(db):
        return shot
    verdicts = query(
        db,
        "SELECT c.prompt_id, c.repeat, v.idx, v.status, v.explanation FROM verdicts v"
        " JOIN conversations c ON c.id = v.conversation_id JOIN runs r ON r.id = c.run_id"
        " WHERE r.name = ?",
        name,
    )
    replies = query(
        db,
        "SELECT c.prompt_id, c.repeat, c.status, c.reply FROM conversations c"
        " JOIN runs r ON r.id = c.run_id WHERE r.name = ?",
        name,
    )
    shot.verdicts = {(p, r, i): (s, e) for p, r, i, s, e in verdicts}
    shot.replies = {(p, r): (s, text) for p, r, s, text in replies}
    shot.duplicates = len(verdicts) - len(shot.verdicts) + len(replies) - len(shot.replies)
    shot.score = query(db, "SELECT score FROM runs WHERE name = ?", name)[0][0]
    return shot


def rows_lost(base: Snapshot, got: Snapshot) -> int:
    """Rows of the uninterrupted run that are missing or different here."""
    return sum(got.verdicts.get(k) != v for k, v in base.verdicts.items()) + sum(
        got.replies.get(k) != v for k, v in base.replies.items()
    )


def wrong_verdicts(db: Path) -> tuple[int, int, int]:
    """(met or not met verdicts, of which "not met" the server said met, "met" it said not met)."""
    template = load_template("builtin")
    rows = query(
        db,
        "SELECT r.body, c.reply, v.criterion, v.points, v.status FROM verdicts v"
        " JOIN conversations c ON c.id = v.conversation_id JOIN records r ON r.id = c.record_id"
        " WHERE v.status IN ('met', 'not_met')",
    )
    wrong_not_met = wrong_met = 0
    for body, reply, criterion, points, status in rows:
        met = expected_verdict(grader_prompt(template, json.loads(body)["prompt"], reply, points, criterion))
        wrong_not_met += status == "not_met" and met
        wrong_met += status == "met" and not met
    return len(rows), wrong_not_met, wrong_met


def wait_for_answers(db: Path, at_least: int, process: subprocess.Popen, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if stored_answers(db) >= at_least:
            return True
        time.sleep(0.05)
    return False


def wait_for_own_answer(db: Path, since: float, process: subprocess.Popen, timeout: float = 120) -> bool:
    """Until an answer the process received is stored (not one of an earlier process it recovered)."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if received_and_stored(db, since, time.time()):
            return True
        time.sleep(0.05)
    return False


# ---- the trials -------------------------------------------------------------------------------


@dataclass
class Row:
    trial: str
    exits: str
    calls: int
    extra: int | None
    lost: int | None
    note: str


class Trials:
    def __init__(self, server: FakeServer, root: Path, data: Path, records: int, quick: bool) -> None:
        self.server, self.root, self.data, self.records, self.quick = server, root, data, records, quick
        self.rows: list[Row] = []
        self.base = Snapshot()
        self.base_calls = 0
        self.base_answers = 0
        self.base_multiplicity: Counter[tuple[str, str]] = Counter()  # answers of each request body

    def folder(self, name: str, **kwargs) -> Folder:
        self.server.control(**DEFAULT_CONFIG)
        self.server.control(**LATENCY)
        self.server.reset_stats()
        return Folder(self.root, name, self.server, self.data, **kwargs)

    def calls(self) -> int:
        return self.server.stats()["requests"]

    def report(self, row: Row, line: str) -> None:
        self.rows.append(row)
        print(f"{row.trial:<9} {line}", flush=True)

    def conclude(self, folder: Folder, trial: str, exits: str, note: str, line: str) -> None:
        """Report a trial of the baseline's sample, with its calls and rows against the baseline's."""
        lost, extra = rows_lost(self.base, snapshot(folder.db)), self.calls() - self.base_calls
        self.report(
            Row(trial, exits, self.calls(), extra, lost, note),
            f"{line}; {self.calls()} calls vs {self.base_calls}: {extra} extra; rows lost {lost}",
        )

    def baseline(self) -> None:
        folder = self.folder("baseline")
        written = folder.path / "server-written.jsonl"
        self.server.control(written_log=str(written))
        started = time.monotonic()
        done = folder.finish(folder.start_run(self.records))
        self.base_calls, self.base = self.calls(), snapshot(folder.db)
        self.base_multiplicity = Counter(request for request, _ in written_answers(written))
        self.base_answers = stored_answers(folder.db)
        self.report(
            Row("baseline", str(done.code), self.base_calls, 0, 0, f"{time.monotonic() - started:.0f} s"),
            f"exit {done.code}; {self.base_calls} calls in {time.monotonic() - started:.1f} s;"
            f" {len(self.base.replies)} replies, {len(self.base.verdicts)} verdicts, score {self.base.score}",
        )

    def kill(self, kills: int) -> None:
        folder = self.folder("kill")
        written = folder.path / "server-written.jsonl"
        self.server.control(written_log=str(written))
        rng = random.Random(11)
        made = processes = early = 0
        killed: list[Killed] = []
        while True:
            sent_before, started_at = self.calls(), time.time()
            process = folder.start("resume", RUN) if has_run(folder.db) else folder.start_run(self.records)
            processes += 1
            if made < kills:
                in_start_up = made % 3 == 2
                if in_start_up:  # opening, migrating, planning, claiming
                    time.sleep(rng.uniform(0.05, 0.8))
                else:  # at a random moment of its work, with calls in flight
                    wait_for_own_answer(folder.db, started_at, process)
                    time.sleep(rng.uniform(0.0, 0.6))
                if process.poll() is None:
                    # Stopped first, so that what it has not read of its sockets stays there to be
                    # counted: from then on it reads nothing, as if killed at that moment.
                    died_at, unread = stop_then_kill(process, self.server.port)
                    made += 1
                    early += in_start_up
                    time.sleep(0.05)  # let the server see the dropped connections
                    sent = self.calls() - sent_before
                    stored = received_and_stored(folder.db, started_at, died_at)
                    killed.append(Killed(started_at, died_at, sent, stored, unread))
                    continue
            done = folder.finish(process)
            break
        got = snapshot(folder.db)
        gap = kill_gap(killed, written_answers(written), self.base_multiplicity)
        extra = self.calls() - self.base_calls
        buffered = "?" if gap.unread is None else str(gap.unread)
        allowed = gap.in_flight + (gap.unread or 0)
        self.conclude(
            folder,
            "kill",
            f"{made} kills, last {done.code}",
            f"{got.duplicates} duplicates; in flight {gap.in_flight} + in a socket buffer {buffered};"
            f" answered not stored {gap.not_stored}; asked again {extra}",
            f"{made} SIGKILLs ({early} in start-up) over {processes} processes, last exit {done.code};"
            f" duplicate rows {got.duplicates}; same score {got.score == self.base.score};"
            f" at the kills, sent and not yet committed {gap.sent - gap.committed} = answered (last byte written)"
            f" but not stored {gap.not_stored} + truly in flight (no answer written yet) {gap.in_flight};"
            f" answers in a socket buffer at the kills {buffered}; calls asked again {extra}, of them answered"
            f" before the kill {gap.answered_asked_again}; goal: asked again <= in flight + in a socket buffer"
            f" = {allowed}: {'met' if extra <= allowed else 'NOT MET'}",
        )

    def stop(self, patience: float | None, stopped_for: float) -> None:
        label = f"patience {patience:g} s" if patience else f"default patience ({DEFAULT_PATIENCE:g} s)"
        env = {"HBTUI_HEARTBEAT_PATIENCE": str(patience)} if patience else None
        folder = self.folder(f"stop-{patience or 'default'}", env=env)
        driver = folder.start_run(self.records)
        wait_for_answers(folder.db, self.base_answers * 3 // 10, driver)
        driver.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        # Once the heartbeat is stale: the moment a takeover would become tempting.
        stale_after = 2 * patience + 1 if patience else DEFAULT_PATIENCE + 2
        time.sleep(max(0.0, stale_after - (time.monotonic() - stopped_at)))
        resumed = folder.run("resume", RUN, timeout=300)
        calls_while_stopped = self.calls()
        time.sleep(max(0.0, stopped_for - (time.monotonic() - stopped_at)))
        driver.send_signal(signal.SIGCONT)
        done = folder.finish(driver)
        refused = resumed.code == 2 and "stopped (Ctrl-Z)" in resumed.err
        self.conclude(
            folder,
            "stop",
            f"resume {resumed.code}, driver {done.code}",
            f"{label}; refused {'yes' if refused else 'NO'}",
            f"{label}, stopped {stopped_for:g} s: resume refused {'yes' if refused else 'NO'}"
            f" (exit {resumed.code}: {resumed.err.strip()[:140]!r}); {calls_while_stopped} calls sent when"
            f" the resume ended; driver exit {done.code}",
        )

    def takeover(self) -> None:
        folder = self.folder("takeover")
        driver = folder.start_run(self.records)
        wait_for_answers(folder.db, self.base_answers * 3 // 10, driver)
        retries = 0
        while True:
            driver.send_signal(signal.SIGSTOP)
            # Another host takes a run over once its heartbeat is stale; by then the driver no
            # longer trusts its lease without a write (6 s).
            time.sleep(7)
            try:
                query_write(
                    folder.db,
                    "UPDATE runs SET owner = 'elsewhere:77:1', lease = 'theirs', heartbeat_at = 0",
                    timeout=0.5,
                )
                break
            except sqlite3.OperationalError:
                # Stopped in the middle of a commit, holding the write lock: let it finish, stop again.
                retries += 1
                driver.send_signal(signal.SIGCONT)
                time.sleep(0.05)
        at_continue = self.calls()
        driver.send_signal(signal.SIGCONT)
        done = folder.finish(driver)
        after_continue = self.calls() - at_continue
        said = "taken over" in done.err
        query_write(folder.db, "UPDATE runs SET owner = NULL, heartbeat_at = 0")
        resumed = folder.run("resume", RUN)
        self.conclude(
            folder,
            "takeover",
            f"driver {done.code}, resume {resumed.code}",
            f"{after_continue} calls after SIGCONT",
            f"driver exit {done.code} (says taken over: {'yes' if said else 'NO'};"
            f" {done.err.strip()[:120]!r}); calls after SIGCONT {after_continue}; resume exit"
            f" {resumed.code}; lock retries {retries}",
        )

    def lock(self, hold: float, busy_timeout: float | None) -> None:
        env = {"HBTUI_BUSY_TIMEOUT": str(busy_timeout)} if busy_timeout else None
        folder = self.folder("lock", env=env)
        driver = folder.start_run(self.records)
        wait_for_answers(folder.db, self.base_answers * 3 // 10, driver)
        holder = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, str(folder.db), str(hold)], stdout=subprocess.PIPE, text=True
        )
        held = holder.stdout.readline().strip() == "held"
        calls_at_lock = self.calls()
        holder.wait(hold + 60)
        calls_during_lock = self.calls() - calls_at_lock
        holder.stdout.close()
        done = folder.finish(driver)
        timeout_label = f"{busy_timeout:g}" if busy_timeout else "10 (default)"
        said = "locked" in done.out + done.err
        self.conclude(
            folder,
            "lock",
            str(done.code),
            f"held {hold:g} s",
            f"write lock held {hold:g} s (busy timeout {timeout_label} s; held: {'yes' if held else 'NO'}):"
            f" exit {done.code}; said locked: {'yes' if said else 'no'}; {calls_during_lock} calls while"
            f" held",
        )

    def faults(self) -> None:
        folder = self.folder("faults", env_lines=("MAX_ATTEMPTS=2", "GRADER_PARSE_ATTEMPTS=2"))
        self.server.control(faults=STORM, retry_after=0.01, seed=3)
        steps = [("run", folder.finish(folder.start_run(self.records)).code, run_status(folder.db))]
        while steps[-1][1] not in (0, 2) and len(steps) < 10:
            steps.append(("regrade-errors", folder.run("regrade-errors", RUN).code, run_status(folder.db)))
        injected = sum(self.server.stats()["faults"].values())
        graded, wrong_not_met, wrong_met = wrong_verdicts(folder.db)
        sequence = " -> ".join(f"{command} {code} ({status})" for command, code, status in steps)
        beyond = self.calls() - self.base_calls - injected
        self.conclude(
            folder,
            "faults",
            ",".join(str(code) for _, code, _ in steps),
            f"{wrong_not_met} wrong 'not met'; {injected} faults",
            f"{sequence}; of {graded} verdicts {wrong_not_met} 'not met' and {wrong_met} 'met' differ from"
            f" the server's; {injected} faults injected, calls beyond one retry per fault {beyond}",
        )

    def keys(self) -> list[tuple[str, str]]:
        folder = self.folder("keys")
        limit = min(self.records, 10)
        exports = folder.path / "exports"
        exports.mkdir()
        search = KeySearch(self.root)
        echoes = [  # (run name, echo_auth, its status, which calls, flags)
            ("full401", "full", 401, "grader", ()),
            ("masked401", "masked", 401, "all", ()),
            ("headers500", "headers", 500, "generation", ("--max-attempts", "2")),
            ("masked500", "masked", 500, "generation", ("--max-attempts", "2")),
            ("full400", "full", 400, "grader", ()),
        ]
        runs, regrades = [], []
        watcher = None
        for name, form, status, calls, flags in echoes:
            self.server.control(echo_auth=form, echo_auth_status=status, echo_auth_calls=calls)
            runs.append(folder.finish(folder.start_run(limit, name, *flags)).code)
            search.files()  # now, before a later command clears the stored errors
            if watcher is None and folder.db.exists():
                # An open connection keeps the WAL on disk between commands, so it is searched too.
                watcher = sqlite3.connect(folder.db)
                watcher.execute("SELECT count(*) FROM runs").fetchall()  # a read maps the WAL's index
        self.server.control(echo_auth=None)
        for name, *_ in echoes:
            regrades.append(folder.run("regrade-errors", name).code)
            search.files()
        for name, *_ in echoes:
            folder.run("show", name)
            folder.run("show", name, "--json")
            folder.run("export", name, "--format", "jsonl", "--out", str(exports / f"{name}.jsonl"))
            folder.run("export", name, "--format", "csv", "--out", str(exports / f"{name}.csv"))
        folder.run("runs")
        search.files()
        if watcher is not None:
            watcher.close()
        exits = f"run {','.join(map(str, runs))}; regrade {','.join(map(str, regrades))}"
        listing = ", ".join(f"{where} ({what})" for where, what in sorted(search.found)) or "0"
        self.report(
            Row("keys", exits, self.calls(), None, None, f"keys found in files: {len(search.found)}"),
            f"runs {', '.join(f'{e[0]} exit {c}' for e, c in zip(echoes, runs))}; regrade-errors with the"
            f" echo off: exits {','.join(map(str, regrades))}; searched {len(search.searched)} files"
            f" ({search.wals} of them WALs; every command's output among them) for the key, its last 12"
            f" characters and its masked echo; the search finds the key in the {search.controls} .env files"
            f" it skips; keys found in files: {listing}",
        )
        return sorted(search.found)


class KeySearch:
    """Every file under ``root`` but the `.env` files that hold the key on purpose, searched for
    the key, its last 12 characters, and the masked form the test server echoes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        masked = KEY[:8] + "*" * (len(KEY) - 12) + KEY[-4:]
        self.needles = {"key": KEY.encode(), "last 12": KEY[-12:].encode(), "masked echo": masked.encode()}
        self.found: set[tuple[str, str]] = set()
        self.searched: set[str] = set()
        self.controls = 0

    @property
    def wals(self) -> int:
        return sum(name.endswith("-wal") for name in self.searched)

    def files(self) -> None:
        self.controls = 0
        for path in self.root.rglob("*"):
            try:
                content = path.read_bytes() if path.is_file() else None
            except OSError:
                continue  # removed meanwhile (a WAL at close)
            if content is None:
                continue
            if path.name == ".env":
                self.controls += KEY.encode() in content
                continue
            where = str(path.relative_to(self.root))
            self.searched.add(where)
            self.found |= {(where, what) for what, needle in self.needles.items() if needle in content}


def query_write(db: Path, sql: str, timeout: float = 30) -> None:
    with contextlib.closing(sqlite3.connect(db, timeout=timeout)) as conn, conn:
        conn.execute(sql)


def tracebacks(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("logs/*")
        if p.is_file() and "Traceback" in p.read_text(errors="replace")
    )


def synthesize(path: Path, count: int) -> Path:
    """HealthBench-shaped records, for a checkout without ../shared."""
    rng = random.Random(SEED)
    lines = []
    for i in range(count):
        criteria = [
            {
                "criterion": f"Criterion {k} of question {i}",
                "points": rng.choice([-5, 3, 5, 7, 10]),
                "tags": ["axis:accuracy", "level:example"],
            }
            for k in range(rng.randint(3, 15))
        ]
        lines.append(
            json.dumps(
                {
                    "prompt_id": f"synthetic-{i}",
                    "example_tags": ["theme:hedging"],
                    "ideal_completions_data": None,
                    "rubrics": criteria,
                    "prompt": [{"role": "user", "content": f"Question {i}: I feel dizzy, why?"}],
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def print_summary(rows: list[Row], leaks: list, crashed: list[str]) -> None:
    print("\nsummary")
    header = ("trial", "exit codes", "calls", "extra", "rows lost", "note")
    table = [header] + [
        (
            r.trial,
            r.exits,
            str(r.calls),
            "-" if r.extra is None else str(r.extra),
            "-" if r.lost is None else str(r.lost),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    for line in table:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1])
    print(
        f"  keys found in files: {len(leaks)}; outputs with a traceback: {len(crashed)}"
        + (f" ({', '.join(crashed)})" if crashed else "")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, help="records per run (default 60, 20 with --quick)")
    parser.add_argument(
        "--quick", action="store_true", help="fewer records and kills, shorter stops and locks (about a minute)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print where it is")
    parser.add_argument("--kills", type=int, help="SIGKILLs of the kill trial (default 10, 4 with --quick)")
    parser.add_argument(
        "--only",
        choices=("kill", "stop", "takeover", "lock", "faults", "keys"),
        action="append",
        help="run only this trial (again for more); the baseline always runs",
    )
    args = parser.parse_args()
    chosen = set(args.only or ("kill", "stop", "takeover", "lock", "faults", "keys"))
    records = args.records or (20 if args.quick else 60)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="hbtui-trials-")
    root = Path(tmp)
    data = MAIN_SUBSET if MAIN_SUBSET.exists() else synthesize(root / "records.jsonl", records)
    print(
        f"records: {records} of {data if data == MAIN_SUBSET else 'synthetic records (../shared is absent)'},"
        f" seed {SEED}; latency {LATENCY['latency_ms']}-{LATENCY['latency_ms'] + LATENCY['latency_jitter_ms']}"
        f" ms; concurrency 8; folder {root}",
        flush=True,
    )
    with FakeServer(api_key=KEY) as server:
        trials = Trials(server, root, data, records, args.quick)
        trials.baseline()
        if "kill" in chosen:
            trials.kill(args.kills or (4 if args.quick else 10))
        if "stop" in chosen:
            trials.stop(2, 6 if args.quick else 20)
            if not args.quick:
                trials.stop(None, 20)
        if "takeover" in chosen:
            trials.takeover()
        if "lock" in chosen:
            if args.quick:
                trials.lock(4, 2)
            else:
                trials.lock(14, None)
        if "faults" in chosen:
            trials.faults()
        leaks = trials.keys() if "keys" in chosen else []
    crashed = tracebacks(root)
    print_summary(trials.rows, leaks, crashed)
    print(f"total {time.monotonic() - started:.0f} s")
    if args.keep:
        print(f"kept {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
