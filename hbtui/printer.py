"""The plain-text display of a run, for headless use (`hbtui run` under nohup, tmux, CI logs).

It counts events as they come and prints one progress line every few seconds, plus a line for
each note and each conversation that could not be generated. No cursor tricks: the output is
meant to be read from a log file as well as a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from hbtui.events import (
    CallFailed,
    ConversationScored,
    Event,
    GenerationFailed,
    Noted,
    RunFinished,
    RunStarted,
)
from hbtui.files import stdout_to_devnull
from hbtui.progress import Tally
from hbtui.text import one_line, visible_controls


class ProgressPrinter:
    def __init__(self, out: TextIO | None = None, every: float = 5.0) -> None:
        self.out: TextIO | None = out or sys.stdout
        self.every = every
        self.started = time.monotonic()
        self.last_print = 0.0
        self.tally = Tally()
        self.failed_calls = 0
        self.scores: list[float] = []
        self.calls_before = 0  # already stored when this process started: not part of its rate
        self.name = ""

    def _print(self, line: str) -> None:
        if self.out is None:
            return
        try:
            print(visible_controls(line), file=self.out, flush=True)
        except BrokenPipeError:
            # Whoever read the progress went away (`hbtui run ... | head`): the run goes on unseen.
            # Failing it would throw away the calls it is paying for.
            if self.out is sys.stdout:
                stdout_to_devnull()
            self.out = None

    def on_event(self, event: Event) -> None:
        self.tally.count(event)
        if isinstance(event, RunStarted):
            self.name = event.name
            self.calls_before = self.tally.replies + self.tally.no_reply + self.tally.graded
            self.scores = list(event.scores)
            self._print(
                f"run {event.run_id} {one_line(event.name)}: {event.conversations_total} conversations,"
                f" {event.criteria_total} criteria ({self.tally.replies} replies and {self.tally.graded}"
                " verdicts already stored)"
            )
        elif isinstance(event, GenerationFailed):
            self._print(
                f"conversation {event.conversation_id}: no reply ({event.kind}): {one_line(event.message, 160)}"
            )
        elif isinstance(event, ConversationScored):
            if event.score is not None:
                self.scores.append(event.score)
        elif isinstance(event, CallFailed):
            self.failed_calls += 1
        elif isinstance(event, Noted):
            self._print(f"note: {one_line(event.message, 240)}")
        elif isinstance(event, RunFinished):
            self.progress_line()
            return
        now = time.monotonic()
        if now - self.last_print >= self.every:
            self.progress_line()

    def progress_line(self) -> None:
        self.last_print = time.monotonic()
        elapsed = self.last_print - self.started
        tally = self.tally
        done_here = tally.conversations_done + tally.graded - self.calls_before
        rate = done_here / elapsed if elapsed > 0 else 0.0
        running = sum(self.scores) / len(self.scores) if self.scores else None
        score = f"  mean score so far {min(max(running, 0), 1):.3f}" if running is not None else ""
        self._print(
            f"[{int(elapsed // 60):02d}:{int(elapsed % 60):02d}] replies {tally.replies_text()}"
            f"  verdicts {tally.criteria_text()} {tally.share_graded:.0%}  {rate:.1f} calls/s"
            f"  failed attempts {self.failed_calls}{score}"
        )
