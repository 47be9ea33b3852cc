"""One keymap (issue 13, defect 8): every screen's keys in one table, in `?` and in docs/app.md,
no key meaning two things on one screen, and pickers for filters of more than three values."""

from __future__ import annotations

import pytest
from textual.binding import Binding

from hbtui.store import Store
from hbtui.tui import keymap
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings
from tests.support.synth import THEMES, synthesize_run
from tests.support.tui import screen_text, wait_for
from tests.tui.test_tui_browser import open_run

SIZES = [(80, 24), (120, 40)]


def test_the_documented_keymap_is_the_one_written_from_the_bindings():
    document = keymap.DOCUMENT.read_text(encoding="utf-8")
    assert keymap.document_with_table(document) == document, "run: python -m hbtui.tui.keymap --write"


def test_no_key_means_two_things_on_one_screen():
    assert keymap.clashes() == []


def test_a_key_given_a_second_meaning_is_caught(monkeypatch):
    # Search matches on n, as the conversation's next: the check this keymap stands on must see it.
    bindings = [*ConversationScreen.BINDINGS, Binding("n", "next_match", "Next match", id="conversation.next_match")]
    monkeypatch.setattr(ConversationScreen, "BINDINGS", bindings)
    assert keymap.clashes() == ["conversation: n is both 'Next conversation' and 'Next match'"]


@pytest.mark.parametrize("size", SIZES)
async def test_help_lists_every_screens_keys(tmp_path, size):
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        await synthesize_run(store, conversations=2, criteria_per=2)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
        body = app.screen.query_one("#help-body")
        body.scroll_end(animate=False)
        await pilot.pause()
        text = screen_text(app)
        # The last rows of the table: keys of other screens than the runs list it was opened on.
        assert "help" in text and "esc/q/?" in text and "question" in text


async def seven_theme_run(tmp_path):
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=40, criteria_per=2)
        themes = await store.themes(run_id)
    assert len(themes) == len(THEMES) == 7
    return db, run_id, themes


@pytest.mark.parametrize("size", SIZES)
async def test_a_theme_among_seven_is_picked_not_cycled_to(tmp_path, size):
    db, run_id, themes = await seven_theme_run(tmp_path)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=size) as pilot:
        screen = await open_run(pilot, run_id)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("end", "enter")  # the last theme in one step, not seven
        await wait_for(pilot, lambda: screen.filter.theme == themes[-1])
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal))
        await pilot.press("escape")  # cancelled: the filter stays
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.filter.theme == themes[-1]


async def test_a_filter_of_three_values_still_cycles(tmp_path):
    db, run_id, themes = await seven_theme_run(tmp_path)
    app = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_run(pilot, run_id)
        screen.themes = themes[:2]  # as a run of two themes reads them: all, one, the other
        seen = []
        for _ in range(3):
            await pilot.press("t")
            await pilot.pause()
            assert app.screen is screen
            seen.append(screen.filter.theme)
        assert seen == [themes[0], themes[1], None]


async def test_help_gives_ctrl_c_one_meaning(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("escape")  # from the form of a fresh clone to the runs list
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
        ctrl_c = [row for row in app.screen.rows if "^c" in row[0]]
        assert len(ctrl_c) == 1 and ctrl_c[0][1].startswith("Quit")
