"""A filter's value picked from a list: for filters of more than three values, where a key that
cycles would take up to seven presses to reach one (and as many to come back)."""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from hbtui.tui.handle import AppModal

Value = TypeVar("Value")
MOST_CYCLED = 3  # a filter of two or three values cycles on its key; more get a picker


class PickerModal(AppModal[tuple[Value] | None], Generic[Value]):
    """Dismissed with (the value,) picked, or None when cancelled: a value may itself be None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="picker.cancel")]

    def __init__(self, title: str, choices: list[tuple[str, Value]], current: Value) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(f"{self.title_text} (enter picks, escape cancels):"))
            # One line a choice: a long criterion tag ends in an ellipsis rather than wrapping
            # mid-word onto a line that reads as another choice.
            yield OptionList(
                *(Option(Text(label, no_wrap=True, overflow="ellipsis")) for label, _ in self.choices),
                id="picker-list",
            )

    def on_mount(self) -> None:
        values = [value for _, value in self.choices]
        options = self.query_one(OptionList)
        options.highlighted = values.index(self.current) if self.current in values else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss((self.choices[event.option_index][1],))

    def action_cancel(self) -> None:
        self.dismiss(None)
