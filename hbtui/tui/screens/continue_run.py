"""Continue a failed run with another way to reach its models: the endpoints, their keys and the
concurrency, which a resume may change (never what the run measures: models, temperatures,
token limits, the grader's prompt), and for a run through the batch API, whether it goes on by
calls (`resume --batch false`). `c` on a run that failed opens it, with why it stopped.

A key left blank is this session's own, and only for the endpoint it was configured for: a
session key never goes to a host typed here (as `hbtui resume --base-url` refuses it too).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, Static

from hbtui.core.batch_files import BatchFiles
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.core.text import one_line
from hbtui.store import RunRow
from hbtui.tui.handle import AppModal
from hbtui.tui.widgets.ordered_input import OrderedInput

# (field, label, whether its text is a secret)
FIELDS = (
    ("base_url", "Base URL", False),
    ("api_key", "API key", True),
    ("grader_base_url", "Grader base URL", False),
    ("grader_api_key", "Grader API key", True),
    ("concurrency", "Concurrency", False),
)


def shown_urls(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(url) for url in value)
    return "" if value is None else str(value)


def reach_settings(run: RunRow, session: Settings, values: dict[str, str], db_path: str) -> Settings:
    """The run's own settings with the endpoints, keys and concurrency typed; SettingsError, in
    one line naming the field, where a value cannot be."""
    from dataclasses import replace

    from hbtui.services import settings_for_run

    typed = {name: values.get(name, "").strip() for name, _, _ in FIELDS}
    stored = settings_for_run(run, replace(session, db_path=db_path, api_key=None, grader_api_key=None))
    settings = stored.with_overrides(
        base_url=typed["base_url"] or None,
        grader_base_url=typed["grader_base_url"] or None,
        concurrency=typed["concurrency"] or None,
    )
    # A blank key is the session's, where the endpoint is the one it was configured for.
    settings = replace(
        settings,
        api_key=session.api_key if settings.base_url == session.base_url else None,
        grader_api_key=session.grader_api_key if settings.grader_base_url == session.grader_base_url else None,
    ).with_overrides(api_key=typed["api_key"] or None, grader_api_key=typed["grader_api_key"] or None)
    if values.get("batch"):  # a run through the batch API may go on by calls (an endpoint without one)
        settings = settings.with_overrides(batch=values["batch"])
    settings.require_models()
    _ = settings.test_endpoints, settings.grader_endpoints  # a key count that fits no URL count: said now
    return settings


class ContinueRunModal(AppModal[Settings | None]):
    """Dismissed with the settings to continue with, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="continue_run.cancel"),
        Binding("ctrl+s", "submit", "Continue", id="continue_run.submit"),
    ]

    def __init__(self, run: RunRow, check: Callable[[dict[str, str]], Settings]) -> None:
        super().__init__()
        self.run = run
        self.check = check

    def compose(self) -> ComposeResult:
        run = self.run
        with Vertical(classes="dialog", id="continue-run"):
            head = Text(f"Continue run {run.id} {one_line(run.name, 60)}", style="bold")
            head.append(f"\nIt stopped on: {one_line(run.error or 'unknown', 200)}")
            head.append(
                "\nChange how it is reached, then ctrl+s (escape cancels). A key left blank is this"
                " session's, for the endpoint it was set for.",
                style="dim",
            )
            yield Static(head)
            values = {
                "base_url": shown_urls(run.settings.get("base_url")),
                "grader_base_url": shown_urls(run.settings.get("grader_base_url")),
                "concurrency": str(run.settings.get("concurrency") or ""),
            }
            for name, label, secret in FIELDS:
                with Horizontal(classes="field-row"):
                    yield Label(label, classes="field-label")
                    yield OrderedInput(
                        values.get(name, ""),
                        placeholder="same as the model under test" if name.startswith("grader") else "",
                        password=secret,
                        compact=True,
                        id=f"continue-{name}",
                    )
            if self.through_batches:
                with Horizontal(classes="field-row"):
                    yield Label("Batch API", classes="field-label")
                    yield Select(
                        [("yes: its batches", "true"), ("no: go on by calls", "false")],
                        value="true",
                        allow_blank=False,
                        compact=True,
                        id="continue-batch",
                    )
            yield Static(id="continue-problem")
            with Horizontal(id="continue-actions"):
                yield Button("Continue ^s", id="continue-yes", variant="primary", compact=True)
                yield Button("Cancel esc", id="continue-no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#continue-base_url", Input).focus()

    @property
    def through_batches(self) -> bool:
        return BatchFiles.online_of(self.run.plan) is not None

    def values(self) -> dict[str, str]:
        typed = {name: self.query_one(f"#continue-{name}", Input).value for name, _, _ in FIELDS}
        if self.through_batches:
            typed["batch"] = str(self.query_one("#continue-batch", Select).value)
        return typed

    def action_submit(self) -> None:
        try:
            settings = self.check(self.values())
        except SettingsError as exc:
            self.query_one("#continue-problem", Static).update(Text(one_line(str(exc), 300), style="bold red"))
            return
        self.dismiss(settings)

    def on_input_submitted(self) -> None:
        self.action_submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "continue-yes":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
