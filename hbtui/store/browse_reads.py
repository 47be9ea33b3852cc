"""Reads of the results browser beyond the list's pages: where a search matched, the tags a
run's criteria carry, every distinct criterion of a run with its outcomes, a record's ideal
completion; and its one write, where the reviewer left each run."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from hbtui.store.connection import ReadsByVersion
from hbtui.store.search import match_expression
from hbtui.store.search_hits import SearchMatches, StoreSearchHits

# What the criteria view groups by: the same text with the same tags is one rubric item, which
# HealthBench's consensus criteria repeat across prompts.
CRITERIA_GROUP = "criterion, tags"


@dataclass(slots=True, frozen=True)
class CriterionStats:
    """One distinct criterion of a run and its outcomes over the conversations that have it."""

    criterion: str
    tags_json: str  # as stored: the key, with the text, of the conversations behind it
    points: float
    conversations: int
    met: int  # for a penalty: triggered
    not_met: int
    errors: int

    @property
    def tags(self) -> list[str]:
        return json.loads(self.tags_json)

    @property
    def graded(self) -> int:
        return self.met + self.not_met

    @property
    def met_fraction(self) -> float | None:
        return self.met / self.graded if self.graded else None


@dataclass(slots=True, frozen=True)
class IdealCompletions:
    """A record's ``ideal_completions_data``: the physician's completion, its completion group,
    and the reference completions it was written from (HealthBench gives none for some records)."""

    ideal: str | None
    group: str | None
    references: tuple[str, ...]


def ideal_completions(body: str) -> IdealCompletions | None:
    """From a record's JSON as stored; None when it has no ideal completion (or an unreadable one)."""
    data = json.loads(body).get("ideal_completions_data")
    if not isinstance(data, dict):
        return None
    ideal, group = data.get("ideal_completion"), data.get("ideal_completions_group")
    references = data.get("ideal_completions_ref_completions") or []
    found = IdealCompletions(
        ideal if isinstance(ideal, str) and ideal.strip() else None,
        str(group) if group is not None else None,
        tuple(r for r in references if isinstance(r, str)) if isinstance(references, list) else (),
    )
    return found if found.ideal or found.references else None


@dataclass(slots=True, frozen=True)
class RepeatGroup:
    """One prompt of a run made with ``--repeats K``: its K conversations and scores, by repeat."""

    prompt_id: str
    theme: str | None
    position: int  # of its first repeat
    conversations: tuple[int, ...]
    scores: tuple[float | None, ...]

    @property
    def scored(self) -> list[float]:
        return [s for s in self.scores if s is not None]

    @property
    def spread(self) -> float | None:
        """Highest minus lowest score of its repeats (None below two scores)."""
        scored = self.scored
        return max(scored) - min(scored) if len(scored) >= 2 else None

    @property
    def mean(self) -> float | None:
        scored = self.scored
        return sum(scored) / len(scored) if scored else None


@dataclass(slots=True, frozen=True)
class ReviewPosition:
    """Where the reviewer was in a run: a conversation (and its list position) and a criterion
    index (-1: none selected)."""

    conversation_id: int
    position: int
    criterion: int


class StoreBrowse(StoreSearchHits):
    def __init__(self, connection: aiosqlite.Connection, path: Path) -> None:
        super().__init__(connection, path)
        self._criteria_stats: ReadsByVersion[list[CriterionStats]] = ReadsByVersion(1)  # by run

    async def repeat_groups(self, run_id: int) -> list[RepeatGroup]:
        """The run's conversations grouped by record (its repeats), in the order of first position."""
        groups: dict[int, list[tuple]] = {}
        for record_id, prompt_id, theme, position, repeat, conversation_id, score in await self._all(
            "SELECT record_id, prompt_id, theme, position, repeat, id, score FROM conversations"
            " WHERE run_id = ? ORDER BY position",
            (run_id,),
        ):
            groups.setdefault(record_id, []).append((repeat, position, conversation_id, score, prompt_id, theme))
        found = []
        for members in groups.values():
            members.sort(key=lambda member: member[0])  # by repeat
            _, _, _, _, prompt_id, theme = members[0]
            found.append(
                RepeatGroup(
                    prompt_id,
                    theme,
                    min(position for _, position, *_ in members),
                    tuple(conversation_id for _, _, conversation_id, *_ in members),
                    tuple(score for _, _, _, score, *_ in members),
                )
            )
        return found

    async def review_position(self, run_id: int) -> ReviewPosition | None:
        row = await self._one(
            "SELECT p.conversation_id, c.position, p.criterion FROM review_positions p"
            " JOIN conversations c ON c.id = p.conversation_id WHERE p.run_id = ?",
            (run_id,),
        )
        return ReviewPosition(*row) if row else None

    async def remember_review_position(self, run_id: int, conversation_id: int, criterion: int) -> bool:
        """Stored for the next opening; False where it cannot be (a read-only database): the
        place is a convenience, never a reason to interrupt a review."""
        try:
            async with self._transaction(immediate=False):
                await self.db.execute(
                    "INSERT INTO review_positions (run_id, conversation_id, criterion, at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (run_id) DO UPDATE SET conversation_id = excluded.conversation_id,"
                    " criterion = excluded.criterion, at = excluded.at",
                    (run_id, conversation_id, criterion, time.time()),
                )
        except sqlite3.Error:
            return False
        return True

    async def ideal_completions(self, conversation_id: int) -> IdealCompletions | None:
        """The ideal completion of a conversation's record: read from the record as the run
        stored it (the dataset line, whole), so runs made before this view have it too."""
        row = await self._one(
            "SELECT r.body FROM conversations c JOIN records r ON r.id = c.record_id WHERE c.id = ?",
            (conversation_id,),
        )
        return ideal_completions(row[0]) if row else None

    async def search_matches(self, run_id: int, text: str) -> SearchMatches:
        return (await self.search_hits(run_id, text)).matches

    async def matching_criteria(self, conversation_id: int, text: str) -> list[int]:
        """Indexes of the conversation's criteria whose text or explanation has the words of ``text``."""
        expression = match_expression(text)
        if expression is None:
            return []
        run = await self._one("SELECT run_id FROM conversations WHERE id = ?", (conversation_id,))
        if run is None:
            return []
        await self.index_for_search(run[0])
        rows = await self._all(
            "SELECT idx FROM verdicts WHERE conversation_id = ?"
            " AND id IN (SELECT rowid FROM verdict_text WHERE verdict_text MATCH ?) ORDER BY idx",
            (conversation_id, expression),
        )
        return [r[0] for r in rows]

    async def criterion_tags(self, run_id: int) -> list[str]:
        """Every tag some criterion of the run carries, axis first, then cluster, level, others."""
        rows = await self._all("SELECT DISTINCT tags FROM verdicts WHERE run_id = ?", (run_id,))
        tags = {tag for (text,) in rows for tag in json.loads(text)}
        order = {"axis": 0, "cluster": 1, "level": 2}
        return sorted(tags, key=lambda tag: (order.get(tag.partition(":")[0], 3), tag))

    async def criteria_stats(self, run_id: int) -> list[CriterionStats]:
        """Every distinct criterion of the run with its outcomes. Read again only when the
        database changed since the last read: the aggregate over a run's verdicts takes 30 ms at
        60,000, which every opening of the criteria view paid."""
        version = await self.database_version()
        cached = self._criteria_stats.get(run_id, version)
        if cached is not None:
            return list(cached)
        rows = await self._all(
            f"SELECT criterion, tags, max(points), count(*), sum(status = 'met'), sum(status = 'not_met'),"
            f" sum(status = 'error') FROM verdicts WHERE run_id = ? GROUP BY {CRITERIA_GROUP}",
            (run_id,),
        )
        stats = [
            CriterionStats(text, tags, float(points), n, met, not_met, errors)
            for text, tags, points, n, met, not_met, errors in rows
        ]
        self._criteria_stats.put(run_id, version, stats)
        return list(stats)

    async def criterion_conversations(self, run_id: int, criterion: str, tags_json: str) -> list[tuple[int, int]]:
        """(conversation id, criterion index) of every conversation of the run with this criterion,
        in position order."""
        rows = await self._all(
            "SELECT c.id, v.idx FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
            " WHERE v.run_id = ? AND v.criterion = ? AND v.tags = ? ORDER BY c.position",
            (run_id, criterion, tags_json),
        )
        return [(r[0], r[1]) for r in rows]
