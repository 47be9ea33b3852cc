"""Regrade without regenerating, and the verdict cache: against the project's test server, with a
real database; each count of calls is what the server saw."""

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from hbtui import cli
from hbtui.core.dataset import load_jsonl
from hbtui.services import plan_run
from hbtui.store import Store
from tests.conftest import make_record, offline_settings, user_folder, write_jsonl

CRITERIA = 3


@pytest.fixture
def here(tmp_path, monkeypatch, server):
    user_folder(tmp_path, monkeypatch, server)
    write_jsonl(
        tmp_path / "data.jsonl",
        [
            make_record(
                f"r{i}",
                [(f"criterion {k} of {i}", 3 - k, [f"axis:a{k}"]) for k in range(CRITERIA)],
                user=f"question {i}",
            )
            for i in range(6)
        ],
    )
    return tmp_path


def db_rows(db: Path, sql: str, *args):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def verdicts_of(db: Path, run_id: int):
    return db_rows(
        db,
        "SELECT c.position, c.repeat, v.idx, v.status, v.explanation FROM verdicts v JOIN conversations c"
        " ON c.id = v.conversation_id WHERE v.run_id = ? ORDER BY 1, 2, 3",
        run_id,
    )


def planned(here: Path, server, name: str, status: str | None = None) -> int:
    """A run of data.jsonl planned, not driven (marked ``status`` if given): no call made yet."""

    async def plan() -> int:
        db = here / "runs" / "hbtui.sqlite"
        async with await Store.open(db) as store:
            settings = offline_settings(
                base_url=server.base_url, model_test="test-model", model_grader="grader-model", db_path=str(db)
            )
            run_id = await plan_run(store, settings, load_jsonl(here / "data.jsonl"), name=name)
            if status:
                await store.finish_run(run_id, status)
            return run_id

    return asyncio.run(plan())


def calls(server) -> tuple[int, int]:
    stats = server.stats()
    return stats["generation"], stats["grader"]


def test_a_regrade_with_the_same_grader_asks_nothing_and_gives_the_same_verdicts(here, server, capsys):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "first"]) == 0
    server.reset_stats()
    assert cli.main(["regrade", "first"]) == 0
    out = capsys.readouterr().out
    assert calls(server) == (0, 0)
    assert "18 verdicts came from the cache" in out
    db = here / "runs" / "hbtui.sqlite"
    assert [v[:4] for v in verdicts_of(db, 2)] == [v[:4] for v in verdicts_of(db, 1)]
    (source,) = db_rows(db, "SELECT source_run_id FROM runs WHERE id = 2")[0]
    assert source == 1
    assert db_rows(db, "SELECT count(*) FROM verdicts WHERE run_id = 2 AND from_cache = 1")[0][0] == 18
    # The replies are the source's, unchanged; no token of the model under test was spent again.
    assert db_rows(db, "SELECT reply FROM conversations WHERE run_id = 2 ORDER BY position") == db_rows(
        db, "SELECT reply FROM conversations WHERE run_id = 1 ORDER BY position"
    )
    assert db_rows(db, "SELECT sum(coalesce(prompt_tokens, 0)) FROM conversations WHERE run_id = 2")[0][0] == 0
    assert cli.main(["show", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["criteria"]["from_cache"] == 18


def test_a_regrade_with_another_prompt_grades_every_criterion_and_generates_nothing(here, server, capsys):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "first"]) == 0
    server.reset_stats()
    mine = here / "mine.txt"  # another prompt than the run's, whichever the session's default is
    mine.write_text("Judge the reply.\n<<conversation>>\nCriterion: <<rubric_item>>\nAnswer with criteria_met.")
    assert cli.main(["regrade", "first", "--grader-template", str(mine), "--name", "mine"]) == 0
    assert calls(server) == (0, 6 * CRITERIA)
    assert cli.main(["show", "mine"]) == 0
    text = capsys.readouterr().out
    assert "(the replies of run 1, graded again)" in text and "grader prompt file mine.txt" in text
    # --no-cache asks again even what is cached.
    server.reset_stats()
    assert cli.main(["regrade", "first", "--no-cache"]) == 0
    assert calls(server) == (0, 6 * CRITERIA)


def test_a_fresh_run_reuses_verdicts_only_when_asked(here, server):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "first"]) == 0
    server.reset_stats()
    assert cli.main(["run", "--data", "data.jsonl", "--name", "again"]) == 0
    assert calls(server) == (6, 6 * CRITERIA)  # a run is a measurement: it asks
    server.reset_stats()
    assert cli.main(["run", "--data", "data.jsonl", "--name", "reused", "--reuse-verdicts"]) == 0
    assert calls(server) == (6, 0)  # the same replies (a deterministic model): the same requests


def test_a_resume_takes_from_the_cache_what_another_run_paid_for(here, server):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "first"]) == 0

    planned(here, server, "planned")
    server.reset_stats()
    assert cli.main(["resume", "planned"]) == 0
    assert calls(server) == (6, 0)


def test_repeats_never_share_a_verdict(here, server):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "twice", "--repeats", "2"]) == 0
    # Both repeats got the same reply from a deterministic model: each was graded all the same.
    assert calls(server) == (12, 12 * CRITERIA)
    db = here / "runs" / "hbtui.sqlite"
    keys = db_rows(db, "SELECT c.repeat, v.cache_key FROM verdicts v JOIN conversations c ON c.id = v.conversation_id")
    assert len({key for _, key in keys}) == len(keys) == 12 * CRITERIA
    server.reset_stats()
    assert cli.main(["regrade", "twice"]) == 0
    assert calls(server) == (0, 0)
    assert [v[:4] for v in verdicts_of(db, 2)] == [v[:4] for v in verdicts_of(db, 1)]


def test_a_run_made_before_the_cache_is_put_in_it_when_regraded(here, server):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "old"]) == 0
    db = here / "runs" / "hbtui.sqlite"
    with sqlite3.connect(db) as conn:  # as a database from before the cache holds it
        conn.execute("DELETE FROM verdict_cache")
        conn.execute("UPDATE verdicts SET cache_key = NULL")
    server.reset_stats()
    assert cli.main(["regrade", "old"]) == 0
    assert calls(server) == (0, 0)


def test_cached_verdicts_outlive_the_run_that_paid_for_them(here, server):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "paid"]) == 0
    assert cli.main(["regrade", "paid", "--name", "kept"]) == 0
    db = here / "runs" / "hbtui.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM runs WHERE name = 'paid'")
        conn.execute("DELETE FROM conversations WHERE run_id = 1")
    assert db_rows(db, "SELECT count(*) FROM verdict_cache")[0][0] == 6 * CRITERIA
    server.reset_stats()
    assert cli.main(["regrade", "kept"]) == 0
    assert calls(server) == (0, 0)


def test_regrade_bad_inputs_are_one_line_and_write_nothing(here, server, capsys):
    server.control(context_chars=1)  # every reply refused: a run without a reply
    assert cli.main(["run", "--data", "data.jsonl", "--name", "empty"]) == cli.EXIT_INCOMPLETE
    server.control(context_chars=None)
    capsys.readouterr()
    db = here / "runs" / "hbtui.sqlite"
    before = db.read_bytes()
    for argv, says in (
        (["regrade", "nope"], "no run 'nope'"),
        (["regrade", "empty"], "run 1 has no replies to grade again"),
        (["regrade", "empty", "--name", "7"], "--name"),
        (["regrade", "empty", "--preset", "nope"], "no such preset"),
        (["regrade", "empty", "--temperature-grader", "hot"], "TEMPERATURE_GRADER (command line)"),
    ):
        assert cli.main(argv) == cli.EXIT_USAGE, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, (argv, err)
    assert db_rows(db, "SELECT count(*) FROM runs")[0][0] == 1
    assert db.read_bytes() == before


def test_a_run_whose_replies_are_not_all_there_is_not_regraded_and_an_incomplete_one_stays_incomplete(
    here, server, capsys
):
    planned(here, server, "half", status="interrupted")
    assert cli.main(["regrade", "half"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "run 1 is interrupted, its replies not all there: finish it first (hbtui resume 1)" in err
    # An incomplete run (replies that never came) gives an incomplete regrade, which says why.
    server.control(faults={"server_error": 0.5}, seed=2)
    assert cli.main(["run", "--data", "data.jsonl", "--name", "gaps", "--max-attempts", "1"]) == cli.EXIT_INCOMPLETE
    server.control(faults={})
    db = here / "runs" / "hbtui.sqlite"
    missing = db_rows(db, "SELECT count(*) FROM conversations WHERE run_id = 2 AND status = 'failed'")[0][0]
    assert missing
    capsys.readouterr()
    server.reset_stats()
    assert cli.main(["regrade", "gaps"]) == cli.EXIT_INCOMPLETE
    err = capsys.readouterr().err
    assert f"{missing} conversation" in err and "got no reply in run 2" in err and "hbtui regrade-errors 2" in err
    assert calls(server)[0] == 0
