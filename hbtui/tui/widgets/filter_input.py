"""The filter bar's input: enter applies, escape clears and closes it."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message

from hbtui.tui.widgets.ordered_input import OrderedInput


class FilterInput(OrderedInput):
    """An input of the filter bar: enter applies, escape clears and closes it."""

    BINDINGS = [Binding("escape", "cancel", "Clear", id="filter_input.cancel")]

    class Cleared(Message):
        """Escape in the input: its filter is emptied, and the input closes."""

        def __init__(self, filter_input: FilterInput) -> None:
            super().__init__()
            self.filter_input = filter_input

        @property
        def control(self) -> FilterInput:
            return self.filter_input

    def action_cancel(self) -> None:
        self.value = ""
        self.post_message(self.Cleared(self))
