"""The limiter's order: grading ahead of generation, but never so far that the slots run dry."""

from __future__ import annotations

import asyncio

import pytest

from hbtui.client.limiter import AdaptiveLimiter
from hbtui.core.calls import GENERATION, GRADING


async def take(limiter: AdaptiveLimiter, priority: int, name: str, order: list[str]) -> None:
    """Wait for a slot, then say so in ``order``."""
    await limiter.acquire(priority)
    order.append(name)


async def granted_order(limit: int, queued: list[tuple[str, int]]) -> list[str]:
    """The names of ``queued`` (name, priority) in the order the slots go to them, once the
    ``limit`` calls holding every slot end one by one."""
    limiter = AdaptiveLimiter(limit)
    for _ in range(limit):
        await limiter.acquire(GRADING)
    order: list[str] = []
    tasks = [asyncio.create_task(take(limiter, priority, name, order)) for name, priority in queued]
    await asyncio.sleep(0)  # every waiter queued
    for _ in queued:
        limiter.release()
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    return order


def test_gradings_enough_to_fill_the_slots_go_first():
    queued = [("gen1", GENERATION), ("grade1", GRADING), ("grade2", GRADING), ("grade3", GRADING)]
    assert asyncio.run(granted_order(2, queued)) == ["grade1", "grade2", "gen1", "grade3"]


def test_a_generation_goes_ahead_of_too_few_gradings_to_fill_the_slots():
    # Two gradings wait for four slots: a generation sent now brings criteria back as they leave.
    queued = [("gen1", GENERATION), ("gen2", GENERATION), ("grade1", GRADING), ("grade2", GRADING)]
    assert asyncio.run(granted_order(4, queued)) == ["gen1", "gen2", "grade1", "grade2"]


@pytest.mark.parametrize(
    "granted_first", [False, True], ids=["cancelled while queued", "cancelled once granted, before it ran"]
)
def test_a_cancelled_waiter_leaves_its_slot_to_the_next(granted_first):
    async def go() -> list[str]:
        limiter = AdaptiveLimiter(1)
        await limiter.acquire()
        order: list[str] = []
        first = asyncio.create_task(take(limiter, GRADING, "cancelled", order))
        second = asyncio.create_task(take(limiter, GENERATION, "next", order))
        await asyncio.sleep(0)  # both queued
        if granted_first:
            limiter.release()  # the slot goes to the first...
            first.cancel()  # ...which is cancelled before it runs: it gives the slot back
        else:
            first.cancel()
            limiter.release()  # in the same turn: the cancelled one is still queued, and passed over
        await asyncio.wait_for(second, 2)
        assert limiter.in_flight == 1 and first.cancelled()
        return order

    assert asyncio.run(go()) == ["next"]
