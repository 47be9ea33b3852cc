"""What the live monitor shows, gathered two ways with one result (no Textual here).

- A run of this process: :class:`RunCounters` observes the engine's events. It only adds to
  counters (the engine calls it synchronously, possibly 1,000 times a second); the monitor reads
  them on its own cadence.
- A run of another process (`hbtui run` under nohup): :func:`view_from_store` reads the
  database, which that process writes in batches and heartbeats every 2 s.

Both produce a :class:`MonitorView`, so the screen renders one thing whichever way it came.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from hbtui.analysis.progress import Tally, completions_by_second, count_completion, running_rate, running_spans
from hbtui.core.batch_files import BatchFiles, awaiting_hint
from hbtui.core.errors import RATE_LIMITED
from hbtui.core.events import (
    CallFailed,
    ConversationScored,
    CriterionGraded,
    Event,
    GenerationFailed,
    Noted,
    ReplyGenerated,
    RunFinished,
)
from hbtui.core.live import LiveSnapshot
from hbtui.core.rate_limits import limits_line
from hbtui.core.verdicts import AWAITING_BATCH, ENDED, GOING, PAUSED, RUNNING
from hbtui.render.batch_state import batch_lines, look_line
from hbtui.store import RunRow, Store

RECENT_ERRORS = 4


@dataclass(eq=False)
class MonitorView:
    """What the monitor shows of a run; two views are equal when they show the same figures
    (the screen holds it as a reactive, so an equal view repaints nothing)."""

    run_id: int
    name: str
    status: str  # as shown: running, paused, finished, interrupted, cancelled, failed, pending
    model_test: str = ""
    model_grader: str = ""
    in_process: bool = False
    owner: str | None = None
    tally: Tally = field(default_factory=Tally)  # counted as the headless lines count
    calls_per_second: float = 0.0
    eta_seconds: float | None = None
    # label (its URL) -> (in flight, limit, answers per second, "live" or "set aside")
    endpoints: dict[str, tuple[int, int, float, str]] = field(default_factory=dict)
    scores: list[float] = field(default_factory=list)
    errors_by_kind: dict[str, int] = field(default_factory=dict)  # final failures, as stored
    retried_by_kind: dict[str, int] = field(default_factory=dict)  # failed attempts, retried or not
    recent_errors: list[tuple[float, str, str]] = field(default_factory=list)  # (at, kind, message)
    latency_p50: float | None = None
    latency_p95: float | None = None
    tokens: tuple[int, int, int, int] = (0, 0, 0, 0)  # test prompt/completion, grader prompt/completion
    final_score: float | None = None  # the run's headline (final_name says which)
    final_name: str = "score"
    final_ci95: tuple[float, float] | None = None
    error: str | None = None
    driver: str | None = None  # host:pid of a run another process drives, and whether it is heard from
    driver_log: str | None = None  # where its detached driver writes (hbtui.engine.detached)
    limits: str | None = None  # what the endpoints' rate limits did (hbtui.core.rate_limits.limits_line)
    # A run through the batch API: each open batch's state, and whether a process looks at them.
    batches: tuple[str, ...] = ()
    batch_look: str | None = None

    @classmethod
    def of_run(cls, run: RunRow, **figures: Any) -> MonitorView:
        """The view of ``run`` (its id, name and models) with ``figures``, the fields below those."""
        return cls(run_id=run.id, name=run.name, model_test=run.model_test, model_grader=run.model_grader, **figures)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MonitorView) and self.signature() == other.signature()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by what it shows

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def criteria_graded(self) -> int:
        return self.tally.graded

    def signature(self) -> tuple:
        """Changes whenever anything shown changes: the screen repaints only then."""
        return (
            self.run_id,
            self.name,
            self.status,
            self.tally.conversations_done,
            self.tally.no_reply,
            self.tally.graded,
            self.tally.grading_errors,
            self.tally.skipped,
            round(self.calls_per_second, 1),
            None if self.eta_seconds is None else int(self.eta_seconds),
            tuple(sorted(self.endpoints.items())),
            len(self.scores),
            tuple(sorted(self.errors_by_kind.items())),
            tuple(sorted(self.retried_by_kind.items())),
            tuple(self.recent_errors),
            self.latency_p50,
            self.latency_p95,
            self.batches,
            self.batch_look,
            self.tokens,
            self.final_score,
            self.final_name,
            self.error,
            self.driver,
            self.driver_log,
            self.limits,
        )


# No ETA from the first seconds of running time: the first answers come back one latency after
# the calls went out, so their rate is far under the run's (a first frame said 1h 28m for a run
# that took 21 s). The monitor says "estimating" meanwhile.
ETA_SETTLE_SECONDS = 5.0


def pause_spans(pauses: list | None) -> list[tuple[float, float | None]]:
    """The heartbeat's [start, end] pauses (JSON lists) as the spans running_spans takes."""
    return [(pause[0] or 0.0, pause[1]) for pause in pauses or []]


def eta(remaining: int, per_second: float, running_seconds: float) -> float | None:
    if remaining <= 0:
        return 0.0
    if running_seconds < ETA_SETTLE_SECONDS:
        return None
    return remaining / per_second if per_second > 0 else None


def percentiles(latencies: list[float]) -> tuple[float | None, float | None]:
    if not latencies:
        return None, None
    if len(latencies) == 1:
        return latencies[0], latencies[0]
    cuts = statistics.quantiles(latencies, n=20, method="inclusive")
    return statistics.median(latencies), cuts[18]


class RunCounters:
    """An engine observer for a run of this process: counters only, no I/O, no repaint."""

    def __init__(self) -> None:
        self.tally = Tally()
        self.scores: list[float] = []
        self.errors_by_kind: Counter[str] = Counter()
        self.retried_by_kind: Counter[str] = Counter()
        self.recent_errors: deque[tuple[float, str, str]] = deque(maxlen=RECENT_ERRORS)
        self.latencies: deque[float] = deque(maxlen=500)
        self.tokens = [0, 0, 0, 0]
        # [second, count], newest last. Wall-clock seconds, as the engine's pause times are (other
        # processes read those): one clock for both.
        self._completions = completions_by_second()
        self._started = time.time()  # the rate's window never reaches back before this
        self.finished: RunFinished | None = None
        self.events = 0

    async def seed(self, store: Store, run_id: int) -> None:
        """Start from what the database holds (a resumed run has work done already)."""
        progress = await store.progress(run_id)
        self.tally = Tally.from_progress(progress)
        self.errors_by_kind.update(progress.errors_by_kind)
        self.tokens = [
            progress.prompt_tokens_test,
            progress.completion_tokens_test,
            progress.prompt_tokens_grader,
            progress.completion_tokens_grader,
        ]
        self.scores = await store.conversation_scores(run_id)

    def failed_to_start(self, message: str) -> None:
        self.recent_errors.append((time.time(), "start", message))

    def _completed(self) -> None:
        count_completion(self._completions, time.time())

    def on_event(self, event: Event) -> None:
        self.events += 1
        self.tally.count(event)
        if isinstance(event, CriterionGraded):
            self._completed()
            self.tokens[2] += event.prompt_tokens
            self.tokens[3] += event.completion_tokens
            if event.met is None:
                kind = event.error_kind or "unknown"
                self.errors_by_kind[kind] += 1
                where = event.where or "a criterion"  # numbered as the browser numbers it
                self.recent_errors.append((time.time(), kind, f"{where}: {event.error or 'failed to grade'}"))
            elif event.latency_ms:
                self.latencies.append(event.latency_ms)
        elif isinstance(event, ReplyGenerated):
            self._completed()
            self.latencies.append(event.latency_ms)
            self.tokens[0] += event.prompt_tokens
            self.tokens[1] += event.completion_tokens
        elif isinstance(event, ConversationScored):
            if event.score is not None:
                self.scores.append(event.score)
        elif isinstance(event, GenerationFailed):
            self.errors_by_kind[f"reply {event.kind}"] += 1
            where = event.where or "a conversation"
            self.recent_errors.append((time.time(), event.kind, f"{where}: no reply: {event.message}"))
        elif isinstance(event, CallFailed):
            if event.kind != RATE_LIMITED:  # a 429 is no failed attempt: the limits row counts it
                self.retried_by_kind[event.kind] += 1
        elif isinstance(event, Noted):
            if event.message.startswith("stopping"):
                self.recent_errors.append((time.time(), "fatal", event.message))
        elif isinstance(event, RunFinished):
            self.finished = event

    def running_seconds(self, pauses: list | None = None, now: float | None = None) -> float:
        """The seconds this process has run the run (the rate's window at most), pauses left out."""
        moment = time.time() if now is None else now
        return sum(end - start for start, end in running_spans(moment, self._started, pause_spans(pauses)))

    def calls_per_second(self, now: float | None = None, pauses: list | None = None) -> float:
        """Calls a second over the last 10 s of running time: the seconds paused (``pauses``,
        the engine's) are left out, and in its first seconds (a run just started or continued)
        the window is what has passed: dividing by the whole 10 s made the first ETA too long."""
        moment = time.time() if now is None else now
        return running_rate(self._completions, self._started, moment, pause_spans(pauses))


def endpoint_figures(live: LiveSnapshot) -> dict[str, tuple[int, int, float, str]]:
    """Each endpoint's figures from the live snapshot (a heartbeat row of an older hbtui has no
    rate or state: its endpoints read as live)."""
    return {
        url: (s.get("in_flight", 0), s.get("limit", 0), s.get("rate", 0.0), s.get("state", "live"))
        for url, s in live.get("endpoints", {}).items()
    }


def view_from_counters(run: RunRow, counters: RunCounters, snapshot: LiveSnapshot) -> MonitorView:
    """The view of a run of this process; ``snapshot`` is ``engine.live_snapshot()``."""
    rate = counters.calls_per_second(pauses=snapshot.get("pauses"))
    remaining = counters.tally.calls_left
    p50, p95 = percentiles(list(counters.latencies))
    finished = counters.finished
    status = finished.status if finished else (PAUSED if snapshot.get("paused") else RUNNING)
    return MonitorView.of_run(
        run,
        status=status,
        in_process=True,
        owner="this process",
        tally=Tally(**vars(counters.tally)),
        calls_per_second=rate,
        eta_seconds=None if finished else eta(remaining, rate, counters.running_seconds(snapshot.get("pauses"))),
        endpoints=endpoint_figures(snapshot),
        scores=list(counters.scores),  # a copy: a view compared with the last must not share its list
        errors_by_kind=dict(counters.errors_by_kind),
        retried_by_kind=dict(counters.retried_by_kind),
        recent_errors=list(reversed(counters.recent_errors)),
        latency_p50=p50,
        latency_p95=p95,
        tokens=(counters.tokens[0], counters.tokens[1], counters.tokens[2], counters.tokens[3]),
        final_score=finished.score if finished else None,
        final_name=finished.score_name if finished else "score",
        error=finished.error if finished else None,
        limits=limits_line(snapshot.get("limits")),
    )


async def view_from_store(store: Store, run_id: int) -> MonitorView:
    """The view of any run, from the database alone (a run of another process, or an ended one)."""
    now = time.time()
    run = await store.get_run(run_id)
    progress = await store.progress(run_id)
    status = run.shown_status(now)
    live = run.live if status == RUNNING else None
    if live and live.get("paused"):
        status = PAUSED
    running = status in GOING
    # As in RunCounters: judged on the seconds it ran, not the idle time before a process took
    # the run up (a resume), nor the seconds it was paused.
    rate = running_seconds = 0.0
    if running:
        spans = running_spans(now, (live or {}).get("started_at", 0.0), pause_spans((live or {}).get("pauses")))
        calls = 0
        for start, end in spans:
            calls += await store.calls_between(run_id, start, end)
        running_seconds = sum(end - start for start, end in spans)
        rate = calls / max(running_seconds, 1.0)
    tally = Tally.from_progress(progress)
    remaining = tally.calls_left
    p50, p95 = percentiles(await store.recent_latencies(run_id))
    return MonitorView.of_run(
        run,
        status=status,
        in_process=False,
        owner=run.owner_shown,
        tally=tally,
        calls_per_second=rate,
        eta_seconds=eta(remaining, rate, running_seconds) if running else None,
        endpoints=endpoint_figures(live or {}),
        scores=await store.conversation_scores(run_id),
        errors_by_kind=progress.errors_by_kind,
        retried_by_kind=dict((run.live or {}).get("call_errors", {})),
        recent_errors=await store.recent_errors(run_id, RECENT_ERRORS),
        latency_p50=p50,
        latency_p95=p95,
        tokens=(
            progress.prompt_tokens_test,
            progress.completion_tokens_test,
            progress.prompt_tokens_grader,
            progress.completion_tokens_grader,
        ),
        final_score=run.headline_score,
        final_name=run.headline[0],
        final_ci95=run.ci95,
        # A run awaiting its batch: what to do, where the reason a run stopped is shown.
        # (A run through the batch API says it in its batches' lines: whether a process looks at them.)
        error=run.error
        or (
            awaiting_hint(run.id, run.plan)
            if run.status == AWAITING_BATCH and BatchFiles.online_of(run.plan) is None
            else None
        ),
        driver=run.driver_label(now),
        driver_log=run.driver_log,
        # While it runs, the heartbeat's figures; once ended, the run's record of them.
        limits=limits_line((live or {}).get("limits") or (run.requests or {}).get("limits")),
        **(await batch_figures(store, run, status, now)),
    )


async def batch_figures(store: Store, run: RunRow, status: str, now: float) -> dict[str, Any]:
    """A run through the batch API: its batches, and its last look at them while it awaits them."""
    if BatchFiles.online_of(run.plan) is None:
        return {}
    look = look_line(run.id, (run.live or {}).get("batch_look"), now) if status == AWAITING_BATCH else None
    return {"batches": tuple(batch_lines(await store.submissions(run.id), now)), "batch_look": look}
