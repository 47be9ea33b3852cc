"""The live monitor of one run, whichever process drives it.

One timer at 4 Hz decides what to show: for a run of this process it reads the counters that
the engine's observer keeps (no I/O); for a run of another process it reads the database, at
most twice a second, in a worker that a tick skips while the previous read is still going. What
is shown is reactive state (the view, the last interval): a view equal to the one shown (see
MonitorView) repaints nothing, so a flood of events costs a few repaints a second, never one per
event. Leaving the monitor never stops the run: the run's
worker belongs to the App.

Longer than most modules (about 540 lines) because it is one screen fed by two sources (the
counters of a run driven in this process, the heartbeat of one driven elsewhere) and the controls
that reach either; its figures are made in monitor_data.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import replace

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from hbtui.core import scoring
from hbtui.core.errors import HbtuiError
from hbtui.core.settings.prices import Price, cost_text, model_usage, tokens_text, total_cost
from hbtui.core.text import middle_cut, one_line, visible_controls
from hbtui.core.verdicts import AWAITING_BATCH, CANCELLED, FAILED, PAUSED, RUNNING
from hbtui.local import DEMO_MODEL_ALIAS
from hbtui.render.run_metadata import duration_text
from hbtui.services import cancel_batches, resume_hint, settings_for_run
from hbtui.store import StoreError
from hbtui.store.owners import this_owner
from hbtui.tui.breakpoints import ResponsiveScreen
from hbtui.tui.monitor_data import MonitorView, view_from_counters, view_from_store
from hbtui.tui.prices_notice import prices_or_notice
from hbtui.tui.widgets.app_header import AppHeader
from hbtui.tui.widgets.histogram import ScoreHistogram
from hbtui.tui.widgets.key_bar import KeyBar

TICK_SECONDS = 0.25
POLL_SECONDS = 0.25  # database reads of a running run of another process (a read takes ~10 ms)
STARTING = "starting"  # shown while the process just started to drive the run has not taken it yet
STARTING_AT_MOST = 30.0  # seconds: a process that took no longer to take its run up (a loaded box)
MONITOR_BATCHES = 2  # batch lines the monitor shows, besides whether a process looks at them
CANCEL_PATIENCE_SECONDS = 10.0  # a look at a batch run's batches holds the run for a moment
POLL_ENDED_SECONDS = 5.0  # an ended run could still be resumed by someone else
HISTOGRAM_SECONDS = 1.0
# The interval's bootstrap is the costly part: it runs again once the scores have changed and
# sixty times its own last duration has passed, within these bounds: a few hundred scores take
# milliseconds (so a quarter of a second), thousands tens of ms (so every 2 s; more often, its
# thread took enough of the GIL to slow the repaints of a fast run below 4 a second).
METRIC_MIN_SECONDS, METRIC_MAX_SECONDS = 0.25, 2.0


def safe(text: str, width: int = 120) -> Text:
    """Text from the database or a model, as data: no markup, escape sequences visible."""
    return Text(one_line(visible_controls(text), width))


def append_counts(text: Text, counts: dict[str, int]) -> None:
    """One line per kind, the most frequent first."""
    for kind, number in sorted(counts.items(), key=lambda item: -item[1]):
        text.append("\n ")
        text.append_text(safe(kind, 20))
        text.append(f" {number}")


CPU_MODEL_NOTE = (
    "the local demo model answers on this machine's CPU: a call can take a minute or more, so calls/s"
    " stays near 0 while it works"
)


class MonitorScreen(ResponsiveScreen):
    SUB_TITLE = "live monitor"
    # Below 72 columns the two panels stack in one scroll instead of clipping their labels.
    HORIZONTAL_BREAKPOINTS = [(0, "-stacked"), (72, "-side-by-side")]
    BINDINGS = [
        Binding("p", "pause", "Pause or resume", id="monitor.pause"),
        Binding("x", "cancel_run", "Cancel run", id="monitor.cancel"),
        Binding("enter,b", "browse", "Browse results", id="monitor.browse"),
    ]

    # What is shown; each change repaints (a view compares equal when its figures are the same).
    view: reactive[MonitorView | None] = reactive(None, init=False)
    # The last bootstrap's interval; each one repaints, as it says how many scores it was drawn from.
    metric: reactive[scoring.Metric | None] = reactive(None, init=False, always_update=True)

    def __init__(self, run_id: int, *, follow_latest: bool = False) -> None:
        super().__init__()
        self.run_id = run_id
        # `hbtui monitor latest`: once this run has ended, a newer run that starts is shown instead.
        self.follow_latest = follow_latest
        self.refreshes = 0  # repaints done, for the benchmark
        self.polls = 0  # database reads done
        self._polling = False
        self._polled_at = 0.0
        self._metric_n = -1  # how many scores the interval was drawn from
        self._metric_at = 0.0
        self._metric_cost = 0.0  # seconds the last bootstrap took
        self._metric_busy = False
        self._announced_end = False
        self._histogram_at = 0.0
        self._seen_running = False
        self._seen_taken = False  # seen its process hold the run (not only starting to)
        self._controllable = False  # as the footer last showed it
        self._batch_run = False  # likewise: a batch run offers no pause
        self.prices: dict[str, Price] = {}  # read once: the monitor repaints 4 times a second

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield AppHeader()
        yield Static(id="monitor-status")
        yield Static(id="monitor-driver")
        yield Static(id="monitor-batches")
        yield Static(id="monitor-failure")
        # Each bar names what it counts: replies received (a conversation with its reply, or with
        # none, is done generating) and verdicts given; "conversations" at 100% read as graded.
        with Horizontal(classes="monitor-bar"):
            yield Static("replies", classes="bar-label")
            yield ProgressBar(total=None, show_eta=False, id="conversations-bar")
            yield Static(id="conversations-count", classes="bar-count")
        with Horizontal(classes="monitor-bar"):
            yield Static("verdicts", classes="bar-label")
            yield ProgressBar(total=None, show_eta=False, id="criteria-bar")
            yield Static(id="criteria-count", classes="bar-count")
        # Scrollable and focused: stacked on a small terminal, the score and errors are below
        # the fold, and the arrow and page keys reach them.
        with ScrollableContainer(id="monitor-main"):
            with Vertical(id="monitor-left"):
                yield Static(id="monitor-stats")
                yield ScoreHistogram(id="monitor-histogram")
            with Vertical(id="monitor-right"):
                yield Static(id="monitor-score")
                yield Static(id="monitor-errors")
        yield KeyBar()

    def on_mount(self) -> None:
        from hbtui.tui.screens.runs import RunsScreen

        for screen in self.app.screen_stack:
            if isinstance(screen, RunsScreen):
                screen.select_on_return(self.run_id)
        self.prices = prices_or_notice(self.app)
        self.set_focus(self.query_one("#monitor-main"))
        self.tick()
        self.set_interval(TICK_SECONDS, self.tick)

    # ---- gathering ----------------------------------------------------------------------
    @property
    def live(self):
        return self.app.live_runs.get(self.run_id)

    @property
    def controllable(self) -> bool:
        """Pause and cancel act on this process's engine, or, for a run another process drives
        (its heartbeat fresh), through the database: that process applies them within a second.
        Only until the run ends."""
        live = self.live
        if live is not None:
            return live.counters.finished is None
        return self.view is not None and (self.view.status in (RUNNING, PAUSED) or self.batch_run)

    @property
    def batch_run(self) -> bool:
        """A run through the batch API not ended: its batches are the provider's to stop."""
        return self.view is not None and bool(self.view.batches) and self.view.status in (RUNNING, AWAITING_BATCH)

    def tick(self) -> None:
        live = self.live
        if live is not None:
            self.apply(view_from_counters(live.engine.run, live.counters, live.engine.live_snapshot()))
            return
        ended = self.view is not None and self.view.ended
        wait = POLL_ENDED_SECONDS if ended and self._announced_end else POLL_SECONDS
        # Measured from the start of the last read; half a tick of slack so timer jitter
        # does not halve the rate.
        if not self._polling and time.monotonic() - self._polled_at >= wait - TICK_SECONDS / 2:
            self._polling = True
            self._polled_at = time.monotonic()
            self.run_worker(self.poll(), group="monitor-poll", exit_on_error=False)

    async def poll(self) -> None:
        try:
            store = self.app.store
            if store is None:
                return
            view = await view_from_store(store, self.run_id)
            self.polls += 1
        except StoreError as exc:
            self.query_one("#monitor-status", Static).update(safe(str(exc), 300))
            return
        finally:
            self._polling = False
        if view.ended and not self._seen_taken and self._driver_starting():
            # Continued from here a moment ago: the run reads as it was left until its new
            # process takes it (a second or so), and is not shown as ended meanwhile (nor read
            # at an ended run's slow pace, which showed the old state for seconds).
            view = replace(view, status=STARTING)
        if self.live is None:  # a run started here meanwhile has the fresher figures
            self.apply(view)
        if self.follow_latest and view.ended:
            await self._follow_a_newer_run(store)

    def _driver_starting(self) -> bool:
        """A process started here for this run a moment ago and going: not yet holding the run
        (a process that ended it and is still exiting is past the moment)."""
        detached = self.app.detached_runs.get(self.run_id)
        return detached is not None and time.monotonic() - detached.launched_at < STARTING_AT_MOST and detached.going()

    async def _follow_a_newer_run(self, store) -> None:
        try:
            latest = await store.resolve_run("latest")
        except StoreError:
            return
        if latest.id <= self.run_id or latest.shown_status() not in (RUNNING, PAUSED):
            return
        self.notify(f"run {self.run_id} has ended; now showing run {latest.id}, started since", markup=False)
        # Not awaited here: this read is a worker of the screen being replaced.
        self.app.call_later(self.app.switch_screen, MonitorScreen(latest.id, follow_latest=True))

    def apply(self, view: MonitorView) -> None:
        self.view = view  # repaints, unless it shows what is shown already
        if self.controllable != self._controllable:  # the footer follows: p and x come and go
            self._controllable = self.controllable
            self.refresh_bindings()
        elif self.batch_run != self._batch_run:
            self.refresh_bindings()
        self._batch_run = self.batch_run
        self._update_metric(view)
        if not view.ended:
            self._seen_running = True  # starting included: its end is announced
            self._seen_taken = self._seen_taken or view.status != STARTING
        elif not self._announced_end:
            self._announced_end = True
            if self._seen_running:
                score = "" if view.final_score is None else f": {view.final_name} {view.final_score:.3f}"
                self.notify(
                    f"run {view.run_id} {view.status}{score}",
                    markup=False,
                    severity="error" if view.status == FAILED else "information",
                )

    def _update_metric(self, view: MonitorView) -> None:
        n = len(view.scores)
        wait = min(METRIC_MAX_SECONDS, max(METRIC_MIN_SECONDS, 60 * self._metric_cost))
        if (
            self._metric_busy
            or n == self._metric_n
            or n == 0
            or (time.monotonic() - self._metric_at < wait and not view.ended)
        ):
            return
        self._metric_busy = True
        scores = list(view.scores)

        async def compute() -> None:
            started = time.monotonic()
            try:
                metric = await asyncio.to_thread(scoring.metric, scores)
                self._metric_n = len(scores)
                self.metric = metric
            finally:
                self._metric_at = time.monotonic()
                self._metric_cost = self._metric_at - started
                self._metric_busy = False

        self.run_worker(compute(), group="monitor-metric", exit_on_error=False)

    # ---- painting -----------------------------------------------------------------------
    def watch_view(self, view: MonitorView | None) -> None:
        if view is not None:
            self.paint(view)

    def watch_metric(self) -> None:
        if self.view is not None:
            self.paint(self.view)

    def on_resize(self) -> None:
        # Stacked (narrow), the status line carries the score: the breakpoint class has just changed.
        if self.view is not None:
            self.paint(self.view)

    def paint(self, view: MonitorView) -> None:
        self.refreshes += 1
        status = Text()
        status.append(f"run {view.run_id} ", style="bold")
        status.append_text(safe(view.name, 40))
        status.append("  ")
        status.append(view.status, style="bold")
        if view.status in (RUNNING, PAUSED):
            status.append(" (this process)" if view.in_process else " (another process)", style="dim")
        if view.ended and view.final_score is not None:
            status.append(f"  final {view.final_name} {view.final_score:.3f}", style="bold")
        elif view.scores and self.has_class("-stacked"):  # the score panel is below the fold there
            status.append(f"  score {scoring.clipped_mean(view.scores):.3f}", style="bold")
        self.query_one("#monitor-status", Static).update(status)
        self._paint_driver(view)
        # The whole error, wrapped: the reason a run failed is what one needs to fix it.
        failure = self.query_one("#monitor-failure", Static)
        failure.display = bool(view.error)
        if view.error:
            message = Text()
            message.append(f"run {view.status}: " if view.ended else "error: ", style="bold")
            message.append(visible_controls(view.error))
            if view.status == FAILED:
                message.append("\n" + resume_hint(view.run_id, view.error), style="dim")
            failure.update(message)

        tally = view.tally
        self._bar("conversations", tally.conversations_done, tally.conversations_total, tally.replies_text())
        self._bar("criteria", tally.graded, tally.to_grade, tally.criteria_text())
        self.query_one("#monitor-stats", Static).update(self._stats(view))
        self.query_one("#monitor-score", Static).update(self._score(view))
        self.query_one("#monitor-errors", Static).update(self._errors(view))
        histogram = self.query_one("#monitor-histogram", ScoreHistogram)
        # A plotext chart costs milliseconds to draw: once a second is plenty for a histogram.
        stale = time.monotonic() - self._histogram_at >= HISTOGRAM_SECONDS or view.ended
        if len(histogram.scores) != len(view.scores) and stale:
            self._histogram_at = time.monotonic()
            histogram.update_scores(view.scores)
        histogram.note_total(len(view.scores))  # behind the score's n until its next redraw: says so

    def _paint_driver(self, view: MonitorView) -> None:
        """The process driving a run of another process (host:pid, said plainly when it has gone
        silent) and the log its detached driver writes."""
        line = Text()
        if view.driver and not view.in_process:
            line.append("driven by ")
            line.append_text(safe(view.driver, 80))
            line.append("  ")
        if view.driver_log:
            line.append("log ")
            # Cut in its middle to what is left of the line: the file's name, at its end, stays whole.
            room = max(20, self.size.width - 2 - line.cell_len)
            line.append(middle_cut(visible_controls(view.driver_log), room))
        widget = self.query_one("#monitor-driver", Static)
        widget.display = bool(line)
        widget.update(line)
        # A run through the batch API: each open batch, and whether a process looks at them.
        # Whether a process looks first, then the batches: a few lines, however many batches.
        shown = [*([view.batch_look] if view.batch_look else []), *view.batches[:MONITOR_BATCHES]]
        if len(view.batches) > MONITOR_BATCHES:
            shown.append(f"and {len(view.batches) - MONITOR_BATCHES} more (enter: the run's summary lists them)")
        batches = Text()
        for text in shown:
            batches.append("\n" if batches else "")
            batches.append_text(safe(text, 200))
        panel = self.query_one("#monitor-batches", Static)
        panel.display = bool(batches)
        panel.update(batches)

    def _bar(self, name: str, done: int, total: int, label: str) -> None:
        self.query_one(f"#{name}-bar", ProgressBar).update(total=max(total, 1), progress=done)
        self.query_one(f"#{name}-count", Static).update(Text(label))

    def _stats(self, view: MonitorView) -> Table:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True, min_width=len("in flight"))  # endpoint rows must not squeeze it
        grid.add_column(no_wrap=True, overflow="ellipsis")
        if view.status == AWAITING_BATCH:
            rate = "– (batches at the provider)" if view.batches else "– (your engine answers it)"
        elif view.ended:
            rate = "– (the run has ended)"
        elif view.status == STARTING:
            rate = "– (its process is starting)"
        elif view.status == PAUSED:  # the 10 s average would still show the calls of before
            rate = "– (paused)"
        else:
            left = "estimating…" if view.eta_seconds is None else duration_text(view.eta_seconds)
            rate = f"{view.calls_per_second:.1f} (last 10 s)   ETA {left}"
        grid.add_row("calls/s", Text(rate))
        if not view.ended and DEMO_MODEL_ALIAS in (view.model_test, view.model_grader):
            # A tiny model on this machine's CPU: minutes of 0.0 calls/s are the demo working.
            grid.add_row("note", Text(CPU_MODEL_NOTE, style="yellow"))
        for label, row in endpoint_rows(view.endpoints):
            grid.add_row(label, row)
        if not view.endpoints:
            grid.add_row("in flight", Text("–" if view.in_process or view.ended else "– (no heartbeat yet)"))
        if view.limits:
            # "paced to 1,800 requests/min from the endpoint's headers; 12 answers refused (429)"
            grid.add_row("limits", safe(view.limits.removeprefix("limits: "), 400))
        p50 = "–" if view.latency_p50 is None else f"{view.latency_p50:.0f} ms"
        p95 = "–" if view.latency_p95 is None else f"{view.latency_p95:.0f} ms"
        grid.add_row("latency", Text(f"p50 {p50}  p95 {p95}"))
        pt, ct, pg, cg = view.tokens
        grid.add_row("tokens", Text(f"test {tokens_text(pt)} in/{tokens_text(ct)} out"))
        grid.add_row("", Text(f"grader {tokens_text(pg)} in/{tokens_text(cg)} out"))
        cost = self._cost(view)
        if cost is not None:
            grid.add_row("cost", Text(cost))
        return grid

    def _cost(self, view: MonitorView) -> str | None:
        """The cost so far where the price table has a model; nothing is guessed for the others."""
        pt, ct, pg, cg = view.tokens
        usages = [
            model_usage(view.model_test, pt, ct, self.prices),
            model_usage(view.model_grader, pg, cg, self.prices),
        ]
        total = total_cost(usages)
        if total is not None:
            return f"{cost_text(total)} in all"
        if all(u.cost is None for u in usages):
            return None
        return ", ".join(
            f"{role} {'no price' if u.cost is None else cost_text(u.cost)}"
            for role, u in zip(("test", "grader"), usages)
        )

    def _score(self, view: MonitorView) -> Text:
        text = Text()
        final_name = view.final_name if view.ended and view.final_score is not None else "score"
        text.append(f"{final_name} ", style="bold")
        metric = self.metric
        # The mean is cheap and exact now; the interval comes from the last bootstrap (marked … when older).
        value = scoring.clipped_mean(view.scores) if view.scores else None
        if view.ended and view.final_score is not None:
            value = view.final_score
        n = len(view.scores)
        final = view.ended and view.final_ci95 is not None
        ci = view.final_ci95 if final else (metric.ci95 if metric else None)
        text.append("–" if value is None else f"{value:.3f}")
        # The one n of the monitor, named: the histogram's and the interval's too.
        # (a line of its own: beside the score it wrapped at 80 columns)
        text.append(f"\nover {n:,} scored conversation{'s' if n != 1 else ''}\n", style="dim")
        text.append("95% CI ", style="bold")
        if ci is None or (not final and self._metric_n < 2):
            text.append("–" if n < 2 else "computing…", style="" if n < 2 else "dim")
        else:
            text.append(f"{ci[0]:.3f}–{ci[1]:.3f}")
            if not final and self._metric_n != n:  # say which scores it was drawn from
                text.append(f" (of {self._metric_n}, updating)", style="dim")
        return text

    def _errors(self, view: MonitorView) -> Text:
        text = Text()
        text.append("errors", style="bold")
        if not view.errors_by_kind:
            text.append("  none")
        append_counts(text, view.errors_by_kind)
        if view.retried_by_kind:
            # Counted whether or not another attempt followed (MAX_ATTEMPTS 1 retries nothing).
            text.append("\nfailed attempts", style="bold")
            append_counts(text, view.retried_by_kind)
        if view.recent_errors:
            text.append("\nlatest", style="bold")
            for at, kind, message in view.recent_errors:
                text.append(f"\n {time.strftime('%H:%M:%S', time.localtime(at))} " if at else "\n ")
                text.append_text(safe(f"{kind}: {message}", 60))
        return text

    # ---- actions --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Pause and cancel: not offered once the run has ended, nor for a driver gone silent.
        if action == "pause":  # a batch at the provider has none
            return self.controllable and not self.batch_run
        if action == "cancel_run":
            return self.controllable
        return True

    @work(group="monitor-control")
    async def _ask_driver(self, control: str | None) -> None:
        """Ask the process driving this run (another one) through the database."""
        store = self.app.store
        owner = self.view.owner if self.view is not None and self.view.owner else "another process"
        try:
            asked = store is not None and await store.request_control(self.run_id, control)
        except (sqlite3.Error, StoreError) as exc:
            self.notify(
                one_line(f"could not ask run {self.run_id}'s driver: {exc}", 200), severity="error", markup=False
            )
            return
        if not asked:
            self.notify(f"run {self.run_id} is not running any more", markup=False, severity="warning")
            return
        what = {PAUSED: "pause", None: "resume", CANCELLED: "cancel"}[control]
        self.say(f"asked {owner} to {what} run {self.run_id}: it does within a second; calls in flight finish")

    def action_pause(self) -> None:
        if not self.controllable:
            return
        if self.batch_run:
            self.say("a batch at the provider has no pause: x cancels the run's batches")
            return
        live = self.live
        if live is None:
            self._ask_driver(None if self.view is not None and self.view.status == PAUSED else PAUSED)
            return
        if live.engine.paused:
            live.engine.resume()
            self.say("resumed")
        else:
            live.engine.pause()
            self.say("paused: calls in flight finish, no new ones start")
        self.tick()

    def action_cancel_run(self) -> None:
        if not self.controllable:
            return
        from hbtui.tui.screens.confirm import ConfirmModal

        batch_run = self.batch_run

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if batch_run:
                self._cancel_batches()
                return
            if self.live is None:
                self._ask_driver(CANCELLED)
                return
            self.app.cancel_run(self.run_id)
            self.say(f"cancelling run {self.run_id}: the calls in flight finish and are saved")

        question = (
            f"Cancel run {self.run_id} and its batches at the provider? What they answered is kept there"
            " (resume stores it); the run is marked cancelled."
            if batch_run
            else f"Cancel run {self.run_id}? What completed is kept; the run is marked cancelled."
        )
        self.app.push_screen(
            ConfirmModal(
                question,
                yes="Cancel run",
                no="Keep running",
            ),
            answered,
        )

    @work(exclusive=True, group="cancel-batches")
    async def _cancel_batches(self) -> None:
        """`hbtui cancel` of a run through the batch API: at the provider, with this session's keys."""
        store = self.app.store
        if store is None:
            return
        self.say(f"cancelling run {self.run_id}'s batches at the provider…")
        try:
            run = await store.get_run(self.run_id)
            cancelled, problems = await cancel_batches(
                store, run, settings_for_run(run, self.app.settings), this_owner(), CANCEL_PATIENCE_SECONDS
            )
        except (sqlite3.Error, StoreError, HbtuiError) as exc:
            self.notify(one_line(f"run {self.run_id}: {exc}", 300), severity="error", markup=False)
            return
        for problem in problems:
            self.notify(one_line(problem, 300), severity="warning", markup=False)
        if problems:
            self.notify(f"run {self.run_id} is not cancelled: x again when the provider answers", markup=False)
            return
        self.say(
            f"run {self.run_id} cancelled: {cancelled} batch{'es' if cancelled != 1 else ''} cancelled at the provider"
        )

    def action_browse(self) -> None:
        self.app.open_run(self.run_id)


ENDPOINT_ROWS = 3  # at most, so that the panel fits 80x24 however many replicas a run has


def endpoint_names(urls: list[str]) -> dict[str, str]:
    """Each endpoint by what tells it apart at 80 columns: its host and port, without the scheme
    and without a path every endpoint shares ("/v1"), which would push the port off the screen."""
    bare = {url: url.split("://", 1)[-1] for url in urls}
    paths = {name.partition("/")[2].partition(" ")[0] for name in bare.values()}
    if len(paths) == 1 and (shared := paths.pop()):
        bare = {url: name.replace("/" + shared, "", 1) for url, name in bare.items()}
    return bare


def endpoint_rows(endpoints: dict[str, tuple[int, int, float, str]]) -> list[tuple[str, Text]]:
    """One row per endpoint: in flight for its (adaptive) limit, its answers per second, and
    whether it is set aside; with several, those set aside first (they are what to look at), and
    beyond a few, one row that counts the rest."""
    several = len(endpoints) > 1
    ordered = sorted(endpoints.items(), key=lambda item: (item[1][3] == "live", item[0]))
    shown = ordered if len(ordered) <= ENDPOINT_ROWS else ordered[: ENDPOINT_ROWS - 1]
    rows = []
    names = endpoint_names(list(endpoints)) if several else {}
    for index, (url, (in_flight, limit, rate, state)) in enumerate(shown):
        figures = f"{in_flight}/{limit}"
        if several:  # one set aside answers nothing: its state takes the rate's place, to fit 80 columns
            figures += f" {rate:.1f}/s live" if state == "live" else f" {state}"
        text = Text(figures + " ", style="bold red" if state != "live" else "") + safe(names.get(url, url), 40)
        rows.append(("in flight" if index == 0 else "", text))
    rest = ordered[len(shown) :]
    if rest:
        aside = sum(1 for _, figures in rest if figures[3] != "live")
        in_flight = sum(figures[0] for _, figures in rest)
        rate = sum(figures[2] for _, figures in rest)
        rows.append(
            (
                "",
                Text(
                    f"{in_flight} {rate:.1f}/s  {len(rest)} more endpoints" + (f", {aside} set aside" if aside else "")
                ),
            )
        )
    return rows
