"""Pictures of the browser's search, sort picker and filter menu at 80x24 and 120x40, on the
fixed synthetic run of test_tui_snapshots_browser (its fixtures, imported)."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import run_engine, settings_for
from tests.support.browser_harness import browser_app
from tests.tui.test_tui_snapshots_browser import browse, snapshot_db, utc  # noqa: F401 - fixtures

SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES)
def test_search_everything_says_where_it_matched(snap_compare, snapshot_db, size):  # noqa: F811
    db, run_id = snapshot_db
    keys = ("2", "slash", *"fabricated", "enter")
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, *keys))


@pytest.mark.parametrize("size", SIZES)
def test_sort_picker(snap_compare, snapshot_db, size):  # noqa: F811
    db, run_id = snapshot_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, "2", "s", "down"))


@pytest.mark.parametrize("size", SIZES)
def test_filter_menu(snap_compare, snapshot_db, size):  # noqa: F811
    db, run_id = snapshot_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, "2", "f"))


@pytest.mark.parametrize("size", SIZES)
def test_filtered_by_tag_and_verdict_state(snap_compare, snapshot_db, size):  # noqa: F811
    db, run_id = snapshot_db
    keys = ("2", "f", "down", "enter", "down", "enter", "f", "down", "down", "enter", "down", "down", "enter")
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, *keys))


@pytest.mark.parametrize("size", [*SIZES, (160, 48)])
def test_criteria_view(snap_compare, snapshot_db, size):  # noqa: F811
    db, run_id = snapshot_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, "V", "j"))


@pytest.mark.parametrize("size", SIZES)
def test_conversation_without_an_ideal_completion(snap_compare, snapshot_db, size):  # noqa: F811
    db, run_id = snapshot_db
    keys = ("2", "enter", "i")
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, *keys, conversation=True))


@pytest.fixture
def repeats_db(server, small_dataset, tmp_path):
    """The small dataset run three times over by the real engine (the fake server answers the
    same request the same way: the scores are the same each time)."""
    db = tmp_path / "hbtui.sqlite"
    run_id, _status = asyncio.run(
        run_engine(settings_for(server, db, grader_template="builtin"), small_dataset, repeats=3, name="thrice")
    )
    return db, run_id


@pytest.mark.parametrize("size", SIZES)
def test_repeats_grouped(snap_compare, repeats_db, size):
    db, run_id = repeats_db
    assert snap_compare(browser_app(db), terminal_size=size, run_before=browse(run_id, "K"))
