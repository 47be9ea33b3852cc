"""Comparing two runs in the app: marking them on the runs list, the compare screen, both replies."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from textual.widgets import DataTable

from hbtui.analysis.compare import compare_runs
from hbtui.store import Store
from hbtui.tui.screens.compare import CompareScreen
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.pair import PairScreen
from hbtui.tui.screens.runs import RunsScreen
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.key_tabs import KeyTabs
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


@pytest.fixture
def db(tmp_path) -> Path:
    """Runs 1 and 2 share their 40 records and differ in answers; run 3 has other records."""
    path = tmp_path / "hbtui.sqlite"

    async def make() -> None:
        async with await Store.open(path) as store:
            await synthesize_run(store, conversations=40, criteria_per=8, seed=3, name="first", hostile=True)
            await synthesize_run(
                store, conversations=40, criteria_per=8, seed=3, name="second", answers_seed=4, hostile=True
            )
            await synthesize_run(store, conversations=10, criteria_per=4, seed=9, name="unrelated")

    asyncio.run(make())
    return path


@asynccontextmanager
async def on_the_runs_list(db: Path, size: tuple[int, int] = (80, 24)):
    """(app, pilot, runs list) of the app on ``db``, once its list shows the three runs."""
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        yield app, pilot, await runs_list(pilot)


def notified(app, text: str) -> bool:
    """Said in a toast, or (a short answer to a key) on the key bar."""
    bars = app.screen.query(KeyBar)
    return any(text in str(note.message) for note in app._notifications) or any(text in bar.status for bar in bars)


async def runs_list(pilot) -> RunsScreen:
    app = pilot.app
    await wait_for(
        pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 3, what="the runs list"
    )
    return app.screen


async def mark(pilot, screen: RunsScreen, *run_ids: int) -> None:
    for run_id in run_ids:
        screen.table.move_cursor(row=screen.table.get_row_index(str(run_id)))
        await pilot.press("space")
        await wait_for(
            pilot,
            lambda run_id=run_id: (
                run_id in screen.marked
                and screen.table.get_row(str(run_id))[0].plain.endswith(f"{'AB'[screen.marked.index(run_id)]} {run_id}")
            ),
            what=f"run {run_id} marked",
        )


async def open_comparison(pilot, *run_ids: int) -> CompareScreen:
    app = pilot.app
    screen = await runs_list(pilot)
    await mark(pilot, screen, *run_ids)
    await pilot.press("C")
    await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.completed, what="the comparison")
    await pilot.pause()
    return app.screen


async def test_two_marked_runs_compare_with_the_numbers_of_hbtui_compare(db):
    async with await Store.open(db, create=False) as store:
        expected = await compare_runs(store, await store.get_run(1), await store.get_run(2))
    async with on_the_runs_list(db) as (app, pilot, runs):
        await mark(pilot, runs, 1, 2)
        shown = screen_text(app)
        assert " A 1 " in shown and " B 2 " in shown  # the marks, in the list
        await pilot.press("C")
        await wait_for(
            pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.completed, what="the comparison"
        )
        await pilot.pause()
        screen = app.screen
        assert screen.result.overall == expected.overall and screen.result.axes == expected.axes
        text = screen_text(app)
        d = expected.overall
        assert f"Paired conversations {d.n}" in text
        assert f"Score A {d.score_a:.3f}   B {d.score_b:.3f}   B - A {d.value:+.3f}" in text
        assert f"95% CI {d.ci95[0]:+.3f} to {d.ci95[1]:+.3f}" in text
        assert f"kappa {expected.agreement.overall.kappa:.3f}" in text


async def test_C_says_how_without_two_runs_and_one_mark_compares_with_the_cursor(db):
    async with on_the_runs_list(db) as (app, pilot, runs):
        await pilot.press("C")
        await wait_for(
            pilot, lambda: notified(app, "mark two runs with space (A, then B), then press C"), what="the hint"
        )
        assert app.screen is runs
        await mark(pilot, runs, 2)
        runs.table.move_cursor(row=runs.table.get_row_index("1"))
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="the comparison")
        assert (app.screen.result.run_a.id, app.screen.result.run_b.id) == (2, 1)


async def test_space_again_unmarks_and_a_third_mark_lets_the_oldest_go(db):
    async with on_the_runs_list(db) as (_app, pilot, runs):
        await mark(pilot, runs, 1, 2, 3)
        assert runs.marked == [2, 3]
        await pilot.press("space")  # the cursor is on run 3
        await wait_for(pilot, lambda: runs.marked == [2], what="run 3 unmarked")


async def test_runs_with_nothing_in_common_are_one_line_and_the_list_stays(db):
    async with on_the_runs_list(db, (100, 24)) as (app, pilot, runs):
        await mark(pilot, runs, 1, 3)
        await pilot.press("C")
        await wait_for(pilot, lambda: notified(app, "runs 1 and 3 share no conversation"), what="the error")
        assert app.screen is runs


@pytest.mark.parametrize("size, side_by_side", [((80, 24), False), ((120, 40), True)])
async def test_enter_on_a_moved_conversation_shows_both_replies_and_the_criteria_that_differ(db, size, side_by_side):
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        screen = await open_comparison(pilot, 1, 2)
        await pilot.press("2")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen), what="the pair")
        await pilot.pause()
        pair = app.screen
        moved = screen.result.moved[0]
        a, b = pair.details
        assert (a.summary.id, b.summary.id) == (moved.conversation_a, moved.conversation_b)
        reply_a, reply_b = pair.query_one("#pair-reply-a"), pair.query_one("#pair-reply-b")
        assert (reply_a.region.y == reply_b.region.y) is side_by_side
        differing = sum(1 for va, vb in zip(a.verdicts, b.verdicts) if va.status != vb.status)
        await pilot.press("d")  # to the criteria, below the replies at 80x24
        await pilot.pause()
        assert differing and f"CRITERIA WHOSE VERDICTS DIFFER ({differing})" in screen_text(app)
        await pilot.press("n")
        await wait_for(pilot, lambda: pair.index == 1, what="the next pair")
        assert pair.details[0].summary.id == screen.result.moved[1].conversation_a
        await pilot.press("escape")
        assert app.screen is screen


async def test_a_click_on_a_tab_label_shows_its_list(db):
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_comparison(pilot, 1, 2)
        await pilot.click(KeyTabs, offset=(20, 0))  # " 1 Summary " then " 2 Moved " (11 to 20), " 3 Disagreements "
        assert screen.query_one(KeyTabs).active == "disagreements-tab"
        assert screen.query_one("#disagreements-tab").display and app.focused.id == "disagreement-table"
        await pilot.click(KeyTabs, offset=(12, 0))
        assert app.focused.id == "moved-table" and not screen.query_one("#disagreements-tab").display
        await pilot.press("1")
        assert screen.query_one(KeyTabs).active == "compare-summary-tab"


async def test_model_text_in_a_pair_is_shown_as_text(db):
    """The first conversation's reply and criterion carry Rich markup and terminal escapes."""
    app = browser_app(db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_comparison(pilot, 1, 2)
        first = [(1, 41, "first")]  # the ids of the conversations at position 0 of runs 1 and 2
        await app.push_screen(await PairScreen.read(app.store, screen.result, first, 0))
        await pilot.pause()
        text = screen_text(app)
        assert text.count("Reply [bold]x[/bold] [link=http://e.com]y[/link]") == 2  # A's and B's
        assert text.count("␛[31mred␛[0m ␛]52;c;aGVsbG8=␇ done") == 3  # the prompt, A's and B's
        assert "Second line [red]not red[/red]" in text
        assert "\x1b" not in text


async def test_every_compare_key_is_in_the_key_bar_or_help(db):
    async with on_the_runs_list(db, (120, 30)) as (app, pilot, runs):
        assert "space Mark" in screen_text(app) and "C Compare" in screen_text(app)
        await mark(pilot, runs, 1, 2)
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="the comparison")
        await pilot.pause()
        assert "Both replies" in screen_text(app) and "x Swap A and B" in screen_text(app)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal), what="help")
        help_text = screen_text(app)
        for description in ("Summary", "Moved", "Disagreements", "Both replies", "Swap A and B"):
            assert description in help_text
        await pilot.press("escape", "x")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, CompareScreen) and app.screen.result.run_a.id == 2,
            what="A and B swapped",
        )
        await pilot.press("3", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen), what="a disagreement's pair")
        assert "n Next" in screen_text(app) and "d Differing criteria" in screen_text(app)


async def test_the_moved_list_names_each_conversation_by_its_number_in_each_run(db):
    """Issue 25, item 10: the app's Moved list named conversations by prompt_id only, which the
    run's browser never shows."""
    app = browser_app(db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_comparison(pilot, 1, 2)
        table = screen.query_one("#moved-table", DataTable)
        shown = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
        assert shown and shown == [m.numbers for m in screen.result.moved[: len(shown)]]
        assert all(number.startswith("#") for number in shown)


async def test_the_disagreements_fit_the_screen_and_name_each_conversation_by_its_number(db):
    """At 80 columns the prompt id ran past the screen's edge, cut with no mark, and nothing
    said where to find the conversation in the run."""
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_comparison(pilot, 1, 2)
        await pilot.press("3")
        table = screen.query_one("#disagreement-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, what="the disagreements")
        disagreements = screen.result.agreement.disagreements
        shown = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert shown == [d.numbers for d in disagreements[: len(shown)]]
        assert table.virtual_size.width <= table.size.width  # nothing past the screen's edge
        for i, d in enumerate(disagreements[: table.row_count]):
            prompt, criterion = (str(cell) for cell in table.get_row_at(i)[4:6])
            assert prompt == d.prompt_id or (prompt.endswith("…") and d.prompt_id.startswith(prompt[:-1]))
            assert criterion == d.criterion or (criterion.endswith("…") and d.criterion.startswith(criterion[:-1]))
