"""The full-text index of criterion texts and grader explanations, brought up to date per run
when the run is searched, never as it is written.

Triggers used to keep it on every write of a verdict: each criterion was tokenized as a run's
plan was stored and each explanation as it was graded, a fifth of the harness's time per call
for an index most runs never use. Now a run is indexed the first time it is searched, and before
each later search the verdicts graded since are indexed again (``verdicts_by_time`` finds them).

Why ``graded_at`` is enough: a run's verdicts are all written when the run is created (its plan,
a regrade's copy, an import), and after that only grading changes their text, stamping
``graded_at``. One process drives a run and writes its results in the order they were graded,
so a verdict graded after an indexing is stamped no earlier than the latest stamp that indexing
saw; ``ties`` counts the verdicts stamped exactly then, so one stamped the same instant but
written after is still found.

The index is a table of its own (a copy of the text, rowid = verdict id) rather than external
content: a re-graded verdict's row is replaced by rowid, where external content needs the exact
text it indexed to take a row out, which the verdict no longer holds.
"""

from __future__ import annotations

import asyncio
import sqlite3

from hbtui.store.connection import Connection

# A read-only database cannot hold a run's index: there it is kept in the connection's own
# temporary schema (which SQLite searches before the file's), for as long as the app is open.
IN_MEMORY_INDEX = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.verdict_text USING fts5("
    " criterion, explanation, tokenize='unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS temp.verdict_text_runs (run_id INTEGER PRIMARY KEY, graded_to REAL, ties INTEGER NOT NULL)",
)


INDEX_CHUNK = 4000  # verdicts indexed in one statement: some 40 ms


class StoreSearchIndex(Connection):
    _indexing: asyncio.Lock | None = None

    async def search_index_behind(self, run_id: int) -> int:
        """How many of the run's verdicts its next search indexes first (0: it is ready)."""
        state = await self._one("SELECT graded_to, ties FROM verdict_text_runs WHERE run_id = ?", (run_id,))
        if state is None:
            return (await self._one("SELECT count(*) FROM verdicts WHERE run_id = ?", (run_id,)))[0]
        graded_to, ties = state
        if graded_to is None:  # none was graded then (a pending or imported run)
            return (
                await self._one("SELECT count(*) FROM verdicts WHERE run_id = ? AND graded_at IS NOT NULL", (run_id,))
            )[0]
        later, same = await self._one(
            "SELECT count(*) FILTER (WHERE graded_at > ?), count(*) FILTER (WHERE graded_at = ?) FROM verdicts"
            " WHERE run_id = ? AND graded_at >= ?",
            (graded_to, graded_to, run_id, graded_to),
        )
        # A tie graded again moves from ``same`` to ``later``: counted there.
        return later + max(0, same - ties)

    async def index_for_search(self, run_id: int) -> int:
        """Bring the run's part of the index up to date; how many verdicts it indexed."""
        if self._indexing is None:
            self._indexing = asyncio.Lock()
        async with self._indexing:  # the list and the match counts ask at once, on one connection
            if not await self.search_index_behind(run_id):
                return 0
            try:
                return await self._index(run_id)
            except sqlite3.OperationalError as exc:
                if "readonly" not in str(exc):
                    raise
            for statement in IN_MEMORY_INDEX:
                await self.db.execute(statement)
            return await self._index(run_id)

    async def _index(self, run_id: int) -> int:
        state = await self._one("SELECT graded_to FROM verdict_text_runs WHERE run_id = ?", (run_id,))
        since, args = "", [run_id]
        if state is not None:
            since = " AND graded_at IS NOT NULL" if state[0] is None else " AND graded_at >= ?"
            args += [] if state[0] is None else [state[0]]
        # Taken before the text is read: whatever is graded from here on is indexed (again) next time.
        graded_to, ties = await self._one(
            "SELECT last, (SELECT count(*) FROM verdicts WHERE run_id = ? AND graded_at = last)"
            " FROM (SELECT max(graded_at) AS last FROM verdicts WHERE run_id = ?)",
            (run_id, run_id),
        )
        ids = [r[0] for r in await self._all(f"SELECT id FROM verdicts WHERE run_id = ?{since} ORDER BY id", args)]
        # In short transactions of a few thousand verdicts: the app's other reads share this
        # connection and wait for each statement, a page of the list no longer than for one chunk.
        for start in range(0, max(len(ids), 1), INDEX_CHUNK):
            chunk = ids[start : start + INDEX_CHUNK]
            async with self._transaction():
                if chunk:
                    await self.db.execute(
                        "INSERT OR REPLACE INTO verdict_text (rowid, criterion, explanation)"
                        # A first indexing reads the chunk by rowid (``+`` keeps SQLite off the
                        # run's index, which it would scan whole for each chunk); later ones, by time.
                        f" SELECT id, criterion, explanation FROM verdicts WHERE {'run_id' if since else '+run_id'} = ?"
                        f"{since} AND id BETWEEN ? AND ?",
                        (*args, chunk[0], chunk[-1]),
                    )
                if start + INDEX_CHUNK >= len(ids):
                    await self.db.execute(
                        "INSERT OR REPLACE INTO verdict_text_runs (run_id, graded_to, ties) VALUES (?, ?, ?)",
                        (run_id, graded_to, ties),
                    )
        return len(ids)
