"""Runs driven in a process of their own (hbtui.engine.detached), as the app starts them.

Real processes throughout: the driver is `python -m hbtui _drive`, started by the launcher the
app uses, against a test server that requires an API key (so a run that finishes proves the key
reached the driver) and answers slowly enough for a run to last a few seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from hbtui.core.dataset import load_jsonl
from hbtui.services import launch_detached, plan_run
from hbtui.store import Store, schema
from tests.cli.test_cli import hbtui
from tests.conftest import KEYED_SERVER_SECRET, settings_for, small_records, write_jsonl
from tests.engine.test_run_control import wait_until
from tests.support.old_schema import make_database_before
from tests.support.server_process import FakeServer

SECRET = KEYED_SERVER_SECRET


def run_status(db: Path) -> tuple[str, str | None]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status, driver_log FROM runs").fetchone()


async def launch(tmp_path: Path, server: FakeServer, kind: str = "model", **values):
    """A run planned and given to a driver of its own: a model run, or a meta-eval of 200 rows."""
    from hbtui.meta_eval.plan import plan_meta_eval
    from tests.support.meta_rows import meta_rows, write_rows

    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db, api_key=SECRET, concurrency=1, grader_template="builtin", **values)
    async with await Store.open(db) as store:
        if kind == "model":
            data = write_jsonl(tmp_path / "data.jsonl", small_records())
            run_id = await plan_run(store, settings, load_jsonl(data), repeats=2, name="apart")
        else:
            data = write_rows(tmp_path / "meta.jsonl", meta_rows(200, seed=2))
            run_id = await plan_meta_eval(store, settings, data, official=False, limit=None, seed=0, name="apart")
        detached = await launch_detached(store, await store.get_run(run_id), settings)
    return db, detached


async def test_a_detached_run_gets_its_key_only_through_its_environment_and_finishes_in_its_own_session(
    tmp_path, slow_keyed_server
):
    db, detached = await launch(tmp_path, slow_keyed_server)
    try:
        command_line = Path(f"/proc/{detached.pid}/cmdline").read_bytes()
        assert b"_drive" in command_line
        assert SECRET.encode() not in command_line  # `ps` shows every user the command line
        assert os.getsid(detached.pid) == detached.pid != os.getsid(0)  # a session of its own
        assert detached.process.wait(timeout=120) == 0
    finally:
        detached.stop()
    status, log = run_status(db)
    assert status == "finished"
    assert Path(log) == detached.log == db.parent / "run-1-apart.log"
    text = detached.log.read_text()
    assert "run 1: driven by process" in text and "results:" in text
    assert SECRET not in text
    assert oct(detached.log.stat().st_mode & 0o777) == "0o600"
    snapshot = Path(detached.process.args[-1])
    assert snapshot.name.startswith("hbtui-run-") and not snapshot.exists()  # read once, removed


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "meta-eval"])
async def test_a_detached_run_shrugs_off_a_hangup_and_stops_resumably_on_sigterm(tmp_path, slow_keyed_server, kind):
    db, detached = await launch(tmp_path, slow_keyed_server, kind)
    try:
        assert SECRET.encode() not in Path(f"/proc/{detached.pid}/cmdline").read_bytes()
        wait_until(
            lambda: run_status(db)[0] == "running" and slow_keyed_server.stats()["requests"] >= 2, "the run going"
        )
        os.kill(detached.pid, signal.SIGHUP)  # the SSH session that started the app went away
        answered = slow_keyed_server.stats()["requests"]
        wait_until(lambda: slow_keyed_server.stats()["requests"] >= answered + 3, "calls after the hangup", timeout=20)
        assert detached.going()
        detached.stop()
        assert detached.process.wait(timeout=60) == 130
    finally:
        if detached.going():
            detached.process.kill()
    assert run_status(db) == ("interrupted", str(db.parent / "run-1-apart.log"))
    log = detached.log.read_text()
    assert "run 1: driven by process" in log and "continue with: hbtui resume 1" in log and SECRET not in log


async def test_a_database_of_the_schema_before_gets_the_driver_log_column(tmp_path):
    db = tmp_path / "before.sqlite"
    make_database_before(db, schema.MIGRATE_ADD_DRIVER_LOG)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " ('old', 'finished', 0, 'd', 'x', 'm', 'g', '{}', '{}', 0, 0)"
        )
    async with await Store.open(db) as store:
        (run,) = await store.list_runs()
        assert (run.name, run.driver_log) == ("old", None)
        await store.set_driver_log(run.id, "runs/run-1-old.log")
        assert (await store.get_run(run.id)).driver_log == "runs/run-1-old.log"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION


async def test_runs_lists_the_host_process_and_log_of_a_run_being_driven(tmp_path, slow_keyed_server):
    db, detached = await launch(tmp_path, slow_keyed_server)
    try:
        wait_until(lambda: run_status(db)[0] == "running", "the run going")
        listed = hbtui("runs", "--db", str(db), cwd=tmp_path)
    finally:
        detached.stop()
        detached.process.wait(timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert f"run 1: driven by {socket.gethostname()}:{detached.pid}; log {detached.log}" in listed.stdout.splitlines()
    after = hbtui("runs", "--db", str(db), cwd=tmp_path)
    assert f"run 1: interrupted; log {detached.log}" in after.stdout.splitlines()


async def test_runs_says_plainly_that_a_driver_on_another_host_has_gone_silent(tmp_path, small_dataset, capsys):
    from hbtui import cli
    from hbtui.core.settings.config import Settings

    db = tmp_path / "runs" / "hbtui.sqlite"
    async with await Store.open(db) as store:
        settings = Settings(base_url="http://127.0.0.1:9/v1", model_test="m", model_grader="g", db_path=str(db))
        run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="far")
        await store.claim_run(run_id, "otherhost:123:1")
        await store.db.execute("UPDATE runs SET heartbeat_at = ? WHERE id = ?", (time.time() - 600, run_id))
        await store.db.commit()
    assert await asyncio.to_thread(cli.main, ["runs", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "run 1: driven by otherhost:123, no heartbeat for 10 min: it drives nothing now, hbtui resume 1 takes the"
        " run over"
    )


def test_the_settings_snapshot_is_owner_only_and_holds_no_key(tmp_path):
    from hbtui.engine.detached import write_snapshot

    settings = settings_for_keys(tmp_path)
    path = Path(write_snapshot(7, settings, use_cache=True))
    try:
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        text = path.read_text()
        assert SECRET not in text and "grader-secret" not in text
        assert '"run_id": 7' in text and str(tmp_path / "db.sqlite") in text
    finally:
        path.unlink()


def settings_for_keys(tmp_path: Path):
    from hbtui.core.settings.config import Settings

    return Settings(
        base_url="http://127.0.0.1:9/v1",
        api_key=SECRET,
        grader_base_url="http://127.0.0.1:10/v1",
        grader_api_key="grader-secret-0123456789",
        model_test="m",
        model_grader="g",
        db_path=str(tmp_path / "db.sqlite"),
    )


def test_the_drive_entry_is_not_a_listed_command_and_a_missing_snapshot_is_one_line(tmp_path, capsys):
    from hbtui import cli

    with pytest.raises(SystemExit):
        cli.main(["no-such-command"])
    assert "_drive" not in capsys.readouterr().err
    missing = tmp_path / "gone.json"
    assert cli.main(["_drive", str(missing)]) == 2
    assert capsys.readouterr().err == f"hbtui: error: {missing}: No such file or directory\n"
