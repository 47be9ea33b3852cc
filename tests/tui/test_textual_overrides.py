"""Canaries for the private parts of Textual and textual-serve that hbtui overrides or reads.

Textual and textual-serve are pinned exactly (pyproject.toml). Each override below waits for an
upstream fix or a public API, named in its docstring and here. These tests fail when a new
version no longer has the defect an override works around (then the override can go) or no
longer has the private name it relies on (then the override would silently do nothing, or
break). The tests of what each override does for the user are elsewhere, named beside each.
"""

from __future__ import annotations

import inspect

from textual import events
from textual.app import App, ComposeResult
from textual.binding import BindingsMap
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input
from textual.widgets._select import Select

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.widgets.ordered_input import OrderedInput
from hbtui.web.serve import GuardedServer

INTERVAL = 1 / 60


# ---- hbtui/tui/widgets/ordered_input.py: an Input's bound keys overtaken (Textual 6605) -------


class OneField(App):
    def __init__(self, field_class: type[Input]) -> None:
        super().__init__()
        self.field_class = field_class

    def compose(self) -> ComposeResult:
        yield self.field_class("12", id="field")


async def burst(field_class: type[Input]) -> str:
    """`End BSpace 3` arriving at once, as one packet over SSH does."""
    app = OneField(field_class)
    async with app.run_test() as pilot:
        field = app.query_one("#field", Input)
        field.focus()
        await pilot.pause()
        for key, character in (("end", None), ("backspace", None), ("3", "3")):
            app.post_message(events.Key(key, character))
        for _ in range(20):
            await pilot.pause()
        return field.value


async def test_textuals_input_still_runs_its_bound_keys_after_a_printable_key_typed_later():
    """The defect OrderedInput works around: Textual issue 6605 ("Input/Textarea action
    synchronization bug"), fixed by its open pull request 6631. When this fails, Textual runs an
    Input's own keys in order: OrderedInput can go (tests/tui/test_tui_config_form.py checks the
    form keeps them in order)."""
    # The 3 went in first, over the text the field selects when focused; End and Backspace ran
    # after it and deleted it.
    assert await burst(Input) == ""
    assert not hasattr(Widget, "_run_key_bindings")  # what pull request 6631 adds


async def test_ordered_input_keeps_the_keys_in_their_order():
    assert await burst(OrderedInput) == "13"


def test_the_bindings_are_still_read_where_hbtui_reads_them():
    """OrderedInput and HBTuiApp.bindings_for read a node's ``_bindings.key_to_bindings``: no
    public call lists a node's own bindings (the nearest request is Textual issue 4740)."""
    assert isinstance(Input("")._bindings, BindingsMap)
    assert "backspace" in Input("")._bindings.key_to_bindings
    assert "_on_key" in Input.__dict__


# ---- hbtui/tui/app.py: the crash report, a Select mounting during teardown, a screen built ahead


def test_textuals_crash_report_still_shows_local_variables():
    """HBTuiApp._fatal_error writes the traceback without local variables (which could hold an
    API key) to a file: Textual's prints them, with no setting to turn that off (the nearest
    request upstream, Textual issue 3069, asks for a plain crash output). When this fails, check
    whether Textual's own report can now leave the locals out; tests/engine/test_crash.py checks ours."""
    assert "show_locals=True" in inspect.getsource(App._fatal_error)
    assert "_fatal_error" in HBTuiApp.__dict__ and "_exception" in inspect.getsource(App)


def test_textuals_select_still_looks_up_its_overlay_unguarded_when_it_mounts():
    """HBTuiApp._handle_exception lets a NoMatches pass while the app is ending: a Select still
    mounting as the app tears down misses its own overlay (Textual issue 6581, the same kind of
    defect, with its open pull request 6680). When this fails, Textual guards that lookup: the
    override can go."""
    source = inspect.getsource(Select._setup_options_renderables)
    assert "query_one(SelectOverlay)" in source and "NoMatches" not in source
    assert "_handle_exception" in App.__dict__


def test_a_screen_can_still_be_built_ahead_through_the_call_push_screen_uses():
    """HBTuiApp.prebuild_config builds the configuration screen off screen with App._get_screen:
    no public call mounts a screen without showing it (none asked upstream; Textual issue 1775
    made install_screen stop mounting). Without it, the screen is built on the first `n`."""
    assert callable(getattr(App, "_get_screen", None))
    assert "_get_screen" in inspect.getsource(App.push_screen)


# ---- hbtui/tui/screens/config.py: a kept screen shown again restyles all its widgets ----------


def test_textual_still_restyles_a_screen_shown_again_unless_told_not_to():
    """ConfigScreen sets ScreenResume.refresh_styles (Textual PR 6314) itself: Textual sets it
    only when a modal is popped, and posts a plain ScreenResume on push and switch, so `n` on
    the runs list restyled ~140 widgets. It reads App._css_update_count to know when a full pass
    is due after all. When this fails, look whether Textual now skips the pass itself."""
    assert "refresh_styles" in inspect.signature(events.ScreenResume).parameters
    assert "events.ScreenResume()" in inspect.getsource(App)
    assert {"_on_screen_suspend", "_on_screen_resume"} <= set(Screen.__dict__)
    assert {"_on_screen_suspend", "_on_screen_resume"} <= set(ConfigScreen.__dict__)
    assert "self._css_update_count" in inspect.getsource(App)


# ---- hbtui/web/serve.py: textual-serve's app, and the processes it leaves ---------------------


def test_textual_serve_still_leaves_an_app_process_it_cannot_stop_to_its_caller():
    """GuardedServer.end_every_tab kills an app process still there after its quit: textual-serve's
    AppService.stop waits for it without a limit and its Server.on_shutdown does nothing (no
    upstream issue found). It reaches the process through the private ``_process``."""
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    assert "_process" in inspect.getsource(AppService)
    stop = inspect.getsource(AppService.stop)
    assert "kill" not in stop and "terminate" not in stop and "wait_for" not in stop
    assert "_make_app" in Server.__dict__ and "_make_app" in GuardedServer.__dict__
