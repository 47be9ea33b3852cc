"""The store's reviews: appending a reviewer's flips, flags and undos, and reading them back with
the verdicts they are about (hbtui.core.reviews makes the states and the scores of them)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from hbtui.core.reviews import FLAG, FLIP, UNDO, Review, ScoredConversation, last_standing_of, standing, subject_of
from hbtui.core.scoring import GradedCriterion
from hbtui.core.verdicts import FAILED
from hbtui.store.connection import Connection
from hbtui.store.rows import ERROR, MET, NOT_MET, StoreError, verdict_met

REVIEW_COLUMNS = "id, conversation_id, idx, reviewer, at, action, met, note, undoes, graded_status, run_id"


def review_from_row(row) -> Review:
    review_id, conversation_id, idx, reviewer, at, action, met, note, undoes, graded_status, run_id = row
    return Review(
        review_id,
        conversation_id,
        idx,
        reviewer,
        at,
        action,
        None if met is None else bool(met),
        note,
        undoes,
        graded_status,
        run_id,
    )


class NothingToReview(StoreError):
    """A review asked of a verdict that cannot take it (no verdict yet, or its grading failed), or
    an undo with nothing of the reviewer's to take back."""


class StoreReviews(Connection):
    async def add_review(
        self,
        conversation_id: int,
        idx: int,
        reviewer: str,
        action: str,
        note: str | None = None,
        at: float | None = None,
    ) -> Review:
        """Append ``reviewer``'s flip or flag of one verdict, or the undo of their latest review
        of it. A flip holds the opposite of the verdict as it is reviewed now (the latest flip
        standing, else the grader's)."""
        async with self._transaction():
            row = await self._one(
                "SELECT v.run_id, v.status, v.criterion, c.prompt_id, c.reply FROM verdicts v"
                " JOIN conversations c ON c.id = v.conversation_id WHERE v.conversation_id = ? AND v.idx = ?",
                (conversation_id, idx),
            )
            if row is None:
                raise NothingToReview(f"no criterion {idx} in conversation {conversation_id}")
            run_id, status, criterion, prompt_id, reply = row
            if status not in (MET, NOT_MET):
                raise NothingToReview("only a graded verdict (met or not met) can be reviewed")
            history = await self.verdict_reviews(conversation_id, idx)
            met = undoes = None
            if action == UNDO:
                last = last_standing_of(history, reviewer, (conversation_id, idx))
                if last is None:
                    raise NothingToReview(f"{reviewer} has no review of this verdict to undo")
                undoes = last.id
            elif action == FLIP:
                flips = [r for r in standing(history) if r.action == FLIP]
                current = flips[-1].met if flips else verdict_met(status)
                met = not current
            elif action != FLAG:
                raise ValueError(f"unknown review action {action!r}")
            cursor = await self.db.execute(
                "INSERT INTO reviews (run_id, conversation_id, idx, reviewer, at, action, met, note, undoes,"
                " graded_status, subject) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    conversation_id,
                    idx,
                    reviewer,
                    time.time() if at is None else at,
                    action,
                    met,
                    note,
                    undoes,
                    status,
                    subject_of(prompt_id, reply, criterion),
                ),
            )
            review_id = cursor.lastrowid
            await cursor.close()
        return review_from_row(await self._one(f"SELECT {REVIEW_COLUMNS} FROM reviews WHERE id = ?", (review_id,)))

    async def verdict_reviews(self, conversation_id: int, idx: int) -> list[Review]:
        return [
            review_from_row(r)
            for r in await self._all(
                f"SELECT {REVIEW_COLUMNS} FROM reviews WHERE conversation_id = ? AND idx = ? ORDER BY id",
                (conversation_id, idx),
            )
        ]

    async def conversation_reviews(self, conversation_id: int) -> list[Review]:
        return [
            review_from_row(r)
            for r in await self._all(
                f"SELECT {REVIEW_COLUMNS} FROM reviews WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            )
        ]

    async def run_reviews(self, run_id: int) -> list[Review]:
        return [
            review_from_row(r)
            for r in await self._all(f"SELECT {REVIEW_COLUMNS} FROM reviews WHERE run_id = ? ORDER BY id", (run_id,))
        ]

    async def earlier_reviews(self, conversation_id: int) -> dict[int, list[Review]]:
        """Reviews made in other runs of the same replies and criteria as this conversation's
        (a regrade's hint), by criterion index: shown, never applied."""
        detail = await self._one("SELECT prompt_id, reply, run_id FROM conversations WHERE id = ?", (conversation_id,))
        if detail is None:
            return {}
        prompt_id, reply, run_id = detail
        subjects = {
            subject_of(prompt_id, reply, criterion): idx
            for idx, criterion in await self._all(
                "SELECT idx, criterion FROM verdicts WHERE conversation_id = ?", (conversation_id,)
            )
        }
        if not subjects:
            return {}
        marks = ",".join("?" * len(subjects))
        out: dict[int, list[Review]] = {}
        for subject, *row in await self._all(
            f"SELECT subject, {REVIEW_COLUMNS} FROM reviews WHERE subject IN ({marks}) AND run_id != ? ORDER BY id",
            (*subjects, run_id),
        ):
            out.setdefault(subjects[subject], []).append(review_from_row(row))
        return out

    async def review_inputs(
        self, run_id: int, conversation_ids: Sequence[int] | None = None
    ) -> list[ScoredConversation]:
        """The run's conversations as scoring reads them (hbtui.store.reads.scoring_inputs), with
        the key of each criterion, so that reviews can be laid over the verdicts; ``conversation_ids``:
        those alone (the conversation screen reads the reviewed ones, not the run)."""
        from hbtui.store.reads import parsed_tags

        only, args = "", [run_id]
        if conversation_ids is not None:
            only = f" AND {{column}} IN ({','.join('?' * len(conversation_ids))})"
            args += list(conversation_ids)
        conversations = await self._all(
            "SELECT id, status, example_tags FROM conversations WHERE run_id = ?"
            + only.format(column="id")
            + " ORDER BY position",
            args,
        )
        criteria: dict[int, tuple[list[int], list[GradedCriterion], list[int]]] = {}
        for conv_id, idx, points, tags, status in await self._all(
            "SELECT conversation_id, idx, points, tags, status FROM verdicts WHERE run_id = ?"
            + only.format(column="conversation_id")
            + " ORDER BY conversation_id, idx",
            args,
        ):
            indexes, graded, errors = criteria.setdefault(conv_id, ([], [], [0]))
            indexes.append(idx)
            graded.append(GradedCriterion(points, parsed_tags(tags), verdict_met(status)))
            errors[0] += status == ERROR
        out = []
        for conv_id, status, tags in conversations:
            indexes, graded, errors = criteria.get(conv_id, ([], [], [0]))
            out.append(ScoredConversation(conv_id, json.loads(tags), indexes, graded, status == FAILED, errors[0]))
        return out

    async def graded_scores(self, run_id: int) -> dict[int, float]:
        """Each scored conversation's score as graded, by id in the run's order: the score its row
        keeps (hbtui.store.rows.conversation_outcome, the same scoring as review_inputs gives)."""
        return dict(
            await self._all(
                "SELECT id, score FROM conversations WHERE run_id = ? AND score IS NOT NULL ORDER BY position",
                (run_id,),
            )
        )
