"""Ctrl-C quits where no input has focus, with the confirmation `q` asks; in an input it copies."""

from __future__ import annotations

import pytest

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings
from tests.support.tui import wait_for


def app_on(tmp_path) -> HBTuiApp:
    return HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_ctrl_c_quits_where_no_input_has_focus(tmp_path, size):
    app = app_on(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the form of a fresh clone")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit


async def test_ctrl_c_asks_what_q_asks_while_a_run_goes_on(tmp_path):
    app = app_on(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the form")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        app.live_runs[7] = None  # type: ignore[assignment]  # only its id is read before the answer
        for key in ("q", "ctrl+c"):
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what=f"the question after {key}")
            assert not app._exit
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the question gone")
        app.live_runs.clear()


async def test_ctrl_c_in_an_input_copies_and_does_not_quit(tmp_path):
    app = app_on(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the form")
        field = app.screen.query_one("#field-base_url")
        assert app.focused is field
        field.value = "http://copied.example/v1"
        field.select_all()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app._exit
        assert app.clipboard == "http://copied.example/v1"


async def test_a_widget_that_misses_its_parts_while_the_app_quits_is_no_internal_error(tmp_path):
    """Quit while the configuration screen is still being built ahead (a loaded machine), Textual's
    Select mounts after its overlay was taken down and raises NoMatches: the app is ending, the
    user lost nothing, so it ends quietly. Before it is ending, the same error is a crash."""
    from textual.css.query import NoMatches

    from hbtui.core.settings.config import Settings

    app = HBTuiApp(settings=Settings(db_path=str(tmp_path / "hbtui.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.exit()
        app._handle_exception(NoMatches("No nodes match 'SelectOverlay'"))
    assert app._exception is None and app.return_code in (0, None)


async def test_quitting_with_a_run_going_in_this_process_names_its_resume_as_invoked(server, small_dataset, tmp_path):
    """The demo's run goes on in the app's own process: the question said "`hbtui resume`", with
    the Markdown backticks the dialog draws as they are, and not as the user invoked hbtui."""
    from hbtui.core.dataset import load_jsonl
    from hbtui.core.invocation import invoked_as
    from hbtui.services import plan_run
    from tests.conftest import settings_for

    server.control(latency_ms=2000)  # the run is still going when q is pressed
    settings = settings_for(server, tmp_path / "runs" / "hbtui.sqlite")
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        store = await app.store_for_a_run(settings.db_path)
        run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="going")
        await app.start_run(run_id, settings)
        await pilot.press("escape")  # from the configuration screen of an empty database to the list
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the question")
        question = app.screen.question
        assert question.endswith(f"continue later with {invoked_as()} resume {run_id}.") and "`" not in question
        await pilot.press("y")
