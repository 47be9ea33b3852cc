"""The plain-text display of a run, for headless use (`hbtui run` under nohup, tmux, CI logs).

It counts events as they come and prints one progress line every few seconds, plus a line for
each note and each conversation that could not be generated. No cursor tricks: the output is
meant to be read from a log file as well as a terminal. Every line fits 80 columns (a phone's
SSH window, a CI log's view): what does not fit on a progress line goes on an indented line
below it, never past the edge. Its calls/s is the monitor's: over the last seconds of running
time, the seconds paused (PauseChanged, from a pause asked by any process) left out.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from hbtui.analysis.progress import Tally, completions_by_second, count_completion, running_rate
from hbtui.core.errors import RATE_LIMITED
from hbtui.core.events import (
    CallFailed,
    ConversationScored,
    CriterionGraded,
    Event,
    GenerationFailed,
    Noted,
    PauseChanged,
    ReplyGenerated,
    RunFinished,
    RunStarted,
)
from hbtui.core.files import stdout_to_devnull
from hbtui.core.text import one_line, visible_controls

LINE_WIDTH = 80
RUN_NAME_SHOWN = 200  # characters of a run's name printed whole (a longer one is a pasted accident)
CONTINUED = "        "  # the width of "[mm:ss] ": a continuation lines up under the figures


def fitted_lines(parts: list[str], width: int = LINE_WIDTH) -> list[str]:
    """``parts`` joined by two spaces, wrapped between parts (never inside one) at ``width``."""
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += "  " + part
        else:
            lines.append(CONTINUED + part)
    return lines


def elapsed_text(seconds: float) -> str:
    """[mm:ss], or [h:mm:ss] past an hour: a long run's clock does not grow to [1234:56]."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"[{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}]"
    return f"[{seconds // 60:02d}:{seconds % 60:02d}]"


class ProgressPrinter:
    """``clock``: wall-clock seconds (the tests move it to make a long pause)."""

    def __init__(
        self,
        out: TextIO | None = None,
        every: float = 5.0,
        clock: Callable[[], float] = time.time,
        given_replies: bool = False,
    ) -> None:
        """``given_replies``: the run grades the records' own completions, its replies from the start."""
        self.out: TextIO | None = out or sys.stdout
        self.given_replies = given_replies
        self.every = every
        self.clock = clock
        self.started = clock()  # what was stored before this process took the run is not its rate
        self.last_print = 0.0
        self.tally = Tally()
        self.failed_calls = 0
        self.refused_calls = 0  # rate-limit 429s: no failed attempt, the call waits and goes again
        self.scores: list[float] = []
        self.name = ""
        # The calls answered here, by second, and the pauses (start, end or None): the rate is
        # over the last seconds of running time, as the monitor's is, never diluted by a pause.
        self.completions = completions_by_second()
        self.pauses: list[tuple[float, float | None]] = []

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
            self.scores = list(event.scores)
            counts = f": {event.conversations_total} conversations, {event.criteria_total} criteria"
            head = f"run {event.run_id} "
            # The name whole: it is what `resume`, `show` and `export` take, copied from here (cut
            # to fit, it named no run). A name too long for one line with the counts gets a line
            # of its own, past 80 columns only when the name alone is.
            name = one_line(event.name, RUN_NAME_SHOWN)
            if len(head) + len(name) + len(counts) <= LINE_WIDTH:
                self._print(head + name + counts)
            else:
                self._print(head + name)
                self._print(f"{CONTINUED}{counts.removeprefix(': ')}")
            if self.given_replies:  # stored with the plan: not the work of an earlier process
                graded = f"; already stored: {self.tally.graded} verdicts" if self.tally.graded else ""
                self._print(f"{CONTINUED}replies: the records' own completions ({self.tally.replies}){graded}")
            elif self.tally.replies or self.tally.graded:
                self._print(f"{CONTINUED}already stored: {self.tally.replies} replies, {self.tally.graded} verdicts")
        elif isinstance(event, GenerationFailed):
            head = f"{event.where or 'a conversation'}: no reply ({one_line(event.kind, 30)}):"
            room = LINE_WIDTH - len(head) - 1
            if room >= 30:
                self._print(f"{head} {one_line(event.message, room)}")
            else:  # the why on a line of its own rather than cut to a few characters
                self._print(head)
                self._print(CONTINUED + one_line(event.message, LINE_WIDTH - len(CONTINUED)))
        elif isinstance(event, ReplyGenerated | CriterionGraded):
            count_completion(self.completions, self.clock())
        elif isinstance(event, PauseChanged):
            if event.paused:
                self.pauses.append((self.clock(), None))
            elif self.pauses and self.pauses[-1][1] is None:
                self.pauses[-1] = (self.pauses[-1][0], self.clock())
        elif isinstance(event, ConversationScored):
            if event.score is not None:
                self.scores.append(event.score)
        elif isinstance(event, CallFailed):
            if event.kind == RATE_LIMITED:
                self.refused_calls += 1
            else:
                self.failed_calls += 1
        elif isinstance(event, Noted):
            self._print(f"note: {one_line(event.message, LINE_WIDTH - 6)}")
        elif isinstance(event, RunFinished):
            self.progress_line()
            return
        if self.clock() - self.last_print >= self.every:
            self.progress_line()

    def progress_line(self) -> None:
        self.last_print = self.clock()
        elapsed = self.last_print - self.started
        tally = self.tally
        rate = running_rate(self.completions, self.started, self.last_print, self.pauses)
        running = sum(self.scores) / len(self.scores) if self.scores else None
        parts = [
            elapsed_text(elapsed),
            f"replies {tally.conversations_done}/{tally.conversations_total}",
            f"verdicts {tally.graded}/{tally.to_grade} {tally.share_graded:.0%}",
            f"{rate:.1f} calls/s",
        ]
        if running is not None:
            parts.append(f"mean score {min(max(running, 0), 1):.3f}")
        if tally.no_reply:
            parts.append(f"{tally.no_reply} without a reply")
        if tally.grading_errors:
            parts.append(f"{tally.grading_errors} failed to grade")
        if tally.skipped:
            parts.append(f"{tally.skipped} skipped: no reply")
        parts.append(f"failed attempts {self.failed_calls}")
        if self.refused_calls:
            parts.append(f"{self.refused_calls:,} refused by rate limits (429)")
        for line in fitted_lines(parts):
            self._print(line)
