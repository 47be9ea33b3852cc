"""A per-endpoint cap on requests in flight, with priorities and adaptive shrinking on 429s.

Grading waits ahead of generation when both share an endpoint, so conversations finish (and
scores appear) as the run goes instead of all replies first and all verdicts last. But not so far
ahead that the slots run dry: once fewer gradings wait than the cap (what the slots take in one
round trip), a generation goes first, so that its reply, and the criteria it brings, come back
as the last of those gradings leave. Without it a run's slots idled for a round trip each time
the gradings ran out: the main subset at 512 in flight took 4.27-4.38 s from its first call to
its last verdict, 4.21-4.24 s with this; its 7 repeats at 2 ms latency 19-21 s, now 15-16 s.

It bounds what is in flight; what is sent each second is the pace's (hbtui.core.rate_limits), which
a call waits for once it holds its slot. A run started with a concurrency far above an
endpoint's rate limit slows down to the limit instead of failing: its calls wait for the pace.

Only a 429 that teaches no pace (it says no wait, and no rate is known) shrinks the cap,
multiplicatively (at most once per ``cooldown`` seconds, so one burst of refusals counts once);
it grows back by one after about one window of successes (``growth`` x the current cap), as
TCP's congestion window does. An endpoint that refuses now and then keeps its concurrency.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from hbtui.core.calls import GENERATION, GRADING


class AdaptiveLimiter:
    def __init__(self, limit: int, *, minimum: int = 1, cooldown: float = 1.0, growth: float = 1.0) -> None:
        self.max_limit = limit
        self.limit = limit
        self.minimum = minimum
        self.cooldown = cooldown
        self.growth = growth
        self.in_flight = 0
        self._waiting: dict[int, deque[asyncio.Future]] = {GRADING: deque(), GENERATION: deque()}
        self._last_shrink = 0.0
        self._successes = 0

    async def acquire(self, priority: int = GENERATION) -> None:
        waiting = self._waiting
        if self.in_flight < self.limit and not (waiting[GRADING] or waiting[GENERATION]):
            self.in_flight += 1
            return
        future = asyncio.get_running_loop().create_future()
        queue = waiting[GRADING if priority == GRADING else GENERATION]
        queue.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted just as we were cancelled: give the slot back
            elif future in queue:  # _wake may have dropped it already, as cancelled
                queue.remove(future)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        grading, generation = self._waiting[GRADING], self._waiting[GENERATION]
        while self.in_flight < self.limit and (grading or generation):
            # Grading first, unless so few gradings wait that the slots would run dry before a
            # generation sent now came back with more (see the module).
            queue = grading if grading and (len(grading) >= self.limit or not generation) else generation
            future = queue.popleft()
            if not future.done():
                self.in_flight += 1
                future.set_result(None)

    def rate_limited(self) -> None:
        now = time.monotonic()
        if now - self._last_shrink < self.cooldown:
            return
        self._last_shrink = now
        self._successes = 0
        self.limit = max(self.minimum, int(self.limit * 0.7))

    def succeeded(self) -> None:
        if self.limit >= self.max_limit:
            return
        self._successes += 1
        if self._successes >= max(1.0, self.limit * self.growth):
            self._successes = 0
            self.limit += 1
            self._wake()

    async def __aenter__(self) -> AdaptiveLimiter:
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()
