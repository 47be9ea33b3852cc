"""SIGKILL at random moments, resume each time: the same result as an uninterrupted run, no
duplicate or lost rows, and no more calls repeated than were in flight at the kills (sent, their
answer not yet written whole by the server) or still unread in the killed process's sockets:
an answer it had received waited in its journal for the resume."""

import asyncio
import math
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from hbtui.engine.result_writer import COMMIT_INTERVAL
from tests.conftest import MAIN_SUBSET, needs_shared, run_engine, settings_for
from tests.support.kills import Killed, kill_gap, stop_then_kill, written_answers

KILLS = 20
LIMIT, SEED = 150, 5


def received_and_stored(db, since: float, until: float) -> int:
    """Answers received between the two times (as the client stored them) and in the database:
    a process's own, not those of an earlier one that it recovered from the journal."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute(
                "SELECT (SELECT count(*) FROM verdicts WHERE status != 'pending' AND from_cache = 0"
                " AND graded_at BETWEEN ?1 AND ?2) + (SELECT count(*) FROM conversations"
                " WHERE status != 'pending' AND generated_at BETWEEN ?1 AND ?2)",
                (since, until),
            ).fetchone()[0]
    except sqlite3.OperationalError:  # killed before its schema was written
        return 0


def has_run(db) -> bool:
    """Whether the run was planned: a process killed earlier may have left the file without it."""
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
    except sqlite3.OperationalError:  # its schema not written yet
        return False


def snapshot(db):
    with sqlite3.connect(db) as conn:
        verdicts = conn.execute(
            "SELECT c.prompt_id, c.repeat, v.idx, v.status, v.explanation FROM verdicts v"
            " JOIN conversations c ON c.id = v.conversation_id ORDER BY 1, 2, 3"
        ).fetchall()
        replies = conn.execute("SELECT prompt_id, repeat, status, reply FROM conversations ORDER BY 1, 2").fetchall()
        score = conn.execute("SELECT score FROM runs").fetchone()[0]
    return verdicts, replies, score


@needs_shared
@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume(server, tmp_path):
    server.control(latency_ms=80, latency_jitter_ms=40)  # enough work to outlast 20 kills
    baseline_db, baseline_log, written_log = tmp_path / "baseline.sqlite", tmp_path / "b.jsonl", tmp_path / "w.jsonl"
    server.control(written_log=str(baseline_log))
    settings = settings_for(server, baseline_db, concurrency=8)
    baseline_started = time.monotonic()
    asyncio.run(run_engine(settings, MAIN_SUBSET, limit=LIMIT, seed=SEED))
    answers_a_second = server.stats()["requests"] / (time.monotonic() - baseline_started)
    baseline_calls = server.stats()["requests"]
    server.reset_stats()
    server.control(written_log=str(written_log))

    db = tmp_path / "crash.sqlite"
    env = dict(
        os.environ,
        BASE_URL=server.base_url,
        MODEL_TEST="test-model",
        MODEL_GRADER="grader-model",
        CONCURRENCY="8",
        HBTUI_DB=str(db),
    )
    start = [
        sys.executable,
        "-m",
        "hbtui",
        "run",
        "--data",
        str(MAIN_SUBSET),
        "--limit",
        str(LIMIT),
        "--seed",
        str(SEED),
        "--name",
        "crash",
    ]
    resume = [sys.executable, "-m", "hbtui", "resume", "crash"]
    rng = random.Random(11)
    kills, in_flight_at_kills, commands = 0, 0, 0
    lost_per_kill = []  # calls a killed process sent whose answers it had not committed
    killed = []
    while True:
        sent_before, started_at = server.stats()["requests"], time.time()
        planned = has_run(db)
        process = subprocess.Popen(
            resume if planned else start, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        commands += 1
        if kills < KILLS:
            time.sleep(rng.uniform(0.6, 1.6))
        if process.poll() is None and kills < KILLS:
            in_flight_at_kills += server.stats()["in_flight"]
            died_at, unread = stop_then_kill(process, server.port)
            kills += 1
            time.sleep(0.05)  # let the server see the dropped connections
            sent, stored = server.stats()["requests"] - sent_before, received_and_stored(db, started_at, died_at)
            lost_per_kill.append(sent - stored)
            killed.append(Killed(started_at, died_at, sent, stored, unread))
            with sqlite3.connect(db) as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            continue
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
        break
    assert kills == KILLS
    total_calls = server.stats()["requests"]
    extra = total_calls - baseline_calls

    verdicts, replies, score = snapshot(db)
    base_verdicts, base_replies, base_score = snapshot(baseline_db)
    assert len(verdicts) == len(set((p, r, i) for p, r, i, *_ in verdicts))  # no duplicate rows
    assert verdicts == base_verdicts and replies == base_replies and score == base_score
    gap = kill_gap(killed, written_answers(written_log), Counter(r for r, _ in written_answers(baseline_log)))
    print(
        f"\n{kills} kills over {commands} processes; {baseline_calls} calls uninterrupted, {total_calls} with kills:"
        f" {extra} repeated; sent and not committed at the kills {sum(lost_per_kill)} (at most"
        f" {max(lost_per_kill)} at one kill) = answered but not stored {gap.not_stored} + truly in flight"
        f" {gap.in_flight}; unread in a socket at the kills {gap.unread}; of the repeated, answered before the"
        f" kill {gap.answered_asked_again}; the server was still answering {in_flight_at_kills}"
    )
    # Only the calls in flight at the kills (no answer written yet), and the answers still unread
    # in the killed process's sockets, were asked again: an answer it had read waited in its
    # journal. (The slack: an answer read from the socket, not yet handed to the journal; without
    # the journal, 22 more than in flight and unread were asked again.)
    assert extra <= gap.in_flight + (gap.unread or 0) + kills // 4
    # Sent and not committed at a kill: the 8 slots, the answers of one commit interval (which the
    # journal keeps), and the 8 of the commit under way.
    assert max(lost_per_kill) <= 2 * 8 + math.ceil(answers_a_second * COMMIT_INTERVAL), answers_a_second
