"""The criteria view (V on a run): every distinct criterion with its outcomes, sorted, exported
to CSV, and the conversations behind one; checked against a scan of the verdict rows."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from hbtui.analysis.criteria_table import CSV_COLUMNS, criteria_csv, sorted_criteria
from hbtui.store import Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.criteria import CriteriaScreen, CriteriaTable
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browse import open_run, synthetic_db
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.tui import told, wait_for

SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def criteria_db(tmp_path_factory) -> tuple[Path, int]:
    return synthetic_db(tmp_path_factory.mktemp("criteria") / "hbtui.sqlite", conversations=80, criteria_per=10, seed=7)


def scanned(db: Path, run_id: int) -> dict[tuple[str, str], dict[str, int]]:
    """(criterion, tags) -> counts, from the rows one by one."""
    found: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with sqlite3.connect(db) as conn:
        for criterion, tags, status in conn.execute(
            "SELECT criterion, tags, status FROM verdicts WHERE run_id = ?", (run_id,)
        ):
            counts = found[(criterion, tags)]
            counts["n"] += 1
            counts[status] += 1
    return found


def test_criteria_stats_group_by_text_and_tags(criteria_db):
    db, run_id = criteria_db

    async def read(store: Store):
        return await store.criteria_stats(run_id)

    stats = asyncio.run(_with(db, read))
    expected = scanned(db, run_id)
    assert len(stats) == len(expected) < 80 * 10  # consensus-like repeats are grouped
    for c in stats:
        counts = expected[(c.criterion, c.tags_json)]
        assert (c.conversations, c.met, c.not_met, c.errors) == (
            counts["n"],
            counts["met"],
            counts["not_met"],
            counts["error"],
        )


def test_the_criteria_read_once_are_read_again_when_the_database_changes(tmp_path):
    """criteria_stats keeps its last read while the database is unchanged (the view opens
    without the aggregate): a verdict graded by another process, or written through this
    connection, is in the next one."""
    db, run_id = synthetic_db(tmp_path / "hbtui.sqlite", conversations=20, criteria_per=4, seed=3)

    def met_of(stats, key):
        return next(c.met for c in stats if (c.criterion, c.tags_json) == key)

    async def go():
        async with await Store.open(db) as store:
            first = await store.criteria_stats(run_id)
            assert await store.criteria_stats(run_id) == first  # unchanged, without reading again
            with sqlite3.connect(db) as other:  # the engine of another process grades one again
                verdict, *key = other.execute(
                    "SELECT id, criterion, tags FROM verdicts WHERE run_id = ? AND status = 'not_met' LIMIT 1",
                    (run_id,),
                ).fetchone()
                key = tuple(key)
                other.execute("UPDATE verdicts SET status = 'met' WHERE id = ?", (verdict,))
            after_other = await store.criteria_stats(run_id)
            await store.db.execute("UPDATE verdicts SET status = 'not_met' WHERE id = ?", (verdict,))
            await store.db.commit()
            after_own = await store.criteria_stats(run_id)
            return met_of(first, key), met_of(after_other, key), met_of(after_own, key)

    before, after_other, after_own = asyncio.run(go())
    assert after_other == before + 1 and after_own == before


async def _with(db: Path, fn):
    async with await Store.open(db) as store:
        return await fn(store)


def test_most_missed_first_and_the_csv_holds_every_row(criteria_db):
    db, run_id = criteria_db
    stats = asyncio.run(_with(db, lambda s: s.criteria_stats(run_id)))
    ordered = sorted_criteria(stats, "missed")
    positives = [c for c in ordered if c.points > 0 and c.met_fraction is not None]
    fractions = [c.met_fraction for c in positives]
    assert fractions == sorted(fractions) and ordered[0] is positives[0]
    rows = list(csv.reader(io.StringIO(criteria_csv(ordered))))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == len(stats) + 1
    assert rows[1][0] == ordered[0].criterion and rows[1][1] == " ".join(json.loads(ordered[0].tags_json))


async def open_criteria(pilot, run_id: int) -> CriteriaScreen:
    app = pilot.app
    await open_run(pilot, run_id)
    await pilot.press("V")
    await wait_for(pilot, lambda: isinstance(app.screen, CriteriaScreen) and app.screen.loaded)
    return app.screen


@pytest.mark.parametrize("size", SIZES)
async def test_criteria_view_sorts_exports_and_opens_the_conversations_behind(criteria_db, tmp_path, size):
    db, run_id = criteria_db
    expected = scanned(db, run_id)
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        view = await open_criteria(pilot, run_id)
        table = view.query_one(CriteriaTable)
        assert len(table.rows) == len(expected)
        assert f"{len(expected):,} distinct" in screen_text(app)
        first = table.current
        fraction = first.met_fraction
        assert all(c.met_fraction is None or c.met_fraction >= fraction for c in table.rows if c.points > 0)

        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("down", "down", "enter")  # penalties triggered, most first
        await wait_for(pilot, lambda: view.sort == "triggered")
        top = table.current
        assert top.points < 0 and top.met == max(c.met for c in table.rows if c.points < 0)

        out = tmp_path / "criteria.csv"
        await pilot.press("e")
        field = view.query_one("#criteria-path")
        assert app.focused is field
        field.value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: out.exists())
        rows = list(csv.reader(out.open()))
        assert out.stat().st_mode & 0o077 == 0  # owner-only, as every export
        assert len(rows) == len(expected) + 1 and rows[1][0] == top.criterion
        assert app.focused is table

        # The criterion most conversations share: n steps to the next of them.
        table.cursor = max(range(len(table.rows)), key=lambda i: table.rows[i].conversations)
        chosen = table.current
        assert chosen.conversations > 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        conversation = app.screen
        assert len(conversation.conversation_ids) == expected[(chosen.criterion, chosen.tags_json)]["n"]
        verdicts = conversation.query_one(VerdictList)
        assert verdicts.current.verdict.criterion == chosen.criterion
        await pilot.press("n")
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 1)
        assert verdicts.current.verdict.criterion == chosen.criterion
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is view)


async def test_an_unwritable_csv_path_says_so_and_keeps_the_view(criteria_db, tmp_path):
    db, run_id = criteria_db
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_criteria(pilot, run_id)
        await pilot.press("e")
        view.query_one("#criteria-path").value = str(tmp_path / "no-such-folder" / "x.csv")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is view and not (tmp_path / "no-such-folder").exists()
        assert any("cannot write" in str(n.message) for n in app._notifications)


async def test_a_csv_path_that_exists_is_replaced_only_when_the_reviewer_says_so(criteria_db, tmp_path):
    from hbtui.tui.screens.confirm import ConfirmModal

    db, run_id = criteria_db
    earlier = tmp_path / "earlier.csv"
    earlier.write_text("an earlier export\n")
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_criteria(pilot, run_id)
        for answer in ("n", "y"):
            await pilot.press("e")
            view.query_one("#criteria-path").value = str(earlier)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
            await pilot.press(answer)
            await wait_for(pilot, lambda: app.screen is view)
            if answer == "n":
                await wait_for(pilot, lambda: told(app, "kept as it was"))
                assert earlier.read_text() == "an earlier export\n"
        await wait_for(pilot, lambda: told(app, "wrote"))
        assert earlier.read_text().startswith("criterion,")
