"""Every setting of a run on one scrolling screen: check the connection, start, keep presets.

Fields are checked as they are typed, with the same rules as `.env` and the command line
(``Setting.parse`` in ``hbtui.core.settings.config``), and the problem is written under the
field. API keys sit in password inputs: shown masked, never written to a preset.

Longer than most modules (about 700 lines) because the form's actions (start, check, presets, .env,
the demo, a meta-eval) all read and mark the one form; its fields, sections and the checks of what
is typed are in config_form.py.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static

from hbtui.analysis.estimate import Estimate, estimate, planned_records
from hbtui.core.dataset import SUBSETS, Dataset, DatasetError, load_jsonl, load_subset
from hbtui.core.grading import TemplateError, load_template
from hbtui.core.run_kinds import META_EVAL, MODEL_RUN
from hbtui.core.settings.config import TEMPLATE_NAMES, Settings, SettingsError, setting_for
from hbtui.core.settings.setting_kinds import Bool, Choice
from hbtui.core.text import one_line
from hbtui.services import plan_run
from hbtui.store import StoreError
from hbtui.tui.screens.config_form import (
    FIELDS,
    LOCAL_FILE,
    NOT_SENT,
    OWN_ENDPOINT,
    RUN_OPTIONS,
    SECTION_OF,
    SECTIONS,
    SETTING_NAMES,
    FormField,
    check_field,
    estimate_question,
    field_text,
    field_title,
    form_wording,
    initial_text,
    large_run_question,
)
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.widgets.app_header import AppHeader
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.ordered_input import OrderedInput

if TYPE_CHECKING:
    from textual import getters

    from hbtui.tui.app import HBTuiApp

DEMO_CHOICE = "demo"  # the local demo model, as `hbtui demo` runs it (screens/demo_start.py)
WELCOME = 'No runs yet. No endpoint of your own? Choose "local demo model" as the endpoint: a tiny local model shows a whole run.'


SECRET_NAMES = frozenset(name for name in SETTING_NAMES if setting_for(name).secret)
# What a connection check depends on: its result is out of date once one of these changes.
CHECKED_FIELDS = ("base_url", "api_key", "model_test", "grader_base_url", "grader_api_key", "model_grader")


class ConfigScreen(Screen):  # not an AppScreen: it restyles itself as it resumes
    if TYPE_CHECKING:  # the type checker sees hbtui's app, not App[object] (Textual's idiom)
        app = getters.app(HBTuiApp)
    SUB_TITLE = "new run"
    BINDINGS = [
        # The buttons above the key bar name these keys (Start ^s ...): the key bar leaves them out.
        Binding("ctrl+s", "start", "Start", show=False, id="config.start"),
        Binding("ctrl+t", "check_connection", "Check", show=False, id="config.check"),
        Binding("c", "check_connection", "Check connection", show=False, id="config.check_c"),
        Binding("ctrl+o", "load_preset", "Load preset", show=False, id="config.load_preset"),
        Binding("ctrl+r", "save_preset", "Save preset", show=False, id="config.save_preset"),
        Binding("ctrl+g", "write_env", "Write .env", show=False, id="config.write_env"),
        Binding("ctrl+x", "cancel_install", "Cancel install", id="config.cancel_install"),
        Binding("ctrl+down", "next_section(1)", "Next section", show=False, id="config.next_section"),
        Binding("ctrl+up", "next_section(-1)", "Previous section", show=False, id="config.previous_section"),
        Binding("ctrl+f", "find_field", "Go to a field", show=False, id="config.find_field"),
        # Not ctrl+e, which an input takes for the end of its line.
        Binding("ctrl+b", "estimate", "Estimate", id="config.estimate"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._starting = False
        self._problems: dict[str, str | None] = {name: None for name in FIELDS}
        # Settings the last preset loaded that the form has no field for (a length adjustment).
        self._preset_extras: dict[str, Any] = {}
        # The last connection check shown: (the checked fields as typed then, the result text).
        self._last_check: tuple[dict[str, str], Text] | None = None
        self._last_check_ok = False
        self._last_check_failures: list[str] = []
        self._status_kind = "message"  # what the status shows (see show_status)
        self._endpoint_fields_shown = True  # False while the local demo model is the endpoint
        self._styled_for: tuple[int, bool, object] | None = None  # what the app was when last shown
        self._install_cancel: threading.Event | None = None  # set: the local model's install stops

    def compose(self) -> ComposeResult:
        from hbtui.core.settings.presets import remembered_data_source

        settings = self.app.settings
        remembered = remembered_data_source()
        yield AppHeader()
        with VerticalScroll(id="config-form"):
            for index, (title, section) in enumerate(SECTIONS):
                yield Static(Text(title), classes="form-section", id=f"section-{index}")
                for form_field in section:
                    yield from self._field_row(settings, form_field, remembered)
        yield Static(id="config-status")
        with Horizontal(id="config-actions"):
            yield Button("Start ^s", id="start", variant="primary", compact=True)
            yield Button("Check ^t", id="check", compact=True)
            yield Button("Load preset ^o", id="load-preset", compact=True)
            yield Button("Save preset ^r", id="save-preset", compact=True)
            yield Button("Write .env ^g", id="write-env", compact=True)
        yield KeyBar()

    def _field_row(self, settings: Settings, form_field: FormField, remembered: dict[str, str]) -> ComposeResult:
        value = initial_text(settings, form_field.name, remembered)
        with Horizontal(classes="field-row", id=f"row-{form_field.name}"):
            yield Label(form_field.label, classes="field-label")
            kind = form_field.setting.kind if form_field.setting else None
            if isinstance(kind, Choice):
                options = [(choice, choice) for choice in kind.choices]
                if form_field.setting is None or form_field.setting.default is None:
                    unset = form_field.placeholder or "not sent"  # what none means for this setting
                    options.insert(0, (unset, NOT_SENT))
                yield Select(options, value=value, allow_blank=False, compact=True, id=f"field-{form_field.name}")
            elif isinstance(kind, Bool):
                yield Select(
                    [("yes", "true"), ("no", "false")],
                    value=value,
                    allow_blank=False,
                    compact=True,
                    id=f"field-{form_field.name}",
                )
            elif form_field.kind == "endpoint":
                options = [("your own endpoint (below)", OWN_ENDPOINT), ("local demo model", DEMO_CHOICE)]
                yield Select(options, value=value, allow_blank=False, compact=True, id=f"field-{form_field.name}")
            elif form_field.kind == "run_kind":
                options = [
                    ("model run: replies generated and graded", MODEL_RUN),
                    ("meta-eval: the grader against physicians (subset: the official meta-eval file)", META_EVAL),
                ]
                yield Select(options, value=value, allow_blank=False, compact=True, id=f"field-{form_field.name}")
            elif form_field.kind == "choice":
                options = [(f"{name} (official)", name) for name in sorted(SUBSETS)] + [("local file", LOCAL_FILE)]
                yield Select(options, value=value, allow_blank=False, compact=True, id=f"field-{form_field.name}")
            else:
                yield OrderedInput(
                    value,
                    placeholder=form_field.placeholder,
                    password=form_field.name in SECRET_NAMES,
                    compact=True,
                    id=f"field-{form_field.name}",
                )
        yield Static("", classes="field-message", id=f"message-{form_field.name}")

    def _on_screen_suspend(self) -> None:
        super()._on_screen_suspend()
        self._styled_for = self._style_inputs()

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # Kept and shown again (n on the runs list), the screen restyled its ~140 widgets: most of
        # the time `n` took. Its widgets restyle themselves when their own classes or focus change;
        # only what the whole app changed while it was away (the theme, CSS, the terminal's focus,
        # the size) needs the full pass. Textual skips it the same way when a modal is popped
        # (ScreenResume.refresh_styles, its pull request 6314), not on push or switch; no issue
        # upstream asks for that. tests/tui/test_textual_overrides.py watches both.
        if self._styled_for == self._style_inputs():
            event.refresh_styles = False
        super()._on_screen_resume(event)

    def _style_inputs(self) -> tuple[int, bool, object]:
        return (self.app._css_update_count, self.app.app_focus, self.app.size)

    def on_mount(self) -> None:
        if self.app.ending:
            # Built ahead (prebuild_config) as the user quit: the app is taking its widgets down,
            # and a form with no fields has nothing to check.
            return
        self.validate_all()
        self.query_one("#field-base_url", Input).focus()
        if self.app.store is None:  # the first screen of a fresh clone: the welcome
            self.show_status(WELCOME)

    # ---- reading and checking the form ----------------------------------------------------
    def raw(self, name: str) -> str:
        widget = self.query_one(f"#field-{name}")
        if isinstance(widget, Select):
            return str(widget.value)
        return cast(Input, widget).value

    def set_raw(self, name: str, value: Any) -> None:
        widget = self.query_one(f"#field-{name}")
        if isinstance(widget, Select):
            widget.value = str(value) if value not in (None, "") else NOT_SENT
        else:
            cast(Input, widget).value = "" if value is None else str(value)

    def validate_field(self, name: str) -> tuple[Any, str | None]:
        value, problem = check_field(FIELDS[name], self.raw(name), self.raw("subset"))
        if name == "model_test" and problem == "required" and self.raw("completions") not in ("", NOT_SENT):
            problem = None  # the records' own completions are graded: no model under test is called
        # Touch the widgets only on a change: every class change restyles, and a screen of 21
        # fields restyled on each keystroke is what made it slow to open.
        if self._problems.get(name, "unset") != problem:
            self._problems[name] = problem
            message = self.query_one(f"#message-{name}", Static)
            message.update(Text(problem or ""))
            message.set_class(problem is not None, "-shown")
            self.query_one(f"#row-{name}").set_class(problem is not None, "-invalid")
        return value, problem

    def validate_all(self) -> tuple[dict[str, Any], list[str]]:
        values, problems = {}, []
        for name in FIELDS:
            value, problem = self.validate_field(name)
            values[name] = value
            if problem:
                problems.append(name)
        return values, problems

    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        name = (event.input.id or "").removeprefix("field-")
        if name == "data_path" and event.value.strip() and self.raw("subset") != LOCAL_FILE:
            self.set_raw("subset", LOCAL_FILE)  # a path typed is the data wanted: no second step
        if name in FIELDS:
            self.validate_field(name)
            self._status_after_edit(name)

    def _status_after_edit(self, name: str) -> None:
        """Keep the status line true: a fixed form or a changed endpoint makes it out of date."""
        if self._status_kind == "problems" and not any(self._problems.values()):
            self.show_status("all fields are valid now", kind="ok")
        elif self._last_check is not None and name in CHECKED_FIELDS:
            self._show_check()

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        name = (event.select.id or "").removeprefix("field-")
        if name in FIELDS:
            self.validate_field(name)
        if name == "subset" and self.is_mounted:
            self.validate_field("data_path")
        if name == "completions" and self.is_mounted:
            self.validate_field("model_test")
        if name == "endpoint" and self.is_mounted:
            self._show_endpoint_fields(event.value != DEMO_CHOICE)

    def _show_endpoint_fields(self, shown: bool) -> None:
        """The local demo model brings its own endpoint and models: the settings' fields go."""
        if shown == self._endpoint_fields_shown:
            return  # Select.Changed also comes when the screen is built: nothing to restyle then
        self._endpoint_fields_shown = shown
        hidden = [
            self.query_one(f"#{part}-{form_field.name}")
            for _, section in SECTIONS
            for form_field in section
            if form_field.setting is not None
            for part in ("row", "message")
        ]
        hidden += [
            self.query_one(f"#section-{index}")
            for index, (_, section) in enumerate(SECTIONS)
            if all(form_field.setting is not None for form_field in section)
        ]
        for widget in hidden:
            if shown:
                widget.styles.clear_rule("display")  # back to the stylesheet's (a message: only when -shown)
            else:
                widget.display = False
        # An empty count means every record for a run of one's own, and the demo's few for the demo.
        from hbtui.local.demo import DEFAULT_LIMIT

        limit = self.query_one("#field-limit", Input)
        limit.placeholder = FIELDS["limit"].placeholder if shown else f"{DEFAULT_LIMIT} (the demo's)"
        if shown and self._status_kind == "demo":
            self.show_status("")
        elif not shown:
            from hbtui.tui.screens.demo_start import chosen_text

            self.show_status(chosen_text(self.app.settings.db_path), kind="demo")

    def form_settings(self, values: dict[str, Any]) -> Settings:
        """The form's values over the app's settings, with what the last preset loaded set that
        the form has no field for (--preset professional's length adjustment)."""
        return replace(self.app.settings, **{**self._preset_extras, **{name: values[name] for name in SETTING_NAMES}})

    def show_status(self, message: str | Text, *, error: bool = False, kind: str = "message") -> None:
        """One status for the whole form; ``kind`` says what it shows (message, problems, check, demo)."""
        self._status_kind = kind
        if kind != "check":
            self._last_check = None
        status = self.query_one("#config-status", Static)
        status.update(message if isinstance(message, Text) else Text(message))
        status.set_class(error, "-error")
        status.set_class(bool(message), "-shown")

    def _first_problem(self, problems: list[str]) -> None:
        labels = ", ".join(field_title(name) for name in problems[:4])
        self.show_status(f"fix the marked fields first: {labels}", error=True, kind="problems")
        widget = self.query_one(f"#field-{problems[0]}")
        widget.focus()
        self.query_one("#config-form", VerticalScroll).scroll_to_widget(widget)

    # ---- moving about the form -------------------------------------------------------------
    @on(events.DescendantFocus)
    @on(events.DescendantBlur)
    def _mark_focused_row(self, event: events.DescendantFocus | events.DescendantBlur) -> None:
        """The row of the focused field is marked (-focused), which its label's style reads."""
        for node in event.widget.ancestors_with_self:  # a Select's open list is inside the Select
            if node.has_class("field-row"):
                node.set_class(isinstance(event, events.DescendantFocus), "-focused")
                return

    def _shown_fields(self) -> list[Widget]:
        """The fields in form order that can take the focus now (the demo hides the endpoint's)."""
        fields = (self.query_one(f"#field-{name}") for name in FIELDS)
        return [field for field in fields if field.focusable and field.parent is not None and field.parent.display]

    @staticmethod
    def _section_of(widget: Widget | None) -> str | None:
        name = (widget.id or "").removeprefix("field-") if widget is not None else ""
        return SECTION_OF.get(name)

    def _go_to(self, widget: Widget) -> None:
        widget.focus()
        self.query_one("#config-form", VerticalScroll).scroll_to_widget(widget, top=True)

    def action_next_section(self, step: int) -> None:
        """The first field of the next (or previous) section: some thirty fields in one Tab chain."""
        firsts: dict[str, Widget] = {}
        for widget in self._shown_fields():
            firsts.setdefault(self._section_of(widget) or "", widget)
        sections = list(firsts)
        current = self._section_of(self.focused)
        here = sections.index(current) if current in sections else (-1 if step > 0 else 0)
        title = sections[(here + step) % len(sections)]
        firsts[title].focus()
        # The section's heading at the top, not its first field: "Base URL" alone does not say
        # whose (the model's or the grader's).
        heading = self.query_one(f"#section-{[t for t, _ in SECTIONS].index(title)}")
        self.query_one("#config-form", VerticalScroll).scroll_to_widget(heading, top=True)

    def action_find_field(self) -> None:
        """Every field by section and label in a list: enter goes to the one picked."""
        choices: list[tuple[str, Widget | None]] = [
            (f"{self._section_of(widget)}: {FIELDS[(widget.id or '').removeprefix('field-')].label}", widget)
            for widget in self._shown_fields()
        ]

        def picked(choice: tuple[Widget | None] | None) -> None:
            if choice is not None and choice[0] is not None:
                self._go_to(choice[0])

        self.app.push_screen(PickerModal("Go to a field", choices, self.focused), picked)

    # ---- actions --------------------------------------------------------------------------
    @on(Button.Pressed)
    async def _button(self, event: Button.Pressed) -> None:
        actions = {
            "start": "start",
            "check": "check_connection",
            "load-preset": "load_preset",
            "save-preset": "save_preset",
            "write-env": "write_env",
        }
        if event.button.id in actions:
            await self.run_action(actions[event.button.id])

    async def action_start(self) -> None:
        if self._starting:
            return
        values, problems = self.validate_all()
        if values["run_kind"] == META_EVAL:
            await self._start_meta_eval(values, problems)
            return
        if values["endpoint"] == DEMO_CHOICE:
            self._start_demo(values, [name for name in problems if name in RUN_OPTIONS])
            return
        if problems:
            self._first_problem(problems)
            return
        failure = self._failed_check_standing()
        if failure is None:
            await self._start_model_run(values)
            return

        async def anyway(start: bool | None) -> None:
            if start:
                await self._start_model_run(values)
            else:  # the check's lines stay, and so does the question at the next ctrl+s
                self._show_check()
                self.notify("not started: fix the endpoint's fields, then ctrl+t checks again", markup=False)

        # A failed check, its fields unchanged: ctrl+s started the run anyway, and it failed in
        # every conversation. Asked first, naming what failed.
        question = f"The last connection check failed ({failure}). Start the run anyway?"
        await self.app.push_screen(ConfirmModal(question, yes="Start anyway", no="Not now"), anyway)

    def _failed_check_standing(self) -> str | None:
        """What the last connection check found wrong, while the fields it checked are unchanged."""
        if self._last_check is None or self._last_check_ok:
            return None
        checked, _ = self._last_check
        if any(self.raw(name) != checked[name] for name in CHECKED_FIELDS):
            return None
        return "; ".join(self._last_check_failures[:2]) or "see its lines above"

    async def _start_model_run(self, values: dict[str, Any]) -> None:
        """Start, a large run's estimate asked about first (LARGE_RUN_CONVERSATIONS)."""
        prepared = await self._prepare(values, "loading the dataset…")
        if prepared is None:
            return
        settings, dataset, estimate = prepared
        question = large_run_question(estimate)
        if question is None:
            await self._plan_and_start(settings, dataset, values)
            return
        await self._ask_to_start(question, settings, dataset, values)

    async def _prepare(self, values: dict[str, Any], doing: str) -> tuple[Settings, Dataset, Estimate] | None:
        """The form's settings, its records and the run's estimate; None (said in the status line,
        the form free again) where one of them cannot be had."""
        settings = self.form_settings(values)
        self._starting = True
        self.show_status(doing)
        try:
            settings.require_models()
            dataset = await self._dataset(settings, values)
            estimate = await self._estimate(settings, dataset, values)
        except (SettingsError, DatasetError, TemplateError, StoreError, ValueError, OSError) as exc:
            self.show_status(one_line(form_wording(str(exc)), 300), error=True)
            self._starting = False
            return None
        self.show_status("")
        return settings, dataset, estimate

    async def _ask_to_start(self, question: str, settings: Settings, dataset: Dataset, values: dict[str, Any]) -> None:
        async def answered(start: bool | None) -> None:
            if start:
                await self._plan_and_start(settings, dataset, values)
            else:
                self._starting = False
                self.show_status("not started")

        await self.app.push_screen(ConfirmModal(question, yes="Start", no="Not now"), answered)

    async def _estimate(self, settings: Settings, dataset: Dataset, values: dict[str, Any]) -> Estimate:
        """The run's estimate (hbtui.analysis.estimate), calibrated by the open database's earlier
        runs. A broken price table prices nothing here: the run itself stops on it."""
        from hbtui.core.settings.prices import PriceError, load_prices

        try:
            prices = load_prices()
        except PriceError:
            prices = {}
        template = await asyncio.to_thread(load_template, settings.grader_template, settings.cache_dir)
        planned = await asyncio.to_thread(planned_records, dataset, settings, values["limit"], values["seed"])
        return await estimate(self.app.store, settings, planned, values["repeats"] or 1, template, prices)

    async def action_estimate(self) -> None:
        """The estimate of the run the form describes, then Start or not: what ctrl+s would start."""
        if self._starting:
            return
        values, problems = self.validate_all()
        if values["run_kind"] == META_EVAL:
            self.show_status("an estimate is of a run of the model under test, not of a meta-eval", error=True)
            return
        if values["endpoint"] == DEMO_CHOICE:
            self.show_status("the local demo model bills nothing: its time depends on this machine")
            return
        if problems:
            self._first_problem(problems)
            return
        prepared = await self._prepare(values, "estimating…")
        if prepared is not None:
            settings, dataset, estimate = prepared
            await self._ask_to_start(estimate_question(estimate), settings, dataset, values)

    async def _plan_and_start(self, settings: Settings, dataset: Any, values: dict[str, Any]) -> None:
        try:
            self.show_status("planning the run…")
            store = await self.app.store_for_a_run(settings.db_path)
            run_id = await plan_run(
                store,
                settings,
                dataset,
                limit=values["limit"],
                seed=values["seed"],
                repeats=values["repeats"],
                name=values["run_name"],
            )
            await self.app.start_detached(run_id, settings)
            self._remember_data_source()
        except (SettingsError, DatasetError, TemplateError, StoreError, ValueError, OSError) as exc:
            self.show_status(one_line(form_wording(str(exc)), 300), error=True)
            return
        finally:
            self._starting = False
        from hbtui.tui.screens.monitor import MonitorScreen

        self.show_status("")
        # The monitor replaces this screen: Back from it goes to the runs list.
        await self.app.switch_screen(MonitorScreen(run_id))

    async def _start_meta_eval(self, values: dict[str, Any], problems: list[str]) -> None:
        """A meta-eval of the grader set here: the official meta-eval file (a subset chosen
        means it), or the local file given; Conversations counts its rows."""
        from hbtui.meta_eval.data import check_file, official_path
        from hbtui.meta_eval.plan import plan_meta_eval, require_grader
        from hbtui.tui.screens.meta_eval import MetaEvalScreen

        if values["endpoint"] == DEMO_CHOICE:
            self.show_status("a meta-eval needs a grader of your own endpoint, not the local demo model", error=True)
            return
        # The model under test plays no part: its fields' problems do not stop a meta-eval.
        problems = [name for name in problems if name not in ("model_test", "repeats")]
        if problems:
            self._first_problem(problems)
            return
        settings = self.form_settings(values)
        self._starting = True
        self.show_status("checking the meta-eval file…")
        try:
            require_grader(settings)
            await asyncio.to_thread(load_template, settings.grader_template, settings.cache_dir)
            local = values["subset"] == LOCAL_FILE
            path = Path(values["data_path"]) if local else await asyncio.to_thread(official_path, settings.cache_dir)
            count = await asyncio.to_thread(check_file, path)
            self.show_status("planning the meta-eval…")
            store = await self.app.store_for_a_run(settings.db_path)
            run_id = await plan_meta_eval(
                store,
                settings,
                path,
                official=not local,
                limit=values["limit"],
                seed=values["seed"],
                name=values["run_name"],
                count=count,
            )
            await self.app.start_detached(run_id, settings)  # goes on without the app, as a model run does
            screen = await MetaEvalScreen.read(store, run_id)
        except (SettingsError, DatasetError, TemplateError, StoreError, ValueError, OSError) as exc:
            self.show_status(one_line(form_wording(str(exc)), 300), error=True)
            return
        finally:
            self._starting = False
        self.show_status("")
        await self.app.switch_screen(screen)

    async def _dataset(self, settings: Settings, values: dict[str, Any]) -> Dataset:
        """The run's records, and its grader prompt checked (the reference's fetched once)."""
        await asyncio.to_thread(load_template, settings.grader_template, settings.cache_dir)
        return await self._records(values)

    async def _records(self, values: dict[str, Any]) -> Dataset:
        settings = self.app.settings
        if values["subset"] == LOCAL_FILE:
            return await asyncio.to_thread(load_jsonl, values["data_path"])
        return await asyncio.to_thread(load_subset, values["subset"], settings.cache_dir)

    def _remember_data_source(self) -> None:
        """The next form, in this app or the next, opens on the data of the run just started."""
        from hbtui.core.settings.presets import remember_data_source

        remember_data_source({"subset": self.raw("subset"), "data_path": self.preset_values()["data_path"]})

    @work(group="demo", exclusive=True)
    async def _start_demo(self, values: dict[str, Any], problems: list[str]) -> None:
        """The local demo model instead of the endpoint: only the data and run fields count."""
        from hbtui.local.model import LocalModelError
        from hbtui.tui.screens.demo_start import start_demo
        from hbtui.tui.screens.monitor import MonitorScreen

        if problems:
            self._first_problem(problems)
            return
        self._starting = True
        self._install_cancel = threading.Event()
        self.refresh_bindings()
        self.show_status("loading the dataset…")
        try:
            dataset = await self._records(values)
            run_id = await start_demo(self.app, dataset, values, self.show_status, self._install_cancel)
            self._remember_data_source()
        except (LocalModelError, DatasetError, TemplateError, StoreError, ValueError, OSError) as exc:
            self.show_status(one_line(form_wording(str(exc)), 300), error=True)
            return
        finally:
            self._starting = False
            self._install_cancel = None
            self.refresh_bindings()
        from hbtui.local.demo import DISCLAIMER

        self.app.notify(DISCLAIMER, title="local demo model", timeout=15, markup=False)
        self.show_status("")
        await self.app.switch_screen(MonitorScreen(run_id))

    def action_cancel_install(self) -> None:
        if self._install_cancel is not None:
            self._install_cancel.set()
            self.show_status("cancelling the install…")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_install":
            return self._install_cancel is not None  # offered only while the local model installs
        return True

    def on_unmount(self) -> None:
        if self._install_cancel is not None:  # the app is closing: no build goes on without it
            self._install_cancel.set()

    def action_check_connection(self) -> None:
        values, problems = self.validate_all()
        problems = [name for name in problems if name in SETTING_NAMES]
        if problems:
            self._first_problem(problems)
            return
        self.show_status("checking the connection…")
        self.run_worker(self._check(self.form_settings(values)), group="check", exclusive=True)

    async def _check(self, settings: Settings) -> None:
        from hbtui.client.checks import check_connection

        checked = {name: self.raw(name) for name in CHECKED_FIELDS}
        results = await check_connection(settings)
        text = Text()
        for result in results:
            if text:
                text.append("\n")
            text.append("✓ " if result.ok else "✗ ", style="bold green" if result.ok else "bold red")
            text.append(f"{result.name}: {result.message}")
        self._last_check_ok = all(result.ok for result in results)
        self._last_check_failures = [one_line(f"{r.name}: {r.message}", 120) for r in results if not r.ok]
        self._last_check = (checked, text)
        self._show_check()  # the results are the status line itself: no toast over them
        if not self._last_check_ok:
            self.app.bell()

    def _show_check(self) -> None:
        """The last check's result, marked out of date while the checked fields differ from it."""
        if self._last_check is None:
            return
        checked, text = self._last_check
        changed = [
            FIELDS[name].label.lower() + (" (grader)" if name.startswith(("grader_", "model_grader")) else "")
            for name in CHECKED_FIELDS
            if self.raw(name) != checked[name]
        ]
        if changed:
            text = text.copy()
            text.append(
                f"\n⟳ out of date: {', '.join(changed)} changed since this check (ctrl+t checks again)",
                style="bold yellow",
            )
        self.show_status(text, error=not self._last_check_ok and not changed, kind="check")

    def preset_values(self) -> dict[str, str]:
        values = {name: self.raw(name) for name in FIELDS if name not in SECRET_NAMES}
        for name in ("data_path", "grader_template"):  # a preset is loaded from anywhere: whole paths
            if values.get(name, "").strip() and values[name].strip().lower() not in TEMPLATE_NAMES:
                values[name] = str(Path(values[name].strip()).expanduser().resolve())
        return values

    def action_save_preset(self) -> None:
        from hbtui.core.settings.presets import PresetError, save_preset
        from hbtui.tui.screens.presets import PresetNameModal

        def named(name: str | None) -> None:
            if not name:
                return
            try:
                path = save_preset(name, self.preset_values())
            except PresetError as exc:
                self.show_status(str(exc), error=True)
                return
            self.show_status(f"saved preset {name!r} in {path} (API keys are never saved in presets)")

        self.app.push_screen(PresetNameModal(), named)

    def action_load_preset(self) -> None:
        from hbtui.core.settings.presets import PresetError, built_in_presets, load_presets
        from hbtui.tui.screens.presets import PresetPickerModal

        try:
            saved = load_presets()
        except PresetError as exc:
            self.show_status(str(exc), error=True)
            return
        # The built-in ones first, read-only (saving under their name is refused).
        presets = {
            name: {field: field_text(field, value) for field, value in values.items()}
            for name, values in built_in_presets().items()
        }
        presets.update({name: values for name, values in saved.items() if name not in presets})

        def picked(name: str | None) -> None:
            if name is None:
                return
            for field_name, value in presets[name].items():
                if field_name in FIELDS and field_name not in SECRET_NAMES:
                    self.set_raw(field_name, value)
            # What the form has no field for goes with the run all the same, said so.
            from hbtui.core.settings.presets import preset_settings

            try:
                values = preset_settings(name)
            except PresetError as exc:
                self.show_status(str(exc), error=True)
                return
            self._preset_extras = {k: v for k, v in values.items() if k not in FIELDS and k not in SECRET_NAMES}
            self.call_after_refresh(self.validate_all)
            extra = ", ".join(
                f"{setting_for(k).key} {setting_for(k).kind.text(v)}" for k, v in self._preset_extras.items()
            )
            self.show_status(
                f"loaded preset {name!r}" + (f" (and {extra}, which the form does not show)" if extra else "")
            )

        built_in = list(built_in_presets())
        self.app.push_screen(
            PresetPickerModal([*built_in, *sorted(n for n in presets if n not in built_in)], read_only=set(built_in)),
            picked,
        )

    def action_write_env(self) -> None:
        from hbtui.core.settings.envfile import changed_meanwhile
        from hbtui.tui.screens.confirm import ConfirmModal

        values, problems = self.validate_all()
        problems = [name for name in problems if name in SETTING_NAMES and not FIELDS[name].required]
        if problems:
            self._first_problem(problems)
            return
        path = self.app.env_file or ".env"
        settings = self.form_settings(values)
        edited = changed_meanwhile(path, self.app.env_as_read, settings)
        if not edited:
            self._write_env(path, settings, keep=frozenset())
            return

        def answered(replace_them: bool | None) -> None:
            self._write_env(path, settings, keep=frozenset() if replace_them else frozenset(edited))

        question = (
            f"{path} was edited since hbtui read it: {', '.join(edited)} changed there. "
            "Replace them with the form's values? (No: keep the file's and write the rest.)"
        )
        self.app.push_screen(ConfirmModal(question, yes="Replace", no="Keep the file's"), answered)

    def _write_env(self, path: str, settings: Settings, keep: frozenset[str]) -> None:
        from hbtui.core.settings.envfile import EnvFileError, env_file_values, write_env

        try:
            written = write_env(path, settings, keep=keep)
        except EnvFileError as exc:
            self.show_status(str(exc), error=True)
            return
        self.app.env_as_read = env_file_values(written)  # what the form now stands on
        kept = f"; kept the file's {', '.join(sorted(keep))}" if keep else ""
        self.show_status(f"wrote {written} (owner-only; it holds the API keys){kept}")
