"""The long repros, as a user meets them: real `hbtui` processes stopped with SIGSTOP, resumed
from another shell, and a write lock held from another process for longer than the busy timeout."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.engine.test_reliability import many_records, stored_answers, wait_for_answers

RECORDS, CRITERIA = 100, 3
EVERY_CALL_ONCE = RECORDS * (1 + CRITERIA)


def start(args, cwd, env):
    return subprocess.Popen(
        [sys.executable, "-m", "hbtui", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def started(cwd, env, name, at_least):
    """A headless run in its own process, once it has stored ``at_least`` answers."""
    db = cwd / "runs" / "hbtui.sqlite"
    process = start(["run", "--data", "data.jsonl", "--name", name], cwd, env)
    wait_for_answers(db, at_least, process)
    return db, process


@pytest.fixture
def shell(tmp_path, server):
    """A working folder with .env, and the environment two shells of one user share."""
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=8\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER")}
    env.update(HBTUI_HEARTBEAT_PATIENCE="2", HBTUI_BUSY_TIMEOUT="1")
    many_records(tmp_path / "data.jsonl", RECORDS, CRITERIA)
    server.control(latency_ms=100)
    return tmp_path, env


@pytest.mark.slow
def test_a_stopped_driver_is_not_taken_over_and_finishes_alone_when_continued(shell, server):
    cwd, env = shell
    _db, first = started(cwd, env, "held", 50)
    first.send_signal(signal.SIGSTOP)
    time.sleep(4)  # twice the heartbeat's patience: the heartbeat is stale
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "held"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert resumed.returncode == 2
    assert f":{first.pid}, which is stopped (Ctrl-Z)" in resumed.stderr and resumed.stderr.count("\n") == 1
    listing = subprocess.run(
        [sys.executable, "-m", "hbtui", "runs"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert listing.stdout.splitlines()[1].split()[2] == "stopped"  # the status column
    first.send_signal(signal.SIGCONT)
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert server.stats()["requests"] == EVERY_CALL_ONCE  # nothing paid twice


@pytest.mark.slow
def test_a_driver_taken_over_while_stopped_stops_when_continued_and_nothing_is_paid_twice(shell, server):
    cwd, env = shell
    db, first = started(cwd, env, "fenced", 50)
    # A process on another host took the run over once the heartbeat went stale (a resume there
    # cannot see this host's process table); it has since stopped, leaving the run to resume.
    # The driver may be stopped in the middle of a commit, holding the lock: stop it again then.
    while True:
        first.send_signal(signal.SIGSTOP)
        # As long as another host's takeover needs: its heartbeat stale (15 s by default), and
        # longer than this driver trusts its lease without a write (6 s).
        time.sleep(7)
        try:
            with sqlite3.connect(db, timeout=0.5) as conn:
                conn.execute("UPDATE runs SET owner = 'elsewhere:77:1', lease = 'theirs', heartbeat_at = 0")
            break
        except sqlite3.OperationalError:
            first.send_signal(signal.SIGCONT)
            time.sleep(0.05)
    stored_at_takeover = stored_answers(db)
    requests_at_continue = server.stats()["requests"]
    first.send_signal(signal.SIGCONT)
    _out, err = first.communicate(timeout=120)
    assert server.stats()["requests"] == requests_at_continue  # not one new call once it went on
    assert first.returncode == 1
    assert "run 1 was taken over by process elsewhere:77" in err and "Traceback" not in err
    assert stored_answers(db) == stored_at_takeover  # it kept nothing it could not write
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT owner, lease FROM runs").fetchone() == ("elsewhere:77:1", "theirs")
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "fenced"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    # Paid twice at most: what was in flight when it was stopped, on the wire (8) or received and
    # not yet committed (at most as many again).
    assert server.stats()["requests"] - EVERY_CALL_ONCE <= 2 * 8


@pytest.mark.slow
def test_a_write_lock_held_by_another_process_for_14_s_loses_nothing(shell, server):
    cwd, env = shell
    db, first = started(cwd, env, "locked", 20)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                "c = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(14); c.execute('COMMIT')\n"
            ),
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    holder.wait(60)
    out, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    assert "database is locked by another connection" in out
    assert server.stats()["requests"] == EVERY_CALL_ONCE


# A new PID namespace under the same host name, as a container or a pod that shares its name:
# the run's process is pid 1 there, and pid 1 here is another process. --kill-child: killing
# unshare kills the run.
UNSHARE_PIDS = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def _can_unshare_pids() -> bool:
    try:
        return subprocess.run([*UNSHARE_PIDS, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare_pids(), reason="needs unshare of a PID namespace (root or user namespaces)")
def test_a_live_driver_in_another_pid_namespace_of_this_host_name_is_not_taken_over_until_its_heartbeat_stops(
    shell, server
):
    cwd, env = shell
    env["HBTUI_HEARTBEAT_PATIENCE"] = "5"  # well above a live driver's silence, far below the default 15 s
    db = cwd / "runs" / "hbtui.sqlite"
    contained = subprocess.Popen(
        [*UNSHARE_PIDS, sys.executable, "-m", "hbtui", "run", "--data", "data.jsonl", "--name", "contained"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_answers(db, 50, contained)
        with sqlite3.connect(db) as conn:
            owner = conn.execute("SELECT owner FROM runs").fetchone()[0]
        assert owner.rsplit(":", 2)[1] == "1"  # pid 1 of its namespace; here pid 1 is another, live process
        resumed = subprocess.run(
            [sys.executable, "-m", "hbtui", "resume", "contained"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert resumed.returncode == 2, resumed.stderr
        assert resumed.stderr.count("\n") == 1, resumed.stderr
        assert "is being driven by process" in resumed.stderr and "in another PID namespace" in resumed.stderr
        assert contained.poll() is None  # still driving its run
    finally:
        contained.kill()
        contained.wait()
    stored_at_kill = stored_answers(db)
    time.sleep(6)  # its heartbeat goes stale: the driver is gone, as far as this namespace can tell
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "contained"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert stored_at_kill < EVERY_CALL_ONCE and stored_answers(db) == EVERY_CALL_ONCE
    # Paid twice at most: what was in flight at the kill, on the wire (8) or received and not yet
    # committed (at most as many again).
    assert server.stats()["requests"] - EVERY_CALL_ONCE <= 2 * 8
