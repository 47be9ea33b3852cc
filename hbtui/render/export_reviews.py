"""The reviews of a run as its exports carry them, beside the grader's columns (never in them).

JSONL: a rubric item with a review gains ``review`` (the reviewed verdict, flipped or not, the
flag's note, the reviewers and the whole history); a conversation with one gains
``reviewed_score``. Unreviewed runs export as before, key for key. CSV: the columns of
REVIEW_CSV_COLUMNS after the grader's, empty where a verdict has no review.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hbtui.core import reviews as rv
from hbtui.core.scoring import GradedCriterion, conversation_metrics
from hbtui.core.verdicts import FAILED
from hbtui.store import verdict_met
from hbtui.store.reads import parsed_tags
from hbtui.store.rows import ExportConversation, ExportVerdict

REVIEW_CSV_COLUMNS = [
    "reviewed_criteria_met",
    "review",
    "review_note",
    "reviewers",
    "reviewed_at",
    "reviewed_conversation_score",
]


def utc_text(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def review_words(state: rv.ReviewState, graded: bool | None) -> str:
    """flipped (the reviewed verdict differs), kept (a flip flipped back), flagged, or both."""
    words = []
    if state.decision is not None:
        words.append("flipped" if state.flipped(graded) else "kept")
    if state.flag is not None:
        words.append("flagged")
    return ", ".join(words)


class ExportReviews:
    """A run's review history, read once, answering for each exported verdict and conversation."""

    def __init__(self, history: Sequence[rv.Review]) -> None:
        self.by_key = rv.states(history)
        self.history: dict[rv.VerdictKey, list[rv.Review]] = {}
        for review in history:
            self.history.setdefault(review.key, []).append(review)

    @classmethod
    async def of(cls, store, run_id: int) -> ExportReviews:
        return cls(await store.run_reviews(run_id))

    def _state(self, verdict: ExportVerdict) -> rv.ReviewState | None:
        return self.by_key.get((verdict.conversation_id, verdict.idx))

    def reviewed_score(self, conversation: ExportConversation, verdicts: Sequence[ExportVerdict]) -> float | None:
        """The conversation's score over its reviewed verdicts, where one of them has a review."""
        if conversation.status == FAILED or not any(self._state(v) for v in verdicts):
            return None
        criteria = [
            GradedCriterion(
                v.points,
                parsed_tags(v.tags),
                (self._state(v) or rv.NOT_REVIEWED_STATE).met(verdict_met(v.status)),
            )
            for v in verdicts
        ]
        result = conversation_metrics(list(parsed_tags(conversation.example_tags)), criteria)
        return None if result is None else result.score

    def conversation_fields(self, conversation: ExportConversation, verdicts: Sequence[ExportVerdict]) -> dict:
        if not any((v.conversation_id, v.idx) in self.history for v in verdicts):
            return {}
        return {"reviewed_score": self.reviewed_score(conversation, verdicts)}

    def rubric_fields(self, verdict: ExportVerdict) -> dict:
        history = self.history.get((verdict.conversation_id, verdict.idx))
        if not history:
            return {}
        state = self._state(verdict) or rv.NOT_REVIEWED_STATE
        graded = verdict_met(verdict.status)
        return {
            "review": {
                "reviewed_criteria_met": state.met(graded),
                "flipped": state.flipped(graded),
                "flagged": state.flag is not None,
                "note": state.flag.note if state.flag else None,
                "reviewers": list(state.reviewers),
                "history": [
                    {
                        "id": r.id,
                        "reviewer": r.reviewer,
                        "at": utc_text(r.at),
                        "action": r.action,
                        "criteria_met": r.met,
                        "note": r.note,
                        "undoes": r.undoes,
                        "graded_status": r.graded_status,
                    }
                    for r in history
                ],
            }
        }

    def csv_cells(self, verdict: ExportVerdict, conversation_score: float | None) -> list:
        state = self._state(verdict)
        if state is None:
            return ["", "", "", "", "", "" if conversation_score is None else conversation_score]
        graded = verdict_met(verdict.status)
        met = state.met(graded)
        latest = max((r for r in (state.decision, state.flag) if r is not None), key=lambda r: r.id)
        return [
            "" if met is None else str(met).lower(),
            review_words(state, graded),
            state.flag.note or "" if state.flag else "",
            "; ".join(state.reviewers),
            utc_text(latest.at),
            "" if conversation_score is None else conversation_score,
        ]
