"""Faults of the machine and of the files: disk full, read-only database, schema versions,
a process that died, permissions."""

import asyncio
import json
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hbtui.core.dataset import load_jsonl
from hbtui.services import Engine, plan_run
from hbtui.store import Store, StoreError, schema
from tests.cli.test_cli import clean_env
from tests.conftest import run_engine, settings_for
from tests.support.full_disk import in_small_disk

FULL_DISK = Path(__file__).parents[1] / "support" / "full_disk.py"


class LimitAfterStart:
    """Applies a connection limit once the run has started (claimed and planned), mid-run."""

    def __init__(self, store, pragma):
        self.store, self.pragma = store, pragma

    def on_event(self, event):
        if type(event).__name__ == "RunStarted":
            # aiosqlite runs statements in order on its thread: this lands before the first batch.
            self.task = asyncio.ensure_future(self.store.db.execute(self.pragma))


def _run_with_connection_limit(db, settings, small_dataset, pragma):
    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="limited")
            run = await store.get_run(run_id)
            pages = (await (await store.db.execute("PRAGMA page_count")).fetchone())[0]
            engine = Engine(store, run, settings, [LimitAfterStart(store, pragma(pages))], backoff_base=0.01)
            status = await engine.execute()
            return run_id, status, engine.error

    return asyncio.run(go())


@pytest.mark.parametrize(
    "fault, pragma, words",
    [
        ("disk full", lambda pages: f"PRAGMA max_page_count = {pages}", "full"),
        ("read-only", lambda pages: "PRAGMA query_only = 1", "readonly"),
    ],
)
def test_database_that_stops_taking_writes_stops_the_run_resumable(
    server, tmp_path, small_dataset, fault, pragma, words
):
    # Sixty conversations (the small three, twenty times): enough writes to need new pages.
    records = [json.loads(line) for line in small_dataset.read_text().splitlines()]
    many = [dict(r, prompt_id=f"{r['prompt_id']}-{i}") for i in range(20) for r in records]
    small_dataset.write_text("".join(json.dumps(r) + "\n" for r in many))
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)
    server.control(latency_ms=20)  # real endpoints take time: calls are in flight, not all done at once
    run_id, status, error = _run_with_connection_limit(db, settings, small_dataset, pragma)
    assert status == "failed"
    assert "cannot write to the database" in error and words in error.replace(" ", "").lower()
    assert f"hbtui resume {run_id}" in error
    calls_before = server.stats()["requests"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = conn.execute(
            "SELECT (SELECT count(*) FROM verdicts WHERE status != 'pending')"
            " + (SELECT count(*) FROM conversations WHERE status != 'pending')"
        ).fetchone()[0]
    # Stopped at the first failed commit: lost are that batch, the calls that completed while it
    # failed, and the calls in flight; not the rest of the run (220 calls). The batch holds what
    # completed while the commit before it was written (up to a few rounds of 8 calls: the search
    # index of the verdicts makes a commit a little longer), hence the margin.
    assert calls_before - stored <= 6 * 8
    # Once the fault is gone, the run resumes and finishes with the right score.

    async def resume():
        async with await Store.open(db) as store:
            await store.db.execute("UPDATE runs SET heartbeat_at = 0")  # the failed process is gone
            await store.db.commit()
            run = await store.get_run(run_id)
            return await Engine(store, run, settings, backoff_base=0.01).execute(), (await store.get_run(run_id)).score

    status, score = asyncio.run(resume())
    assert status == "finished" and score == pytest.approx(0.625)


def test_database_from_the_first_schema_is_migrated_in_place(tmp_path):
    db = tmp_path / "v1.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(schema.SCHEMA_V1)
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test, model_grader,"
            " settings_json, plan_json, n_conversations, n_criteria, score) VALUES"
            " ('old', 'finished', 1.0, 'main', 'abc', 'm', 'g', '{}', '{}', 1, 1, 0.42)"
        )

    async def reopen():
        async with await Store.open(db) as store:
            return await store.list_runs()

    runs = asyncio.run(reopen())
    assert [(r.name, r.score, r.heartbeat_at) for r in runs] == [("old", 0.42, None)]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        columns = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    assert {"heartbeat_at", "owner", "live_json"} <= set(columns)


def test_a_new_files_schema_made_in_one_script_is_the_one_every_migration_makes(tmp_path):
    fresh, migrated = tmp_path / "fresh.sqlite", tmp_path / "migrated.sqlite"
    with sqlite3.connect(migrated) as conn:  # version 1, as the first hbtui made it
        conn.executescript(schema.SCHEMA_V1)
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 1")

    async def open_both():
        for db in (fresh, migrated):
            async with await Store.open(db) as store:
                await store.list_runs()

    asyncio.run(open_both())

    def described(db):
        with sqlite3.connect(db) as conn:
            return (
                conn.execute("PRAGMA user_version").fetchone(),
                conn.execute("PRAGMA application_id").fetchone(),
                conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall(),
            )

    assert described(fresh) == described(migrated)
    assert described(fresh)[0] == (schema.SCHEMA_VERSION,)


def test_database_from_a_future_schema_is_refused_untouched(tmp_path):
    db = tmp_path / "future.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER)")
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 5}")
    before = db.read_bytes()
    with pytest.raises(StoreError, match="newer than this hbtui"):
        asyncio.run(Store.open(db))
    assert db.read_bytes() == before


def test_a_stranger_sqlite_file_is_refused(tmp_path):
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(StoreError, match="not an hbtui database"):
        asyncio.run(Store.open(db))


def test_dead_process_shows_interrupted_with_how_long_ago(finished_run_db):
    with sqlite3.connect(finished_run_db) as conn:
        conn.execute("UPDATE runs SET status = 'running', owner = 'h:1', heartbeat_at = ?", (time.time() - 190,))

    async def load():
        async with await Store.open(finished_run_db) as store:
            return await store.resolve_run("latest")

    run = asyncio.run(load())
    assert run.status == "running" and run.shown_status() == "interrupted"
    assert run.stopped_ago() == "3 min ago"


def test_database_and_run_folder_are_owner_only(server, tmp_path, small_dataset):
    from hbtui.render.export import write_run_folder

    db = tmp_path / "private" / "db.sqlite"
    asyncio.run(run_engine(settings_for(server, db), small_dataset, name="private"))

    async def folder():
        async with await Store.open(db) as store:
            return await write_run_folder(store, await store.resolve_run("private"), db.parent)

    path = asyncio.run(folder())
    for item in [db.parent, db, path, *path.iterdir()]:
        assert not stat.S_IMODE(item.stat().st_mode) & 0o077, item


def test_a_run_stopped_by_a_full_disk_is_listed_as_failed_as_its_driver_said(server, tmp_path, small_dataset):
    """The end of a run a full disk stops is a write too, which the WAL had no room for: the run
    stayed `running` under an owner soon gone, listed as `interrupted`. A real full disk (a
    tmpfs, in a mount namespace of the test's own), since only that refuses the WAL its room."""
    records = [json.loads(line) for line in small_dataset.read_text().splitlines()]
    many = [dict(r, prompt_id=f"{r['prompt_id']}-{i}") for i in range(100) for r in records]
    small_dataset.write_text("".join(json.dumps(r) + "\n" for r in many))
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=4\n"
    )
    server.control(latency_ms=20)  # the run lasts a few seconds: the disk fills while its calls go on
    probe = in_small_disk(disk, "4m", ["true"])
    if not probe or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("no mount namespace for a small disk here (unshare)")
    argv = in_small_disk(disk, "4m", [sys.executable, str(FULL_DISK), str(disk), str(small_dataset)])
    result = subprocess.run(argv, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["filled"] and seen["code"] == 1, seen
    assert "failed: cannot write to the database" in seen["output"] and "disk is full" in seen["output"], seen
    (listed,) = seen["runs"].splitlines()[1:2]
    assert listed.split()[2] == "failed", seen["runs"]
