"""The ideal completion beside the reply (i in a conversation), read from the record the run
stored: the physician's completion, its group and the reference completions, or a plain "none"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from hbtui.store.browse_reads import ideal_completions
from tests.conftest import MAIN_SUBSET, needs_shared
from tests.support.browse import open_conversation, open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.tui import wait_for

IDEAL = {
    "ideal_completion": "See a doctor [bold]today[/bold] if the pain spreads.",
    "ideal_completions_group": "Group 3",
    "ideal_completions_ref_completions": ["First reference \x1b[31mreply", "Second reference reply"],
}


@pytest.fixture
def ideal_db(tmp_path) -> tuple[Path, int]:
    """Each test its own: a review's place is remembered, and the run would open where it was left."""
    db, run_id = synthetic_db(tmp_path / "hbtui.sqlite", conversations=5, criteria_per=4, seed=9)
    with sqlite3.connect(db) as conn:  # the first conversation's record gets one, as HealthBench's do
        conn.execute(
            "UPDATE records SET body = json_set(body, '$.ideal_completions_data', json(?)) WHERE id ="
            " (SELECT record_id FROM conversations WHERE run_id = ? AND position = 0)",
            (json.dumps(IDEAL), run_id),
        )
    return db, run_id


@needs_shared  # ../shared beside the checkout, or HBTUI_HEALTHBENCH_DIR, as every such test
def test_the_main_subset_has_93_records_without_an_ideal_completion():
    found = [ideal_completions(line) for line in MAIN_SUBSET.read_text().splitlines() if line.strip()]
    assert len(found) == 738 and sum(f is None for f in found) == 93
    assert all(f.group for f in found if f is not None)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_i_shows_the_ideal_completion_and_says_when_there_is_none(ideal_db, size):
    db, run_id = ideal_db
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        await open_run(pilot, run_id)
        conversation = await open_conversation(pilot, "2", "enter")
        panel = conversation.query_one("#ideal")
        assert not panel.display
        await pilot.press("i")
        await wait_for(pilot, lambda: panel.display)
        await pilot.pause(0.1)
        text = str(panel.render())
        assert "IDEAL COMPLETION" in text and "Group 3" in text
        assert "[bold]today[/bold]" in text  # data, never markup
        assert "Reference completion 2 of 2" in text and "\x1b" not in text
        assert "Physician's completion" in screen_text(app)
        await pilot.press("n")  # stays open on the next conversation, which has none
        await wait_for(pilot, lambda: conversation.index == 1 and "no ideal completion" in str(panel.render()))
        await pilot.press("i")
        assert not panel.display
