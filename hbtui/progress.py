"""How far a run is, counted one way for every display (the headless lines, the monitor).

A criterion is graded (met, not met, or its grading failed), skipped (its conversation got no
reply, so there is nothing to grade), or left. Skipped criteria are neither done nor graded:
they are shown apart, and the share graded is of those that can be graded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hbtui.events import CriterionGraded, Event, GenerationFailed, ReplyGenerated, RunStarted

if TYPE_CHECKING:
    from hbtui.store.rows import Progress


@dataclass
class Tally:
    conversations_total: int = 0
    replies: int = 0
    no_reply: int = 0
    criteria_total: int = 0
    graded: int = 0
    grading_errors: int = 0
    skipped: int = 0

    @classmethod
    def from_progress(cls, progress: Progress) -> Tally:
        """From the store's Progress (what the database holds)."""
        return cls(
            progress.conversations_total,
            progress.conversations_generated,
            progress.conversations_failed,
            progress.criteria_total,
            progress.criteria_graded,
            progress.criteria_errors,
            progress.criteria_skipped,
        )

    def count(self, event: Event) -> None:
        if isinstance(event, CriterionGraded):
            self.graded += 1
            self.grading_errors += event.met is None
        elif isinstance(event, ReplyGenerated):
            self.replies += 1
        elif isinstance(event, GenerationFailed):
            self.no_reply += 1
            self.skipped += event.n_criteria
        elif isinstance(event, RunStarted):
            self.conversations_total, self.criteria_total = event.conversations_total, event.criteria_total
            self.replies, self.no_reply = event.replies, event.no_reply
            self.graded, self.skipped = event.criteria_graded, event.criteria_skipped
            self.grading_errors = event.grading_errors

    @property
    def conversations_done(self) -> int:
        return self.replies + self.no_reply

    @property
    def to_grade(self) -> int:
        return self.criteria_total - self.skipped

    @property
    def conversations_left(self) -> int:
        return self.conversations_total - self.conversations_done

    @property
    def criteria_left(self) -> int:
        return self.to_grade - self.graded

    @property
    def calls_left(self) -> int:
        return self.conversations_left + self.criteria_left

    @property
    def share_graded(self) -> float:
        return self.graded / self.to_grade if self.to_grade else 1.0

    def replies_text(self) -> str:
        extra = f" ({self.no_reply} without a reply)" if self.no_reply else ""
        return f"{self.conversations_done}/{self.conversations_total}{extra}"

    def criteria_text(self) -> str:
        extra = [f"{self.grading_errors} failed to grade"] if self.grading_errors else []
        if self.skipped:
            extra.append(f"{self.skipped} skipped: no reply")
        return f"{self.graded}/{self.to_grade}" + (f" ({', '.join(extra)})" if extra else "")
