"""Processes meeting on a new database: the schema is made once, automatic names never collide."""

import asyncio
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from hbtui.core.dataset import load_jsonl
from hbtui.services import plan_run
from hbtui.store import Store, schema
from tests.cli.test_cli import hbtui
from tests.conftest import settings_for

# Each process imports first, says so, and opens the database only when told: all of them then
# open within the same few milliseconds, the moment the race needs.
OPENER = textwrap.dedent("""
    import asyncio, sys
    from hbtui.store import Store

    async def main():
        print("ready", flush=True)
        sys.stdin.readline()
        async with await Store.open(sys.argv[1]) as store:
            await store.list_runs()

    asyncio.run(main())
""")


def test_many_processes_opening_a_new_database_at_once_all_succeed(tmp_path):
    db = tmp_path / "fresh.sqlite"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(30)
    ]
    for process in processes:
        assert process.stdout.readline() == "ready\n"
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    failures = []
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        if process.returncode:
            failures.append(stderr.strip().splitlines()[-1])
    assert failures == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION


def test_runs_planned_at_once_without_a_name_get_distinct_names(server, small_dataset, tmp_path, monkeypatch):
    import hbtui.engine.run_plan

    monkeypatch.setattr(hbtui.engine.run_plan.time, "strftime", lambda *_: "20261130-120000")  # all in one second
    db = tmp_path / "runs.sqlite"
    settings = settings_for(server, db)
    dataset = load_jsonl(small_dataset)

    async def plan_together():
        stores = [await Store.open(db) for _ in range(8)]
        try:
            return await asyncio.gather(*(plan_run(store, settings, dataset) for store in stores))
        finally:
            for store in stores:
                await store.close()

    ids = asyncio.run(plan_together())
    with sqlite3.connect(db) as conn:
        names = sorted(name for (name,) in conn.execute("SELECT name FROM runs"))
    base = "test-model-small-20261130-120000"
    assert len(set(ids)) == 8 and names == sorted([base] + [f"{base}-{n}" for n in range(2, 9)])


@pytest.mark.slow
def test_headless_runs_started_in_the_same_second_without_a_name_all_run(server, small_dataset, tmp_path):
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    command = [sys.executable, "-m", "hbtui", "run", "--data", str(small_dataset)]
    processes = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [(process.wait(timeout=120), process.stderr.read()) for process in processes]
    assert [code for code, _ in results] == [0] * 4, results
    listing = hbtui("runs", cwd=tmp_path, check=True).stdout
    assert len(listing.splitlines()) == 5


def test_a_new_database_opens_while_another_process_holds_its_write_lock(tmp_path):
    """The switch to WAL reads the file, then asks to write: SQLite refuses that upgrade at once,
    without its busy timeout, while another connection holds the write lock of the new file (the
    refusal CI met with 30 processes). The opening tries again until the lock is let go."""
    db = tmp_path / "fresh.sqlite"
    db.touch(mode=0o600)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock of a file still in rollback mode

    async def open_while_held():
        asyncio.get_running_loop().call_later(0.3, holder.execute, "COMMIT")
        async with await Store.open(db) as store:
            return await store.list_runs()

    try:
        assert asyncio.run(open_while_held()) == []
    finally:
        holder.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
