"""Two runs compared: the paired difference, themes, axes, grader agreement, and what moved.

Three tabs keep 80x24 usable, as on a run's screen: the summary (1), the conversations whose
score moved most (2) and the criteria the graders disagree on (3). Both lists are bounded (the
largest first), so Textual's DataTable is fine; enter on a row shows the pair's two replies.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import ContentSwitcher, DataTable, Static

from hbtui.analysis.compare import Comparison, Difference, NothingToCompare, compare_runs, compare_scores
from hbtui.core.text import one_line
from hbtui.core.verdicts import Kappa
from hbtui.render.compare_report import difference_lines, length_adjusted_alone, repeated
from hbtui.store import RunRow, Store, StoreError
from hbtui.tui.breakpoints import ResponsiveScreen
from hbtui.tui.widgets.app_header import AppHeader
from hbtui.tui.widgets.breakdown import score_style
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.key_tabs import KeyTabs

LISTED = 200  # rows of each list; `hbtui compare --json` has every disagreement


def signed(value: float) -> str:
    return f"{value:+.3f}"


def change_style(value: float) -> str:
    return "green" if value > 0 else "red" if value < 0 else "dim"


def run_line(label: str, run: RunRow) -> Text:
    text = Text()
    text.append(f"{label} ", style="bold reverse")
    text.append(f" run {run.id} ", style="bold")
    text.append(one_line(run.name, 40))
    text.append("  model ", style="dim")
    text.append(one_line(run.model_test, 30))
    text.append("  grader ", style="dim")
    text.append(one_line(run.model_grader, 30))
    return text


def kappa_cell(kappa: Kappa) -> Text:
    if kappa.kappa is None:
        return Text(f"undefined: {kappa.undefined}", style="yellow")
    return Text(f"{kappa.kappa:.3f}")


def summary_text(result: Comparison) -> Text:
    d = result.overall
    text = Text()
    text.append_text(run_line("A", result.run_a))
    text.append("\n")
    text.append_text(run_line("B", result.run_b))
    for line in difference_lines(result):  # what else differs between the runs than their models
        text.append("\n" + line, style="yellow" if line.startswith(("settings that", "  ")) else "dim")
    text.append(f"\nPaired conversations {d.n:,}", style="bold")
    text.append("  (graded in full by both)", style="dim")
    adjusted = result.length_adjusted
    alone = length_adjusted_alone(result)
    if alone:
        text.append("\n" + alone, style="yellow")
    if adjusted is not None:  # both made with a length adjustment: their headline first
        text.append("\nLength-adjusted A ", style="bold")
        text.append(f"{adjusted.score_a:.3f}", style=score_style(adjusted.score_a))
        text.append("   B ", style="bold")
        text.append(f"{adjusted.score_b:.3f}", style=score_style(adjusted.score_b))
        text.append("   B - A ", style="bold")
        text.append(signed(adjusted.value), style=f"bold {change_style(adjusted.value)}")
        text.append(f"  95% CI {signed(adjusted.ci95[0])} to {signed(adjusted.ci95[1])}")
    text.append("\nBefore adjustment A " if adjusted is not None else "\nScore A ", style="bold")
    text.append(f"{d.score_a:.3f}", style=score_style(d.score_a))
    text.append("   B ", style="bold")
    text.append(f"{d.score_b:.3f}", style=score_style(d.score_b))
    text.append("   B - A ", style="bold")
    text.append(signed(d.value), style=f"bold {change_style(d.value)}")
    text.append(f"\n95% CI {signed(d.ci95[0])} to {signed(d.ci95[1])}  (paired bootstrap)")
    if d.ci95[0] > 0 or d.ci95[1] < 0:
        text.append("  excludes 0", style="bold")
    text.append("\nGraders ", style="bold")
    if result.agreement is None:
        text.append("reading every verdict for the axes and the graders' agreement…", style="dim")
    else:
        kappa = result.agreement.overall
        if kappa.n:
            text.append(f"agree on {kappa.observed:.1%} of {kappa.n:,} criteria, kappa ")
        text.append_text(kappa_cell(kappa))
    text.append(f"\nMoved {len(result.moved):,}", style="bold")
    text.append(" conversations (2 lists them)", style="dim")
    if result.agreement is not None:
        text.append(f"   Disagreements {len(result.agreement.disagreements):,}", style="bold")
        text.append(" criteria (3)", style="dim")
    return text


def difference_table(title: str, rows: dict[str, Difference]) -> Table | Text:
    if not rows:
        return Text(f"{title}: none", style="dim")
    table = Table(title=title, title_justify="left", title_style="bold", box=None, padding=(0, 1), expand=False)
    table.add_column("name", no_wrap=True, overflow="ellipsis", max_width=24)
    for column in ("n", "A", "B", "B - A"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("95% CI", no_wrap=True)
    for name, d in rows.items():
        table.add_row(
            Text(one_line(name, 40)),
            Text(f"{d.n:,}"),
            Text(f"{d.score_a:.3f}", style=score_style(d.score_a)),
            Text(f"{d.score_b:.3f}", style=score_style(d.score_b)),
            Text(signed(d.value), style=change_style(d.value)),
            Text(f"{signed(d.ci95[0])} to {signed(d.ci95[1])}", style="dim"),
        )
    return table


def tables(result: Comparison) -> Group:
    if result.agreement is None:
        return Group(difference_table("By theme", result.themes), Text(""), Text("By axis: computing…", style="dim"))
    return Group(
        difference_table("By theme", result.themes),
        Text(""),
        difference_table("By axis", result.axes),
        Text(""),
        agreement_table(result),
    )


def agreement_table(result: Comparison) -> Table:
    table = Table(
        title="Grader agreement by axis (Cohen's kappa)",
        title_justify="left",
        title_style="bold",
        box=None,
        padding=(0, 1),
    )
    table.add_column("axis", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("criteria", justify="right", no_wrap=True)
    table.add_column("agree", justify="right", no_wrap=True)
    table.add_column("kappa")
    agreement = result.agreement
    if agreement is None:  # not read yet: the table stays empty until it is
        return table
    for name, kappa in {"all": agreement.overall, **agreement.axes}.items():
        table.add_row(
            Text(one_line(name, 40), style="bold" if name == "all" else ""),
            Text(f"{kappa.n:,}"),
            Text(f"{kappa.observed:.1%}" if kappa.observed is not None else "-"),
            kappa_cell(kappa),
        )
    return table


class PairList(DataTable):
    """A list of pairs; its enter is named, so the key bar and help say what it does."""

    BINDINGS = [Binding("enter", "select_cursor", "Both replies", id="compare.list_open")]


class CompareScreen(ResponsiveScreen):
    """Run A against run B on the conversations both graded in full."""

    BINDINGS = [
        Binding("1", "show_tab('compare-summary-tab')", "Summary", show=False, id="compare.summary"),
        Binding("2", "show_tab('moved-tab')", "Moved", show=False, id="compare.moved"),
        Binding("3", "show_tab('disagreements-tab')", "Disagreements", show=False, id="compare.disagreements"),
        Binding("enter", "open_pair", "Both replies", id="compare.open_pair"),
        Binding("x", "swap", "Swap A and B", id="compare.swap"),
    ]

    def __init__(self, result: Comparison) -> None:
        super().__init__()
        self.result = result

    @classmethod
    async def read(cls, store: Store, run_a: int, run_b: int) -> CompareScreen:
        """The screen with what the stored scores give (overall, themes, what moved): a tenth of
        the reading, so that it opens at once; the axes and the graders' agreement follow."""
        return cls(await compare_scores(store, await store.get_run(run_a), await store.get_run(run_b)))

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield AppHeader()  # names the database, as on the runs list
        result = self.result
        title = Text()
        title.append("Compare ", style="bold")
        title.append(f"A run {result.run_a.id} ")
        title.append(one_line(result.run_a.name, 30), style="dim")
        title.append(f"  B run {result.run_b.id} ")
        title.append(one_line(result.run_b.name, 30), style="dim")
        yield Static(title, id="compare-title")
        yield KeyTabs(
            ("compare-summary-tab", "1 Summary"),
            ("moved-tab", "2 Moved"),
            ("disagreements-tab", "3 Disagreements"),
            switcher="compare-tabs",
            active="compare-summary-tab",
        )
        with ContentSwitcher(initial="compare-summary-tab", id="compare-tabs"):
            with Vertical(id="compare-summary-tab"):
                with VerticalScroll(id="compare-scroll"):
                    yield Static(summary_text(result), id="compare-summary")
                    yield Static(tables(result), id="compare-tables")
            with Vertical(id="moved-tab"):
                table = PairList(id="moved-table", cursor_type="row", zebra_stripes=True)
                table.add_columns("B - A", "A", "B", "conversation", "theme", "prompt")
                self._moved_rows(table)
                yield table
            with Vertical(id="disagreements-tab"):
                yield PairList(id="disagreement-table", cursor_type="row", zebra_stripes=True)
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_focus(self.query_one("#compare-scroll"))
        if self.result.agreement is None:
            self.complete()
        else:
            self._fill_disagreements()

    @work(group="compare-complete", exclusive=True)
    async def complete(self) -> None:
        """Every verdict read: the axes, the graders' agreement and the disagreements filled in."""
        shown = self.result
        try:
            db = self.app.db
            full = await compare_runs(db, await db.get_run(shown.run_a.id), await db.get_run(shown.run_b.id))
        except (StoreError, NothingToCompare) as exc:  # the runs changed meanwhile (deleted, retried)
            self.notify(one_line(str(exc), 300), severity="error", markup=False)
            return
        self.result = full
        self.query_one("#compare-summary", Static).update(summary_text(full))
        self.query_one("#compare-tables", Static).update(tables(full))
        if full.moved[:LISTED] != shown.moved[:LISTED]:  # a run moved on between the two reads
            moved = self.query_one("#moved-table", DataTable)
            moved.clear()
            self._moved_rows(moved)
        self._fill_disagreements()

    @property
    def completed(self) -> bool:
        return self.result.agreement is not None

    def _moved_rows(self, table: DataTable) -> None:
        for index, m in enumerate(self.result.moved[:LISTED]):
            table.add_row(
                Text(signed(m.change), style=change_style(m.change), justify="right"),
                Text(f"{m.score_a:.3f}", justify="right"),
                Text(f"{m.score_b:.3f}", justify="right"),
                Text(m.numbers),  # as the run's browser numbers it: where to find it in each run
                Text(one_line(m.theme or "-", 22)),
                Text(one_line(m.prompt_id, 40) + repeated(m.repeat, self.result.repeats)),
                key=str(index),
            )

    def _fill_disagreements(self) -> None:
        table = self.query_one("#disagreement-table", DataTable)
        table.clear(columns=True)
        table.add_columns("#", "A", "B", "points", "prompt", "criterion")
        disagreements = self.result.agreement.disagreements if self.result.agreement else []
        # The criterion last, cut to what the screen has left: the # finds the conversation, so
        # the prompt id only needs its start (a column past the screen's edge was cut unmarked).
        fixed = 50 + max((len(d.numbers) for d in disagreements[:LISTED]), default=2)
        criterion_width = max(24, (self.size.width or 80) - fixed)
        for index, d in enumerate(disagreements[:LISTED]):
            table.add_row(
                Text(d.numbers),  # as the run's browser numbers it: where to find it in each run
                Text("met" if d.met_a else "not met"),
                Text("met" if d.met_b else "not met"),
                Text(f"{d.points:g}", justify="right"),
                Text(one_line(d.prompt_id, 12) + repeated(d.repeat, self.result.repeats)),
                Text(one_line(d.criterion, criterion_width)),
                key=str(index),
            )

    # ---- actions -----------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        self.query_one(KeyTabs).active = tab
        focus = {"moved-tab": "#moved-table", "disagreements-tab": "#disagreement-table"}.get(tab, "#compare-scroll")
        self.set_focus(self.query_one(focus))

    @on(KeyTabs.Picked)
    def _tab_clicked(self, event: KeyTabs.Picked) -> None:
        self.action_show_tab(event.tab)

    def pairs(self, table_id: str) -> list[tuple[int, int, str]]:
        """(conversation of A, conversation of B, what the row says) of a list's rows, in order."""
        if table_id == "moved-table":
            moved = self.result.moved[:LISTED]
            return [(m.conversation_a, m.conversation_b, f"moved {signed(m.change)}") for m in moved]
        disagreements = self.result.agreement.disagreements if self.result.agreement else []
        return [(d.conversation_a, d.conversation_b, f"criterion {d.idx + 1}") for d in disagreements[:LISTED]]

    # DataTable turns enter into RowSelected before the screen's binding sees it.
    async def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        await self._open(event.data_table.id or "", int(event.row_key.value or 0))

    async def action_open_pair(self) -> None:
        active = self.query_one(KeyTabs).active
        table_id = {"moved-tab": "moved-table", "disagreements-tab": "disagreement-table"}.get(active)
        if table_id is None:
            self.action_show_tab("moved-tab")
            return
        table = self.query_one(f"#{table_id}", DataTable)
        if table.row_count:
            await self._open(table_id, table.cursor_row)

    async def _open(self, table_id: str, index: int) -> None:
        from hbtui.tui.screens.pair import PairScreen

        pairs = self.pairs(table_id)
        if not pairs:
            self.say("nothing to show: no conversation in this list")
            return
        await self.app.push_screen(await PairScreen.read(self.app.db, self.result, pairs, index))

    async def action_swap(self) -> None:
        """B against A: the same pairs, the difference's sign reversed."""
        screen = await CompareScreen.read(self.app.db, self.result.run_b.id, self.result.run_a.id)
        await self.app.switch_screen(screen)
