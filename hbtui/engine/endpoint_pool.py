"""The endpoints a run calls: one client and one limit each, their live figures, and the gate
every new call waits on (closed while the run is paused or its answers are not being stored)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hbtui.client import CONNECTION, CallRecord, ChatClient, ChatError, Endpoint
from hbtui.config import Settings
from hbtui.events import CallFailed, Event
from hbtui.limiter import AdaptiveLimiter


@dataclass
class EndpointStats:
    """What the calls to one endpoint came to, for the heartbeat row (its requests in flight and
    its limit are the limiter's, read as the row is written)."""

    calls: int = 0
    successes: int = 0  # the failed ones: calls - successes
    failing_since: float | None = None  # monotonic time of the first connection failure since the last answer


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
    """The clients of one run, by base URL (the model under test and the grader may share one)."""

    settings: Settings
    run_id: int
    backoff_base: float
    on_note: Callable[[str], None]
    emit: Callable[[Event], None]
    on_unreachable: Callable[[ChatError, str], None]
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

    def client(self, base_url: str, api_key: str | None, concurrency: int) -> ChatClient:
        if base_url not in self.clients:
            limiter = AdaptiveLimiter(concurrency)
            self.limiters[base_url] = limiter
            self.live.endpoints[base_url] = EndpointStats()
            self.clients[base_url] = ChatClient(
                Endpoint(base_url, api_key),
                limiter=limiter,
                timeout=self.settings.timeout,
                max_attempts=self.settings.max_attempts,
                backoff_base=self.backoff_base,
                on_note=self.on_note,
                on_call=self.on_call,
                gate=self.calls_open,
            )
        return self.clients[base_url]

    def busy_besides(self, endpoint: str | None) -> bool:
        """Whether calls to another endpoint than ``endpoint`` are in flight."""
        return any(limiter.in_flight for url, limiter in self.limiters.items() if url != endpoint)

    def on_call(self, record: CallRecord) -> None:
        stats = self.live.endpoints[record.endpoint]
        stats.calls += 1
        stats.successes += record.ok
        if record.ok or record.kind != CONNECTION:
            stats.failing_since = None
        else:
            now = time.monotonic()
            stats.failing_since = stats.failing_since or now
            patience = self.settings.unreachable_patience
            if stats.successes and now - stats.failing_since >= patience:
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

    def never_answered(self, endpoint: str | None) -> bool:
        """Whether ``endpoint`` is one of this run's and has not answered once since it started."""
        stats = self.live.endpoints.get(endpoint or "")
        return stats is not None and stats.successes == 0

    def snapshot(self) -> dict:
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
                }
                for url, s in self.live.endpoints.items()
            },
            "call_errors": dict(self.live.errors_by_kind),
        }

    def deviations(self) -> set[str]:
        """What the providers refused or renamed in this run's requests (see hbtui.fidelity)."""
        found = set()
        for client in self.clients.values():
            for model, quirks in client.quirks.items():
                where = f"{model} at {client.endpoint.base_url}"
                if not quirks.json_schema and self.settings.grader_json_schema:
                    found.add(f"response_format refused by {where}")
                found.update(f"{param} left out for {where} (refused)" for param in quirks.dropped)
                if quirks.max_tokens_key != "max_tokens":
                    found.add(f"max_tokens sent as {quirks.max_tokens_key} to {where}")
        return found

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()
