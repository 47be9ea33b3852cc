"""The endpoints a run calls: one client and one limit each, their live figures, and the gate
every new call waits on (closed while the run is paused or its answers are not being stored).

A model may have several endpoints (replicas, or several keys of one provider): its calls go
through :class:`Replicas`, each to the endpoint with the fewest in flight for its limit. An
endpoint that refuses connections, or answers 5xx or nothing several times running, is set
aside for a while (doubling, up to a minute) and its unanswered call goes to another; then one
call at a time tries it again. Nothing answered is ever sent again, so nothing is paid twice.

Rate limits are each client's (hbtui.core.rate_limits): a 429 is no failure here. An endpoint that
has answered nothing but 429 for RATE_LIMIT_PATIENCE is set aside while a sibling answers; with
none left, its calls raise rate_limited and the run stops, resumable, naming the limit.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hbtui.client.chat import (
    CLIENT_ERROR,
    CONNECTION,
    RATE_LIMITED,
    RETRIED_KINDS,
    SERVER_ERROR,
    TIMEOUT,
    CallRecord,
    ChatClient,
)
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatError, Endpoint, endpoints_of
from hbtui.core.calls import ChatResult
from hbtui.core.events import CallFailed, Event
from hbtui.core.live import LiveSnapshot
from hbtui.core.rate_limits import pace_summary
from hbtui.core.settings.config import Settings

SET_ASIDE_SECONDS = 2.0  # the first time an endpoint is set aside; doubled each time after, up to:
SET_ASIDE_CAP = 60.0
FAILURES_TO_SET_ASIDE = 3  # 5xx or no answer within the timeout, in a row; a refused connection: 1
LIVE, SET_ASIDE = "live", "set aside"
# Calls in a row that ended in a 4xx that is no refusal, with no answer before them, that stop
# the run (one alone could be one conversation's: a few agree that it is the endpoint).
CLIENT_ERRORS_TO_STOP = 3


RATE_SECONDS = 10  # an endpoint's rate: its answers over the last whole seconds, this many


@dataclass
class AnswerRate:
    """Answers per second over the last few whole seconds, counted in per-second buckets (a
    busy endpoint answers thousands of calls a minute: one bucket each second, not one entry each)."""

    buckets: deque[list[int]] = field(default_factory=deque)  # [second, answers], newest last
    since: float = field(default_factory=time.monotonic)

    def answered(self) -> None:
        second = int(time.monotonic())
        if self.buckets and self.buckets[-1][0] == second:
            self.buckets[-1][1] += 1
            return
        self.buckets.append([second, 1])
        while len(self.buckets) > RATE_SECONDS + 1:
            self.buckets.popleft()

    def per_second(self) -> float:
        newest = int(time.monotonic()) - 1  # whole seconds only: the current one would jitter
        oldest = newest - RATE_SECONDS + 1
        answers = sum(count for second, count in self.buckets if oldest <= second <= newest)
        return answers / min(RATE_SECONDS, max(newest - int(self.since) + 1, 1))


@dataclass
class EndpointStats:
    """What the calls to one endpoint came to, for the heartbeat row (its requests in flight and
    its limit are the limiter's, read as the row is written)."""

    calls: int = 0
    successes: int = 0  # the failed ones: calls - successes
    failing_since: float | None = None  # monotonic time of the first connection failure since the last answer
    failures_in_a_row: int = 0  # of the kinds that set an endpoint aside
    client_errors: int = 0  # calls that ended in a 4xx that is no refusal (CLIENT_ERROR)
    aside_until: float | None = None  # monotonic: set aside until then, then tried one call at a time
    times_set_aside: int = 0  # since it last answered
    # Calls handed to it and not yet done: in flight, waiting for its limit, or for its first call
    # of a shape to settle (see ModelQuirks), which the limiter does not count.
    assigned: int = 0
    rate: AnswerRate = field(default_factory=AnswerRate)
    siblings: set[str] = field(default_factory=set)  # the other endpoints of its model(s): it may be set aside

    @property
    def state(self) -> str:
        return SET_ASIDE if self.aside_until is not None else LIVE


MAX_PAUSES_KEPT = 8  # enough for any rate window of seconds; a long run pauses often otherwise


@dataclass
class LiveStats:
    started_at: float = field(default_factory=time.time)
    # (start, end) wall-clock times of the latest pauses, end None while paused: monitors (of any
    # process) leave those seconds out of the rate, so a run just unpaused is not judged on them.
    pauses: list[list[float | None]] = field(default_factory=list)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    endpoints: dict[str, EndpointStats] = field(default_factory=dict)


@dataclass(eq=False)
class EndpointPool:
    """The clients of one run, by endpoint label (the model under test and the grader may share
    endpoints: then they share their clients and limits, grading ahead of generation)."""

    settings: Settings
    run_id: int
    backoff_base: float
    on_note: Callable[[str], None]
    emit: Callable[[Event], None]
    on_unreachable: Callable[[ChatError, str], None]
    # Each call's last look before it is sent (see ChatClient.before_send): may close the gate.
    before_send: Callable[[], None] | None = None
    live: LiveStats = field(default_factory=LiveStats, init=False)
    clients: dict[str, ChatClient] = field(default_factory=dict, init=False)
    limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict, init=False)
    # Calls go out only while this is set: see gate().
    calls_open: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    paused: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.calls_open.set()

    def gate(self, held_back: bool) -> None:
        """Open the gate unless the run is paused or ``held_back`` (its answers not stored, or
        its lease not confirmed lately). Calls in flight finish either way."""
        if self.paused or held_back:
            self.calls_open.clear()
        else:
            self.calls_open.set()

    def set_paused(self, paused: bool) -> None:
        """Pause or resume (the gate is the caller's to update), noting when for the rate."""
        if paused == self.paused:
            return
        self.paused = paused
        pauses = self.live.pauses
        if paused:
            pauses.append([time.time(), None])
            del pauses[:-MAX_PAUSES_KEPT]
        elif pauses and pauses[-1][1] is None:
            pauses[-1][1] = time.time()

    def in_flight(self) -> int:
        """Calls sent and not yet answered, over every endpoint."""
        return sum(limiter.in_flight for limiter in self.limiters.values())

    def replicas(
        self,
        endpoints: list[tuple[str, str | None]],
        concurrency: int,
        *,
        model: str | None = None,
        rate_limits: list[tuple[float | None, float | None]] | None = None,
        key_name: str = "API_KEY",
    ) -> Replicas:
        """The calls of one model, over its endpoints ((URL, key) pairs), ``concurrency`` each;
        ``rate_limits``: the (RPM, TPM) given for ``model`` at each endpoint, in their order."""
        members = [self.client(endpoint, concurrency, key_name) for endpoint in endpoints_of(endpoints)]
        if model is not None and rate_limits:
            for member, limits in zip(members, rate_limits):
                if any(limits):
                    member.rate_limits[model] = limits
        labels = {member.endpoint.label for member in members}
        for label in labels:
            self.live.endpoints[label].siblings |= labels - {label}
        return Replicas(self, members)

    def client(self, endpoint: Endpoint, concurrency: int, key_name: str = "API_KEY") -> ChatClient:
        label = endpoint.label
        if label not in self.clients:
            limiter = AdaptiveLimiter(concurrency)
            self.limiters[label] = limiter
            self.live.endpoints[label] = EndpointStats()
            self.clients[label] = ChatClient(
                endpoint,
                limiter=limiter,
                timeout=self.settings.timeout,
                max_attempts=self.settings.max_attempts,
                backoff_base=self.backoff_base,
                on_note=self.on_note,
                on_call=self.on_call,
                gate=self.calls_open,
                before_send=self.before_send,
                rate_limit_patience=self.settings.rate_limit_patience,
                key_name=key_name,
                max_answer_bytes=self.settings.max_answer_bytes,
            )
        return self.clients[label]

    def pick(self, members: list[ChatClient]) -> ChatClient:
        """The member to send the next call to: of those live (or due a try again, one call at a
        time), the one with the fewest calls handed to it for its limit; when every one is
        set aside, the one due back first (a model with one endpoint always has that one)."""
        now = time.monotonic()
        best, best_load = None, 0.0
        for member in members:
            stats = self.live.endpoints[member.endpoint.label]
            if stats.aside_until is not None and (stats.aside_until > now or stats.assigned):
                continue
            load = stats.assigned / member.limiter.limit
            if best is None or load < best_load:
                best, best_load = member, load
        if best is not None:
            return best
        return min(members, key=lambda member: self.live.endpoints[member.endpoint.label].aside_until or 0.0)

    def set_aside(self, label: str) -> bool:
        """Whether ``label`` is set aside and not yet due a try again."""
        aside_until = self.live.endpoints[label].aside_until
        return aside_until is not None and aside_until > time.monotonic()

    def others_live(self, label: str, members: list[ChatClient]) -> bool:
        """Whether a member besides ``label`` is live, to take a call ``label`` could not answer."""
        return any(
            self.live.endpoints[m.endpoint.label].aside_until is None for m in members if m.endpoint.label != label
        )

    def _failed(self, stats: EndpointStats, record: CallRecord) -> None:
        """Set a replicated endpoint aside on a refused connection, or on 5xx / no answer in a row."""
        if not stats.siblings or record.kind not in (CONNECTION, SERVER_ERROR, TIMEOUT):
            stats.failures_in_a_row = 0
            return
        stats.failures_in_a_row += 1
        now = time.monotonic()
        if record.kind != CONNECTION and stats.failures_in_a_row < FAILURES_TO_SET_ASIDE:
            return
        if stats.aside_until is not None and stats.aside_until > now:
            return  # already aside: the calls that were in flight to it are failing one by one
        seconds = min(SET_ASIDE_CAP, SET_ASIDE_SECONDS * 2**stats.times_set_aside)
        stats.times_set_aside += 1
        stats.aside_until = now + seconds
        self.on_note(
            f"endpoint {record.endpoint} set aside for {seconds:g} s ({record.kind}: {record.message});"
            " its calls go to the others meanwhile"
        )

    def _answered(self, stats: EndpointStats, label: str) -> None:
        if stats.aside_until is not None:
            self.on_note(f"endpoint {label} answers again: back in use")
        stats.failures_in_a_row = stats.times_set_aside = 0
        stats.aside_until = None

    def busy_besides(self, endpoint: str | None) -> bool:
        """Whether calls to another endpoint than ``endpoint`` are in flight."""
        return any(limiter.in_flight for url, limiter in self.limiters.items() if url != endpoint)

    def _rate_limited(self, stats: EndpointStats, record: CallRecord) -> None:
        """A 429: after RATE_LIMIT_PATIENCE of nothing else, set aside while a sibling answers.
        With none, the call itself raises rate_limited, and the engine stops the run on it."""
        since = self.clients[record.endpoint].refusing_since
        patience = self.settings.rate_limit_patience
        now = time.monotonic()
        if since is None or now - since < patience:
            return
        if not any(self.live.endpoints[label].aside_until is None for label in stats.siblings):
            return
        if stats.aside_until is None or stats.aside_until <= now:
            stats.aside_until = now + patience
            self.on_note(
                f"endpoint {record.endpoint} set aside for {patience:g} s: nothing but 429 (rate limited) for"
                f" {now - since:.0f} s (RATE_LIMIT_PATIENCE); its calls go to the others meanwhile"
            )

    def limits(self) -> dict | None:
        """What the rate limits did in this process (hbtui.core.rate_limits.pace_summary)."""
        several = len(self.clients) > 1
        return pace_summary(
            {
                (f"{model} at {label}" if several else model): pacer
                for label, client in self.clients.items()
                for model, pacer in client.pacers.items()
            }
        )

    def on_call(self, record: CallRecord) -> None:
        stats = self.live.endpoints[record.endpoint]
        if record.kind == RATE_LIMITED:
            # Not a failed try (the call waits for the pace and goes again): counted as refused.
            self._rate_limited(stats, record)
            self.emit(CallFailed(self.run_id, record.endpoint, RATE_LIMITED, record.message))
            return
        stats.calls += 1
        stats.successes += record.ok
        stats.client_errors += record.kind == CLIENT_ERROR
        if record.ok:
            stats.rate.answered()
            self._answered(stats, record.endpoint)
        else:
            self._failed(stats, record)
        if record.ok or record.kind != CONNECTION:
            stats.failing_since = None
        else:
            now = time.monotonic()
            stats.failing_since = stats.failing_since or now
            patience = self.settings.unreachable_patience
            siblings_answer = any(self.live.endpoints[label].failing_since is None for label in stats.siblings)
            if stats.successes and now - stats.failing_since >= patience and not siblings_answer:
                # The endpoint answered before and has failed every call since, for that long: stop
                # (resumable) instead of burning every remaining conversation's attempts.
                self.on_unreachable(
                    ChatError(
                        CONNECTION,
                        f"{record.endpoint} stopped answering: every call failed to connect"
                        f" for {now - stats.failing_since:.0f} s (UNREACHABLE_PATIENCE {patience:g} s):"
                        f" {record.message}",
                    ),
                    record.endpoint,
                )
        if not record.ok:
            kind = record.kind or "unknown"
            self.live.errors_by_kind[kind] = self.live.errors_by_kind.get(kind, 0) + 1
            self.emit(CallFailed(self.run_id, record.endpoint, kind, record.message))

    def refuses_every_call(self, endpoint: str | None) -> bool:
        """Whether ``endpoint`` has answered nothing since the run started but 4xx that are no
        refusal, several calls' worth: a misconfigured proxy that every call would meet."""
        stats = self.live.endpoints.get(endpoint or "")
        return stats is not None and stats.client_errors >= CLIENT_ERRORS_TO_STOP and self.never_answered(endpoint)

    def never_answered(self, endpoint: str | None) -> bool:
        """Whether ``endpoint`` is one of this run's and has not answered once since it started
        (nor, for one of several endpoints of a model, has any other of the run's)."""
        stats = self.live.endpoints.get(endpoint or "")
        if stats is None or stats.successes:
            return False
        return not any(self.live.endpoints[label].successes for label in stats.siblings)

    def snapshot(self) -> LiveSnapshot:
        """The live figures as the heartbeat row keeps them, for monitors in other processes."""
        limiters = self.limiters
        return {
            "paused": self.paused,
            "started_at": self.live.started_at,  # when this process took the run up
            "pauses": [list(pause) for pause in self.live.pauses],
            "endpoints": {
                # (failing_since stays here: a monotonic time means nothing to another process)
                url: {
                    "in_flight": limiters[url].in_flight,
                    "limit": limiters[url].limit,
                    "calls": s.calls,
                    "successes": s.successes,
                    "state": s.state,
                    "rate": round(s.rate.per_second(), 2),
                }
                for url, s in self.live.endpoints.items()
            },
            "call_errors": dict(self.live.errors_by_kind),
            **({"limits": limits} if (limits := self.limits()) else {}),
        }

    def deviations(self) -> set[str]:
        """What the providers refused or renamed in this run's requests (see hbtui.core.fidelity)."""
        found = set()
        for client in self.clients.values():
            for model, quirks in client.quirks.items():
                where = f"{model} at {client.endpoint.label}"
                if not quirks.json_schema and self.settings.grader_json_schema:
                    found.add(f"response_format refused by {where}")
                found.update(f"{param} left out for {where} (refused)" for param in quirks.dropped)
                if quirks.max_tokens_key != "max_tokens":
                    found.add(f"max_tokens sent as {quirks.max_tokens_key} to {where}")
        return found

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()


@dataclass(eq=False)
class Replicas:
    """One model's endpoints, called as one client: each call goes where :meth:`EndpointPool.pick`
    says; a call that got no answer from an endpoint set aside meanwhile goes to another (it was
    not answered, so it is not paid twice); its attempts add up across them."""

    pool: EndpointPool
    members: list[ChatClient]

    @property
    def capacity(self) -> int:
        """Calls in flight at most, over every member."""
        return sum(member.limiter.max_limit for member in self.members)

    async def complete(self, model: str, messages: list[dict], **request: Any) -> ChatResult:
        """As :meth:`ChatClient.complete` (the same keywords), on the member :meth:`pick` names."""
        pool, members = self.pool, self.members
        if len(members) == 1:
            return await members[0].complete(model, messages, **request)
        spent = 0
        while True:
            member = pool.pick(members)
            label = member.endpoint.label

            def leave(label: str = label) -> bool:
                return pool.set_aside(label) and pool.others_live(label, members)

            stats = pool.live.endpoints[label]
            stats.assigned += 1
            try:
                result = await member.complete(model, messages, leave=leave, **request)
            except ChatError as exc:
                spent += exc.attempts
                exc.attempts = spent
                if exc.kind in RETRIED_KINDS and leave() and spent < member.max_attempts * len(members):
                    continue
                raise
            finally:
                stats.assigned -= 1
            result.attempts += spent
            return result
