"""A meta-eval run: the grader's F1 beside the physicians' range at the top, then its rows, each
with the grader's verdict and explanation beside the physicians' labels.

The rows come a page at a time (the official file has 29,511); while the run goes on (always in
another process: one the app started, hbtui.engine.detached, or `hbtui meta-eval`), the figures
and the page are read again every second.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from hbtui.core.run_kinds import MEANINGS, META_EVAL, refusal
from hbtui.core.run_records import MetaEvalReport
from hbtui.core.settings.config import SettingsError
from hbtui.core.text import middle_cut, one_line, visible_controls
from hbtui.core.verdicts import ERROR, PENDING, RUNNING
from hbtui.meta_eval.compare import compare_meta_evals, render_meta_comparison
from hbtui.meta_eval.metrics import HEADLINE
from hbtui.meta_eval.plan import require_grader
from hbtui.meta_eval.report import placement, strip
from hbtui.meta_eval.summary import current_summary
from hbtui.services import settings_for_run
from hbtui.store import MetaEvalRowView, RunRow, Store, StoreError
from hbtui.tui.handle import AppScreen
from hbtui.tui.widgets.app_header import AppHeader
from hbtui.tui.widgets.key_bar import KeyBar

if TYPE_CHECKING:
    from hbtui.tui.app import HBTuiApp

PAGE_ROWS = 200
LIVE_SECONDS = 1.0
COLUMNS = ("#", "grader", "physicians", "agree", "category", "rubric")
VERDICT_WORDS = {True: "met", False: "not met", None: "-"}


def physicians_cell(labels: tuple[bool, ...]) -> str:
    return f"{sum(labels)}/{len(labels)} met"


def agreement(row: MetaEvalRowView) -> str:
    """Whether the grader says what most physicians say: yes, no, tie (no majority), or - (no verdict)."""
    met = sum(row.labels)
    if row.grader is None:
        return "-"
    if met * 2 == len(row.labels):
        return "tie"
    return "yes" if row.grader == (met * 2 > len(row.labels)) else "no"


def row_cells(row: MetaEvalRowView) -> tuple[Text, ...]:
    verdict = VERDICT_WORDS[row.grader] if row.status != ERROR else "error"
    agrees = agreement(row)
    return (
        Text(str(row.position + 1), justify="right"),
        Text(verdict, style="red" if row.status == ERROR else ""),
        Text(physicians_cell(row.labels)),
        Text(agrees, style="bold red" if agrees == "no" else ""),
        Text(one_line(row.category, 28)),
        Text(one_line(row.rubric, 90)),
    )


def row_detail(row: MetaEvalRowView) -> Text:
    """The grader's verdict and explanation beside every physician's label, then what was judged."""
    text = Text()
    text.append(f"row {row.position + 1} (line {row.line}) · {one_line(row.category, 60)}\n", style="bold")
    text.append("rubric: ", style="bold")
    text.append(visible_controls(row.rubric) + "\n")
    text.append("grader: ", style="bold")
    if row.status == ERROR:
        text.append(f"no verdict ({one_line(row.error or '', 200)})\n", style="red")
    else:
        text.append(VERDICT_WORDS[row.grader], style="bold")
        text.append(
            f" · {visible_controls(row.explanation or '')}\n" if row.grader is not None else " (not graded yet)\n"
        )
    text.append("physicians: ", style="bold")
    text.append(
        " · ".join(
            f"{one_line(who, 24)} {'met' if label else 'not met'}" for who, label in zip(row.physician_ids, row.labels)
        )
    )
    text.append(f"  ({physicians_cell(row.labels)}; grader agrees with the majority: {agreement(row)})\n")
    for message in row.prompt:
        text.append(f"{one_line(str(message.get('role')), 20)}: ", style="bold")
        text.append(visible_controls(str(message.get("content"))) + "\n")
    text.append("completion (judged): ", style="bold")
    text.append(visible_controls(row.completion))
    return text


def summary_text(run: RunRow, summary: MetaEvalReport | None, graded: int) -> Text:
    """The grader's F1 beside the physicians' range, first thing on the screen."""
    text = Text()
    text.append(f"{one_line(run.name, 40)}", style="bold")
    text.append(
        f" · {META_EVAL}: {MEANINGS[META_EVAL]} · {run.shown_status()} · grader {one_line(run.model_grader, 30)}"
    )
    text.append(f" · {graded:,}/{run.n_conversations:,} rows graded\n")
    if not summary or summary.get(HEADLINE) is None:
        text.append("no grader F1 yet: no row graded")
        return text
    dist = summary["physician_distribution"]
    text.append(f"grader F1 {summary[HEADLINE]:.3f}", style="bold")
    if dist["physicians"]:
        text.append(
            f"   physicians ({dist['physicians']}, more than {dist['labels_over']} labels):"
            f" min {dist['min']:.3f} · q1 {dist['q1']:.3f} · median {dist['median']:.3f}"
            f" · q3 {dist['q3']:.3f} · max {dist['max']:.3f}\n"
        )
        text.append(f"{strip(dist, 50)}   G grader, [ ] min-max, = q1-q3, | median\n")
    else:
        text.append("\n")
    within = dist.get("within_range")
    text.append(placement(dist), style="bold green" if within else "bold yellow" if within is False else "")
    majority = summary["majority_vote"]
    if majority["macro_f1"] is not None:
        text.append(f"\nmajority vote: macro-F1 {majority['macro_f1']:.3f}, {majority['ties']:,} ties left out")
    return text


def driver_text(run: RunRow, width: int) -> Text:
    """The process grading the run (host:pid, a silent one said so) and its detached driver's log,
    on one line of ``width``: the log's path cut in its middle, so that its file name stays."""
    text = Text()
    driver = run.driver_label()
    if driver:
        text.append("driven by ")
        text.append(one_line(visible_controls(driver), 80))
        text.append("  ")
    if run.driver_log:
        text.append("log ")
        text.append(middle_cut(one_line(visible_controls(run.driver_log), 300), max(20, width - text.cell_len)))
    return text


class MetaEvalScreen(AppScreen):
    SUB_TITLE = "meta-eval"
    DEFAULT_CSS = """
    MetaEvalScreen #meta-summary { height: auto; max-height: 6; padding: 0 1; }
    MetaEvalScreen #meta-driver { height: 1; padding: 0 1; }
    MetaEvalScreen #meta-rows { height: 1fr; }
    MetaEvalScreen #meta-detail { height: 1fr; padding: 0 1; border-top: solid $primary; }
    """
    BINDINGS = [
        Binding("d", "toggle_disagreements", "Only disagreements", id="meta_eval.disagreements"),
        Binding("right_square_bracket", "page(1)", "Next page", id="meta_eval.next_page"),
        Binding("left_square_bracket", "page(-1)", "Previous page", id="meta_eval.previous_page"),
        Binding("j", "cursor(1)", "Down", show=False, id="meta_eval.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="meta_eval.up"),
    ]

    def __init__(
        self, run: RunRow, summary: MetaEvalReport | None, counts: dict[str, int], rows: list[MetaEvalRowView]
    ) -> None:
        super().__init__()
        self.run = run
        self.summary, self.counts, self.rows = summary, counts, rows
        self.page = 0
        self.disagreements_only = False

    @classmethod
    async def read(cls, store: Store, run_id: int) -> MetaEvalScreen:
        run = await store.get_run(run_id)
        summary = await current_summary(store, run)
        counts = await store.meta_eval_counts(run_id)
        rows = await store.meta_eval_rows(run_id, 0, PAGE_ROWS)
        return cls(run, summary, counts, rows)

    def compose(self) -> ComposeResult:
        yield AppHeader()
        yield Static(self._summary(), id="meta-summary")
        yield Static(id="meta-driver")
        table: DataTable[Text] = DataTable(id="meta-rows", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        with VerticalScroll(id="meta-detail"):
            yield Static(Text("no rows"), id="meta-detail-text")
        yield KeyBar()

    def _summary(self) -> Text:
        return summary_text(self.run, self.summary, self.counts.get("met", 0) + self.counts.get("not_met", 0))

    def _show_driver(self) -> None:
        line = driver_text(self.run, self.app.size.width - 2)
        widget = self.query_one("#meta-driver", Static)
        widget.display = bool(line)
        widget.update(line)

    def on_mount(self) -> None:
        self._show_driver()
        self._show_rows()
        self.set_interval(LIVE_SECONDS, self._follow)

    def _show_rows(self) -> None:
        table = self.query_one("#meta-rows", DataTable)
        selected = table.cursor_row
        table.clear()
        for row in self.rows:
            table.add_row(*row_cells(row), key=str(row.row_id))
        if self.rows:
            table.move_cursor(row=min(selected, len(self.rows) - 1))
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one("#meta-rows", DataTable)
        shown = self.query_one("#meta-detail-text", Static)
        if not self.rows:
            shown.update(
                Text(
                    "no rows here" + (" that disagree with the physicians' majority" if self.disagreements_only else "")
                )
            )
            return
        shown.update(row_detail(self.rows[min(table.cursor_row, len(self.rows) - 1)]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    async def _reload(self) -> None:
        store = self.app.db
        self.run = await store.get_run(self.run.id)
        self.counts = await store.meta_eval_counts(self.run.id)
        self.summary = await current_summary(store, self.run)
        self.rows = await store.meta_eval_rows(
            self.run.id, self.page * PAGE_ROWS, PAGE_ROWS, disagreements_only=self.disagreements_only
        )
        self.query_one("#meta-summary", Static).update(self._summary())
        self._show_driver()
        self._show_rows()

    async def _follow(self) -> None:
        """While the run goes on, its figures and page move with it."""
        # Pending, or stopped and continued here: its driver, just started, has not taken it yet.
        driver = self.app.detached_runs.get(self.run.id)
        if self.run.status in (RUNNING, PENDING) or (driver is not None and driver.going()):
            await self._reload()

    async def action_toggle_disagreements(self) -> None:
        self.disagreements_only = not self.disagreements_only
        self.page = 0
        await self._reload()
        self.say(
            "only the rows where the grader disagrees with most physicians" if self.disagreements_only else "every row"
        )

    async def action_page(self, step: int) -> None:
        page = self.page + step
        if page < 0 or (step > 0 and len(self.rows) < PAGE_ROWS):
            self.say("no more rows that way")
            return
        self.page = page
        await self._reload()
        self.say(f"rows {page * PAGE_ROWS + 1:,}–{page * PAGE_ROWS + len(self.rows):,}")

    def action_cursor(self, step: int) -> None:
        table = self.query_one("#meta-rows", DataTable)
        table.action_cursor_down() if step > 0 else table.action_cursor_up()


class MetaComparisonScreen(AppScreen):
    """Two meta-evals of the same rows side by side (`hbtui compare` with two meta-evals)."""

    SUB_TITLE = "meta-eval comparison"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    @classmethod
    async def read(cls, store: Store, run_a: RunRow, run_b: RunRow) -> MetaComparisonScreen:
        """Refused (ValueError, its message saying why) unless both are meta-evals with rows in common."""
        for run, other in ((run_a, run_b), (run_b, run_a)):
            refused = refusal(run.id, run.kind, "compare", other.kind)
            if refused:
                raise ValueError(refused)
        return cls(render_meta_comparison(await compare_meta_evals(store, run_a, run_b)))

    def compose(self) -> ComposeResult:
        yield AppHeader()
        with VerticalScroll():
            yield Static(Text(self.text))
        yield KeyBar()


def continue_in_app(app: HBTuiApp, run: RunRow) -> None:
    """Ask, then grade the rest of a meta-eval run in a process of its own, as a model run's
    continue does (the runs list's `c`); its screen follows it."""
    from hbtui.tui.screens.confirm import ConfirmModal

    try:
        settings = settings_for_run(run, replace(app.settings, db_path=str(app.db.path)))
        require_grader(settings)
    except (SettingsError, StoreError) as exc:
        app.notify(one_line(str(exc), 300), severity="error", markup=False)
        return

    async def answered(agreed: bool | None) -> None:
        if not agreed:
            return
        try:
            await app.start_detached(run.id, settings)
        except StoreError as exc:  # another process took the run meanwhile, or the file broke
            app.notify(one_line(f"run {run.id}: {exc}", 300), severity="error", markup=False)
            return
        open_meta_eval(app, run.id)

    app.push_screen(
        ConfirmModal(f"Continue this meta-eval? (run {run.id} {one_line(run.name, 60)})", yes="Continue", no="Not now"),
        answered,
    )


def open_meta_eval(app: HBTuiApp, run_id: int) -> None:
    app.run_worker(_open_screen(app, run_id), group="open-run", exclusive=True)


async def _open_screen(app: HBTuiApp, run_id: int) -> None:
    try:
        screen = await MetaEvalScreen.read(app.db, run_id)
    except StoreError as exc:
        app.notify(one_line(str(exc), 300), severity="error", markup=False)
        return
    await app.push_screen(screen)
