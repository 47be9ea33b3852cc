"""One line asked of a reviewer: a flag's note, or their name where $USER is not theirs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from hbtui.core.text import one_line
from hbtui.tui.handle import AppModal
from hbtui.tui.widgets.ordered_input import OrderedInput

NOTE_LIMIT = 500  # characters: a note is one line, shown on one line in the rubric and the exports


class ReviewQuestion(AppModal[str | None]):
    """Enter answers (an empty answer too, for a note: a flag needs none); escape cancels."""

    DEFAULT_CSS = """
    ReviewQuestion { align: center middle; }
    ReviewQuestion > .dialog { width: 70; max-width: 100%; height: auto; border: round $primary;
        background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="review_question.cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = "", *, required: bool = False) -> None:
        super().__init__()
        self.question, self.value, self.placeholder, self.required = question, value, placeholder, required

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question))
            yield OrderedInput(self.value, placeholder=self.placeholder, max_length=NOTE_LIMIT, id="review-answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        answer = one_line(event.value, NOTE_LIMIT)
        if self.required and not answer:
            self.notify("a name is needed: each review says who made it", severity="warning", markup=False)
            return
        self.dismiss(answer)

    def action_cancel(self) -> None:
        self.dismiss(None)
