"""The browser's reads: search over criteria and explanations (FTS5, schema migration), the
verdict filters and the sort orders, checked against a brute-force reading of the same rows."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from hbtui.store import ConversationFilter, Store, schema
from hbtui.store.search import SORT_CHOICES, match_expression
from tests.support.browse import synthetic_db
from tests.support.old_schema import make_database_before


@pytest.fixture(scope="module")
def synth_db(tmp_path_factory) -> tuple[Path, int]:
    return synthetic_db(tmp_path_factory.mktemp("browse") / "hbtui.sqlite", conversations=120, criteria_per=8, seed=5)


def rows(db: Path, sql: str, args=()) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


async def with_store(db: Path, fn):
    async with await Store.open(db) as store:
        return await fn(store)


def test_match_expression_quotes_every_word_so_operators_are_text():
    assert match_expression("chest pain") == '"chest"* "pain"*'
    assert match_expression('NEAR(a b) OR "x" *:') == '"NEAR"* "a"* "b"* "OR"* "x"*'
    assert match_expression("criterion", "explanation") == '{explanation} : ("criterion"*)'
    assert match_expression("  !? ") is None


def test_search_counts_criteria_and_explanations_as_a_scan_of_the_rows_does(synth_db):
    db, run_id = synth_db
    for word in ("fabricated", "satisfy", "jargon"):
        criteria = rows(
            db, "SELECT count(*) FROM verdicts WHERE run_id = ? AND criterion LIKE ?", (run_id, f"%{word}%")
        )
        explanations = rows(
            db, "SELECT count(*) FROM verdicts WHERE run_id = ? AND explanation LIKE ?", (run_id, f"%{word}%")
        )
        found = asyncio.run(with_store(db, lambda s, word=word: s.search_matches(run_id, word)))
        assert (found.criteria, found.explanations) == (criteria[0][0], explanations[0][0])
        assert found.criteria + found.explanations > 0


def test_search_filter_finds_conversations_by_criterion_text(synth_db):
    db, run_id = synth_db
    expected = {
        r[0]
        for r in rows(
            db,
            "SELECT DISTINCT conversation_id FROM verdicts WHERE run_id = ? AND criterion LIKE '%fabricated%'",
            (run_id,),
        )
    }
    assert expected
    found = asyncio.run(with_store(db, lambda s: s.conversation_ids(run_id, ConversationFilter(text="Fabricat"))))
    assert set(found) == expected


def test_matching_criteria_of_one_conversation(synth_db):
    db, run_id = synth_db
    conversation_id, idx = rows(
        db, "SELECT conversation_id, idx FROM verdicts WHERE run_id = ? AND criterion LIKE '%jargon%'", (run_id,)
    )[0]
    found = asyncio.run(with_store(db, lambda s: s.matching_criteria(conversation_id, "jargon")))
    assert idx in found
    texts = dict(rows(db, "SELECT idx, criterion FROM verdicts WHERE conversation_id = ?", (conversation_id,)))
    assert all("jargon" in texts[i].lower() for i in found)


STATES = {
    "met": lambda points, status: points > 0 and status == "met",
    "missed": lambda points, status: points > 0 and status == "not_met",
    "penalty": lambda points, status: points < 0 and status == "met",
    "error": lambda points, status: status == "error",
}


@pytest.mark.parametrize("tag", [None, "axis:accuracy", "level:cluster"])
@pytest.mark.parametrize("state", [None, *STATES])
def test_tag_and_verdict_state_filters(synth_db, tag, state):
    db, run_id = synth_db
    if tag is None and state is None:
        return
    expected = set()
    for conversation_id, points, status, tags in rows(
        db, "SELECT conversation_id, points, status, tags FROM verdicts WHERE run_id = ?", (run_id,)
    ):
        if (tag is None or tag in json.loads(tags)) and (state is None or STATES[state](points, status)):
            expected.add(conversation_id)
    flt = ConversationFilter(tag=tag, verdict_state=state)
    found = asyncio.run(with_store(db, lambda s: s.conversation_ids(run_id, flt)))
    assert set(found) == expected and len(found) == len(expected)


def sort_key(sort: str, row: tuple):
    position, score, n_met, positives, penalties, n_errors, status, reply, theme = row
    met = n_met / positives if positives and n_met is not None else None
    length = len(reply) if reply is not None else None
    last = float("inf")
    return {
        "position": (position,),
        "score": (score is None, score if score is not None else 0, position),
        "-score": (score is None, -(score or 0), position),
        "met": (met is None, met if met is not None else 0, position),
        "-met": (met is None, -(met or 0), position),
        "penalties": (-penalties, position),
        "errors": (status != "failed", -n_errors, position),
        "-length": (length is None, -(length or 0), position),
        "length": (length is None, length if length is not None else last, position),
        "theme": (theme is None, theme or "", position),
    }[sort]


@pytest.mark.parametrize("sort", list(SORT_CHOICES))
def test_every_sort_order_is_the_order_python_gives(synth_db, sort):
    db, run_id = synth_db
    table = rows(
        db,
        "SELECT id, position, score, n_met, (SELECT count(*) FROM verdicts v WHERE v.conversation_id = c.id"
        " AND v.points > 0), penalties, n_errors, status, reply, theme FROM conversations c WHERE run_id = ?",
        (run_id,),
    )
    expected = [r[0] for r in sorted(table, key=lambda r: sort_key(sort, r[1:]))]
    found = asyncio.run(with_store(db, lambda s: s.conversation_ids(run_id, None, sort)))
    assert found == expected


def test_criterion_tags_axis_first(synth_db):
    db, run_id = synth_db
    tags = asyncio.run(with_store(db, lambda s: s.criterion_tags(run_id)))
    assert tags[0].startswith("axis:") and "level:cluster" in tags and "level:example" in tags


def database_before_search(db: Path) -> None:
    """A database at the schema version just before the search index, holding one verdict."""
    make_database_before(db, schema.MIGRATE_ADD_BROWSER_INDEXES)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (id, name, status, created_at, dataset_name, dataset_sha256, model_test, model_grader,"
            " settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " (1, 'old', 'finished', 1.0, 'main', 'abc', 'm', 'g', '{}', '{}', 1, 1)"
        )
        conn.execute("INSERT INTO records (id, prompt_id, sha256, body) VALUES (1, 'p', 's', '{\"prompt\": []}')")
        conn.execute(
            "INSERT INTO conversations (id, run_id, position, repeat, prompt_id, record_id, example_tags, preview,"
            " n_criteria, status) VALUES (1, 1, 0, 0, 'p', 1, '[]', 'hello', 1, 'generated')"
        )
        conn.execute(
            "INSERT INTO verdicts (run_id, conversation_id, idx, criterion, points, tags, status, explanation)"
            " VALUES (1, 1, 0, 'Mentions anaphylaxis', 5, '[\"axis:accuracy\"]', 'met', 'It names epinephrine.')"
        )


def test_an_older_database_is_migrated_and_its_verdicts_indexed(tmp_path):
    db = tmp_path / "old.sqlite"
    database_before_search(db)

    async def search(store: Store):
        return (
            await store.search_matches(1, "anaphylaxis"),
            await store.search_matches(1, "epineph"),
            await store.conversation_ids(1, ConversationFilter(text="epinephrine")),
            await store.remember_review_position(1, 1, 0),
            await store.review_position(1),
        )

    criteria, explanations, ids, remembered, position = asyncio.run(with_store(db, search))
    assert remembered and position.conversation_id == 1  # the table of review positions is there
    assert (criteria.criteria, criteria.explanations) == (1, 0)
    assert (explanations.criteria, explanations.explanations) == (0, 1)
    assert ids == [1]
    assert rows(db, "PRAGMA user_version")[0][0] == schema.SCHEMA_VERSION


def test_changed_and_deleted_verdicts_leave_the_index(tmp_path):
    db = tmp_path / "old.sqlite"
    database_before_search(db)
    asyncio.run(with_store(db, lambda s: s.search_matches(1, "x")))  # migrates
    with sqlite3.connect(db) as conn:  # graded again, as a grade is written: stamped
        conn.execute("UPDATE verdicts SET explanation = 'It names adrenaline.', graded_at = 10.0")
    found = asyncio.run(with_store(db, lambda s: s.search_matches(1, "epinephrine")))
    assert found.explanations == 0
    assert asyncio.run(with_store(db, lambda s: s.search_matches(1, "adrenaline"))).explanations == 1

    async def delete(store: Store):
        await store.delete_run(await store.get_run(1))

    asyncio.run(with_store(db, delete))
    assert rows(db, "SELECT count(*) FROM verdict_text WHERE verdict_text MATCH 'adrenaline'") == [(0,)]


def test_the_criteria_view_reads_an_index_not_the_rows(synth_db):
    """The verdict rows carry the grader's whole output: grouping 60,000 of them from the rows
    took five times as long as from the covering index."""
    db, run_id = synth_db
    plan = rows(
        db,
        "EXPLAIN QUERY PLAN SELECT criterion, tags, max(points), count(*), sum(status = 'met')"
        " FROM verdicts WHERE run_id = ? GROUP BY criterion, tags",
        (run_id,),
    )
    assert any("COVERING INDEX verdicts_by_criterion" in step[-1] for step in plan)
