"""A run of the model under test sends its first calls while its plan is being stored
(hbtui.engine.run_plan.start_run): no other connection sees the run until its plan is whole, a
stop meanwhile keeps the whole plan and the answers, and a plan that cannot be stored is the
command's one-line error with nothing left behind. A real server, a real SQLite file."""

from __future__ import annotations

import asyncio
import sqlite3

from hbtui import cli
from hbtui.core.dataset import load_jsonl
from hbtui.core.events import ReplyGenerated
from hbtui.services import Engine, start_run
from hbtui.store import Store
from hbtui.store.owners import this_owner
from tests.conftest import settings_for, user_folder

# The small dataset's 3 records planned 20,000 times over: a plan of 60,000 conversations that
# takes seconds to store, against calls answered in 20 ms.
LONG_PLAN_REPEATS = 20_000


class Received:
    """The replies the engine got, as its observers hear of them."""

    def __init__(self) -> None:
        self.replies = 0

    def on_event(self, event) -> None:
        if isinstance(event, ReplyGenerated):
            self.replies += 1


def runs_seen_from_outside(db) -> int:
    with sqlite3.connect(db) as other:
        return other.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_the_first_calls_are_answered_while_the_plan_is_stored_and_a_stop_then_keeps_both(
    server, small_dataset, tmp_path
):
    server.control(latency_ms=20)
    db = tmp_path / "runs.sqlite"
    settings = settings_for(server, db, concurrency=8)
    received = Received()

    async def go():
        async with await Store.open(db) as store:
            run, head = await start_run(
                store, settings, load_jsonl(small_dataset), this_owner(), repeats=LONG_PLAN_REPEATS
            )
            assert head is not None
            running = asyncio.create_task(Engine(store, run, settings, [received], head_start=head).execute())
            while not received.replies and not head.stored.done():
                await asyncio.sleep(0.01)
            storing = not head.stored.done()
            seen = await asyncio.to_thread(runs_seen_from_outside, db)
            replies_before_stop = received.replies
            running.cancel()  # what Ctrl-C does
            return run.id, await running, storing, replies_before_stop, seen

    run_id, status, storing, replies_before_stop, seen = asyncio.run(go())
    assert storing and replies_before_stop, "no reply came in before the plan was stored"
    assert seen == 0  # the run, half planned, was nobody else's to see
    assert status == "interrupted"
    with sqlite3.connect(db) as conn:
        (planned,) = conn.execute("SELECT count(*) FROM conversations WHERE run_id = ?", (run_id,)).fetchone()
        (replies,) = conn.execute(
            "SELECT count(*) FROM conversations WHERE run_id = ? AND status = 'generated'", (run_id,)
        ).fetchone()
        (criteria,) = conn.execute("SELECT n_criteria FROM runs WHERE id = ?", (run_id,)).fetchone()
        (verdicts,) = conn.execute("SELECT count(*) FROM verdicts WHERE run_id = ?", (run_id,)).fetchone()
    assert planned == 3 * LONG_PLAN_REPEATS and verdicts == criteria  # the plan whole
    assert replies >= replies_before_stop  # every reply that came while it was stored, kept


def test_a_plan_that_cannot_be_stored_is_one_error_and_leaves_no_run(
    server, small_dataset, tmp_path, monkeypatch, capsys
):
    folder = user_folder(tmp_path, monkeypatch, server)
    db = folder / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", str(small_dataset), "--limit", "1", "--name", "first"]) == 0
    with sqlite3.connect(db) as conn:  # the disk fills up as the next plan's criteria are written
        conn.execute(
            "CREATE TRIGGER disk_full BEFORE INSERT ON verdicts WHEN new.run_id > 1"
            " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    capsys.readouterr()
    server.reset_stats()

    code = cli.main(["run", "--data", str(small_dataset), "--name", "second"])

    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED
    assert err.count("\n") == 1 and "database or disk is full" in err and "Traceback" not in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name, status FROM runs").fetchall() == [("first", "finished")]
        assert conn.execute("SELECT count(*) FROM conversations WHERE run_id != 1").fetchone() == (0,)
