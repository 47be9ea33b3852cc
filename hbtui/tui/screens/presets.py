"""The two small dialogs of presets: name the current settings, pick saved ones."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from hbtui.tui.handle import AppModal


class PresetNameModal(AppModal[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="preset_name.cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text("Save these settings as preset (API keys are left out):"))
            yield Input(placeholder="preset name", id="preset-name")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PresetPickerModal(AppModal[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="preset_picker.cancel")]

    def __init__(self, names: list[str], read_only: set[str] | frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.names = names
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text("Load a preset (enter picks, escape cancels):"))
            yield OptionList(
                *(
                    Option(
                        Text(
                            name
                            + (" (built in: requests as simple-evals sends them)" if name in self.read_only else "")
                        ),
                        id=str(i),
                    )
                    for i, name in enumerate(self.names)
                ),
                id="preset-list",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.names[int(event.option.id or 0)])

    def action_cancel(self) -> None:
        self.dismiss(None)
