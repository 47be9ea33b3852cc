"""Which llama.cpp server slot grades a conversation (GRADER_SLOTS, sent as ``id_slot``).

A slot keeps the prompt it last processed, so a conversation's criteria, whose grader prompts
share everything up to the criterion (the template's head, the conversation, the reply), pay for
that prefix once when they follow one another on one slot. Two conversations on one slot at once
take turns, and each turn processes the whole prompt again: with 5 conversations on 4 slots, the
fifth shared a slot (by its id) with one still grading, and the demo's CPU spent its time on
prefixes. So a slot grades one conversation at a time: a conversation takes a free slot, or waits
for the one with the fewest waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class GraderSlots:
    def __init__(self, slots: int) -> None:
        self._locks = [asyncio.Lock() for _ in range(slots)]
        self._waiting = [0] * slots

    @asynccontextmanager
    async def slot_for(self, conversation_id: int) -> AsyncIterator[int]:
        """A slot of this conversation's own while the block runs."""
        count = len(self._locks)
        free = [slot for slot, lock in enumerate(self._locks) if not lock.locked()]
        # Among free slots, or else the least awaited, the one its id names first (the same slot
        # for the same conversation on a resume, when nothing else is going).
        slot = min(free or range(count), key=lambda s: (0 if free else self._waiting[s], (s - conversation_id) % count))
        self._waiting[slot] += 1
        try:
            await self._locks[slot].acquire()
        finally:
            self._waiting[slot] -= 1
        try:
            yield slot
        finally:
            self._locks[slot].release()
