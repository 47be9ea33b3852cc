"""The criteria view (`V` on a run): every distinct rubric criterion of the run, grouped by text
and tags, with how often it was met, missed or triggered; sortable (s), exportable to CSV (e),
and enter opens the conversations behind the criterion under the cursor, on that criterion.

A run of HealthBench holds up to ~48,000 distinct criteria: the table (a LineTable) renders
only the lines on screen, from the list read once as the view opens.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import Input, Static

from hbtui.analysis.criteria_table import CRITERIA_SORTS, sorted_criteria, write_criteria_csv
from hbtui.core.text import one_line
from hbtui.store import CriterionStats
from hbtui.tui.breakpoints import ResponsiveScreen
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.widgets.filter_input import FilterInput
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.line_table import LineTable

HEADER = f"{'met%':>6} {'met':>5} {'miss':>5} {'err':>4} {'pts':>4}  criterion  [tags]"


def row_text(c: CriterionStats) -> str:
    fraction = c.met_fraction
    share = "   -  " if fraction is None else f"{100 * fraction:5.1f}%"
    tags = one_line(" ".join(t for t in c.tags if not t.startswith("level:")), 200)  # the dataset's, as data
    return f"{share} {c.met:>5} {c.not_met:>5} {c.errors:>4} {c.points:>+4g}  {one_line(c.criterion, 400)}  [{tags}]"


class CriteriaTable(LineTable[CriterionStats]):
    """The distinct criteria, one line each; penalties in the error colour."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(HEADER, row_text, lambda c: c.points < 0, id=id)


class CriteriaScreen(ResponsiveScreen):
    """Every distinct criterion of a run and how often it was met, missed or triggered."""

    BINDINGS = [
        Binding("s", "pick_sort", "Sort criteria by…", id="criteria.sort"),
        Binding("e", "export", "Export CSV to a path", id="criteria.export"),
        Binding("enter", "open", "Open its conversations", id="criteria.open"),
    ]

    sort: reactive[str] = reactive("missed", init=False)

    def __init__(self, run_id: int, stats: list[CriterionStats] | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.stats = stats
        self.loaded = False

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield Static(Text(f"Criteria of run {self.run_id}", style="bold"), id="criteria-title")
        yield FilterInput(placeholder="CSV path (enter writes, esc closes)", id="criteria-path", classes="filter-input")
        yield CriteriaTable(id="criteria-table")
        yield KeyBar()

    @classmethod
    async def read(cls, store, run_id: int) -> CriteriaScreen:
        return cls(run_id, await store.criteria_stats(run_id))

    def on_mount(self) -> None:
        if self.stats is not None:
            self._show()
        else:
            self.load()

    @work(group="criteria-load", exclusive=True)
    async def load(self) -> None:
        self.stats = await self.app.db.criteria_stats(self.run_id)
        self._show()

    def _show(self) -> None:
        stats = self.stats or []
        table = self.query_one(CriteriaTable)
        table.show(sorted_criteria(stats, self.sort))
        title = Text()
        title.append(f"Criteria of run {self.run_id}", style="bold")
        title.append(f"  {len(stats):,} distinct", style="dim")
        title.append("  ·  sort ", style="dim")
        title.append(CRITERIA_SORTS[self.sort][0], style="bold")
        self.query_one("#criteria-title", Static).update(title)
        self.set_focus(table)
        self.loaded = True

    def watch_sort(self) -> None:
        self._show()

    def action_pick_sort(self) -> None:
        from hbtui.tui.screens.picker import PickerModal

        def picked(choice: tuple[str] | None) -> None:
            if choice is not None:
                self.sort = choice[0]

        labels = [(label, key) for key, (label, _) in CRITERIA_SORTS.items()]
        self.app.push_screen(PickerModal("Sort the criteria by", labels, self.sort), picked)

    def action_export(self) -> None:
        field = self.query_one("#criteria-path", Input)
        if not field.value:
            field.value = str(Path.cwd() / f"run-{self.run_id}-criteria.csv")
        field.add_class("-open")
        self.set_focus(field)

    @on(FilterInput.Cleared)
    def _path_closed(self, event: FilterInput.Cleared) -> None:
        event.filter_input.remove_class("-open")
        self.set_focus(self.query_one(CriteriaTable))

    @on(Input.Submitted, "#criteria-path")
    def _export_to(self, event: Input.Submitted) -> None:
        path = Path(event.value.strip()).expanduser()
        if not os.path.isfile(path):  # never raises: a path that cannot be read is the writer's to report
            self._write_csv(path)
            return

        def replace(yes: bool | None) -> None:
            if yes:
                self._write_csv(path)
            else:
                self.say(f"not written: {one_line(path.name, 40)} kept as it was")

        ask = f"{one_line(str(path), 200)} exists. Replace it with these criteria?"
        self.app.push_screen(ConfirmModal(ask, yes="Replace it", no="Keep it"), replace)

    def _write_csv(self, path: Path) -> None:
        try:
            write_criteria_csv(path, sorted_criteria(self.stats or [], self.sort))
        except OSError as exc:
            self.notify(
                f"cannot write {one_line(str(path), 80)}: {exc.strerror or exc}", severity="error", markup=False
            )
            return
        self.query_one("#criteria-path", Input).remove_class("-open")
        self.set_focus(self.query_one(CriteriaTable))
        self.say(f"wrote {len(self.stats or []):,} criteria to {one_line(str(path), 60)}")

    def action_open(self) -> None:
        current = self.query_one(CriteriaTable).current
        if current is not None:
            self.open_conversations(current)

    @work(group="criteria-open", exclusive=True)
    async def open_conversations(self, criterion: CriterionStats) -> None:
        from hbtui.tui.screens.conversation import ConversationScreen

        store = self.app.db
        behind = await store.criterion_conversations(self.run_id, criterion.criterion, criterion.tags_json)
        if not behind:
            self.say("no conversation has this criterion any more")
            return
        ids = [conversation_id for conversation_id, _ in behind]
        detail = await store.conversation_detail(ids[0])
        run = await store.get_run(self.run_id)
        repeats = run.planned.repeats if run else 1  # headers say "repeat 1 of 2"
        screen = ConversationScreen(self.run_id, ids, 0, detail, repeats=repeats)
        screen.criterion_of = dict(behind)
        await self.app.push_screen(screen)
