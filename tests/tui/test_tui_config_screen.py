"""The configuration screen, kept between visits, shown again without restyling every widget, yet
never with styles older than the app's."""

from __future__ import annotations

from textual.color import Color

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings
from tests.support.tui import wait_for


async def away_and_back(pilot, app: HBTuiApp, meanwhile=lambda: None) -> ConfigScreen:
    """From the configuration screen (the first of an empty database) to the runs list and back."""
    await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
    screen = app.screen
    assert isinstance(screen, ConfigScreen)
    await pilot.press("escape")
    await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
    meanwhile()
    await pilot.pause()
    await pilot.press("n")
    await wait_for(pilot, lambda: app.screen is screen)
    await pilot.pause()
    return screen


async def test_a_theme_changed_while_the_screen_was_away_is_applied_when_it_is_back(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "empty.sqlite")), env_file=None)
    other_theme = "textual-light" if app.theme != "textual-light" else "nord"
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await away_and_back(pilot, app, meanwhile=lambda: setattr(app, "theme", other_theme))
        assert screen.styles.background == Color.parse(app.current_theme.background)


async def test_a_field_marked_while_the_screen_is_kept_shows_its_mark_when_it_is_back(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "empty.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await away_and_back(pilot, app)  # shown again: from here on without the full restyle
        screen.set_raw("concurrency", "0")
        await pilot.pause()
        message = screen.query_one("#message-concurrency")
        assert message.display and message.region.height == 1
