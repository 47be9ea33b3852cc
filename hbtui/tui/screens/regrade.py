"""The dialog that grades a run's replies again: another grader, prompt or parameters, no generation.

What it asks for is the grader's side of a run's settings; everything else (the model under test,
its replies) stays the source run's. The values are checked as the command line checks them, and
the dialog returns them as flags would be given (attribute -> text), for `settings_for_run`.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, Static

from hbtui.core.settings.config import setting_for
from hbtui.core.settings.presets import built_in_presets
from hbtui.core.text import one_line, visible_controls
from hbtui.store import RunRow
from hbtui.tui.handle import AppModal
from hbtui.tui.screens.config_form import check_setting
from hbtui.tui.widgets.ordered_input import OrderedInput

FIELDS = (
    ("model_grader", "Grader model"),
    ("grader_base_url", "Grader URL"),
    ("grader_template", "Prompt"),
    ("temperature_grader", "Temperature"),
    ("max_tokens_grader", "Max tokens"),
    ("system_message_grader", "System message"),
)
REFERENCE_FIELDS = (
    "grader_template",
    "temperature_grader",
    "max_tokens_grader",
    "system_message_grader",
    "grader_json_schema",
)


def _text(name: str, value: object) -> str:
    """A setting's value as its field shows it, as everywhere a value is typed back. The run's
    own values may come from an imported file: their controls are shown, never acted on."""
    return visible_controls(setting_for(name).kind.text(value))


class RegradeModal(AppModal[dict[str, str] | None]):
    """Returns the grader settings as typed (attribute -> text), or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="regrade.cancel"),
        # Priority: the inputs take ctrl+e (end of line) and would swallow them otherwise.
        Binding("ctrl+s", "submit", "Regrade", id="regrade.submit", priority=True),
        Binding("ctrl+e", "reference", "Reference grader", id="regrade.reference", priority=True),
    ]

    def __init__(self, run: RunRow) -> None:
        super().__init__()
        self.run = run

    def compose(self) -> ComposeResult:
        settings = self.run.settings
        with Vertical(classes="dialog", id="regrade-body"):
            yield Static(
                Text(
                    f"Grade the replies of run {self.run.id} {one_line(self.run.name, 40)} again, as a new"
                    " run (no reply is generated; verdicts already paid for come from the cache)."
                )
            )
            for name, label in FIELDS:
                with Horizontal(classes="regrade-row"):
                    yield Label(label, classes="regrade-label")
                    yield OrderedInput(
                        _text(name, settings.get(name)),
                        compact=True,
                        id=f"regrade-{name}",
                        placeholder="same as the model under test" if name == "grader_base_url" else "none",
                    )
            with Horizontal(classes="regrade-row"):
                yield Label("JSON schema", classes="regrade-label")
                yield Select(
                    [("yes", "true"), ("no", "false")],
                    value=_text("grader_json_schema", settings.get("grader_json_schema", True)),
                    allow_blank=False,
                    compact=True,
                    id="regrade-grader_json_schema",
                )
            yield Static("", id="regrade-problem")
            with Horizontal(id="confirm-buttons"):
                yield Button("Reference ^e", id="regrade-reference", compact=True)
                yield Button("Cancel", id="regrade-cancel", compact=True)
                yield Button("Regrade ^s", id="regrade-submit", variant="primary", compact=True)

    def values(self) -> tuple[dict[str, str], str | None]:
        """The typed values, and the first problem (naming the field) if any."""
        typed = {name: self.query_one(f"#regrade-{name}", Input).value.strip() for name, _ in FIELDS}
        typed["grader_json_schema"] = str(self.query_one("#regrade-grader_json_schema", Select).value)
        if not typed["model_grader"]:
            return typed, "Grader model: required"
        labels = dict(FIELDS, grader_json_schema="JSON schema")
        for name, raw in typed.items():
            if raw == "":
                continue  # the source run's value
            _, problem = check_setting(setting_for(name), raw)  # checked as the configuration screen checks it
            if problem:
                return typed, f"{labels[name]}: {problem}"
        return typed, None

    def action_reference(self) -> None:
        """The reference's grader requests (its prompt, system message, 0.5, 2048, no schema)."""
        preset = built_in_presets()["reference"]
        for name in REFERENCE_FIELDS:
            if name == "grader_json_schema":
                self.query_one("#regrade-grader_json_schema", Select).value = _text(name, preset[name])
            else:
                self.query_one(f"#regrade-{name}", Input).value = _text(name, preset[name])

    def action_submit(self) -> None:
        typed, problem = self.values()
        if problem:
            self.query_one("#regrade-problem", Static).update(Text(problem, style="bold red"))
            return
        self.dismiss(typed)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        {
            "regrade-reference": self.action_reference,
            "regrade-cancel": self.action_cancel,
            "regrade-submit": self.action_submit,
        }[event.button.id or ""]()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_submit()
