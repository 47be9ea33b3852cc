"""The live figures a run's driver writes with each heartbeat (runs.live_json), which monitors in
other processes read: one record, typed, from the engine that builds it to the app that shows it.

Every key may be missing: a heartbeat written by an older hbtui lacks the newer ones, so readers
take each with ``.get`` and a default, as the monitor does.
"""

from __future__ import annotations

from typing import Any, TypedDict


class EndpointFigures(TypedDict, total=False):
    """One endpoint's figures: its calls in flight against its adaptive limit, its calls and
    answers so far, its state (live, set aside) and its answers a second."""

    in_flight: int
    limit: int
    calls: int
    successes: int
    state: str
    rate: float


class LiveSnapshot(TypedDict, total=False):
    paused: bool
    started_at: float  # when this process took the run up (a resume's idle time before is not running time)
    pauses: list[list[float | None]]  # [start, end] of each pause; end None while still paused
    endpoints: dict[str, EndpointFigures]  # by the endpoint's label (its URL, never its key)
    call_errors: dict[str, int]  # failed attempts by kind, retried or not
    limits: dict[str, Any]  # what the rate limits did (hbtui.core.rate_limits.pace_summary)
    # A run through the batch API: its last look at its batches ({"at", "next", "by": owner}), kept
    # while it awaits them with no lease, so that a monitor tells a process looking from none.
    batch_look: dict[str, Any]
