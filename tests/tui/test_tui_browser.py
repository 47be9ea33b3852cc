"""The results browser driven by keys, on runs made by the real engine or written by synth.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hbtui.store import ConversationFilter, Store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.screens.run_summary import parse_range
from hbtui.tui.widgets.key_tabs import KeyTabs
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_text
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for

SIZE = (80, 24)


async def read(db: Path, fn):
    async with await Store.open(db) as store:
        return await fn(store)


async def open_run(pilot, run_id: int) -> RunScreen:
    app = pilot.app
    await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 2)  # the root screen is up
    screen = RunScreen(run_id)
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.conversation_list.loaded and screen.report is not None)
    return screen


async def open_conversation(pilot, screen: RunScreen) -> ConversationScreen:
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConversationScreen) and pilot.app.screen.loaded)
    return pilot.app.screen


def normalised(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def big_db(tmp_path_factory) -> tuple[Path, int]:
    db = tmp_path_factory.mktemp("big") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            return await synthesize_run(store, conversations=5000, criteria_per=12, seed=1)

    return db, asyncio.run(make())


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> tuple[Path, int]:
    db = tmp_path_factory.mktemp("hostile") / "hbtui.sqlite"

    async def make():
        async with await Store.open(db) as store:
            return await synthesize_run(store, conversations=20, seed=2, hostile=True)

    return db, asyncio.run(make())


def test_parse_range():
    assert parse_range("0..0.5") == (0.0, 0.5)
    assert parse_range("..0.3") == (None, 0.3)
    assert parse_range("0.8..") == (0.8, None)
    assert parse_range("0.4") == (0.4, None)
    assert parse_range(" ") == (None, None)
    with pytest.raises(ValueError):
        parse_range("low..high")


async def test_a_click_on_a_tab_label_shows_its_tab(finished_run_db):
    run = await read(finished_run_db, lambda s: s.resolve_run("small-run"))
    app = browser_app(finished_run_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run.id)
        labels = screen.query_one(KeyTabs)
        await pilot.click(KeyTabs, offset=(14, 0))  # on " 2 Conversations ", which starts at 11
        assert screen.shown_tab == "conversations" and labels.active == "conversations"
        assert screen.query_one("#conversations").display and app.focused is screen.conversation_list
        # The bar: its own colour under the label's text, between half bars, as Textual's tabs draw it.
        cells = [(seg.text[i], seg.style) for seg in labels.render_line(1) for i in range(len(seg.text))]
        assert "".join(ch for ch, _ in cells[10:28]) == "━╸" + "━" * 15 + "╺"
        assert {style for _, style in cells[12:27]} == {cells[12][1]} != {cells[0][1]} == {cells[27][1]}
        await pilot.click(KeyTabs, offset=(3, 0))
        assert screen.shown_tab == "summary" and not screen.query_one("#conversations").display
        await pilot.click(KeyTabs, offset=(60, 0))  # past the labels: nothing changes
        assert screen.shown_tab == "summary"


async def test_summary_list_sort_and_conversation(finished_run_db):
    run = await read(finished_run_db, lambda s: s.resolve_run("small-run"))
    app = browser_app(finished_run_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run.id)
        text = screen_text(app)
        assert f"Score {run.report.score:.3f}" in text
        low, high = run.report.overall.ci95
        assert f"95% CI {low:.3f}–{high:.3f}" in text

        await pilot.press("2")
        assert screen.shown_tab == "conversations"
        assert app.focused is screen.conversation_list
        assert screen.conversation_list.total == 3

        await pilot.press("s")  # the sort picker, on "position": two down is best first
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("down", "down", "enter")
        await wait_for(pilot, lambda: screen.sort == "-score" and screen.conversation_list.row(0) is not None)
        shown = [screen.conversation_list.row(i).score for i in range(3)]
        assert shown == sorted(shown, reverse=True)
        await pilot.press("s")  # worst first: one up from best first
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("up", "enter")
        await wait_for(pilot, lambda: screen.sort == "score" and screen.conversation_list.row(0) is not None)
        shown = [screen.conversation_list.row(i).score for i in range(3)]
        assert shown == sorted(shown)

        await pilot.press("G")
        assert screen.conversation_list.cursor == 2
        await pilot.press("g")
        assert screen.conversation_list.cursor == 0

        first = screen.conversation_list.row(0)
        conversation = await open_conversation(pilot, screen)
        assert conversation.conversation_ids[conversation.index] == first.id
        detail = await app.store.conversation_detail(first.id)
        # Each criterion's explanation from the database is on screen once selected.
        for number, verdict in enumerate(detail.verdicts):
            await pilot.press("j")
            assert conversation.query_one(VerdictList).selected == number
            await pilot.pause()
            assert normalised(verdict.explanation)[:30] in normalised(screen_text(app))

        # next / previous in the list's order (worst first)
        order = await app.store.conversation_ids(run.id, ConversationFilter(), "score")
        await pilot.press("n")
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 1)
        assert conversation.detail.summary.id == order[1]
        assert "Conversation 2/3" in screen_text(app)
        await pilot.press("]")
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 2)
        await pilot.press("n")  # at the end: stays
        await pilot.pause()
        assert conversation.index == 2
        await pilot.press("N")
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 1)

        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.conversation_list.cursor == 1  # the list follows where review ended


def assert_bar(verdicts: VerdictList, kind: str) -> None:
    """The selected criterion is drawn with the thick bar, in the colour of its kind, on every line."""
    colour = verdicts.get_component_rich_style(f"verdict-list--{kind}").color
    for y in verdicts.lines_of(verdicts.selected):
        bar = verdicts.render_line(y)._segments[0]
        assert bar.text == "█" and bar.style.color == colour, (y, bar)


async def test_jump_to_penalty_and_copy(finished_run_db):
    run = await read(finished_run_db, lambda s: s.resolve_run("small-run"))
    app = browser_app(finished_run_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run.id)
        await pilot.press("2")
        conversation = await open_conversation(pilot, screen)  # p1: one penalty, one missed
        verdicts = conversation.query_one(VerdictList)
        await pilot.press("p")
        assert verdicts.current.kind == "penalty"
        assert verdicts.current.verdict.points < 0
        assert_bar(verdicts, "penalty")
        assert "Recommends an unsafe dose" in screen_text(app)
        await pilot.press("m")
        assert verdicts.current.kind == "missed"
        assert_bar(verdicts, "missed")
        assert "Mentions hydration" in verdicts.current.verdict.criterion
        await pilot.press("e")  # no grader error here: the selection stays
        assert verdicts.current.kind == "missed"
        kinds = {item.kind for item in verdicts.items}
        assert kinds == {"met", "missed", "penalty"}

        await pilot.press("c")  # App.copy_to_clipboard: OSC 52 to the terminal, and kept in app.clipboard
        assert app.clipboard == verdicts.current.verdict.explanation
        await pilot.press("y")
        assert app.clipboard == conversation.detail.reply


async def test_filters_change_the_count(finished_run_db):
    run = await read(finished_run_db, lambda s: s.resolve_run("small-run"))
    app = browser_app(finished_run_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run.id)
        lst = screen.conversation_list
        await pilot.press("2")
        assert lst.total == 3

        await pilot.press("t")  # three themes and "all": a picker, on "all themes"
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("down", "enter")  # the first theme
        await wait_for(pilot, lambda: screen.filter.theme is not None and lst.total == 1)
        assert lst.row(0).theme == screen.filter.theme
        assert "1 of 3" in screen_text(app)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("up", "enter")  # back to "all themes"
        await wait_for(pilot, lambda: screen.filter.theme is None and lst.total == 3)

        await pilot.press("p")
        await wait_for(pilot, lambda: lst.total == 1)
        assert lst.row(0).prompt_id == "p1" and lst.row(0).penalties == 1
        await pilot.press("p")
        await wait_for(pilot, lambda: lst.total == 3)

        await pilot.press("slash")
        assert app.focused is screen.query_one("#search-input")
        await pilot.press(*"HbA1c", "enter")
        await wait_for(pilot, lambda: lst.total == 1)
        assert lst.row(0).prompt_id == "p3"
        assert app.focused is lst
        await pilot.press("slash")
        await pilot.press("escape")  # clears the search
        await wait_for(pilot, lambda: lst.total == 3 and screen.filter.text is None)

        await pilot.press("r")
        await pilot.press(*"0.6..", "enter")
        scores = await app.store.conversation_scores(run.id)
        await wait_for(pilot, lambda: lst.total == sum(1 for s in scores if s >= 0.6))
        await pilot.press("x")
        await wait_for(pilot, lambda: lst.total == 3)


async def test_five_thousand_conversations_open_and_jump_to_the_end(big_db):
    db, run_id = big_db
    app = browser_app(db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        lst = screen.conversation_list
        await pilot.press("2")
        assert lst.total == 5000
        assert len(lst._pages) <= 2  # paged, never the whole run
        await pilot.press("G")
        await wait_for(pilot, lambda: lst.cursor == 4999 and lst.row(4999) is not None)
        await pilot.pause()
        assert lst.row(4999).position == 4999
        lines = screen_text(app).splitlines()
        assert any(line.lstrip().startswith("5000 ") for line in lines)
        await pilot.press("pageup", "k")
        assert lst.cursor < 4999
        conversation = await open_conversation(pilot, screen)
        assert conversation.conversation_ids[conversation.index] == lst.row(lst.cursor).id
        assert len(conversation.conversation_ids) == 5000


async def test_markup_and_escapes_render_literally(hostile_db):
    db, run_id = hostile_db
    app = browser_app(db)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_run(pilot, run_id)
        await pilot.press("2")
        listed = screen_text(app)
        assert "[bold]x[/bold]" in listed  # the preview in the list
        conversation = await open_conversation(pilot, screen)
        await pilot.press("r")  # reasoning open
        await pilot.press("j")
        await pilot.pause()
        text = screen_text(app)
        for literal in (
            "Reply [bold]x[/bold]",
            "[link=http://e.com]y[/link]",
            "␛[31mred",
            "␛]52;c;aGVsbG8=␇",
            "[red]not red[/red]",
            "Criterion [bold]x[/bold]",
            "Explanation [bold]x[/bold]",
            "Reasoning [bold]x[/bold]",
            "User text [bold]x[/bold]",
        ):
            assert literal in text, literal
        assert "\x1b" not in text and "\x07" not in text
        # No segment on screen is a hyperlink or picked up a style from the data's markup.
        for strip in app.screen._compositor.render_strips():
            for segment in strip:
                assert not (segment.style and segment.style.link), segment
                assert "\x1b" not in segment.text
        assert conversation.query_one(VerdictList).current.verdict.criterion.startswith("Criterion [bold]")


async def test_run_without_report_is_computed_on_open(tmp_path):
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=40, seed=4)
        expected = (await store.get_run(run_id)).report
        # As a killed run leaves it: no report, and no live process behind the heartbeat.
        await store.db.execute(
            "UPDATE runs SET report_json = NULL, score = NULL, status = 'running' WHERE id = ?", (run_id,)
        )
        await store.db.commit()
    app = browser_app(db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        assert screen.report == expected
        text = screen_text(app)
        assert f"Score {expected.score:.3f}" in text
        assert "interrupted" in text


async def test_the_list_has_a_column_header_and_marks_conversations_without_a_reply(big_db):
    db, run_id = big_db
    rows = await read(db, lambda s: s.conversation_page(run_id, ConversationFilter(), "position", offset=0, limit=5000))
    failed = next(row for row in rows if row.status == "failed")
    graded_error = next(row for row in rows if row.status != "failed" and row.n_errors and row.score is None)
    app = browser_app(db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        lst = screen.conversation_list
        await pilot.press("2")
        await pilot.pause()
        header = lst.render_line(0).text
        # The fixed columns are 6 + 9 + 13 + 5 + 7 + 3 + 3 cells wide at 80 columns.
        assert header.index("score") == 28 and header.index("preview") == 46
        assert header.split() == ["#", "id", "theme", "score", "met", "pen", "preview"]
        for target in (failed, graded_error):
            lst.cursor = target.position
            await wait_for(pilot, lambda target=target: lst.row(target.position) is not None)
            await pilot.pause()
            line = next(
                line for line in screen_text(app).splitlines() if line.lstrip().startswith(f"{target.position + 1} ")
            )
            if target is failed:
                assert line[28:33] == "    —" and line[44] == "✗" and line[46:].startswith("no reply")
            else:
                assert line[28:33] == "  err" and line[44] == "!" and "no reply" not in line
        assert "#" in screen_text(app).splitlines()[lst.region.y].split()  # the header stays put when scrolled
        lst.cursor = 0
        await pilot.pause()
        conversation = await open_conversation(pilot, screen)
        title = screen_text(app).splitlines()[0]
        detail = conversation.detail.summary
        assert title.index("score") < title.index(detail.prompt_id[:8] + "…")
        assert detail.prompt_id not in title and len(detail.prompt_id) > 12


async def test_a_runs_first_search_says_it_is_indexing_the_run_and_the_next_does_not(tmp_path, monkeypatch):
    from hbtui.tui.screens import run as run_screen
    from hbtui.tui.widgets.key_bar import KeyBar

    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=40, seed=4)
    monkeypatch.setattr(run_screen, "INDEXING_SAID", 10)  # this run is "big"
    said: list[str] = []
    show_status = KeyBar.show_status
    monkeypatch.setattr(
        KeyBar, "show_status", lambda bar, message, **kw: (said.append(message), show_status(bar, message, **kw))
    )
    app = browser_app(db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        bar = screen.query_one(KeyBar)
        for word in ("jargon", "fabricated"):
            await pilot.press("slash", *word, "enter")
            await wait_for(pilot, lambda word=word: screen.filter.text == word and screen.matches is not None)
            await wait_for(pilot, lambda: not bar.status)  # said until the indexing is done, not longer
        assert said == [f"indexing run {run_id} for search…"]
        assert screen.matches.criteria > 0
