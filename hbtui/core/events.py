"""Progress events from the engine, and the observer protocol that displays implement.

Observers are called synchronously on the engine's event loop, so they must be cheap: a display
records what changed and repaints on its own cadence, never once per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: int
    name: str
    conversations_total: int
    criteria_total: int
    replies: int  # already stored (a resume): replies, and conversations that got none
    no_reply: int
    criteria_graded: int
    criteria_skipped: int  # of conversations that got no reply
    grading_errors: int
    scores: tuple[float, ...] | list[float] = ()  # of conversations already scored (a resume)


@dataclass(frozen=True, slots=True)
class ReplyGenerated:
    run_id: int
    conversation_id: int
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class GenerationFailed:
    run_id: int
    conversation_id: int
    kind: str
    message: str
    n_criteria: int = 0  # its criteria, now skipped: there is no reply to grade
    where: str = ""  # "conversation #15 (repeat 1 of 2)": hbtui.core.numbering, as the browser numbers it


@dataclass(frozen=True, slots=True)
class CriterionGraded:
    run_id: int
    conversation_id: int
    idx: int
    met: bool | None  # None: grading failed (error_kind and error say why)
    error_kind: str | None
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None
    where: str = ""  # "criterion 4 of conversation #15": hbtui.core.numbering, as the browser numbers it


@dataclass(frozen=True, slots=True)
class ConversationScored:
    run_id: int
    conversation_id: int
    score: float | None  # None: incomplete because a criterion failed to grade


@dataclass(frozen=True, slots=True)
class CallFailed:
    """One failed HTTP attempt (the client may try again)."""

    run_id: int
    endpoint: str
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Noted:
    run_id: int
    level: str
    message: str


@dataclass(frozen=True, slots=True)
class PauseChanged:
    """The run paused (a pause or a cancel asked, from any process) or went on: its rate is over
    the running seconds only (hbtui.analysis.progress.running_spans)."""

    run_id: int
    paused: bool


@dataclass(frozen=True, slots=True)
class RunFinished:
    run_id: int
    status: str
    score: float | None  # the run's headline: the length-adjusted score of a run made with one
    error: str | None
    score_name: str = "score"  # what ``score`` is: "score", or "length-adjusted score"


Event = (
    RunStarted
    | ReplyGenerated
    | GenerationFailed
    | CriterionGraded
    | ConversationScored
    | CallFailed
    | Noted
    | PauseChanged
    | RunFinished
)


class Observer(Protocol):
    def on_event(self, event: Event) -> None: ...
