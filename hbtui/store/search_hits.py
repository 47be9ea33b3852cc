"""A search's conversations, found once for each text and database version.

Applying a search read the run three times over: the list's count and its first page each
scanned every reply for the text and asked the full-text index for the conversations behind
its words, and the filter bar's match counts did both again. At 5,000 conversations that was
36 ms of the 65 ms between Enter and the matches on screen. Now one read finds the
conversations a search matches and where it matched; the count, every page and the match counts
take them from there (a JSON array of ids, one parameter to ``json_each``), until the database
changes. Nothing is written for it, so a search never holds a transaction open beside the app's
own writes.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from hbtui.store.connection import ReadsByVersion
from hbtui.store.search import like_clause, match_expression
from hbtui.store.search_index import StoreSearchIndex

# Searches remembered: the last few texts typed, each a few bytes per conversation matched.
SEARCHES_KEPT = 8


@dataclass(slots=True, frozen=True)
class SearchMatches:
    """Where a search matched in one run: conversations whose prompt, reply or prompt_id holds
    it, criteria whose text has its words, and explanations that have them."""

    in_text: int
    criteria: int
    explanations: int


@dataclass(slots=True, frozen=True)
class SearchHits:
    """The conversations of a run a search matches, and where it matched."""

    conversations_json: str  # their ids, ascending, as a JSON array
    matches: SearchMatches


class StoreSearchHits(StoreSearchIndex):
    def __init__(self, connection: aiosqlite.Connection, path: Path) -> None:
        super().__init__(connection, path)
        self._search_hits: ReadsByVersion[SearchHits] = ReadsByVersion(SEARCHES_KEPT)  # by (run, text)
        self._searching = asyncio.Lock()  # the list and the match counts ask at once: one reads

    async def search_hits(self, run_id: int, text: str) -> SearchHits:
        """The conversations of the run whose preview, reply or prompt_id holds ``text``, or one of
        whose criteria or explanations has its words (``search.text_clause``, read once)."""
        key = (run_id, text)
        async with self._searching:
            # Nothing written since the last read: its index was up to date, and so is what it found.
            hits = self._search_hits.get(key, await self.database_version())
            if hits is not None:
                return hits
            await self.index_for_search(run_id)
            # Taken after the index's own writes and before the reads: a change made while they
            # run moves it, and the next search reads again.
            version = await self.database_version()
            hits = await self._read_search_hits(run_id, text)
            self._search_hits.put(key, version, hits)
            return hits

    async def _read_search_hits(self, run_id: int, text: str) -> SearchHits:
        condition, args = like_clause(text)
        in_text = [
            row[0]
            for row in await self._all(
                f"SELECT id FROM conversations WHERE run_id = ? AND ({condition})", (run_id, *args)
            )
        ]
        found = set(in_text)
        criteria = explanations = 0
        expression = match_expression(text)
        if expression is not None:
            # One pass over the verdicts with every word somewhere in their text: their
            # conversations, and how many have all the words in the criterion, or in the
            # explanation (a subset each: the same words, in one column). CROSS JOIN keeps the
            # index first: joined the other way, SQLite planned a scan of the run's verdicts with
            # a full-text query for each (minutes for 60,000).
            criteria, explanations, conversations = await self._one(
                "SELECT count(*) FILTER (WHERE v.id IN (SELECT rowid FROM verdict_text WHERE verdict_text MATCH ?)),"
                " count(*) FILTER (WHERE v.id IN (SELECT rowid FROM verdict_text WHERE verdict_text MATCH ?)),"
                " json_group_array(DISTINCT v.conversation_id)"
                " FROM verdict_text f CROSS JOIN verdicts v ON v.id = f.rowid"
                " WHERE f.verdict_text MATCH ? AND v.run_id = ?",
                (match_expression(text, "criterion"), match_expression(text, "explanation"), expression, run_id),
            )
            found.update(json.loads(conversations))
        return SearchHits(
            json.dumps(sorted(found), separators=(",", ":")), SearchMatches(len(in_text), criteria, explanations)
        )
