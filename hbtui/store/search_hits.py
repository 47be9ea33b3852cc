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
from collections import OrderedDict
from dataclasses import dataclass

from hbtui.store.search import like_pattern, match_expression
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
    # (run, text) -> (the database version it was read at, what was found); oldest first.
    _search_hits: OrderedDict[tuple[int, str], tuple[tuple[int, int], SearchHits]] | None = None
    _searching: asyncio.Lock | None = None

    async def search_hits(self, run_id: int, text: str) -> SearchHits:
        """The conversations of the run whose preview, reply or prompt_id holds ``text``, or one of
        whose criteria or explanations has its words (``search.text_clause``, read once)."""
        if self._searching is None:
            self._searching = asyncio.Lock()
            self._search_hits = OrderedDict()
        cache = self._search_hits
        assert cache is not None
        async with self._searching:  # the list and the match counts ask at once: one reads
            await self.index_for_search(run_id)
            # Taken before the reads: a change made while they run moves it, and the next search
            # reads again.
            version = await self.database_version()
            key = (run_id, text)
            cached = cache.get(key)
            if cached is not None and cached[0] == version:
                cache.move_to_end(key)
                return cached[1]
            hits = await self._read_search_hits(run_id, text)
            cache[key] = (version, hits)
            cache.move_to_end(key)
            while len(cache) > SEARCHES_KEPT:
                cache.popitem(last=False)
            return hits

    async def _read_search_hits(self, run_id: int, text: str) -> SearchHits:
        pattern = like_pattern(text)
        in_text = [
            row[0]
            for row in await self._all(
                "SELECT id FROM conversations WHERE run_id = ? AND (preview LIKE ? ESCAPE '\\'"
                " OR reply LIKE ? ESCAPE '\\' OR prompt_id LIKE ? ESCAPE '\\')",
                (run_id, pattern, pattern, pattern),
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
