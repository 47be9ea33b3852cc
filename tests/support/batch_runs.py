"""`hbtui run --batch` in a process of its own, for the tests that stop or kill it at a given step
of a submission (tests/engine/test_batch_api.py, tests/tui/test_tui_batch.py): its environment,
its start, the database's view of its submissions, and the wait for a step."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def batch_env(server, db: Path, **more: str) -> dict[str, str]:
    """The test server as the endpoint of both models, the run in ``db``."""
    return dict(
        os.environ,
        BASE_URL=server.base_url,
        MODEL_TEST="test-model",
        MODEL_GRADER="grader-model",
        HBTUI_DB=str(db),
        **more,
    )


def start_batch_run(folder: Path, env: dict[str, str], name: str, *data: str) -> subprocess.Popen:
    """`hbtui run --batch` of ``data`` (default: the folder's data.jsonl), its output kept."""
    return subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", *(data or ("--data", "data.jsonl")), "--batch", "--name", name],
        env=env,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def verdicts_by_request(db: Path, run: str) -> dict[tuple, tuple]:
    """The run's verdicts by (prompt id, repeat, criterion): two runs of the same records compare."""
    return {
        (prompt_id, repeat, idx): (status, explanation)
        for prompt_id, repeat, idx, status, explanation in rows(
            db,
            "SELECT c.prompt_id, c.repeat, v.idx, v.status, v.explanation FROM verdicts v JOIN conversations c"
            " ON c.id = v.conversation_id JOIN runs r ON r.id = c.run_id WHERE r.name = ?",
            (run,),
        )
    }


def shown_json(cli, capsys, *names: str) -> dict[str, dict]:
    """`hbtui show NAME --json` of each run, by name."""
    capsys.readouterr()
    shown = {}
    for name in names:
        assert cli.main(["show", name, "--json"]) == 0
        shown[name] = json.loads(capsys.readouterr().out)
    return shown


def state_of(db: Path) -> list[tuple]:
    """(number, state, batch_status) of each submission, or none before the database has them."""
    if not db.exists():
        return []
    try:
        return rows(db, "SELECT number, state, batch_status FROM batch_submissions ORDER BY number")
    except sqlite3.OperationalError:  # not made yet
        return []


def submitted(db: Path) -> bool:
    return any(state == "submitted" for _, state, _ in state_of(db))


def wait_while_running(process: subprocess.Popen, ready: Callable[[], bool], timeout: float = 30.0) -> None:
    """Until ``ready``; the process must not end first (its output then says why)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the step waited for never came"
        time.sleep(0.02)


def ctrl_c(process: subprocess.Popen) -> str:
    """SIGINT, as Ctrl-C sends it: the process ends with 130; its stderr."""
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    return err


def left_awaiting(folder: Path, env: dict[str, str], name: str) -> str:
    """A batch run stopped with Ctrl-C once its first batch is at the provider; its stderr."""
    process = start_batch_run(folder, env, name)
    wait_while_running(process, lambda: submitted(Path(env["HBTUI_DB"])))
    return ctrl_c(process)
