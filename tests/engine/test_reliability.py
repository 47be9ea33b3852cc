"""Nothing paid twice, nothing mislabelled: a driver taken over, a stopped driver, a long lock,
an endpoint that goes away mid-run, runs with gaps, resume flags that would relabel a run, and
one way of counting progress. Real server process, real SQLite files, real subprocesses."""

import asyncio
import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hbtui import cli
from hbtui.core.dataset import load_jsonl
from hbtui.core.events import RunStarted
from hbtui.render.printer import ProgressPrinter
from hbtui.services import Engine, plan_run
from hbtui.store import RunBusy, RunTakenOver, Store
from hbtui.tui.monitor_data import RunCounters, view_from_store
from tests.conftest import make_record, run_engine, settings_for, user_folder, write_jsonl
from tests.support.server_process import FakeServer


def many_records(path: Path, n: int, criteria: int = 3) -> Path:
    return write_jsonl(
        path,
        [
            make_record(
                f"r{i}",
                [(f"criterion {k} of {i}", 5 - k, ["axis:accuracy"]) for k in range(criteria)],
                user=f"question number {i}",
            )
            for i in range(n)
        ],
    )


def stored_answers(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM verdicts WHERE status != 'pending')"
            " + (SELECT count(*) FROM conversations WHERE status != 'pending')"
        ).fetchone()[0]


def wait_for_answers(db: Path, at_least: int, process: subprocess.Popen) -> None:
    """Until the run ``process`` drives has stored this many answers (the database may not exist yet)."""
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        try:
            if stored_answers(db) >= at_least:
                return
        except sqlite3.Error:
            pass  # not created yet
        time.sleep(0.05)


class OnStart:
    """Runs ``action`` (a coroutine function) once the engine has started its work."""

    def __init__(self, action):
        self.action = action

    def on_event(self, event):
        if isinstance(event, RunStarted):
            self.task = asyncio.ensure_future(self.action())


# ---- 1. fencing: a driver whose run was taken over stops and writes nothing more ---------------


def test_a_driver_taken_over_stops_at_its_next_write_and_leaves_the_run_to_its_new_owner(server, tmp_path, monkeypatch):
    import hbtui.store.writes as writes

    monkeypatch.setattr(writes, "HEARTBEAT_STALE_SECONDS", 0.0)  # another host's takeover is allowed at once
    data = many_records(tmp_path / "data.jsonl", 40)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db, concurrency=4)
    server.control(latency_ms=30)
    at_takeover = {}

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(data), name="fenced")

            async def take_over():
                await asyncio.sleep(0.5)
                # Another host's process (its heartbeat rule allowed it) takes the run over.
                async with await Store.open(db) as other:
                    at_takeover["lease"] = await other.claim_run(run_id, "elsewhere:4242:1")
                at_takeover["stored"] = stored_answers(db)
                at_takeover["requests"] = server.stats()["requests"]

            write_batch = store.write_batch

            async def watched_write_batch(*args, **kwargs):
                # When the driver learns of the takeover, and whether a write succeeded before it.
                after_takeover = "lease" in at_takeover
                try:
                    await write_batch(*args, **kwargs)
                except RunTakenOver:
                    at_refusal.setdefault("requests", server.stats()["requests"])
                    raise
                if after_takeover:
                    at_takeover["writes since"] = at_takeover.get("writes since", 0) + 1

            store.write_batch = watched_write_batch
            engine = Engine(store, await store.get_run(run_id), settings, [OnStart(take_over)], backoff_base=0.01)
            engine.owner = "farhost:99:1"  # seen from the other process, this driver is on another host
            return engine, await engine.execute()

    at_refusal = {}
    engine, status = asyncio.run(go())
    assert status == "taken over"
    assert "taken over by process elsewhere:4242" in engine.error
    # Nothing written after the takeover, and the run is left as its new owner made it.
    assert stored_answers(db) == at_takeover["stored"]
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status, owner, lease FROM runs").fetchone()
    assert row == ("running", "elsewhere:4242:1", at_takeover["lease"])
    # It learned of the takeover at its next write (none succeeded after it), and sent nothing
    # new from then on: at most the calls already on their way (both stages' limits) reached the
    # server. (Counted from the refusal, not the takeover: how many calls go out between the two
    # depends on how busy the machine is.)
    assert at_takeover.get("writes since", 0) == 0
    in_flight_at_most = settings.concurrency + settings.effective_grader_concurrency
    assert server.stats()["requests"] - at_refusal["requests"] <= in_flight_at_most


def lease_trusted_briefly(server, tmp_path, monkeypatch):
    """(data, database, settings) of a run whose driver trusts its lease 0.3 s without a write,
    so that a freeze of under a second outlasts it."""
    import hbtui.engine.result_writer as result_writer

    monkeypatch.setattr(result_writer, "LEASE_CONFIRM_SECONDS", 0.3)
    server.control(latency_ms=30)
    db = tmp_path / "db.sqlite"
    return many_records(tmp_path / "data.jsonl", 60), db, settings_for(server, db, concurrency=4)


def test_a_driver_frozen_past_its_lease_sends_nothing_when_it_wakes_and_was_taken_over(server, tmp_path, monkeypatch):
    """The process stopped (SIGSTOP, a suspended laptop) with calls queued for a slot: the answers
    that arrived meanwhile free slots as it wakes, and not one queued call may go out before a
    write has confirmed the lease (here, found gone)."""
    data, db, settings = lease_trusted_briefly(server, tmp_path, monkeypatch)
    at_wake = {}

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(data), name="frozen")

            async def freeze():
                await asyncio.sleep(0.4)
                while True:
                    # The whole event loop stands still, as the process does under SIGSTOP, while
                    # the calls in flight are answered and another host takes the run over.
                    time.sleep(0.8)
                    try:
                        with sqlite3.connect(db, timeout=0.1) as conn:
                            conn.execute("UPDATE runs SET owner = 'elsewhere:77:1', lease = 'theirs'")
                        break
                    except sqlite3.OperationalError:
                        await asyncio.sleep(0.01)  # frozen mid-commit: let it end, then again
                at_wake["requests"] = server.stats()["requests"]
                at_wake["stored"] = stored_answers(db)

            engine = Engine(store, await store.get_run(run_id), settings, [OnStart(freeze)], backoff_base=0.01)
            return await engine.execute()

    assert asyncio.run(go()) == "taken over"
    assert server.stats()["requests"] == at_wake["requests"]  # not one call once it woke
    assert stored_answers(db) == at_wake["stored"]


def test_a_driver_stopped_between_its_commit_and_hearing_of_it_takes_no_fresh_lease_from_it(
    server, tmp_path, monkeypatch
):
    """The commit is done (in SQLite's thread) when the process stops, before its loop hears of
    it; another host takes the run over. Waking, the driver must not count that commit as its
    lease confirmed now: not one call may follow."""
    data, db, settings = lease_trusted_briefly(server, tmp_path, monkeypatch)
    at_wake: dict = {}
    writes = 0
    write_batch = Store.write_batch

    async def written_then_stopped(self, batch, **fenced):
        nonlocal writes
        await write_batch(self, batch, **fenced)
        writes += 1
        if writes == 5:
            time.sleep(0.8)  # the whole process stands still, its commit done and not yet heard of
            with sqlite3.connect(db, timeout=5) as conn:
                conn.execute("UPDATE runs SET owner = 'elsewhere:77:1', lease = 'theirs'")
            at_wake.update(requests=server.stats()["requests"], stored=stored_answers(db))

    monkeypatch.setattr(Store, "write_batch", written_then_stopped)

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(data), name="late")
            return await Engine(store, await store.get_run(run_id), settings, [], backoff_base=0.01).execute()

    assert asyncio.run(go()) == "taken over"
    assert server.stats()["requests"] == at_wake["requests"]  # not one call once it woke
    assert stored_answers(db) == at_wake["stored"]


# ---- 1. a stopped driver on this host is alive: no takeover ------------------------------------


def _owner_of(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    start = stat[stat.rfind(")") + 2 :].split()[19]
    return f"{socket.gethostname()}:{pid}:{start}"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see a stopped process")
def test_a_stopped_driver_is_not_taken_over_and_the_refusal_says_how_to_go_on(tmp_path):
    from tests.support.synth import synthesize_run

    db = tmp_path / "db.sqlite"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:

        async def claim(owner_text, heartbeat_age):
            async with await Store.open(db) as store:
                run_id = (
                    (await store.list_runs())[0].id
                    if await store.list_runs()
                    else await synthesize_run(store, conversations=2, name="held")
                )
                await store.db.execute(
                    "UPDATE runs SET status = 'running', owner = ?, heartbeat_at = ?",
                    (owner_text, time.time() - heartbeat_age),
                )
                await store.db.commit()
                return await store.claim_run(run_id, "me:1:1")

        os.kill(sleeper.pid, signal.SIGSTOP)
        time.sleep(0.1)
        with pytest.raises(RunBusy) as stopped:
            asyncio.run(claim(_owner_of(sleeper.pid), heartbeat_age=600))  # silent for 10 minutes, yet alive
        message = str(stopped.value)
        assert f"process {socket.gethostname()}:{sleeper.pid}, which is stopped (Ctrl-Z)" in message
        assert "`fg` it" in message and f"kill {sleeper.pid}" in message and "\n" not in message

        os.kill(sleeper.pid, signal.SIGCONT)
        time.sleep(0.1)
        with pytest.raises(RunBusy, match="is being driven by process"):  # running, heartbeat stale: still its own
            asyncio.run(claim(_owner_of(sleeper.pid), heartbeat_age=600))
        # The same pid with another start time is another process: the driver is gone.
        assert asyncio.run(claim(f"{socket.gethostname()}:{sleeper.pid}:1", heartbeat_age=600))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert asyncio.run(claim(_owner_of(os.getpid()).replace(str(os.getpid()), str(sleeper.pid), 1), 0))


# ---- 1. a driver in another PID namespace or boot of this host name: only its heartbeat tells ---


@pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="needs /proc for the PID namespace")
def test_a_driver_of_another_pid_namespace_or_boot_is_taken_over_only_once_its_heartbeat_is_stale(tmp_path):
    # Containers that share a host name, or `docker exec`: the driver's pid is not this
    # namespace's. Its pid may be no process here (it counted as gone: taken over at once, 63
    # calls paid twice) or an unrelated live one (it counted as alive for ever).
    from hbtui.store import HEARTBEAT_STALE_SECONDS
    from hbtui.store.owners import this_space
    from tests.support.synth import synthesize_run

    db = tmp_path / "db.sqlite"
    namespace, boot = this_space()
    assert namespace is not None and boot is not None
    host, no_such_pid = socket.gethostname(), int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    live_pid, live_start = _owner_of(os.getpid()).rsplit(":", 2)[1:]
    elsewhere = {
        "another PID namespace": f"{host}/{int(namespace) + 1}/{boot}",
        "another boot": f"{host}/{namespace}/{boot[::-1]}",
    }

    async def claim(owner_text, heartbeat_age):
        async with await Store.open(db) as store:
            runs = await store.list_runs()
            run_id = runs[0].id if runs else await synthesize_run(store, conversations=2, name="held")
            await store.db.execute(
                "UPDATE runs SET status = 'running', owner = ?, lease = 'theirs', heartbeat_at = ?",
                (owner_text, time.time() - heartbeat_age),
            )
            await store.db.commit()
            shown = (await store.get_run(run_id)).shown_status()
            try:
                return shown, await store.claim_run(run_id, "me:1:1")
            except RunBusy as busy:
                return shown, str(busy)

    for where, space in elsewhere.items():
        for pid in (no_such_pid, f"{live_pid}:{live_start}"):
            shown, refusal = asyncio.run(claim(f"{space}:{pid}", heartbeat_age=1))
            assert shown == "running", (where, pid)
            assert refusal.startswith(f"run 1 is being driven by process {host}:{str(pid).split(':')[0]}, "), refusal
            assert "(heartbeat 1 s ago); watch it with hbtui monitor instead" in refusal
            assert ("in another PID namespace" if where == "another PID namespace" else "before a reboot") in refusal
            shown, lease = asyncio.run(claim(f"{space}:{pid}", heartbeat_age=HEARTBEAT_STALE_SECONDS + 5))
            assert shown == "interrupted", (where, pid)
            assert len(lease) == 32, lease  # taken over
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT owner FROM runs").fetchone() == ("me:1:1",)


# ---- 2. a write lock held longer than the busy timeout -----------------------------------------


def _hold_write_lock(db: Path, seconds: float, held: threading.Event, on_release=None) -> threading.Thread:
    """``on_release``: called as the lock is about to be let go (still held)."""

    def hold():
        conn = sqlite3.connect(db, timeout=30, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(seconds)
        if on_release is not None:
            on_release()
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def _run_under_a_lock(server, tmp_path, monkeypatch, lock_seconds, **settings_values):
    import hbtui.store as store_module

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_SECONDS", 0.2)  # the lock outlasts it many times over
    data = many_records(tmp_path / "data.jsonl", 40)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db, concurrency=4, **settings_values)
    server.control(latency_ms=60)
    seen = {}

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(data), name="locked")
            held = threading.Event()

            async def lock():
                await asyncio.sleep(0.3)

                # Counted as the lock is let go, in its own thread: read from this loop after a
                # sleep, a busy machine read it after the release.
                def count_at_release() -> None:
                    seen["requests_before_unlock"] = server.stats()["requests"]

                thread = seen["thread"] = _hold_write_lock(db, lock_seconds, held, count_at_release)
                await asyncio.to_thread(held.wait)
                seen["requests_at_lock"] = server.stats()["requests"]
                await asyncio.to_thread(thread.join)

            engine = Engine(store, await store.get_run(run_id), settings, [OnStart(lock)], backoff_base=0.01)
            status = await engine.execute()
            await asyncio.to_thread(seen["thread"].join)  # the other connection is done with the file
            return run_id, engine, status

    run_id, engine, status = asyncio.run(go())
    return db, run_id, engine, status, seen


def test_a_long_write_lock_loses_no_answer_and_pays_nothing_twice(server, tmp_path, monkeypatch):
    db, _run_id, engine, status, seen = _run_under_a_lock(server, tmp_path, monkeypatch, lock_seconds=3.0)
    assert status == "finished", engine.error
    # Every call once: 40 replies and 120 verdicts, none asked again.
    assert server.stats()["requests"] == 40 + 120
    # Back-pressure: while the lock held, no more calls went out than the unwritten allowance and
    # the calls already in flight.
    assert seen["requests_at_lock"] < 160 - (engine.max_unwritten + 2 * 4)  # enough left to be held back
    assert seen["requests_before_unlock"] - seen["requests_at_lock"] <= engine.max_unwritten + 2 * 4
    with sqlite3.connect(db) as conn:
        notes = [m for (m,) in conn.execute("SELECT message FROM run_log WHERE level = 'warning'")]
    assert any("database is locked by another connection" in note for note in notes)


def test_a_lock_past_its_patience_stops_the_run_saying_why_and_a_resume_completes_it(server, tmp_path, monkeypatch):
    db, run_id, engine, status, _ = _run_under_a_lock(
        server, tmp_path, monkeypatch, lock_seconds=3.0, db_write_patience=1.0
    )
    assert status == "failed"
    assert "stayed locked by another connection" in engine.error and "DB_WRITE_PATIENCE" in engine.error
    assert "answers received meanwhile could not be stored" in engine.error

    async def resume():
        async with await Store.open(db) as store:
            await store.db.execute("UPDATE runs SET heartbeat_at = 0, owner = NULL")  # as after the process exited
            await store.db.commit()
            return await Engine(
                store, await store.get_run(run_id), settings_for(server, db), backoff_base=0.01
            ).execute()

    assert asyncio.run(resume()) == "finished"


# ---- 6. an endpoint that goes away mid-run; runs with gaps are incomplete ----------------------


def test_an_endpoint_that_stops_answering_stops_the_run_resumable(tmp_path):
    data = many_records(tmp_path / "data.jsonl", 30)
    db = tmp_path / "db.sqlite"
    with FakeServer(config={"latency_ms": 50}) as first:
        settings = settings_for(first, db, concurrency=2, max_attempts=3, unreachable_patience=1.0)
        port = first.port

        async def go():
            async with await Store.open(db) as store:
                run_id = await plan_run(store, settings, load_jsonl(data), name="gone")

                async def kill_server():
                    await asyncio.sleep(1.0)
                    await asyncio.to_thread(first.stop)

                engine = Engine(store, await store.get_run(run_id), settings, [OnStart(kill_server)], backoff_base=0.3)
                return run_id, engine, await engine.execute()

        run_id, engine, status = asyncio.run(go())
    assert status == "failed" and "stopped answering" in engine.error and "UNREACHABLE_PATIENCE" in engine.error
    with sqlite3.connect(db) as conn:
        burnt = conn.execute("SELECT count(*) FROM conversations WHERE status = 'failed'").fetchone()[0]
        pending = conn.execute("SELECT count(*) FROM conversations WHERE status = 'pending'").fetchone()[0]
    # Stopped after about a second of failures, not after every conversation burnt its attempts.
    assert pending > 15 and burnt <= 4
    with FakeServer(port=port) as back:

        async def resume():
            async with await Store.open(db) as store:
                return await Engine(
                    store, await store.get_run(run_id), settings_for(back, db), backoff_base=0.01
                ).execute()

        assert asyncio.run(resume()) == "finished"


@pytest.fixture
def in_dir(tmp_path, monkeypatch, server):
    return user_folder(tmp_path, monkeypatch, server, "MAX_ATTEMPTS=1\n")


def test_a_run_with_replies_or_verdicts_missing_is_incomplete_and_regrade_errors_completes_it(in_dir, server, capsys):
    data = many_records(in_dir / "data.jsonl", 30)
    server.control(faults={"server_error": 0.3}, seed=4)
    assert cli.main(["run", "--data", str(data), "--name", "gappy"]) == cli.EXIT_INCOMPLETE
    err = capsys.readouterr().err
    line = [ln for ln in err.splitlines() if ln.startswith("run 1 incomplete")]
    assert len(line) == 1 and "hbtui regrade-errors 1" in line[0]
    with sqlite3.connect(in_dir / "runs" / "hbtui.sqlite") as conn:
        no_reply = conn.execute("SELECT count(*) FROM conversations WHERE status = 'failed'").fetchone()[0]
        unfinished = conn.execute(
            "SELECT count(DISTINCT conversation_id) FROM verdicts WHERE status = 'error'"
        ).fetchone()[0]
    assert no_reply > 0 and unfinished > 0  # both kinds of gap, or half the test asserts nothing
    assert f"{no_reply} conversations got no reply" in line[0] and f"{unfinished} have criteria" in line[0]

    assert cli.main(["show", "gappy", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"]["status"] == "incomplete"
    with sqlite3.connect(in_dir / "runs" / "hbtui.sqlite") as conn:  # the report's counts are the database's
        errors, pending, skipped = conn.execute(
            "SELECT (SELECT count(*) FROM verdicts WHERE status = 'error'),"
            " (SELECT count(*) FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
            "  WHERE v.status = 'pending' AND c.status != 'failed'),"
            " (SELECT coalesce(sum(n_criteria), 0) FROM conversations WHERE status = 'failed')"
        ).fetchone()
    assert shown["criteria"]["errors"] == errors and shown["criteria"]["pending"] == pending == 0
    assert shown["criteria"]["skipped"] == skipped == 3 * no_reply and shown["conversations"]["excluded"] == no_reply
    assert cli.main(["runs"]) == 0 and "incomplete" in capsys.readouterr().out

    server.control(faults={})
    assert cli.main(["regrade-errors", "gappy"]) == 0
    capsys.readouterr()
    assert cli.main(["show", "gappy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["status"] == "finished"


def test_a_run_where_every_reply_is_refused_is_not_finished(in_dir, server, capsys):
    data = many_records(in_dir / "data.jsonl", 3)
    server.control(context_chars=1)  # every request "too long": refusals, answers of a kind
    status = cli.main(["run", "--data", str(data), "--name", "refused"])
    assert status == cli.EXIT_INCOMPLETE
    assert "no conversation could be scored" in capsys.readouterr().err


# ---- 7. resume never relabels a run ------------------------------------------------------------


def test_resume_may_not_change_what_a_run_measures(in_dir, server, capsys):
    data = many_records(in_dir / "data.jsonl", 3)
    assert cli.main(["run", "--data", str(data), "--name", "done"]) == 0
    db = in_dir / "runs" / "hbtui.sqlite"
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT model_test, model_grader, settings_json, status FROM runs").fetchone()
    capsys.readouterr()
    for flags in (
        ["--model-grader", "other"],
        ["--model-test", "other"],
        ["--temperature-grader", "0.9"],
        ["--max-tokens-test", "10"],
        ["--reasoning-grader", "high"],
    ):
        assert cli.main(["resume", "done", *flags]) == cli.EXIT_USAGE, flags
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not what it measures" in err and "start a new run" in err, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT model_test, model_grader, settings_json, status FROM runs").fetchone() == before
    # How it is reached may change.
    assert cli.main(["resume", "done", "--concurrency", "2", "--timeout", "30"]) == 0


def test_resume_refuses_another_model_under_test_on_a_half_done_run(in_dir, server, capsys):
    data = many_records(in_dir / "data.jsonl", 12)
    server.control(latency_ms=40)
    db = in_dir / "runs" / "hbtui.sqlite"
    runner = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", "--data", str(data), "--name", "half"],
        cwd=in_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_answers(db, 5, runner)
    finally:
        runner.send_signal(signal.SIGINT)
        runner.wait(30)
    assert cli.main(["resume", "half", "--model-test", "grader-model"]) == cli.EXIT_USAGE
    assert "MODEL_TEST 'grader-model': run 1 was made with 'test-model'" in capsys.readouterr().err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT model_test FROM runs").fetchone()[0] == "test-model"


# ---- 8. one way of counting progress -----------------------------------------------------------


def test_the_headless_lines_and_the_monitor_count_the_same(server, tmp_path):
    records = [
        make_record(f"r{i}", [("c one", 5, []), ("c two", 3, [])], user=f"q{i}" + ("x" * 400) * (i % 3 == 0))
        for i in range(9)
    ]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    server.control(context_chars=300)  # three conversations are too long: no reply, criteria skipped
    db = tmp_path / "db.sqlite"
    out = io.StringIO()
    counters = RunCounters()
    asyncio.run(run_engine(settings_for(server, db), data, observers=[ProgressPrinter(out), counters]))

    async def from_store():
        async with await Store.open(db) as store:
            return await view_from_store(store, 1)

    stored = asyncio.run(from_store()).tally
    printed = out.getvalue().strip()
    last = printed[printed.rindex("\n[") :]  # the last progress line and its continuation
    assert stored.graded == 12 and stored.skipped == 6 and stored.to_grade == 12
    assert f"verdicts {stored.graded}/{stored.to_grade} 100%" in last and "6 skipped: no reply" in last
    assert f"replies {stored.conversations_done}/{stored.conversations_total}" in last
    assert "3 without a reply" in last
    assert vars(counters.tally) == vars(stored)


# ---- 15. SIGHUP stops a headless run cleanly -------------------------------------------------


def test_sighup_stops_a_headless_run_as_interrupted_and_resumable(in_dir, server):
    data = many_records(in_dir / "data.jsonl", 30)
    server.control(latency_ms=40)
    db = in_dir / "runs" / "hbtui.sqlite"
    runner = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", "--data", str(data), "--name", "hup"],
        cwd=in_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_answers(db, 5, runner)
    runner.send_signal(signal.SIGHUP)
    _out, err = runner.communicate(timeout=60)
    assert runner.returncode == cli.EXIT_INTERRUPTED, err
    assert "interrupted; continue with: hbtui resume 1" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status, owner FROM runs").fetchone() == ("interrupted", None)
    server.control(latency_ms=0)
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "hup"], cwd=in_dir, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
