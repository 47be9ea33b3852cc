"""What the store holds and hands out: run and conversation rows, filters, statuses, errors."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hbtui.core.errors import HbtuiError
from hbtui.core.live import LiveSnapshot
from hbtui.core.plan import RunPlan
from hbtui.core.run_kinds import MODEL_RUN
from hbtui.core.run_records import ImportedFrom, MetaEvalReport, RequestsRecord, StoredSettings
from hbtui.core.scoring import Metric, conversation_score
from hbtui.core.settings.config import LENGTH_CENTRE
from hbtui.core.verdicts import ERROR, INTERRUPTED, MET, NOT_MET, PAUSED, RUNNING, RunStatus
from hbtui.store.owners import GONE, REMOTE, STOPPED, owner_label, owner_state, parse_owner
from hbtui.store.run_report import StoredReport
from hbtui.store.search import text_clause, verdict_clause


def record_fields(record: type) -> tuple[str, ...]:
    """The field names of a named tuple or a dataclass, in their order."""
    if dataclasses.is_dataclass(record):
        return tuple(item.name for item in dataclasses.fields(record))
    return tuple(record._fields)  # type: ignore[attr-defined]


# How long a driver on another host may stay silent before its run counts as interrupted and can
# be taken over. Settable for tests that stop a driver (HBTUI_HEARTBEAT_PATIENCE, seconds).
HEARTBEAT_STALE_SECONDS = float(os.environ.get("HBTUI_HEARTBEAT_PATIENCE") or 15.0)


def verdict_met(status: str) -> bool | None:
    """A verdict's status as the reference's ``criteria_met``: None while not graded or failed."""
    return True if status == MET else False if status == NOT_MET else None


@dataclass(frozen=True, slots=True)
class ConversationOutcome:
    """What a conversation's verdicts add up to, as its row keeps it for the list and its filters."""

    score: float | None  # scoring's score, once every criterion is met or not met
    n_met: int  # criteria worth positive points, met
    n_errors: int  # criteria whose grading failed
    penalties: int  # criteria worth negative points, met

    def as_row(self, conversation_id: int) -> tuple[float | None, int, int, int, int]:
        """(score, n_met, n_errors, penalties, id): the parameters of the summary's UPDATE."""
        return self.score, self.n_met, self.n_errors, self.penalties, conversation_id


def conversation_outcome(verdicts: Iterable[tuple[float, str]]) -> ConversationOutcome:
    """The outcome of a conversation's (points, status) verdicts, in rubric order: the engine
    writes it after the last verdict, and a refresh recomputes it from the database."""
    items = list(verdicts)
    met = [verdict_met(status) for _, status in items]
    complete = all(m is not None for m in met)
    return ConversationOutcome(
        score=conversation_score([p for p, _ in items], [bool(m) for m in met]) if complete else None,
        n_met=sum(1 for (p, _), m in zip(items, met) if m and p > 0),
        n_errors=sum(1 for _, status in items if status == ERROR),
        penalties=sum(1 for (p, _), m in zip(items, met) if m and p < 0),
    )


class StoreError(HbtuiError):
    """A database that cannot be used; the message names the file."""


class RunNotFound(StoreError):
    pass


class RunBusy(StoreError):
    """Another live process drives this run."""


class RunTakenOver(StoreError):
    """This process's lease on the run is gone: another process took the run over."""


def elapsed(seconds: float) -> str:
    """A time gone by in its largest unit: "45 s", "3 min", "2 h", "4 d"."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


@dataclass(slots=True)
class RunRow:
    id: int
    name: str
    status: RunStatus  # as stored (shown_status says interrupted for a driver gone)
    created_at: float
    finished_at: float | None
    dataset_name: str
    dataset_path: str | None
    dataset_sha256: str
    model_test: str
    model_grader: str
    settings: StoredSettings
    plan: dict  # read by name through ``planned`` (hbtui.core.plan.RunPlan)
    n_conversations: int
    n_criteria: int
    error: str | None
    score: float | None
    report: StoredReport | None
    folder: str | None
    heartbeat_at: float | None
    owner: str | None
    live: LiveSnapshot | None  # the driver's last heartbeat (hbtui.core.live)
    requests: RequestsRecord | None = None  # what its requests were: template, system messages, reference-identical
    source_run_id: int | None = None  # a regrade: the run whose replies it grades again
    kind: str = MODEL_RUN  # hbtui.core.run_kinds
    imported: ImportedFrom | None = None  # an imported run: its format, file and what the file stated
    driver_log: str | None = None  # the output of its detached driver (hbtui.engine.detached), if it had one
    meta_eval: MetaEvalReport | None = None  # a meta-eval run's report (hbtui.meta_eval.summary), once computed
    # Not a column: a run without a report yet (stopped, or going) has its conversations scored so
    # far counted by list_runs, so that every list gives the n `show` gives.
    scored_so_far: int | None = None

    @property
    def planned(self) -> RunPlan:
        """The plan, read by name."""
        return RunPlan.of(self.plan)

    @property
    def recorded_length(self) -> tuple[float, float] | None:
        """(penalty per 500 characters, centre) of the length adjustment the run was made with
        (--preset professional records one); None: made without."""
        penalty = self.settings.get("length_penalty")
        if penalty is None:
            return None
        centre = self.settings.get("length_centre")
        return float(penalty), float(LENGTH_CENTRE if centre is None else centre)

    @property
    def headline(self) -> tuple[str, Metric | None]:
        """(name, metric) of the score the run is known by: its stored report's headline (the
        length-adjusted score where the run was made with a length adjustment), else none."""
        if self.report is None:
            return "score", None
        return self.report.headline

    @property
    def headline_score(self) -> float | None:
        """What a list of runs shows as its score: the headline's value; a meta-eval's F1."""
        _, metric = self.headline
        return metric.value if metric is not None else self.score

    @property
    def ci95(self) -> tuple[float, float] | None:
        _, overall = self.headline
        return overall.ci95 if overall else None

    @property
    def n_scored(self) -> int | None:
        if self.meta_eval is not None:  # a meta-eval: its rows with a verdict
            return self.meta_eval.get("judged")
        return self.report.conversations.scored if self.report else self.scored_so_far

    def shown_status(self, now: float | None = None) -> str:
        """`running` while its process exists (this host) or keeps the heartbeat (another host).

        A driver on this host that is stopped (Ctrl-Z) or blocked on a lock is still the driver:
        it holds answers it paid for, and a resume is refused until it goes on or is ended.
        """
        if self.status != RUNNING:
            return self.status
        state = owner_state(self.owner)
        if state == GONE or (state == REMOTE and self.heartbeat_stale(now)):
            return INTERRUPTED
        return "running"

    def status_label(self, now: float | None = None) -> str:
        """The status as listed: a running run its process has paused, or that is stopped, says so."""
        status = self.shown_status(now)
        if status == RUNNING and owner_state(self.owner) == STOPPED:
            return "stopped"
        return PAUSED if status == RUNNING and (self.live or {}).get("paused") else status

    def stopped_ago(self, now: float | None = None) -> str | None:
        """How long ago an interrupted run's process went silent, e.g. "3 min ago"."""
        moment = self.heartbeat_at if self.status == RUNNING else self.finished_at
        if self.shown_status(now) != INTERRUPTED or moment is None:
            return None
        return f"{elapsed((time.time() if now is None else now) - moment)} ago"

    def driver_label(self, now: float | None = None) -> str | None:
        """Who drives the run, as a user can act on it (host:pid), and whether it still shows
        signs of life; None for a run nobody drives. A heartbeat gone stale is said plainly:
        on another host it is all there is to go by."""
        owner = parse_owner(self.owner)
        if self.status != RUNNING or owner is None:
            return None
        state = owner_state(self.owner)
        if state == GONE:
            return f"{owner.label}, gone"
        if state == STOPPED:
            return f"{owner.label}, stopped (SIGSTOP or Ctrl-Z)"
        if not self.heartbeat_stale(now):
            return owner.label
        silent = (time.time() if now is None else now) - (self.heartbeat_at or self.created_at)
        return f"{owner.label}, no heartbeat for {elapsed(silent)}"

    @property
    def owner_shown(self) -> str | None:
        """Its driver as a user reads it (host:pid), not the stored namespace and boot ids."""
        return owner_label(self.owner)

    def heartbeat_stale(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.heartbeat_at is None or now - self.heartbeat_at > HEARTBEAT_STALE_SECONDS


# The runs columns stored as JSON, by the RunRow field each fills.
_JSON_COLUMNS = {"settings": "settings_json", "plan": "plan_json", "report": "report_json"}
_OPTIONAL_JSON_COLUMNS = {
    "live": "live_json",
    "requests": "requests_json",
    "imported": "import_json",
    "meta_eval": "meta_eval_json",
}
# Read by name, not position (Connection._all_named): branches that each add a column to runs
# would otherwise shift one another's indices (a log path read as JSON).
RUN_COLUMNS = ", ".join(
    f"{_JSON_COLUMNS.get(name) or _OPTIONAL_JSON_COLUMNS.get(name)} AS {name}"
    if name in _JSON_COLUMNS or name in _OPTIONAL_JSON_COLUMNS
    else name
    for name in record_fields(RunRow)
    if name != "scored_so_far"  # counted by list_runs, not stored
)


def run_from_row(row: dict[str, Any]) -> RunRow:
    """A run read with RUN_COLUMNS by name, its JSON decoded."""
    values = dict(row)
    for name in ("settings", "plan"):
        values[name] = json.loads(values[name])
    for name in _OPTIONAL_JSON_COLUMNS:
        values[name] = json.loads(values[name]) if values[name] else None
    values["report"] = StoredReport.from_json(json.loads(values["report"])) if values["report"] else None
    return RunRow(**values)


class ImportedVerdict(NamedTuple):
    """A verdict as another harness's file gave it: met, not met, or an error it recorded."""

    status: str  # MET, NOT_MET or ERROR
    explanation: str | None = None
    error: str | None = None
    error_kind: str | None = None


@dataclass(slots=True)
class ImportedReply:
    """What an imported conversation holds beyond its plan: the reply and its verdicts, in
    rubric order."""

    status: str  # 'generated', or 'failed' (the file recorded no reply)
    reply: str | None
    verdicts: Sequence[ImportedVerdict]
    reasoning: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    error_kind: str | None = None


@dataclass(slots=True)
class ConversationFilter:
    theme: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    has_errors: bool = False
    has_penalties: bool = False
    text: str | None = None
    tag: str | None = None  # a criterion tag (axis:, cluster:, level:) some criterion carries
    verdict_state: str | None = None  # a key of search.VERDICT_STATES some criterion is in
    review: str | None = None  # flagged, flipped, not-reviewed (hbtui.store.review_filter)

    def where(self, search_hits: str | None = None) -> tuple[str, list[Any]]:
        """The filter as SQL on ``conversations``. ``search_hits``: the conversations its search
        matches, already found (``StoreSearchHits.search_hits``), so that the text is not searched
        again."""
        clauses: list[str] = []
        args: list[Any] = []
        if self.theme:
            clauses.append("theme = ?")
            args.append(self.theme)
        if self.min_score is not None:
            clauses.append("score >= ?")
            args.append(self.min_score)
        if self.max_score is not None:
            clauses.append("score <= ?")
            args.append(self.max_score)
        if self.has_errors:
            clauses.append("(n_errors > 0 OR status = 'failed')")
        if self.has_penalties:
            clauses.append("penalties > 0")
        if self.text and search_hits is not None:
            clauses.append("id IN (SELECT value FROM json_each(?))")
            args.append(search_hits)
        elif self.text:
            clause, more = text_clause(self.text)
            clauses.append(clause)
            args.extend(more)
        if self.tag or self.verdict_state:
            clause, more = verdict_clause(self.tag, self.verdict_state)
            clauses.append(clause)
            args.extend(more)
        if self.review:
            from hbtui.store.review_filter import REVIEW_CLAUSES

            clauses.append(REVIEW_CLAUSES[self.review])
        return (" AND " + " AND ".join(clauses)) if clauses else "", args


@dataclass(slots=True)
class ConversationSummary:
    id: int
    position: int
    repeat: int
    prompt_id: str
    theme: str | None
    preview: str
    status: str
    score: float | None
    n_criteria: int
    n_met: int | None
    n_errors: int
    penalties: int
    error_kind: str | None
    n_positive: int = 0  # criteria worth positive points: what n_met counts against


@dataclass(slots=True)
class VerdictRow:
    idx: int
    criterion: str
    points: float
    tags: list[str]
    status: str
    explanation: str | None
    raw_output: str | None
    reasoning: str | None
    error: str | None
    error_kind: str | None
    attempts: int
    latency_ms: float | None


@dataclass(slots=True)
class ConversationTokens:
    """Tokens spent on one conversation, retries included: (prompt, completion) of its reply,
    and of each criterion's grading by index."""

    reply: tuple[int, int] = (0, 0)
    verdicts: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class ConversationDetail:
    summary: ConversationSummary
    prompt: list[dict]
    example_tags: list[str]
    reply: str | None
    reasoning: str | None
    finish_reason: str | None
    error: str | None
    verdicts: list[VerdictRow] = field(default_factory=list)
    tokens: ConversationTokens = field(default_factory=ConversationTokens)


@dataclass(slots=True)
class Progress:
    conversations_total: int
    conversations_generated: int
    conversations_failed: int
    conversations_scored: int
    criteria_total: int
    criteria_graded: int  # met, not met, or failed to grade
    criteria_skipped: int  # of conversations that got no reply: never graded, not work left either
    criteria_met: int
    criteria_errors: int
    errors_by_kind: dict[str, int]
    prompt_tokens_test: int
    completion_tokens_test: int
    prompt_tokens_grader: int
    completion_tokens_grader: int


def select_list(record: type, table: str | None, sources: dict[str, str] | None = None) -> str:
    """The columns of a record's fields (a named tuple or a dataclass), in their order:
    ``table.field`` (``field`` with no table), or the expression ``sources`` gives, named as the
    field. A row selected with them fills the record field by field, and read as a mapping
    (Connection._all_named) it holds each field under its name."""
    sources = sources or {}
    prefix = f"{table}." if table else ""
    return ", ".join(
        f"{sources[name]} AS {name}" if name in sources else f"{prefix}{name}" for name in record_fields(record)
    )


class ExportConversation(NamedTuple):
    """A conversation as the exports write it, with the JSON of its record."""

    id: int
    position: int
    repeat: int
    prompt_id: str
    example_tags: str  # a JSON list
    status: str
    reply: str | None
    reasoning: str | None
    finish_reason: str | None
    error: str | None
    error_kind: str | None
    score: float | None
    record_body: str
    # A completions run's reply is one of the record's own completions: its group ("Group 2") and
    # which one it is ("ideal", "reference 1"); both None for a model's reply.
    completion_group: str | None
    completion: str | None


class ExportVerdict(NamedTuple):
    """A verdict as the exports write it."""

    conversation_id: int
    idx: int
    criterion: str
    points: float
    tags: str  # a JSON list
    status: str
    explanation: str | None
    error: str | None
    error_kind: str | None


EXPORT_CONVERSATION_COLUMNS = select_list(ExportConversation, "c", {"record_body": "r.body"})
EXPORT_VERDICT_COLUMNS = select_list(ExportVerdict, "v")


SUMMARY_FIELDS = record_fields(ConversationSummary)
SUMMARY_COLUMNS = select_list(
    ConversationSummary,
    None,
    {"n_positive": "(SELECT count(*) FROM verdicts v WHERE v.conversation_id = conversations.id AND v.points > 0)"},
)
