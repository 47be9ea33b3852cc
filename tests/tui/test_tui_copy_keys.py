"""More copy keys in a conversation: T the criterion text, P the prompt, I the prompt_id, M the
conversation with its verdicts as Markdown (escapes in model text shown, never passed on)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hbtui.render.conversation_markdown import conversation_markdown
from hbtui.store import Store
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browse import open_conversation, open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.tui import wait_for


@pytest.fixture
def hostile_db(tmp_path) -> tuple[Path, int]:
    """Each test its own: a review's place is remembered, and the run would open where it was left."""
    return synthetic_db(tmp_path / "hbtui.sqlite", conversations=6, criteria_per=5, seed=2, hostile=True)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_copy_criterion_prompt_prompt_id_and_markdown(hostile_db, size):
    db, run_id = hostile_db
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        await open_run(pilot, run_id)
        conversation = await open_conversation(pilot, "2", "j", "enter")  # the second: plain text
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


def test_markdown_keeps_a_multi_line_criterion_in_its_item_and_names_the_repeat(hostile_db):
    from dataclasses import replace

    db, run_id = hostile_db

    async def go():
        async with await Store.open(db) as store:
            return await store.conversation_detail((await store.conversation_ids(run_id))[0])

    detail = asyncio.run(go())
    first = replace(detail.verdicts[0], idx=0, criterion="Advises, among others:\n- rest\n\n- fluids")
    detail = replace(detail, verdicts=[first], summary=replace(detail.summary, repeat=1))
    text = conversation_markdown(detail, run_id, 3, repeats=2)
    number = detail.summary.position + 1
    assert f"## Run {run_id}, conversation #{number} (repeat 2 of 2) (list 3)\n" in text
    assert "] Advises, among others:\n   - rest\n\n   - fluids\n" in text  # inside item 1, not a list of their own
    assert "positive criteria met" in text


async def test_markdown_carries_the_reviewers_flip_flag_and_note(hostile_db, monkeypatch):
    """Issue 25, item 10: M left out what the reviewer said of each verdict."""
    monkeypatch.setenv("USER", "tester")
    db, run_id = hostile_db
    app = browser_app(db)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_run(pilot, run_id)
        conversation = await open_conversation(pilot, "2", "j", "enter")
        await pilot.press("j", "j", "w", "f", *"check the dose", "enter")
        verdicts = conversation.query_one(VerdictList)
        await wait_for(pilot, lambda: len(verdicts.items[1].notes) == 2, what="the flip and the flag shown")
        await pilot.press("M")
        markdown = app.clipboard
        item = next(part for part in markdown.split("\n2. ")[1:2])
        assert "- reviewed " in item and ": flipped by tester" in item
        assert "- flagged by tester: check the dose" in item
        assert markdown.count("flagged by") == 1, "only the criterion reviewed"
