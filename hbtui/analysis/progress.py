"""How far a run is, counted one way for every display (the headless lines, the monitor).

A criterion is graded (met, not met, or its grading failed), skipped (its conversation got no
reply, so there is nothing to grade), or left. Skipped criteria are neither done nor graded:
they are shown apart, and the share graded is of those that can be graded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hbtui.core.events import CriterionGraded, Event, GenerationFailed, ReplyGenerated, RunStarted

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


RATE_WINDOW_SECONDS = 10.0


def running_spans(
    now: float, started: float, pauses: list[tuple[float, float | None]], length: float = RATE_WINDOW_SECONDS
) -> list[tuple[float, float]]:
    """The last ``length`` seconds the run was running before ``now``, as (start, end) spans,
    newest first: the seconds it was paused are left out, so a rate just after a pause is not
    diluted by them (one unpaused 3 s after a 90 s pause is judged on those 3 s and the 7 before
    the pause). ``pauses``: (start, end) times, end None while still paused; ``started``: when
    this process took the run up (a resume's idle time before it is no running time either)."""
    spans: list[tuple[float, float]] = []
    end, remaining = now, length
    for pause_start, pause_end in sorted(pauses, key=lambda pause: pause[0], reverse=True):
        pause_end = now if pause_end is None else pause_end
        if pause_start >= end:
            continue
        if pause_end < end:
            take = min(end - max(pause_end, started), remaining)
            if take > 0:
                spans.append((end - take, end))
                remaining -= take
        end = min(end, pause_start)
        if remaining <= 0 or end <= started:
            return spans
    if remaining > 0 and end > started:
        spans.append((max(started, end - remaining), end))
    return spans


def completions_by_second() -> deque[list[int]]:
    """[second, calls completed in it], newest last: enough seconds for the rate's window."""
    return deque(maxlen=4 * int(RATE_WINDOW_SECONDS))


def count_completion(completions: deque[list[int]], now: float) -> None:
    second = int(now)
    if completions and completions[-1][0] == second:
        completions[-1][1] += 1
    else:
        completions.append([second, 1])


def running_rate(
    completions: deque[list[int]], started: float, now: float, pauses: list[tuple[float, float | None]]
) -> float:
    """Calls a second over the last RATE_WINDOW_SECONDS of running time (see running_spans);
    in a run's first seconds the window is what has passed."""
    # Whole seconds only: the current, partial second would make the rate jitter.
    spans = running_spans(float(int(now)), float(int(started)), pauses)
    # A second counts where its middle is running time: calls finishing in a paused second
    # (those in flight when it paused) are not part of the running rate.
    calls = sum(count for second, count in completions if any(a <= second + 0.5 < b for a, b in spans))
    return calls / max(sum(b - a for a, b in spans), 1.0)
