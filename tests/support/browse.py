"""Steps the browser tests share: a synthetic run in a fresh database, a run's screen opened and
loaded, and a conversation opened from its list."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.run import RunScreen
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


def synthetic_db(db: Path, **synth) -> tuple[Path, int]:
    """``db`` holding one synthetic finished run (``synth``: synthesize_run's options)."""

    async def make():
        async with await Store.open(db) as store:
            return await synthesize_run(store, **synth)

    return db, asyncio.run(make())


async def open_run(pilot, run_id: int, *, read_first: bool = False) -> RunScreen:
    """The run's screen pushed and loaded; ``read_first`` reads it before, as the runs list does."""
    app = pilot.app
    await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
    screen = await RunScreen.read(app.store, run_id) if read_first else RunScreen(run_id)
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.conversation_list.loaded and screen.report is not None)
    return screen


async def open_conversation(pilot, *keys: str) -> ConversationScreen:
    """``keys`` pressed (the last one opening a conversation), and the conversation loaded."""
    await pilot.press(*keys)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConversationScreen) and pilot.app.screen.loaded)
    return pilot.app.screen
