"""What passes between the engine and the store: the plan it creates, the work it reads back, and
the results its writer commits, each a named record (the store turns them into SQL rows)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from hbtui.core.run_records import RequestsRecord
from hbtui.core.verdicts import PENDING
from hbtui.store.rows import ConversationOutcome, ImportedReply

WORK_PAGE = 256  # conversations of a run's work the engine holds at a time, read or planned


@dataclass(slots=True)
class PlannedConversation:
    position: int
    repeat: int
    prompt_id: str
    record_body: str
    record_sha256: str
    theme: str | None
    example_tags: Sequence[str]
    preview: str
    criteria: Sequence[tuple[str, float, Sequence[str]]]  # (criterion, points, tags)
    imported: ImportedReply | None = None  # an imported run's: its reply and verdicts are already there
    # A completion of the record itself, graded as the reply (hbtui.core.completions): nothing is generated.
    completion_text: str | None = None
    completion_group: str | None = None
    completion: str | None = None  # which one: "ideal", "reference 1"...


@dataclass(slots=True, frozen=True)
class RunClaim:
    """A run created already driven: by which process, under which lease, sending what."""

    owner: str
    lease: str
    requests: RequestsRecord  # hbtui.core.fidelity.describe_requests


@dataclass(slots=True, frozen=True)
class CachedVerdict:
    """A verdict already paid for, found in the cache under the key of an identical request."""

    status: str
    explanation: str | None
    raw_output: str | None
    reasoning: str | None

    def result(self, conversation_id: int, idx: int, key: str) -> VerdictResult:
        """This verdict stored for another request of the same key: paid for by an earlier run, so
        no attempt, no tokens, no latency of this run's own."""
        return VerdictResult(
            self.status,
            conversation_id,
            idx,
            key,
            self.explanation,
            self.raw_output,
            self.reasoning,
            graded_at=time.time(),
            from_cache=1,
        )


@dataclass(slots=True)
class WorkItem:
    """A conversation that still needs a reply, or verdicts, when a run starts or resumes."""

    conversation_id: int
    position: int
    prompt: list[dict]
    reply: str | None
    criteria: list[tuple[int, str, float]]  # (idx, criterion, points) still to grade
    all_criteria: list[tuple[int, float, str]]  # (idx, points, status)
    repeat: int = 0
    # Cache keys of the criteria still to grade, by idx, when computed as the work was read
    # (a reply that exists already), and what the cache held for them.
    keys: dict[int, str] | None = None
    cached: dict[str, CachedVerdict] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        conversation_id: int,
        position: int,
        repeat: int,
        record: dict,
        reply: str | None,
        verdicts: list[tuple[int, float, str]],
    ) -> WorkItem:
        """``record``: the record as its file has it, parsed; ``verdicts``: (idx, points as
        stored, status) of every criterion."""
        # The criterion and its points as the record writes them (SQLite's NUMERIC would turn
        # 8.0 into 8): the grader is sent "[8.0] ..." exactly where the reference sends it.
        rubrics = record["rubrics"]
        return cls(
            conversation_id=conversation_id,
            position=position,
            prompt=record["prompt"],
            reply=reply,
            criteria=[
                (idx, rubrics[idx]["criterion"], rubrics[idx]["points"]) for idx, _, st in verdicts if st == PENDING
            ],
            all_criteria=verdicts,
            repeat=repeat,
        )


def stored_points(points: float) -> float:
    """Points as a NUMERIC column gives them back: a whole float as an int (8.0 as 8)."""
    return int(points) if isinstance(points, float) and points.is_integer() else points


@dataclass(slots=True, frozen=True)
class ReplyResult:
    """A reply (or the failure to get one) of the model under test. Attempts and tokens add up
    over retries (regrade, resume): all of them were spent."""

    conversation_id: int
    status: str  # generated or failed
    generated_at: float
    reply: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    endpoint: str | None = None  # the label of the endpoint that answered (never a key)


@dataclass(slots=True, frozen=True)
class VerdictResult:
    """One criterion's verdict, its failure, or a verdict served from the cache (``from_cache``)."""

    status: str
    conversation_id: int
    idx: int
    cache_key: str | None = None
    explanation: str | None = None
    raw_output: str | None = None
    reasoning: str | None = None
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    latency_ms: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    graded_at: float = 0.0
    from_cache: int = 0
    endpoint: str | None = None  # the label of the endpoint that answered (never a key)


@dataclass(slots=True, frozen=True)
class ConversationScore:
    """A conversation's summary, written with its last verdict."""

    conversation_id: int
    outcome: ConversationOutcome

    def as_row(self) -> tuple[float | None, int, int, int, int]:
        return self.outcome.as_row(self.conversation_id)


@dataclass(slots=True, frozen=True)
class LogLine:
    run_id: int
    at: float
    level: str
    message: str


@dataclass(slots=True)
class ResultBatch:
    """What the writer commits in one transaction."""

    replies: list[ReplyResult] = field(default_factory=list)
    verdicts: list[VerdictResult] = field(default_factory=list)
    scores: list[ConversationScore] = field(default_factory=list)
    log: list[LogLine] = field(default_factory=list)

    @property
    def results(self) -> int:
        """Paid answers in the batch: what an unwritten batch would cost again."""
        return len(self.replies) + len(self.verdicts)

    def __bool__(self) -> bool:
        return bool(self.replies or self.verdicts or self.scores or self.log)
