"""The search index kept off a run's write path (hbtui.store.search_index): a run indexed when it
is first searched, brought up to date before each later search, gone with its run; and the
migration that took the triggers away."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from hbtui.store import ConversationFilter, Store, _read_only_uri, schema
from tests.support.old_schema import make_database_before


def rows(db: Path, sql: str, args=()) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def write(db: Path, sql: str, args=()) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, args)
    conn.close()


def add_run(db: Path, run_id: int, verdicts: list[tuple[str, str | None, float | None]]) -> None:
    """A run of one conversation whose verdicts are (criterion, explanation, graded_at): a pending
    one has no explanation, an imported one no graded_at."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (id, name, status, created_at, dataset_name, dataset_sha256, model_test, model_grader,"
            " settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " (?, ?, 'finished', 1.0, 'main', 'abc', 'm', 'g', '{}', '{}', 1, ?)",
            (run_id, f"run-{run_id}", len(verdicts)),
        )
        conn.execute(
            "INSERT OR IGNORE INTO records (id, prompt_id, sha256, body) VALUES (1, 'p', 's', '{\"prompt\": []}')"
        )
        conn.execute(
            "INSERT INTO conversations (id, run_id, position, repeat, prompt_id, record_id, example_tags, preview,"
            " n_criteria, status) VALUES (?, ?, 0, 0, 'p', 1, '[]', 'hello', ?, 'generated')",
            (run_id, run_id, len(verdicts)),
        )
        conn.executemany(
            "INSERT INTO verdicts (run_id, conversation_id, idx, criterion, points, tags, status, explanation,"
            " graded_at) VALUES (?, ?, ?, ?, 5, '[]', ?, ?, ?)",
            [
                (run_id, run_id, idx, criterion, "pending" if explanation is None else "met", explanation, at)
                for idx, (criterion, explanation, at) in enumerate(verdicts)
            ],
        )
    conn.close()


def regrade(db: Path, run_id: int, idx: int, explanation: str, at: float) -> None:
    """What a grade writes (hbtui.store.writes.write_batch): the explanation, stamped."""
    write(
        db,
        "UPDATE verdicts SET status = 'met', explanation = ?, graded_at = ? WHERE run_id = ? AND idx = ?",
        (explanation, at, run_id, idx),
    )


async def with_store(db: Path, fn, **options):
    async with await Store.open(db, **options) as store:
        return await fn(store)


def search(db: Path, run_id: int, text: str, **options) -> tuple[int, int]:
    found = asyncio.run(with_store(db, lambda s: s.search_matches(run_id, text), **options))
    return found.criteria, found.explanations


def fresh_db(tmp_path: Path) -> Path:
    db = tmp_path / "hbtui.sqlite"

    async def create():
        async with await Store.open(db):
            pass

    asyncio.run(create())
    return db


def test_a_run_is_indexed_when_first_searched_pending_and_imported_verdicts_included(tmp_path):
    db = fresh_db(tmp_path)
    add_run(
        db,
        1,
        [
            ("Mentions anaphylaxis", "It names epinephrine.", 100.0),
            ("Advises rest", None, None),  # pending: its criterion is searchable all the same
            ("Explains dosage", "Imported without a time.", None),
        ],
    )
    assert rows(db, "SELECT count(*) FROM verdict_text") == [(0,)]  # storing a run indexes nothing
    assert search(db, 1, "anaphylaxis") == (1, 0)
    assert search(db, 1, "epineph") == (0, 1)
    assert search(db, 1, "rest") == (1, 0)
    assert search(db, 1, "imported") == (0, 1)
    ids = asyncio.run(with_store(db, lambda s: s.conversation_ids(1, ConversationFilter(text="dosage"))))
    assert ids == [1]
    assert asyncio.run(with_store(db, lambda s: s.matching_criteria(1, "rest"))) == [1]


def test_the_list_and_a_conversation_index_the_run_they_search(tmp_path):
    """The list's filter and a conversation's matches may come before the match counts."""
    db = fresh_db(tmp_path)
    add_run(db, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0)])
    ids = asyncio.run(with_store(db, lambda s: s.conversation_ids(1, ConversationFilter(text="epinephrine"))))
    assert ids == [1]
    (tmp_path / "other").mkdir()
    db2 = fresh_db(tmp_path / "other")
    add_run(db2, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0)])
    assert asyncio.run(with_store(db2, lambda s: s.matching_criteria(1, "anaphylaxis"))) == [0]


def test_verdicts_graded_after_a_search_are_found_by_the_next(tmp_path):
    db = fresh_db(tmp_path)
    add_run(db, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0), ("Advises rest", None, None)])
    add_run(db, 2, [("Advises rest", None, None), ("Other run", None, None)])
    assert search(db, 1, "sleep") == (0, 0)
    assert search(db, 2, "sleep") == (0, 0)  # a run never graded: indexed with no time
    regrade(db, 1, 1, "It says to sleep.", 200.0)
    regrade(db, 2, 0, "Sleep, it says.", 150.0)
    assert search(db, 1, "sleep") == (0, 1)
    assert search(db, 2, "sleep") == (0, 1)
    # Stamped the same instant as the latest the index saw, but written after it.
    add_run(db, 3, [("First", "one", 300.0), ("Second", None, None)])
    assert search(db, 3, "two") == (0, 0)
    regrade(db, 3, 1, "two", 300.0)
    assert search(db, 3, "two") == (0, 1)


def test_a_regraded_verdicts_old_explanation_is_no_longer_found(tmp_path):
    db = fresh_db(tmp_path)
    add_run(db, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0), ("Advises rest", "Sleep.", 100.0)])
    assert search(db, 1, "epinephrine") == (0, 1)
    # Both were stamped the latest time the index saw: one graded again leaves the other there.
    regrade(db, 1, 0, "It names adrenaline.", 200.0)  # regrade-errors or a resume grading it again
    assert search(db, 1, "epinephrine") == (0, 0)
    assert search(db, 1, "adrenaline") == (0, 1)
    regrade(db, 1, 1, "It says to lie down.", 250.0)
    assert search(db, 1, "sleep") == (0, 0)
    assert search(db, 1, "lie") == (0, 1)


def test_a_deleted_run_leaves_no_index_rows(tmp_path):
    db = fresh_db(tmp_path)
    add_run(db, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0)])
    add_run(db, 2, [("Advises rest", "It says sleep.", 100.0)])
    assert search(db, 1, "epinephrine") == (0, 1)
    assert search(db, 2, "sleep") == (0, 1)

    async def delete(store: Store):
        await store.delete_run(await store.get_run(1))

    asyncio.run(with_store(db, delete))
    assert rows(db, "SELECT rowid FROM verdict_text") == rows(db, "SELECT id FROM verdicts WHERE run_id = 2")
    assert rows(db, "SELECT run_id FROM verdict_text_runs") == [(2,)]
    assert search(db, 2, "sleep") == (0, 1)


def test_a_read_only_database_is_searched_with_an_index_in_memory(tmp_path):
    db = fresh_db(tmp_path)
    add_run(db, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0)])

    async def search_read_only():
        # As Store.open connects where the file cannot be written (as root, a chmod would not stop it).
        store = await Store._connect(db, _read_only_uri(db), create=False, writable=False)
        async with store:
            found = await store.search_matches(1, "epinephrine")
            return found.criteria, found.explanations

    assert asyncio.run(search_read_only()) == (0, 1)
    assert rows(db, "SELECT count(*) FROM verdict_text_runs") == [(0,)]  # the file untouched


def test_the_migration_takes_the_triggers_away_and_runs_are_indexed_when_searched(tmp_path):
    db = tmp_path / "old.sqlite"
    make_database_before(db, schema.MIGRATE_INDEX_SEARCH_WHEN_SEARCHED)
    add_run(db, 1, [("Mentions anaphylaxis", "It names epinephrine.", 100.0), ("Advises rest", None, None)])
    assert rows(db, "SELECT count(*) FROM verdict_text WHERE verdict_text MATCH 'anaphylaxis'") == [(1,)]

    async def opened(store: Store):
        pass

    asyncio.run(with_store(db, opened))
    assert rows(db, "PRAGMA user_version") == [(schema.SCHEMA_VERSION,)]
    assert rows(db, "SELECT name FROM sqlite_master WHERE type = 'trigger'") == []
    assert rows(db, "SELECT count(*) FROM verdict_text") == [(0,)]
    add_run(db, 2, [("Advises fluids", "Water.", 100.0)])
    assert rows(db, "SELECT count(*) FROM verdict_text") == [(0,)]  # a new run's verdicts: not yet
    assert search(db, 1, "anaphylaxis") == (1, 0)
    assert search(db, 1, "rest") == (1, 0)
    assert search(db, 2, "water") == (0, 1)
    regrade(db, 1, 1, "Sleep well.", 200.0)
    assert search(db, 1, "sleep") == (0, 1)


def test_a_run_indexed_in_many_chunks_is_indexed_whole(tmp_path, monkeypatch):
    from hbtui.store import search_index

    monkeypatch.setattr(search_index, "INDEX_CHUNK", 2)
    db = fresh_db(tmp_path)
    add_run(db, 1, [(f"Criterion {n}", None if n % 2 else f"Reason {n}", None if n % 2 else 100.0) for n in range(5)])
    assert search(db, 1, "criterion") == (5, 0)
    assert search(db, 1, "reason") == (0, 3)
    assert rows(db, "SELECT count(*) FROM verdict_text_runs") == [(1,)]
