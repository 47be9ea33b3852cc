"""Quitting while runs this app started go on in their own processes: leave them going (the
default: that is why they have processes of their own), or stop them resumably."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from hbtui.tui.handle import AppModal

LEAVE, STOP = "leave", "stop"


class QuitModal(AppModal[str | None]):
    """Dismissed with LEAVE, STOP, or None to stay in the app."""

    BINDINGS = [
        Binding("l", "answer('leave')", "Leave the runs going and quit", id="quit.leave"),
        Binding("s", "answer('stop')", "Stop the runs (resumable) and quit", id="quit.stop"),
        Binding("escape", "answer(None)", "Stay in the app", id="quit.stay"),
    ]

    def __init__(self, question: str, runs: int = 2) -> None:
        super().__init__()
        self.question = question
        self.them = "it" if runs == 1 else "them"  # the buttons speak of one run as one

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-body"):
            yield Static(Text(self.question), id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button("Leave going (l)", id="quit-leave", variant="primary", compact=True)
                yield Button(f"Stop {self.them} (s)", id="quit-stop", variant="error", compact=True)
                yield Button("Stay (esc)", id="quit-stay", compact=True)

    def on_mount(self) -> None:
        self.query_one("#quit-leave", Button).focus()  # enter leaves them going: the default

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss({"quit-leave": LEAVE, "quit-stop": STOP}.get(event.button.id or ""))

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
