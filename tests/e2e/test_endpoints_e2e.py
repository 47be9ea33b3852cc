"""Two llama.cpp servers as two endpoints of one model: `hbtui run` spreads its calls over both,
one is killed mid-run, and the run finishes on the other with nothing lost; which endpoint
answered each call is recorded."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import needs_shared
from tests.e2e.llama import LlamaServer, llama_paths
from tests.e2e.test_llama_e2e import MODEL, e2e_env, short_records  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, needs_shared]


@pytest.fixture
def two_llamas():
    if llama_paths() is None:
        pytest.skip("llama-server and SmolLM2 are not built: run scripts/build_llama_server.sh")
    with LlamaServer(extra_args=["--alias", MODEL]) as first, LlamaServer(extra_args=["--alias", MODEL]) as second:
        yield first, second


def answered_by(db, url: str) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute(
                "SELECT (SELECT count(*) FROM conversations WHERE endpoint = ?)"
                " + (SELECT count(*) FROM verdicts WHERE endpoint = ?)",
                (url, url),
            ).fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # not created yet


def test_a_run_over_two_llama_servers_finishes_on_one_when_the_other_is_killed(
    two_llamas,
    short_records,  # noqa: F811
    tmp_path,
):
    first, second = two_llamas
    db = tmp_path / "runs" / "e2e.sqlite"
    env = e2e_env(f"{first.base_url},{second.base_url}")
    env["CONCURRENCY"] = "2"
    run = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", "--data", str(short_records), "--db", str(db), "--name", "two"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while answered_by(db, second.base_url) == 0 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run.poll() is None, "the run ended before the second server answered once"
        second.process.kill()  # SIGKILL mid-run: its calls in flight are cut, then connections refused
        _, err = run.communicate(timeout=900)
    finally:
        if run.poll() is None:
            run.kill()
    with sqlite3.connect(db) as conn:
        replies = conn.execute("SELECT status FROM conversations").fetchall()
        pending = conn.execute("SELECT count(*) FROM verdicts WHERE status = 'pending'").fetchone()[0]
        endpoints = {row[0] for row in conn.execute("SELECT endpoint FROM verdicts WHERE endpoint IS NOT NULL")}
        endpoints |= {row[0] for row in conn.execute("SELECT endpoint FROM conversations")}
        log = [row[0] for row in conn.execute("SELECT message FROM run_log")]
        # The tiny model may leave a verdict unparseable, never a call without an answer: those
        # cut by the kill were sent again to the live server.
        unanswered = conn.execute(
            "SELECT (SELECT count(*) FROM verdicts WHERE error_kind IN ('connection', 'timeout', 'server_error'))"
            " + (SELECT count(*) FROM conversations WHERE error_kind IN ('connection', 'timeout', 'server_error'))"
        ).fetchone()[0]
    # A verdict the tiny model never finished is a grading error: the run is then incomplete (exit 3).
    assert run.returncode in (0, 3), err
    assert replies == [("generated",)] * 3 and pending == 0 and unanswered == 0
    assert endpoints == {first.base_url, second.base_url}
    assert any(f"endpoint {second.base_url} set aside" in line for line in log)
