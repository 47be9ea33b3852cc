"""A search's conversations found once per text and database version (hbtui.store.search_hits):
the list's count, pages and order, and the match counts, equal to the search written out in SQL
(``search.text_clause``) on the same real SQLite file; and read again once the database changes."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hbtui.store import ConversationFilter, Store
from hbtui.store.search import SORTS, like_pattern, match_expression
from hbtui.store.search_hits import SEARCHES_KEPT
from tests.support.browse import synthetic_db


@pytest.fixture(scope="module")
def synth_db(tmp_path_factory) -> tuple[Path, int]:
    return synthetic_db(tmp_path_factory.mktemp("hits") / "hbtui.sqlite", conversations=120, criteria_per=8, seed=11)


def rows(db: Path, sql: str, args=()) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        found = conn.execute(sql, args).fetchall()
    conn.close()
    return found


def written_out(db: Path, run_id: int, flt: ConversationFilter, sort: str) -> list[int]:
    """The conversations of ``flt`` as the filter's own SQL finds them, the text searched in place."""
    where, args = flt.where()
    return [
        r[0]
        for r in rows(
            db, f"SELECT id FROM conversations WHERE run_id = ?{where} ORDER BY {SORTS[sort]}", (run_id, *args)
        )
    ]


def matches_written_out(db: Path, run_id: int, text: str) -> tuple[int, int, int]:
    pattern = like_pattern(text)
    in_text = rows(
        db,
        "SELECT count(*) FROM conversations WHERE run_id = ? AND (preview LIKE ? ESCAPE '\\'"
        " OR reply LIKE ? ESCAPE '\\' OR prompt_id LIKE ? ESCAPE '\\')",
        (run_id, pattern, pattern, pattern),
    )[0][0]
    counts = []
    for column in ("criterion", "explanation"):
        expression = match_expression(text, column)
        counts.append(
            0
            if expression is None
            else rows(
                db,
                "SELECT count(*) FROM verdict_text f JOIN verdicts v ON v.id = f.rowid"
                " WHERE f.verdict_text MATCH ? AND v.run_id = ?",
                (expression, run_id),
            )[0][0]
        )
    return in_text, counts[0], counts[1]


def texts(db: Path, run_id: int) -> list[str]:
    """Texts that find something each way: a prompt's words, a reply's, a prompt_id, a criterion's
    word, an explanation's, one word from a criterion with one from its explanation (in no one
    column), LIKE's wildcards, and none."""
    preview, reply, prompt_id = rows(
        db, "SELECT preview, reply, prompt_id FROM conversations WHERE run_id = ? AND reply IS NOT NULL", (run_id,)
    )[3]
    criterion, explanation = rows(
        db,
        "SELECT criterion, explanation FROM verdicts WHERE run_id = ? AND explanation IS NOT NULL ORDER BY id",
        (run_id,),
    )[5]
    criterion_word = max(criterion.split(), key=len).strip(".,;:()")
    explanation_word = next(
        w.strip(".,;:()")
        for w in sorted(explanation.split(), key=len, reverse=True)
        if w.lower() not in criterion.lower()
    )
    return [
        preview[2:14],
        reply[10:25],
        prompt_id[:6],
        criterion_word,
        explanation_word,
        f"{criterion_word} {explanation_word}",
        "fabricated",
        "satisfy",
        "%",
        "_",
        "100%",
        "!?",
        "no such words anywhere",
    ]


async def searched(store: Store, run_id: int, flt: ConversationFilter, sort: str) -> tuple[int, list[int], list[int]]:
    total = await store.count_conversations(run_id, flt)
    page = [s.id for s in await store.conversation_page(run_id, flt, sort, offset=7, limit=25)]
    return total, page, await store.conversation_ids(run_id, flt, sort)


def test_the_list_and_the_match_counts_are_what_the_search_written_out_finds(synth_db):
    db, run_id = synth_db

    async def check() -> int:
        checked = 0
        async with await Store.open(db) as store:
            await store.index_for_search(run_id)  # the SQL written out reads the same index
            for text in texts(db, run_id):
                for flt in (
                    ConversationFilter(text=text),
                    ConversationFilter(text=text, has_penalties=True),
                    ConversationFilter(text=text, tag="axis:accuracy", verdict_state="missed"),
                ):
                    for sort in ("position", "-score", "met", "theme"):
                        expected = written_out(db, run_id, flt, sort)
                        assert await searched(store, run_id, flt, sort) == (len(expected), expected[7:32], expected)
                        checked += bool(expected)
                matches = await store.search_matches(run_id, text)
                assert (matches.in_text, matches.criteria, matches.explanations) == matches_written_out(
                    db, run_id, text
                )
        return checked

    assert asyncio.run(check()) > 20  # most of them found something


def test_a_search_is_read_again_once_another_connection_or_the_stores_own_changes_the_database(synth_db, tmp_path):
    source, run_id = synth_db
    db = tmp_path / "hbtui.sqlite"
    with sqlite3.connect(source) as conn, sqlite3.connect(db) as copy:
        conn.backup(copy)
    conn.close()
    copy.close()
    conversation_id, idx, graded_at = rows(
        db,
        "SELECT conversation_id, idx, graded_at FROM verdicts WHERE run_id = ? AND graded_at IS NOT NULL"
        " ORDER BY graded_at DESC LIMIT 1",
        (run_id,),
    )[0]
    (other,) = rows(db, "SELECT id FROM conversations WHERE run_id = ? AND id != ? LIMIT 1", (run_id, conversation_id))[
        0
    ]

    async def check() -> None:
        async with await Store.open(db) as store:
            word = ConversationFilter(text="zebrafish")
            assert await store.conversation_ids(run_id, word) == []
            first = await store.search_hits(run_id, "zebrafish")
            assert await store.search_hits(run_id, "zebrafish") is first  # nothing changed: not read again

            with sqlite3.connect(db) as conn:  # a grade written by the run's driver
                conn.execute(
                    "UPDATE verdicts SET explanation = 'Mentions zebrafish.', graded_at = ?"
                    " WHERE conversation_id = ? AND idx = ?",
                    (graded_at + 1, conversation_id, idx),
                )
            conn.close()
            assert await store.conversation_ids(run_id, word) == [conversation_id]
            assert (await store.search_matches(run_id, "zebrafish")).explanations == 1

            # A change through the store's own connection: SQLite's data_version does not move.
            await store.db.execute("UPDATE conversations SET reply = 'a zebrafish reply' WHERE id = ?", (other,))
            await store.db.commit()
            assert await store.count_conversations(run_id, word) == 2
            assert (await store.search_matches(run_id, "zebrafish")).in_text == 1

    asyncio.run(check())


def test_the_last_searches_are_kept_and_older_ones_read_again(synth_db):
    db, run_id = synth_db

    async def check() -> None:
        async with await Store.open(db) as store:
            kept = {text: await store.search_hits(run_id, text) for text in [f"w{n}" for n in range(SEARCHES_KEPT)]}
            assert all([await store.search_hits(run_id, text) is hits for text, hits in kept.items()])
            await store.search_hits(run_id, "one more")
            assert await store.search_hits(run_id, "w0") is not kept["w0"]  # the oldest made room
            assert await store.search_hits(run_id, "w7") is kept["w7"]

    asyncio.run(check())
