"""The key bar, mouse on keys and criteria, and what the first frame of a new screen shows.

The first frame matters: a screen that is drawn wide and then restyled narrow, or drawn with
"Loading…" and then filled, makes a key press to the next screen take two layouts instead of one.
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager

from hbtui.core.settings.config import Settings
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.screens.runs import CONFIG_PREBUILD_DELAY, RunsScreen
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browser_harness import browser_app
from tests.support.screen_text import screen_lines
from tests.support.synth import synthesize_run
from tests.support.tui import wait_for
from tests.tui.test_tui_browser import open_conversation, open_run


async def resolve(db, name: str):
    async with await Store.open(db) as store:
        return await store.resolve_run(name)


@asynccontextmanager
async def small_run_list(db, size: tuple[int, int]):
    """The app at ``size`` on the conversation list of the run "small-run": (app, pilot, run screen)."""
    run = await resolve(db, "small-run")
    app = browser_app(db)
    async with app.run_test(size=size) as pilot:
        screen = await open_run(pilot, run.id)
        await pilot.press("2")
        yield app, pilot, screen


class FirstFrame:
    """The classes of the first screen of ``screen_type`` drawn, and its lines, as that frame went out."""

    def __init__(self, app, screen_type: type) -> None:
        self.classes: set[str] | None = None
        self.lines: list[str] | None = None
        display = app._display

        def on_frame(shown, renderable):
            if renderable is not None and isinstance(shown, screen_type) and self.lines is None:
                self.classes = set(shown.classes)
                self.lines = screen_lines(app)
            return display(shown, renderable)

        app._display = on_frame


def key_line(app) -> str:
    return screen_lines(app)[-1]


async def test_the_key_bar_keeps_help_and_quit_in_view_at_80_columns(finished_run_db):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.pause()
        line = key_line(app)
        assert "n New run" in line and "? Help" in line and "q Quit" in line, line

        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RunScreen", what="the run")
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        await pilot.pause()
        line = key_line(app)
        # The conversation's keys do not all fit: the screen's are cut (with "…"), never the app's.
        assert line.lstrip().startswith("n Next conversation"), line
        assert "…" in line and "? Help" in line and "esc Back" in line and "q Quit" in line, line
        assert "y Copy reply" not in line


async def test_every_key_of_a_conversation_shows_on_a_wide_terminal(finished_run_db):
    async with small_run_list(finished_run_db, (160, 48)) as (app, pilot, screen):
        await open_conversation(pilot, screen)
        await pilot.pause()
        line = key_line(app)
        for entry in (
            "n Next conversation",
            "m Next missed criterion",
            "p Next penalty",
            "e Next error",
            "c Copy why",
            "y Copy reply",
            "esc Back",
        ):
            assert entry in line, (entry, line)
        assert "…" not in line


async def test_clicking_a_key_in_the_bar_does_what_the_key_does(finished_run_db):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.pause()
        column = key_line(app).index("New run")
        assert await pilot.click(KeyBar, offset=(column, 0))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the configuration screen")


async def test_a_conversation_is_narrow_and_filled_in_its_very_first_frame(finished_run_db):
    async with small_run_list(finished_run_db, (80, 24)) as (app, pilot, screen):
        await pilot.pause()
        first = FirstFrame(app, ConversationScreen)
        await open_conversation(pilot, screen)
        await wait_for(pilot, lambda: first.lines is not None, what="a frame of the conversation")
        assert "-narrow" in first.classes and "-wide" not in first.classes
        assert first.lines[0].lstrip().startswith("Conversation 1/3"), first.lines[0]


async def test_a_run_opened_from_the_list_is_filled_in_its_very_first_frame(finished_run_db):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await pilot.pause()
        first = FirstFrame(app, RunScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: first.lines is not None, what="a frame of the run")
        text = "\n".join(first.lines)
        assert "Loading" not in text
        assert "Score 0.625" in text and "small-run" in text, text


async def test_the_configuration_screen_is_built_while_the_runs_list_waits(finished_run_db):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await wait_for(
            pilot,
            lambda: app.is_screen_installed("config") and app.get_screen("config").is_running,
            timeout=5,
            what="the configuration screen built off screen",
        )
        assert isinstance(app.screen, RunsScreen)  # built, not shown
        config = app.get_screen("config")
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is config, what="n shows the screen built ahead")
        await pilot.press("x")  # typed into the focused field, as on a screen built on demand
        assert config.raw("base_url").endswith("x")


async def test_the_configuration_screen_waits_for_a_pause_in_the_keys_and_for_a_run_being_opened(finished_run_db):
    """Its build holds the app for 120-130 ms: never while the user is at the keys, nor while the
    run asked for is being read and shown (that opening would take 200 ms instead of 35)."""
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        runs = app.screen

        def built() -> bool:
            return app.is_screen_installed("config") and app.get_screen("config").is_running

        await pilot.press("j")  # a key just now
        runs._prebuild_config()
        await pilot.pause()
        assert not built()
        assert app.input_quiet() < CONFIG_PREBUILD_DELAY

        app.open_run(runs.table.coordinate_to_cell_key(runs.table.cursor_coordinate).row_key.value)
        app.last_input_at = 0.0  # as long ago as can be: the opening alone is what counts
        assert app.input_quiet() == 0.0  # the run is being opened
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run")
        # Its screen shows before its last part is read (a loaded box takes longer): once the
        # opening is over the keys have been quiet long enough, and still nothing is built here.
        await wait_for(pilot, lambda: app.input_quiet() > CONFIG_PREBUILD_DELAY, what="the opening to end")
        assert not built()  # not on the run's screen

        quiet_when_built: list[float] = []
        prebuild = app.prebuild_config

        def noted_prebuild() -> None:
            quiet_when_built.append(app.input_quiet())
            prebuild()

        app.prebuild_config = noted_prebuild  # type: ignore[method-assign]
        await pilot.press("escape")  # back on the list: built once the keys pause
        await wait_for(pilot, built, timeout=5, what="the configuration screen built off screen")
        assert quiet_when_built and quiet_when_built[0] >= CONFIG_PREBUILD_DELAY
        assert isinstance(app.screen, RunsScreen)


async def test_clicking_a_criterion_selects_it(finished_run_db):
    async with small_run_list(finished_run_db, (160, 48)) as (_app, pilot, screen):
        conversation = await open_conversation(pilot, screen)
        verdicts = conversation.query_one(VerdictList)
        await pilot.pause()
        second = verdicts.lines_of(1)
        assert await pilot.click(VerdictList, offset=(20, second.start + 1))
        assert verdicts.selected == 1
        await pilot.press("j")
        assert verdicts.selected == 2


async def test_the_monitor_stacks_its_panels_on_a_small_terminal(finished_run_db):
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None, monitor_run="small-run")
    async with app.run_test(size=(60, 20)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        await pilot.pause(0.3)
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert app.screen.has_class("-stacked")
        # Every label and count whole, none cut with "…" as when the panels sat side by side.
        assert re.search(r"verdicts +━+ 100% (\d+)/\1", text), text
        for label in ("calls/s", "in flight", "latency", "tokens"):
            assert any(line.lstrip().startswith(label) for line in lines), (label, text)
        assert "final score 0.625" in lines[1]
        # The score and errors are below the fold there: the page keys reach them.
        main = app.screen.query_one("#monitor-main")
        score = app.screen.query_one("#monitor-score")
        assert not main.region.overlaps(score.region) or score.region.bottom > main.region.bottom
        await pilot.press("pagedown")
        await pilot.pause()
        assert main.scroll_y > 0 and main.region.contains_region(score.region)
    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None, monitor_run="small-run")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        assert app.screen.has_class("-side-by-side") and not app.screen.has_class("-stacked")


async def test_the_conversation_scrolls_by_keys_and_k_above_the_first_criterion_returns_to_it(finished_run_db):
    async with small_run_list(finished_run_db, (80, 16)) as (_app, pilot, screen):
        conversation = await open_conversation(pilot, screen)
        body = conversation.query_one("#conversation-body")  # at 80 columns the one scroll
        verdicts = conversation.query_one(VerdictList)
        await pilot.pause()
        assert body.max_scroll_y > 0, "the test wants a conversation taller than the screen"
        await pilot.press("pagedown")
        await pilot.pause()
        assert body.scroll_y > 0
        await pilot.press("pageup")
        await pilot.pause()
        assert body.scroll_y == 0
        await pilot.press("G")  # the last criterion, scrolled into view
        await pilot.pause()
        assert verdicts.selected == len(verdicts.items) - 1 and body.scroll_y > 0
        await pilot.press("g")  # top of the conversation, nothing selected
        await pilot.pause()
        assert verdicts.selected == -1 and body.scroll_y == 0
        await pilot.press("j", "k")  # up from the first criterion: the conversation again
        await pilot.pause()
        assert verdicts.selected == -1 and body.scroll_y == 0


async def test_p_says_no_triggered_penalty_where_the_penalties_were_avoided(finished_run_db):
    async with small_run_list(finished_run_db, (80, 24)) as (app, pilot, screen):
        conversation = await open_conversation(pilot, screen)
        await pilot.press("n")  # p2: its one penalty criterion was avoided (not met)
        await wait_for(pilot, lambda: conversation.loaded and conversation.index == 1)
        verdicts = conversation.query_one(VerdictList)
        assert {item.kind for item in verdicts.items} == {"met", "avoided"}
        await pilot.press("p")
        await pilot.pause()
        assert verdicts.selected == -1
        assert conversation.query_one(KeyBar).status == "no triggered penalty in this conversation"
        assert not app._notifications  # an answer to a key, not a toast over the rubric


async def test_r_unfolds_the_reasoning_where_it_can_be_read(tmp_path):
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=30, seed=5)
        ids = await store.conversation_ids(run_id)
        with_reasoning = [i for i in ids if (await store.conversation_detail(i)).reasoning]
    assert with_reasoning, "the synthetic run should have replies with reasoning"
    app = browser_app(db)
    async with app.run_test(size=(80, 16)) as pilot:
        screen = await open_run(pilot, run_id)
        await pilot.press("2")
        screen.conversation_list.cursor = ids.index(with_reasoning[0])
        conversation = await open_conversation(pilot, screen)
        reasoning = conversation.query_one("#reasoning")
        body = conversation.query_one("#conversation-body")
        await pilot.pause()
        assert "▸ reasoning (r shows it)" in str(reasoning.render())
        await pilot.press("r")
        await pilot.pause(0.1)
        assert "▾ reasoning (r hides it)" in str(reasoning.render())
        # Its first line is on screen: within the body's visible region.
        assert body.region.contains(reasoning.region.x, reasoning.region.y), (body.region, reasoning.region)


async def test_no_line_of_the_transcript_is_cut_off_on_a_narrow_terminal(tmp_path):
    """Stacked (below 120 columns), the transcript takes the height of all its lines."""
    db = tmp_path / "hbtui.sqlite"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=40, seed=3)
        ids = await store.conversation_ids(run_id)
    cut = []
    for width in (100, 111):  # widths where, with a reserved gutter, some lines wrapped once more
        app = browser_app(db)
        async with app.run_test(size=(width, 30)) as pilot:
            await wait_for(pilot, lambda app=app: app.store is not None and len(app.screen_stack) >= 2)
            screen = ConversationScreen(run_id, ids, 0)
            await app.push_screen(screen)
            for index in range(len(ids)):
                if index:
                    screen.action_step(1)
                await wait_for(pilot, lambda screen=screen, index=index: screen.loaded and screen.index == index)
                await pilot.pause()
                transcript = screen.query_one("#transcript")
                if transcript.virtual_size.height > transcript.scrollable_content_region.height:
                    cut.append((width, index))
    assert not cut, f"transcripts cut off (width, conversation): {cut}"
