"""Every run in the database, newest first; the app's root screen.

A run list stays small (tens or hundreds of rows), so Textual's DataTable is fine here. It is
re-read every couple of seconds so running runs (of this or another process) move on their own.

Longer than most modules (about 530 lines) because every action on a run in the list (open,
monitor, continue, compare, search, filter, the database switch) reads the one table's selection;
the export, rename and delete dialogs are in run_actions.py.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input, Static

from hbtui.analysis.compare import NothingToCompare
from hbtui.core.batch_files import BatchFiles, awaiting_hint
from hbtui.core.errors import TRANSIENT_KINDS, failure_words
from hbtui.core.run_kinds import META_EVAL, MODEL_RUN, not_repeatable
from hbtui.core.settings.config import Settings
from hbtui.core.text import middle_cut, one_line
from hbtui.core.verdicts import AWAITING_BATCH, CANCELLED, FAILED, FINISHED, INCOMPLETE, INTERRUPTED, PENDING, RUNNING
from hbtui.render.batch_state import looking_process
from hbtui.store import RunRow, StoreError
from hbtui.store.run_report import ADJUSTED_MARK, HEADLINE_ADJUSTED
from hbtui.tui.screens.picker import PickerModal
from hbtui.tui.screens.run_actions import RunActions
from hbtui.tui.widgets.app_header import AppHeader
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.ordered_input import OrderedInput

REFRESH_SECONDS = 2.0
# Once the runs list has been on screen this long and no key or click has come for as long (nor a
# run is being opened), the configuration screen is built off screen. The build holds the app for
# 120-130 ms: started on a timer alone, it fell in the middle of a run being opened, now and then,
# which then took 200 ms instead of 35 ms.
CONFIG_PREBUILD_DELAY = 0.5
# Statuses a run can be continued from; a finished one only when calls got no answer.
RESUMABLE = (INTERRUPTED, FAILED, CANCELLED, PENDING, INCOMPLETE)
# What tells runs apart comes first, then what says whether a run is whole (n scored of planned,
# errors), then when it was made; at 80 columns the rest scrolls sideways under the fixed id and name.
# Last, the process driving a running run (host:pid, said so when silent) and its detached driver's log.
COLUMNS = (
    "id",
    "name",
    "status",
    "score",
    "n",
    "errors",
    "date",
    "95% CI",
    "model",
    "grader",
    "dataset",
    "driver",
    "log",
)
FIXED_COLUMNS = 2
STATUS_STYLES = {
    INCOMPLETE: "bold yellow",
    FAILED: "red",
    INTERRUPTED: "yellow",
    CANCELLED: "yellow",
    AWAITING_BATCH: "cyan",
}


def error_count(run: RunRow) -> int | None:
    """Replies that never came and verdicts that failed: the gaps in a run's score."""
    if run.report is None:
        return None
    return run.report.conversations.excluded + run.report.criteria.errors


def name_width(width: int) -> int:
    """How much of a run's name its column shows at a terminal ``width``: 20 at 80 columns, the
    columns beside it keeping their room; wider terminals give it the rest, up to 48, so that a
    default name (model and time, some 32 characters) is whole at 120."""
    return max(20, min(48, width - 76))


def run_cells(run: RunRow, now: float, mark: str = "", width: int = 80) -> tuple[Text, ...]:
    """One table row; every string from the database goes in as Text, never as markup.
    ``mark``: A or B, a run marked for comparison; ``width``: the terminal's (name_width)."""
    status = run.status_label(now)
    ago = run.stopped_ago(now)
    shown = f"{status} {ago}" if ago else status
    shown = shown if run.kind == MODEL_RUN else f"{shown} · {run.kind}"
    headline = run.headline_score
    score = f"{headline:.3f}" if headline is not None else ""
    if run.kind == META_EVAL and score:
        score = f"F1 {score}"  # the grader's agreement with physicians, not a HealthBench score
    elif run.headline[0] == HEADLINE_ADJUSTED and score:
        score = f"{ADJUSTED_MARK} {score}"  # made with a length adjustment: its headline
    ci = run.ci95
    errors = error_count(run)
    return (
        Text(f"{mark} {run.id}" if mark else str(run.id), justify="right", style="bold reverse" if mark else ""),
        Text(middle_cut(run.name, name_width(width))),  # default names differ at their end, the time
        Text(shown, style=STATUS_STYLES.get(status, "")),
        Text(score, justify="right"),
        # Scored of planned, for a running run and a finished one alike.
        Text(f"{run.n_scored or 0}/{run.n_conversations}", justify="right"),
        # A failed run has no count yet: its reason in a few words instead (its whole error: enter).
        Text(failure_words(run.error), style="red")
        if errors is None and status == FAILED
        else Text("" if errors is None else str(errors), justify="right", style="bold red" if errors else "dim"),
        Text(time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at))),
        Text(f"{ci[0]:.3f}–{ci[1]:.3f}" if ci else ""),
        Text(one_line(run.model_test or "", 24)),
        Text(one_line(run.model_grader or "", 24)),
        Text(one_line(run.dataset_name or "", 24)),
        Text(one_line(run.driver_label(now) or "", 60)),
        Text(middle_cut(one_line(run.driver_log or "", 300), 60)),
    )


EVERY_RUN, WITH_ERRORS = "every run", "with errors"


def run_matches(run: RunRow, cells: tuple[str, ...], search: str, status: str) -> bool:
    """Whether a run stays listed: ``search`` found (case-insensitive) in any of its cells, and
    its status the filter's (or any, for every run; or errors counted, for with errors)."""
    if search and not any(search.casefold() in cell.casefold() for cell in cells):
        return False
    if status == WITH_ERRORS:
        return bool(error_count(run))
    return status == EVERY_RUN or run.status_label() == status


class RunsScreen(RunActions):
    SUB_TITLE = "runs"
    BINDINGS = [
        Binding("enter", "open_run", "Open", id="runs.open"),
        Binding("m", "monitor", "Monitor", id="runs.monitor"),
        Binding("c", "continue_run", "Continue", id="runs.continue"),
        Binding("n", "new_run", "New run", id="runs.new"),
        Binding("space", "mark", "Mark", id="runs.mark"),
        Binding("C", "compare", "Compare", id="runs.compare"),
        Binding("slash", "search", "Search runs", id="runs.search"),
        Binding("f", "filter_runs", "Filter by status", id="runs.filter"),
        Binding("e", "export_run", "Export run", id="runs.export"),
        Binding("E", "rename_run", "Rename run", id="runs.rename"),
        Binding("D", "delete_run", "Delete run", id="runs.delete"),
        Binding("b", "switch_database", "Your runs or the demo's", show=False, id="runs.switch_database"),
        Binding("r", "refresh", "Refresh", show=False, id="runs.refresh"),  # it refreshes itself
        Binding("j", "cursor_down", "Down", show=False, id="runs.down"),
        Binding("k", "cursor_up", "Up", show=False, id="runs.up"),
        # priority: the table's own home/end scroll without moving the cursor.
        Binding("g,home", "first", "First", show=False, priority=True, id="runs.first"),
        Binding("G,end", "last", "Last", show=False, priority=True, id="runs.last"),
        # The table's own left/right move one cell of width at a time: a column at a time here.
        Binding("right", "scroll_columns(1)", "Scroll right", show=False, priority=True, id="runs.scroll_right"),
        Binding("left", "scroll_columns(-1)", "Scroll left", show=False, priority=True, id="runs.scroll_left"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._shown: list[tuple] = []
        self._refreshing = False
        self._runs: list[RunRow] = []  # as last read: a search or filter narrows them without a query
        self._config_prebuild_planned = False
        self.marked: list[int] = []  # runs marked for comparison: A, then B
        self._select_on_return: int | None = None  # the run a monitor above showed last
        self.search = ""  # runs listed: those whose cells hold it
        self.status_filter = EVERY_RUN
        self._statuses: list[str] = []  # the statuses of the runs last read, for the filter's picker

    def compose(self) -> ComposeResult:
        yield AppHeader()
        table: DataTable[Text | str] = DataTable(
            id="runs-table", cursor_type="row", zebra_stripes=True, fixed_columns=FIXED_COLUMNS
        )
        table.add_columns(*COLUMNS)
        yield table
        yield OrderedInput(
            placeholder="search runs: name, model, grader, dataset, status (enter keeps, escape clears)",
            id="runs-search",
        )
        yield Static(id="runs-filtered")
        yield Static(
            Text(f"{ADJUSTED_MARK}: the {HEADLINE_ADJUSTED}, the headline of a run made with a length adjustment"),
            id="runs-legend",
        )
        yield Static(
            Text(
                'No runs yet: press n to configure and start one. No endpoint of your own? Choose "local demo'
                ' model" as the endpoint there (or run `hbtui demo`): a tiny local model shows a whole run.'
            ),
            id="runs-empty",
        )
        yield KeyBar()

    async def on_mount(self) -> None:
        await self.reload()
        self.set_interval(REFRESH_SECONDS, self.reload)

    def select_on_return(self, run_id: int) -> None:
        """Back from a monitor, the cursor is on the run it showed: a run started since is a new
        row at the top, and the cursor left on the row it had would be on another run."""
        self._select_on_return = run_id

    async def on_screen_resume(self) -> None:
        await self.reload()
        run_id, self._select_on_return = self._select_on_return, None
        if run_id is not None and str(run_id) in self.table.rows:
            self.table.move_cursor(row=self.table.get_row_index(str(run_id)))
        if not self._config_prebuild_planned:
            self._config_prebuild_planned = True
            self.set_timer(CONFIG_PREBUILD_DELAY, self._prebuild_config)

    def _prebuild_config(self) -> None:
        if self.app.screen is not self:  # not while another screen (a monitor repainting) is in use
            self._config_prebuild_planned = False  # the next time back here
            return
        quiet = self.app.input_quiet()
        if quiet < CONFIG_PREBUILD_DELAY:  # the user is at the keys: once they pause
            self.set_timer(CONFIG_PREBUILD_DELAY - quiet, self._prebuild_config)
            return
        self.app.prebuild_config()

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs-table", DataTable)

    async def action_switch_database(self) -> None:
        """The runs of the demo's database beside the user's, or back: the demo plans its runs
        there, and the app lists them after it; the header names the one listed."""
        from hbtui.local.demo import demo_db_beside
        from hbtui.tui.widgets.app_header import database_label

        own = self.app.settings.db_path
        demo = demo_db_beside(own)
        if self.app.own_database and not Path(demo).exists():
            self.say(
                f"no demo runs yet ({database_label(demo)}): the local demo model on the configuration screen makes them"
            )
            return
        await self.app.open_database(demo if self.app.own_database else own)
        await self.reload()
        self.say(f"the runs of {database_label(self.app.store.path if self.app.store else own)}")

    async def reload(self) -> None:
        store = self.app.store
        if store is None:  # no database yet: made when the first run starts
            self._runs, self._shown = [], []
            self.table.clear()
            self.set_class(True, "-empty")
            return
        if self._refreshing:
            return
        self._refreshing = True
        try:
            self._runs = await store.list_runs()
        finally:
            self._refreshing = False
        self._fill()

    def _fill(self) -> None:
        """The table from the runs last read: a search or filter typed narrows them, no query."""
        runs = self._runs
        now = time.time()
        self.marked = [run_id for run_id in self.marked if any(run.id == run_id for run in runs)]
        marks = dict(zip(self.marked, "AB"))
        self._statuses = sorted({run.status_label(now) for run in runs})
        self.set_class(not runs, "-empty")
        every = [
            (run, cells, tuple(cell.plain for cell in cells))
            for run in runs
            for cells in [run_cells(run, now, marks.get(run.id, ""), self.app.size.width)]
        ]
        rows = [
            (run.id, cells, plain)
            for run, cells, plain in every
            if run_matches(run, plain, self.search, self.status_filter)
        ]
        self._say_filtered(len(rows), len(runs))
        # "adj" before a score is explained where one is listed, as `hbtui runs` explains it.
        self.query_one("#runs-legend", Static).display = any(
            run.headline[0] == HEADLINE_ADJUSTED for run in runs if str(run.id) in {str(r[0]) for r in rows}
        )
        plain = [(run_id, texts) for run_id, _, texts in rows]
        if plain == self._shown:
            return  # nothing changed: keep the cursor and the scroll position untouched
        self._shown = plain
        table = self.table
        selected = self.selected_run_id()
        table.clear()
        for run_id, cells, _ in rows:
            table.add_row(*cells, key=str(run_id))
        if selected is not None and str(selected) in table.rows:
            table.move_cursor(row=table.get_row_index(str(selected)))
        self.call_after_refresh(self._say_more_columns)

    def _say_more_columns(self) -> None:
        """The header says when columns lie beyond the screen and which keys reach them: a
        horizontal scrollbar, one line high, read as a stray glyph at the foot of the list."""
        table = self.table
        self.sub_title = "runs  ← → more columns" if table.max_scroll_x > 0 else "runs"

    def on_resize(self) -> None:
        self._shown = []  # the name's width follows the terminal's: the rows again
        self._fill()

    def _say_filtered(self, shown: int, total: int) -> None:
        """A line above the key bar while a search or filter hides runs: what hides them."""
        line = self.query_one("#runs-filtered", Static)
        hiding = [f"search {one_line(self.search, 30)!r}"] if self.search else []
        if self.status_filter != EVERY_RUN:
            hiding.append(f"status {self.status_filter}")
        line.display = bool(hiding)
        if hiding:
            line.update(Text(f"{shown} of {total} runs: {', '.join(hiding)} (f: every run; / then escape: no search)"))

    async def selected_run(self) -> RunRow | None:
        run_id = self.selected_run_id()
        if run_id is None or self.app.store is None:
            self.say("no run selected")
            return None
        try:
            return await self.app.store.get_run(run_id)
        except StoreError as exc:
            self._failed(f"run {run_id} not read", exc)
            return None

    async def after_change(self) -> None:
        self._shown = []
        await self.reload()

    # ---- search and filter ---------------------------------------------------------------------
    def action_search(self) -> None:
        field = self.query_one("#runs-search", Input)
        field.add_class("-shown")
        field.focus()

    async def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "runs-search":
            self.search = event.value.strip()
            self._fill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "runs-search":
            self.table.focus()

    async def on_key(self, event) -> None:
        field = self.query_one("#runs-search", Input)
        if event.key == "escape" and field.has_focus:
            event.stop()
            field.value = ""  # Changed fills the list again
            field.remove_class("-shown")
            self.table.focus()

    def action_filter_runs(self) -> None:
        choices = [(EVERY_RUN, EVERY_RUN), (WITH_ERRORS, WITH_ERRORS)] + [(s, s) for s in self._statuses]

        async def picked(choice: tuple[str] | None) -> None:
            if choice is not None:
                self.status_filter = choice[0]
                self._fill()

        self.app.push_screen(PickerModal("Show the runs", choices, self.status_filter), picked)

    def selected_run_id(self) -> int | None:
        table = self.table
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return int(key.value or 0)

    # DataTable turns enter into RowSelected before our binding sees it.
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.open_run(int(event.row_key.value or 0))

    def action_open_run(self) -> None:
        run_id = self.selected_run_id()
        if run_id is not None:
            self.app.open_run(run_id)

    async def action_monitor(self) -> None:
        run_id = self.selected_run_id()
        if run_id is None:
            self.say("no run selected")
            return
        store = self.app.store
        if store is not None and (await store.get_run(run_id)).kind == META_EVAL:
            self.app.open_run(run_id)  # a meta-eval's own screen follows it as it goes
            return
        self.app.open_monitor(run_id)

    async def action_continue_run(self) -> None:
        """Resume the selected run, as `hbtui resume` does, in a process of its own."""

        run_id = self.selected_run_id()
        store = self.app.store
        if run_id is None or store is None:
            self.say("no run selected")
            return
        driver = self.app.detached_runs.get(run_id)
        if run_id in self.app.live_runs or (driver is not None and driver.going()):
            await self.action_monitor()  # already going: watched, not started twice
            return
        run = await store.get_run(run_id)
        if run.kind == META_EVAL and run.shown_status() in RESUMABLE:
            from hbtui.tui.screens.meta_eval import continue_in_app

            continue_in_app(self.app, run)
            return
        refusal = not_repeatable(run.id, run.kind)
        if refusal:
            self.notify(refusal, markup=False)
            return
        status = run.shown_status()
        if status == RUNNING:
            owner = run.owner_shown
            self.notify(
                f"run {run_id} is driven by another process{f' ({one_line(owner, 60)})' if owner else ''};"
                " press m to monitor it",
                markup=False,
                severity="warning",
            )
            return
        if status == FINISHED:
            kinds = (await store.progress(run_id)).errors_by_kind
            if not any(kind.removeprefix("reply ") in TRANSIENT_KINDS for kind in kinds):
                self.say(
                    f"run {run_id} is finished: nothing to continue"
                    + (" (R in its results retries the errors)" if kinds else "")
                )
                return
        elif status == AWAITING_BATCH and BatchFiles.online_of(run.plan) is not None:
            looker = looking_process((run.live or {}).get("batch_look"))
            if looker is not None:
                self.say(f"run {run_id}'s batches are looked at by {looker} already: m monitors them")
                return
            # Its batches at the provider: a process of its own looks at them until they end.
            question = "Look at this run's batches until they end, storing their answers?"
            self.app.offer_to_drive(run, question, "Look")
            return
        elif status == AWAITING_BATCH:
            self.say(awaiting_hint(run_id, run.plan))  # its answers come from the user's engine
            return
        elif status not in RESUMABLE:
            self.say(f"run {run_id} is {status}: nothing to continue")
            return
        if status == INCOMPLETE:

            async def retry() -> str:
                verdicts, replies = await store.reset_errors(run_id)
                return f"run {run_id}: retrying {verdicts} criteria and {replies} replies that failed"

            question = f"Complete this incomplete run?\n\n{one_line(run.error or '', 200)}"
            self.app.offer_to_drive(run, question, "Complete", before=retry)
            return
        if status == FAILED:
            self._continue_failed(run)
            return
        self.app.offer_to_drive(run, f"Continue this {status} run?", "Continue")

    def _continue_failed(self, run: RunRow) -> None:
        """A failed run continues once how it is reached is put right: its endpoints, keys and
        concurrency can be changed here first (hbtui resume --base-url... does it in the shell)."""
        from hbtui.tui.screens.continue_run import ContinueRunModal, reach_settings

        app = self.app
        db_path = str(app.db.path)

        async def chosen(settings: Settings | None) -> None:
            if settings is None:
                return
            try:
                await app.start_detached(run.id, settings, use_cache=True)  # as `hbtui resume`
            except StoreError as exc:  # another process took the run meanwhile, or the file broke
                self.notify(one_line(f"run {run.id}: {exc}", 300), severity="error", markup=False)
                return
            self.notify(f"continuing run {run.id} at {','.join(settings.base_url or ())}", markup=False)
            app.open_monitor(run.id)

        app.push_screen(
            ContinueRunModal(run, lambda values: reach_settings(run, app.settings, values, db_path)), chosen
        )

    def action_new_run(self) -> None:
        self.app.open_config()

    async def action_refresh(self) -> None:
        self._shown = []
        await self.reload()

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_scroll_columns(self, direction: int) -> None:
        """Scroll sideways to the next column's (or the previous one's) left edge."""
        table = self.table
        edges, x = [], 0
        for column in table.ordered_columns[FIXED_COLUMNS:]:
            edges.append(x)
            x += column.get_render_width(table)
        if direction > 0:
            target = next((edge for edge in edges if edge > table.scroll_x), table.max_scroll_x)
        else:
            target = next((edge for edge in reversed(edges) if edge < table.scroll_x), 0)
        table.scroll_to(x=min(target, table.max_scroll_x), animate=False)

    def action_first(self) -> None:
        self.table.move_cursor(row=0)

    def action_last(self) -> None:
        self.table.move_cursor(row=max(0, self.table.row_count - 1))

    # ---- comparing two runs ------------------------------------------------------------------
    async def action_mark(self) -> None:
        """Mark the selected run for comparison (A first, then B), or unmark it."""
        run_id = self.selected_run_id()
        if run_id is None:
            return
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked = [*self.marked, run_id][-2:]  # a third mark lets the oldest go
        self._shown = []
        await self.reload()
        if len(self.marked) == 2:
            self.say(f"A run {self.marked[0]}, B run {self.marked[1]}: C compares them")

    def compared_runs(self) -> tuple[int, int] | None:
        """The two marked runs; or the one marked and the one under the cursor."""
        if len(self.marked) == 2:
            return self.marked[0], self.marked[1]
        selected = self.selected_run_id()
        if len(self.marked) == 1 and selected is not None and selected != self.marked[0]:
            return self.marked[0], selected
        return None

    def action_compare(self) -> None:
        runs = self.compared_runs()
        if runs is None:
            self.say("mark two runs with space (A, then B), then press C")
            return
        self.open_compare(*runs)

    @work(group="open-compare", exclusive=True)
    async def open_compare(self, run_a: int, run_b: int) -> None:
        from hbtui.tui.screens.compare import CompareScreen

        try:
            a, b = await self.app.db.get_run(run_a), await self.app.db.get_run(run_b)
            if META_EVAL in (a.kind, b.kind):
                from hbtui.tui.screens.meta_eval import MetaComparisonScreen

                await self.app.push_screen(await MetaComparisonScreen.read(self.app.db, a, b))
                return
            screen = await CompareScreen.read(self.app.db, run_a, run_b)
        except (StoreError, NothingToCompare, ValueError) as exc:
            self._failed("not compared", exc)
            return
        await self.app.push_screen(screen)
