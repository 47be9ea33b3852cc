"""The browser's widgets in a bare App: they read what their screen hands them and post messages
up, so they work under any screen and any app, not only under RunScreen in HBTuiApp."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import App, ComposeResult

from hbtui.store import ConversationFilter, Store
from hbtui.tui.widgets.conversation_list import ConversationList, ConversationPages, Query
from hbtui.tui.widgets.filter_input import FilterInput
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for


class ListApp(App[None]):
    """No ``store`` and no ``db``: the list has only the pages it was given."""

    def __init__(self, pages: ConversationPages) -> None:
        super().__init__()
        self.pages = pages
        self.opened: list[ConversationList.Opened] = []

    def compose(self) -> ComposeResult:
        yield ConversationList(self.pages)

    @on(ConversationList.Opened)
    def _opened(self, event: ConversationList.Opened) -> None:
        self.opened.append(event)


async def test_conversation_list_pages_from_the_reader_it_is_handed(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "runs.sqlite") as store:
        run_id = await synthesize_run(store, conversations=450, criteria_per=2, seed=1)
        ids = await store.conversation_ids(run_id)
        app = ListApp(ConversationPages(store))
        async with app.run_test(size=(80, 24)) as pilot:
            lst = app.query_one(ConversationList)
            await lst.load(Query(run_id, ConversationFilter()))
            assert lst.total == 450
            lst.focus()
            await pilot.press("G")  # the last row is on a page not read yet: fetched through the reader
            await wait_for(pilot, lambda: lst.row(449) is not None)
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(app.opened) == 1)
            assert (app.opened[0].index, app.opened[0].conversation_id) == (449, ids[449])


class InputApp(App[None]):
    """A plain screen above the input: escape must reach whoever listens, not call a RunScreen."""

    def __init__(self) -> None:
        super().__init__()
        self.cleared: list[str] = []

    def compose(self) -> ComposeResult:
        yield FilterInput(value="needle", id="search-input")

    @on(FilterInput.Cleared)
    def _cleared(self, event: FilterInput.Cleared) -> None:
        self.cleared.append(event.filter_input.id or "")


async def test_filter_input_escape_posts_cleared_up() -> None:
    app = InputApp()
    async with app.run_test() as pilot:
        field = app.query_one(FilterInput)
        field.focus()
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.cleared == ["search-input"])
        assert field.value == ""


class ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        from hbtui.tui.widgets.histogram import ScoreHistogram

        yield ScoreHistogram([0.1 * i for i in range(8)], id="chart")


async def test_a_chart_behind_the_screens_count_says_it_is_updating() -> None:
    """One n on a monitor's frame: while the chart (redrawn once a second) holds fewer scores than
    the score above it counts, its title says it is updating instead of giving a second n as if it
    were current (a new user's trial saw "over 9 scored" beside "(n=8)")."""
    from hbtui.tui.widgets.histogram import ScoreHistogram

    def title(app: App) -> str:
        chart = app.query_one("#chart", ScoreHistogram)
        return "".join(chart.render_line(y).text for y in range(chart.size.height))

    app = ChartApp()
    async with app.run_test(size=(60, 14)) as pilot:
        await pilot.pause()
        assert "(n=8)" in title(app)
        app.query_one("#chart", ScoreHistogram).note_total(9)
        await pilot.pause()
        assert "(n=8, updating)" in title(app)
        app.query_one("#chart", ScoreHistogram).update_scores([0.1 * i for i in range(9)])
        await pilot.pause()
        assert "(n=9)" in title(app) and "updating" not in title(app)
