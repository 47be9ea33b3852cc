"""The answer journal (issue 23, item 6): an answer received is on disk before it waits for the
group commit, so a SIGKILL between the two does not make the resume pay for it again.

A real `hbtui run` is brought to that moment deterministically: HBTUI_COMMIT_INTERVAL (a knob
for tests) holds every commit after the first back, so the answers it receives pile up
uncommitted until its gate stops new calls (past the answers it may hold unwritten). The test
server logs every answer whose last byte it wrote: what was paid for, by request body.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hbtui.engine.result_writer import ResultWriter
from hbtui.store import RunTakenOver, Store, VerdictResult
from hbtui.store.answer_journal import AnswerJournal, journal_paths, read_journal
from tests.cli.test_cli import clean_env, hbtui
from tests.conftest import make_record, write_jsonl
from tests.engine.test_run_control import wait_until

CONVERSATIONS = 30  # 4 criteria each: 150 calls, past twice the 32 answers a run holds unwritten
# (the first commit, which is not held back, may take up to 32 of them when storing the plan is slow)
HELD_BACK = {"HBTUI_COMMIT_INTERVAL": "600"}


def records() -> list[dict]:
    return [
        make_record(
            f"journal-{n}",
            [
                (f"[[{'MET' if (n + k) % 3 else 'NOT_MET'}]] criterion {k} of {n}", 2 + k, ["axis:accuracy"])
                for k in range(4)
            ],
            user=f"Question {n}: is this rash serious?",
        )
        for n in range(CONVERSATIONS)
    ]


def user_folder(path: Path, server) -> Path:
    path.mkdir()
    (path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=2\n"
        "GRADER_TEMPLATE=builtin\n"
    )
    write_jsonl(path / "data.jsonl", records())
    return path


def database(folder: Path) -> Path:
    return folder / "runs" / "hbtui.sqlite"


def stored_answers(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute(
                "SELECT (SELECT count(*) FROM verdicts WHERE status != 'pending')"
                " + (SELECT count(*) FROM conversations WHERE status != 'pending')"
            ).fetchone()[0]
    except sqlite3.OperationalError:  # the file made, its tables not yet
        return 0


def written(log: Path) -> Counter:
    """How many answers the server wrote whole for each request body, by (kind, sha256)."""
    if not log.exists():
        return Counter()
    return Counter((entry["kind"], entry["sha256"]) for entry in map(json.loads, log.read_text().splitlines()))


def snapshot(db: Path):
    with sqlite3.connect(db) as conn:
        verdicts = conn.execute(
            "SELECT c.prompt_id, v.idx, v.status, v.explanation, v.attempts FROM verdicts v"
            " JOIN conversations c ON c.id = v.conversation_id ORDER BY 1, 2"
        ).fetchall()
        replies = conn.execute("SELECT prompt_id, status, reply, attempts FROM conversations ORDER BY 1").fetchall()
        score = conn.execute("SELECT status, score FROM runs").fetchone()
    return verdicts, replies, score


@pytest.fixture
def baseline(tmp_path, server):
    """The run uninterrupted, its calls counted; then the server logs what it writes."""
    folder = user_folder(tmp_path / "baseline", server)
    hbtui("run", "--data", "data.jsonl", "--name", "journaled", cwd=folder, check=True)
    calls = server.stats()["requests"]
    server.reset_stats()
    log = tmp_path / "written.jsonl"
    server.control(written_log=str(log))
    return database(folder), calls, log


@contextmanager
def held_back_run(folder: Path, server, log: Path, *, frozen: bool = False) -> Iterator[subprocess.Popen]:
    """`hbtui run` with its commits held back, once it sends nothing more (its gate closed): of
    the answers it received, none since its first commit is in the database."""
    driver = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", "--data", "data.jsonl", "--name", "journaled"],
        cwd=folder,
        env=clean_env(HELD_BACK),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = database(folder)

    def uncommitted() -> int | None:
        """Answers the server wrote and the database lacks, once nothing is in flight."""
        answered, stats = sum(written(log).values()), server.stats()
        if stats["in_flight"] or stats["requests"] != answered:
            return None
        return answered - stored_answers(db)

    # Settled: answers held, nothing in flight, and no more sent for a while. Where it stops
    # depends on the machine's speed: at the 32 answers it may hold unwritten, or earlier, when
    # no commit has confirmed its lease for a few seconds (both close its gate).
    seen: dict = {"held": None, "since": time.monotonic()}

    def settled() -> bool:
        if driver.poll() is not None:
            raise AssertionError(
                f"the run ended (exit {driver.returncode}) before it settled: {driver.stderr.read() if driver.stderr else ''}"
            )
        held = uncommitted()
        if held != seen["held"]:
            seen.update(held=held, since=time.monotonic())
            return False
        return bool(held) and time.monotonic() - seen["since"] >= 0.5

    try:
        for _ in range(5):
            wait_until(settled, "the run holding answers uncommitted, its gate closed", timeout=120.0)
            if not frozen:
                break
            # Frozen, it sends and commits nothing more; settled still (no call slipped out between
            # the look and the freeze), the test gets it stopped, to measure and kill.
            os.kill(driver.pid, signal.SIGSTOP)
            time.sleep(0.2)
            if uncommitted() == seen["held"]:
                break
            os.kill(driver.pid, signal.SIGCONT)
            seen.update(held=None, since=time.monotonic())
        else:
            raise AssertionError("the run never stayed settled long enough to be frozen")
        assert driver.poll() is None
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


def test_answers_received_before_a_sigkill_are_stored_by_the_resume_not_asked_again(tmp_path, server, baseline):
    baseline_db, baseline_calls, log = baseline
    folder = user_folder(tmp_path / "killed", server)
    db = database(folder)
    with held_back_run(folder, server, log, frozen=True) as driver:
        held = sum(written(log).values()) - stored_answers(db)  # received, read, not committed
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    assert sum(written(log).values()) - stored_answers(db) == held > 0  # none of them committed
    # A record the kill cut short in the middle of its write: ignored.
    with open(journal_paths(db, 1)[0], "ab") as journal:
        journal.write(b'0123abcd {"run":1,"created":')

    resumed = hbtui("resume", "journaled", cwd=folder)

    assert resumed.returncode == 0, resumed.stderr
    # Not one of the answers the killed process held was asked again: the same calls as the
    # uninterrupted run, each request answered once.
    assert server.stats()["requests"] == baseline_calls
    assert sum(written(log).values()) == baseline_calls and max(written(log).values()) == 1
    assert snapshot(db) == snapshot(baseline_db)
    with sqlite3.connect(db) as conn:
        noted = {message for (message,) in conn.execute("SELECT message FROM run_log WHERE message LIKE '%journal%'")}
    assert noted == {
        f"journal: {held} answers received before the stop stored, not asked again",
        "1 lines of the answer journal cut short (by a kill) or damaged: ignored",
    }
    assert not any(path.exists() for path in journal_paths(db, 1))  # the run finished: nothing to hold


def test_the_journal_is_owner_only_and_a_resume_without_the_lease_leaves_it_alone(tmp_path, server, baseline):
    _, _, log = baseline
    folder = user_folder(tmp_path / "driven", server)
    db = database(folder)
    with held_back_run(folder, server, log):
        paths = journal_paths(db, 1)
        assert [stat.S_IMODE(path.stat().st_mode) for path in paths] == [0o600, 0o600]
        assert not any(path.name.endswith(("-journal", "-wal", "-shm")) for path in paths)
        contents, stored = [path.read_bytes() for path in paths], stored_answers(db)

        second = hbtui("resume", "journaled", cwd=folder, env_extra=HELD_BACK)

        assert second.returncode == 2 and "is being driven by process" in second.stderr, second.stderr
        assert [path.read_bytes() for path in paths] == contents
        assert stored_answers(db) == stored


def test_delete_removes_the_journal_of_a_killed_run(tmp_path, server, baseline):
    _, _, log = baseline
    folder = user_folder(tmp_path / "deleted", server)
    db = database(folder)
    with held_back_run(folder, server, log) as driver:
        driver.kill()
        driver.wait()
    assert all(path.exists() for path in journal_paths(db, 1))

    deleted = hbtui("delete", "journaled", "--yes", "--folder", cwd=folder)

    assert deleted.returncode == 0, deleted.stderr
    assert not any(path.exists() for path in journal_paths(db, 1))


def verdict(idx: int, at: float, explanation: str = "right") -> VerdictResult:
    return VerdictResult("met", 1, idx, None, explanation, attempts=1, graded_at=at)


def test_a_torn_or_damaged_record_and_another_runs_are_ignored(tmp_path):
    db = tmp_path / "runs.sqlite"
    left_open = journal_paths(db, 1)[0]
    left_open.write_text("")
    left_open.chmod(0o644)  # a file readable by others where the journal goes: replaced, not reused
    journal = AnswerJournal(db, 1, created_at=100.0, lease="ours")
    for idx in range(3):
        journal.append(verdict(idx, 200.0 + idx))
    journal.close(remove=False)
    other_run = AnswerJournal(tmp_path / "other.sqlite", 1, created_at=99.0, lease="theirs")
    other_run.append(verdict(9, 300.0))
    other_run.close(remove=False)
    path = journal_paths(db, 1)[0]
    lines = path.read_bytes().splitlines(keepends=True)
    damaged = lines[1].replace(b"right", b"wrong")  # its checksum no longer matches
    # A record of a run of the same id created before (deleted since), then one cut short.
    foreign = journal_paths(tmp_path / "other.sqlite", 1)[0].read_bytes()
    path.write_bytes(lines[0] + damaged + lines[2] + foreign + lines[2][:20])

    found = read_journal(db, 1, created_at=100.0)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [(v.idx, v.explanation) for v in found.verdicts] == [(0, "right"), (2, "right")]
    assert found.ignored == 2 and found.replies == []


async def a_run_of_one_conversation(db: Path):
    from hbtui.store import PlannedConversation
    from hbtui.store.owners import this_owner

    store = await Store.open(db)
    run_id = await store.create_run(
        name="one",
        dataset_name="d",
        dataset_path=None,
        dataset_sha256="0",
        model_test="m",
        model_grader="g",
        settings={},
        plan={},
        conversations=[
            PlannedConversation(0, 0, "p", '{"prompt": [], "rubrics": []}', "0", None, (), "", [("c", 1.0, [])] * 2)
        ],
    )
    lease = await store.claim_run(run_id, this_owner())
    return store, await store.get_run(run_id), lease


def verdict_rows(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status, attempts FROM verdicts ORDER BY idx").fetchall()


def test_only_the_lease_holder_stores_the_journal_and_only_what_the_database_lacks(tmp_path):
    db = tmp_path / "runs.sqlite"

    async def go():
        store, run, lease = await a_run_of_one_conversation(db)
        async with store:
            journal = AnswerJournal(db, run.id, run.created_at, lease)
            journal.append(verdict(0, 10.0))
            journal.append(verdict(1, 11.0))
            journal.close(remove=False)
            # Verdict 1 was committed before the kill, then put back to pending (a resume's
            # retry keeps its time): the journal's copy of it is not stored again.
            with sqlite3.connect(db) as conn:
                conn.execute("UPDATE verdicts SET status = 'pending', attempts = 1, graded_at = 11.0 WHERE idx = 1")
            writer = ResultWriter(
                store, run.id, patience=5, max_unwritten=32, on_written=lambda: None, on_warning=print
            )
            writer.lease = "a lease the run no longer holds"
            with pytest.raises(RunTakenOver):
                await writer.recover_journal(run.created_at)
            without_lease = verdict_rows(db), read_journal(db, run.id, run.created_at)
            writer.lease = lease
            stored = await writer.recover_journal(run.created_at)
            return without_lease, stored, run

    (rows_before, untouched), stored, run = asyncio.run(go())
    assert rows_before == [("pending", 0), ("pending", 1)] and len(untouched.verdicts) == 2  # nothing stored or dropped
    assert stored == 1 and verdict_rows(db) == [("met", 1), ("pending", 1)]
    assert read_journal(db, run.id, run.created_at).verdicts == []  # what it held is stored: it starts anew


def test_the_journal_holds_only_what_is_not_yet_committed(tmp_path):
    async def go():
        store, run, lease = await a_run_of_one_conversation(tmp_path / "runs.sqlite")
        async with store:
            writer = ResultWriter(
                store, run.id, patience=5, max_unwritten=32, on_written=lambda: None, on_warning=print
            )
            writer.lease = lease
            writer.start_journal(run.created_at)
            paths = journal_paths(store.path, run.id)
            writing = asyncio.create_task(writer.run())
            writer.put_answer(verdict(0, 10.0))
            held_at_once = sum(path.stat().st_size for path in paths)
            while writer.committed < writer.queued:
                await asyncio.sleep(0.01)
            held_once_committed = sum(path.stat().st_size for path in paths)
            writer.put_answer(verdict(1, 11.0))
            await writer.close()
            await writing
            return held_at_once, held_once_committed, [path.exists() for path in paths]

    held_at_once, held_once_committed, left = asyncio.run(go())
    assert held_at_once > 0 and held_once_committed == 0
    assert left == [False, False]  # the last commit done: the journal goes
