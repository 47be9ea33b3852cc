"""More copy keys in a conversation: T the criterion text, P the prompt, I the prompt_id, M the
conversation with its verdicts as Markdown (escapes in model text shown, never passed on)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hbtui.conversation_markdown import conversation_markdown
from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browser_harness import browser_app
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> tuple[Path, int]:
    db = tmp_path_factory.mktemp("copy") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            return await synthesize_run(store, conversations=6, criteria_per=5, seed=2, hostile=True)

    return db, asyncio.run(make())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_copy_criterion_prompt_prompt_id_and_markdown(hostile_db, size):
    db, run_id = hostile_db
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)
        screen = RunScreen(run_id)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.conversation_list.loaded and screen.report is not None)
        await pilot.press("2", "j", "enter")  # the second: plain text
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        conversation = app.screen
        detail = conversation.detail
        await pilot.press("j", "j", "T")
        assert app.clipboard == detail.verdicts[1].criterion
        await pilot.press("I")
        assert app.clipboard == detail.summary.prompt_id
        await pilot.press("P")
        assert app.clipboard.startswith("user: I have ") and detail.prompt[-1]["content"] in app.clipboard
        await pilot.press("M")
        markdown = app.clipboard
        assert markdown.startswith(f"## Run {run_id}, conversation #2 (list 2)")
        assert f"`{detail.summary.prompt_id}`" in markdown and "### Verdicts" in markdown
        for v in detail.verdicts:
            assert v.criterion in markdown
        assert "copied the conversation and its verdicts as Markdown" in str(conversation.query_one("KeyBar").render())

        await pilot.press("N")  # the first: escapes in every text
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 0)
        await pilot.press("M")
        assert "\x1b" not in app.clipboard and "\x07" not in app.clipboard
        await pilot.press("T")
        assert conversation.query_one(VerdictList).selected == 0


def test_markdown_marks_missed_criteria_and_triggered_penalties(hostile_db):
    db, run_id = hostile_db

    async def read(store: Store):
        ids = await store.conversation_ids(run_id)
        return [await store.conversation_detail(i) for i in ids]

    async def go():
        async with await Store.open(db) as store:
            return await read(store)

    details = asyncio.run(go())
    text = "\n".join(conversation_markdown(d, run_id) for d in details)
    kinds = {(v.points > 0, v.status) for d in details for v in d.verdicts}
    if (True, "not_met") in kinds:
        assert "**MISSED**" in text
    if (False, "met") in kinds:
        assert "**PENALTY triggered**" in text
