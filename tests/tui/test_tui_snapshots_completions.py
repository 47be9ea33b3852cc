"""Pictures of a run of physicians' completions in the app (issue 14, section 2): its summary
names whose replies it grades, the records skipped, and each group's own score.

Regenerate with `pytest tests/tui/test_tui_snapshots_completions.py --snapshot-update` and read the
SVGs in __snapshots__ before committing them.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from tests.conftest import run_engine, settings_for
from tests.engine.test_completions import completion_records
from tests.support.browser_harness import browser_app
from tests.tui.test_tui_snapshots_browser import browse, utc  # noqa: F401 - utc is a fixture

FIXED_TIME = 1_767_225_600.0  # 2026-01-01 00:00 UTC: the dates on screen never change


@pytest.fixture
def completions_db(server, tmp_path):
    db = tmp_path / "runs" / "hbtui.sqlite"
    # The builtin prompt whether or not ../shared holds the reference's: the grader's tokens shown
    # depend on the prompt's words.
    settings = settings_for(server, db, grader_template="builtin", completions="physician")
    run_id, status = asyncio.run(run_engine(settings, completion_records(tmp_path), name="physicians"))
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET created_at = ?, finished_at = ?", (FIXED_TIME, FIXED_TIME + 60))
    return db, run_id


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_run_summary_of_physician_completions(snap_compare, completions_db, size):
    db, run_id = completions_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id))
