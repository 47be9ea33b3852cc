"""The configuration screen, kept between visits, shown again without restyling every widget, yet
never with styles older than the app's."""

from __future__ import annotations

from textual.color import Color

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings
from tests.support.tui import wait_for


async def test_a_theme_changed_while_the_screen_was_away_is_applied_when_it_is_back(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "empty.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.pause()
        assert screen.styles.background == Color.parse(app.current_theme.background)


async def test_a_field_marked_while_the_screen_is_kept_shows_its_mark_when_it_is_back(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "empty.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("n")  # shown again: from here on without the full restyle
        await wait_for(pilot, lambda: app.screen is screen)
        screen.set_raw("concurrency", "0")
        await pilot.pause()
        message = screen.query_one("#message-concurrency")
        assert message.display and message.region.height == 1
