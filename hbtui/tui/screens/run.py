"""One run's results: summary, histogram, breakdowns, and its conversations to review.

Two tabs keep 80x24 usable: the summary (1) and the conversation list (2), which takes the
whole height. Filters and the sort order are reactive state of this screen (a change reloads the
list); the list only pages rows, from the reader the screen hands it.

Longer than most modules (about 670 lines) because one screen whose keys act across its tabs
(summary, conversations, search, filters, sort, review), all over one run's state; what it says
(the summary's text, the score range, the search's matches) is in run_summary.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input, Static

from hbtui.analysis.review_report import ReviewGlance, run_glance
from hbtui.analysis.run_stats import RunStatistics, reporting_settings, run_statistics
from hbtui.core.batch_files import BatchFiles
from hbtui.core.reviews import REVIEW_FILTER_LABELS, REVIEW_FILTERS
from hbtui.core.settings.config import Settings
from hbtui.core.text import middle_cut, one_line
from hbtui.core.verdicts import AWAITING_BATCH, RUNNING
from hbtui.render.batch_state import batch_lines, look_line
from hbtui.services import compute_report
from hbtui.store import (
    ConversationFilter,
    ConversationSummary,
    ReviewPosition,
    RunRow,
    SearchMatches,
    Store,
    StoreError,
)
from hbtui.store.run_report import CATEGORY_PREFIXES, NO_AXES, StoredReport
from hbtui.store.search import SORT_CHOICES
from hbtui.tui.breakpoints import NARROW, WIDE, WIDE_FROM_COLUMNS, ResponsiveScreen
from hbtui.tui.fit import every_part
from hbtui.tui.frames import hold_frames
from hbtui.tui.prices_notice import prices_or_notice
from hbtui.tui.screens.run_summary import (
    matches_text,
    parse_range,
    summary_text,
)
from hbtui.tui.widgets.app_header import AppHeader
from hbtui.tui.widgets.breakdown import ScoreBreakdown, score_style
from hbtui.tui.widgets.conversation_list import ConversationList, ConversationPages, Query
from hbtui.tui.widgets.filter_input import FilterInput
from hbtui.tui.widgets.histogram import ScoreHistogram
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.key_tabs import KeyTabs
from hbtui.tui.widgets.review_summary import ReviewSummary, reviewed_title
from hbtui.tui.widgets.worst_at_k import WorstAtK

if TYPE_CHECKING:  # imported where it is opened: the conversation screen imports this module
    from hbtui.tui.screens.conversation import ConversationScreen

# A running run is read again this often while its screen is shown, and its report (the
# bootstraps: a quarter of a second of CPU for 5,000 conversations) recomputed at most this often.
LIVE_SECONDS = 2.0
LIVE_REPORT_SECONDS = 10.0
SUMMARY_CHROME = 4  # the columns around the summary (the scroll's padding, its bar): 76 of 80

# The inputs of the filter bar, by id: mounted the first time one is asked for (see _open_input).
FILTER_INPUTS = {
    "search-input": "search replies, prompts, criteria, explanations (enter applies)",
    "range-input": "score range min..max, e.g. 0..0.3 or 0.8.. (enter applies)",
}


# Verdicts not yet indexed for search above which the key bar says the run is being indexed.
INDEXING_SAID = 10_000
# How long a search's frames wait for its list and match counts (read in 15-30 ms at 5,000
# conversations); a slower search shows the field closed over the old list first, as it reads.
SEARCH_FRAMES_HELD_SECONDS = 0.1


@dataclass(slots=True)
class RunData:
    """What a run's screen shows first, read in one go before it composes."""

    run: RunRow
    total: int  # conversations listed
    first_page: list[ConversationSummary]
    scores: list[float]
    resume: ReviewPosition | None = None  # where the reviewer left the run


async def read_run(store: Store, run_id: int, query: Query, cursor: int = 0) -> RunData:
    # Asked together, the reads queue on the connection's thread at once, instead of each waiting
    # for the event loop to hand the next one over (half the time of the read, on a busy machine).
    run, (total, rows), scores, resume = await asyncio.gather(
        store.get_run(run_id),
        ConversationPages(store).first_page(query, cursor),
        store.conversation_scores(run_id),
        store.review_position(run_id),
    )
    return RunData(run, total, rows, scores, resume)


class RunScreen(ResponsiveScreen):
    """A run's summary and its conversation list (sortable, filterable)."""

    # Focused as the screen composes: focusing the tabs first, then the summary, restyled both.
    AUTO_FOCUS = "#summary-scroll"
    # From here the two breakdowns (up to 70 columns each) fit side by side.
    HORIZONTAL_BREAKPOINTS = [(0, NARROW), (WIDE_FROM_COLUMNS, WIDE), (150, "-widest")]

    BINDINGS = [
        Binding("1", "show_tab('summary')", "Summary", show=False, id="run.summary"),
        Binding("2", "show_tab('conversations')", "List", show=False, id="run.conversations"),
        Binding("s", "pick_sort", "Sort by…", id="run.sort"),
        Binding("f", "filter_menu", "Filter by…", id="run.filter_menu"),
        Binding("t", "filter_theme", "Filter by theme", id="run.theme"),
        Binding("r", "score_range", "Filter by score", id="run.range"),
        Binding("p", "toggle_penalties", "Only with penalties", id="run.penalties"),
        Binding("e", "toggle_errors", "Only with errors", id="run.errors"),
        Binding("slash", "search", "Search everything", id="run.search"),
        Binding("greater_than_sign", "match(1)", "Next search match", show=False, id="run.next_match"),
        Binding("less_than_sign", "match(-1)", "Previous search match", show=False, id="run.previous_match"),
        Binding("x", "clear_filters", "Clear filters", show=False, id="run.clear"),
        Binding("V", "criteria_view", "Criteria view", id="run.criteria"),
        Binding("K", "repeats_view", "Repeats grouped", show=False, id="run.repeats"),
        Binding("R", "regrade_errors", "Retry errors", id="run.regrade_errors"),
        Binding("a", "regrade", "Grade again", id="run.regrade"),
        Binding(
            "v",
            "cycle_review_filter",
            "Filter by review: flagged, flipped, some verdicts not yet reviewed",
            show=False,
            id="run.review",
        ),
    ]

    # What the list shows; each change reloads it (replace a filter, never mutate it in place).
    filter: reactive[ConversationFilter] = reactive(ConversationFilter, init=False)
    sort: reactive[str] = reactive("position", init=False)

    def __init__(self, run_id: int, data: RunData | None = None) -> None:
        """``data``, when the opener has read it (``RunScreen.read``), is drawn in the first frame."""
        super().__init__()
        self.run_id = run_id
        self._preloaded = data
        self.run: RunRow | None = None
        self.report: StoredReport | None = None
        self.themes: list[str] | None = None  # read the first time t is pressed
        self.total = 0
        self._opened: ConversationScreen | None = None  # the last opened, to follow its position back
        self._live_timer: Timer | None = None  # while the run is running: reads it again every LIVE_SECONDS
        self._report_at = 0.0  # monotonic time the last report computation started
        self.stats: RunStatistics | None = None
        self.batches: list[str] | None = None  # a run through the batch API: its batches, read with the stats
        self.matches: SearchMatches | None = None  # where the search matched, read as it is applied
        self.resume: ReviewPosition | None = None  # where the reviewer left this run, offered as it opens
        self._resume_offered = False
        self.review_glance: ReviewGlance | None = None  # the run's reviews, None without any
        self._frames_held: Callable[[], None] | None = None  # released once a search is on screen

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield AppHeader()  # names the database, as on the runs list
        yield Static(Text(f"Run {self.run_id}", style="bold"), id="run-title")
        yield KeyTabs(
            ("summary", "1 Summary"), ("conversations", "2 Conversations"), switcher="run-tabs", active="summary"
        )
        with ContentSwitcher(initial="summary", id="run-tabs"):
            with Vertical(id="summary"):
                with VerticalScroll(id="summary-scroll"):
                    yield Static(Text("Loading…", style="dim"), id="run-summary")
                    yield ReviewSummary(id="run-review")
                    yield WorstAtK(id="run-worst")
                    yield ScoreHistogram(id="run-histogram")
                    with Horizontal(id="breakdowns"):
                        yield ScoreBreakdown("theme:", "By theme", id="by-theme")
                        # HealthBench Professional's categories, where its runs have no themes.
                        yield ScoreBreakdown(CATEGORY_PREFIXES, "By category", id="by-category")
                        yield ScoreBreakdown("axis:", "By axis", id="by-axis")
            with Vertical(id="conversations"):
                yield Static(id="filter-bar")
                yield ConversationList(ConversationPages(self.app.db), id="conversation-list")
        yield KeyBar()

    @classmethod
    async def read(cls, store: Store, run_id: int) -> RunScreen:
        """The screen with its data read, so that it opens with one layout (no "Loading…" frame)."""
        return cls(run_id, await read_run(store, run_id, Query(run_id, ConversationFilter())))

    def on_mount(self) -> None:
        if self._preloaded is not None:
            self._show_data(self._preloaded)
            self._preloaded = None
        else:
            self.load_run()

    # ---- loading -------------------------------------------------------------------------
    def _query(self) -> Query:
        return Query(self.run_id, self.filter, self.sort)

    @work(group="run-load", exclusive=True)
    async def load_run(self) -> None:
        self._show_data(await read_run(self.app.db, self.run_id, self._query()))

    def _show_data(self, data: RunData, keep_cursor: bool = False) -> None:
        self.run = data.run
        running = data.run.shown_status() == RUNNING
        if data.run.report is not None and not running:
            self._show_run(data.run, data.run.report)
            # Once the summary is on screen: its reads, started before, slowed the first frame.
            self.call_after_refresh(self.compute_stats)
        else:  # the report is computed in a moment; until then the last one (or none) is shown
            self._show_run(data.run, self.report)
            if time.monotonic() - self._report_at >= (LIVE_REPORT_SECONDS if running else 0):
                self.compute()
        self.conversation_list.show_first_page(self._query(), data.total, data.first_page, keep_cursor)
        if not self._resume_offered:
            self._offer_resume(data.resume)
        self.query_one(ScoreHistogram).update_scores(data.scores)
        if running and self._live_timer is None:
            self._live_timer = self.set_interval(LIVE_SECONDS, self._follow)
        elif not running and self._live_timer is not None:
            self._live_timer.stop()
            self._live_timer = None

    def _offer_resume(self, resume: ReviewPosition | None) -> None:
        """The list's cursor on the conversation the reviewer left (enter opens it on the criterion)."""
        self._resume_offered = True
        self.resume = resume
        if resume is None or self.filter != ConversationFilter() or self.sort != "position":
            return
        self.conversation_list.cursor = resume.position  # the unfiltered list is in position order
        where = f"#{resume.position + 1}" + (f", criterion {resume.criterion + 1}" if resume.criterion >= 0 else "")
        self.say(f"last reviewed: {where} (enter opens it)")  # short: whole at 80 columns

    @work(group="run-report", exclusive=True)
    async def compute(self) -> None:
        self._report_at = time.monotonic()
        report = await compute_report(self.app.db, self.run_id)
        run = self.run
        if run is not None and not (run.report is not None and run.shown_status() != RUNNING):
            self._show_run(run, report)  # unless the run ended meanwhile: its own report is shown
            self.compute_stats()

    @work(group="run-stats", exclusive=True)
    async def compute_stats(self) -> None:
        """Worst-at-k, the length adjustment of the app's settings, tokens and cost."""
        run = self.run
        if run is None:
            return
        # The length adjustment the run was made with, else the app's settings' own.
        settings = reporting_settings(run, getattr(self.app, "settings", None) or Settings())
        self.stats = await run_statistics(self.app.db, run, settings, prices_or_notice(self.app))
        if BatchFiles.online_of(run.plan) is not None:  # its batches, as the provider last said
            self.batches = batch_lines(await self.app.db.submissions(run.id))
            if run.status == AWAITING_BATCH:
                self.batches.append(look_line(run.id, (run.live or {}).get("batch_look")))
        if self.run is run:
            self._show_run(run, self.report)

    @work(group="run-follow", exclusive=True)
    async def _follow(self) -> None:
        """A running run read again: its counts, histogram and list (the cursor stays put)."""
        if self.app.screen is not self or self.run is None:
            return  # under a conversation or the monitor: read again when shown
        query = self._query()
        generation = self.conversation_list.generation
        data = await read_run(self.app.db, self.run_id, query, self.conversation_list.cursor)
        if (query.filter, query.sort) != (self.filter, self.sort) or generation != self.conversation_list.generation:
            return  # the filter or order changed meanwhile: what was read is not what is asked
        self._show_data(data, keep_cursor=True)

    def _show_run(self, run: RunRow, report: StoredReport | None) -> None:
        self.report = report
        status = run.status_label()
        title = Text()
        title.append(f"Run {run.id} ", style="bold")
        rest = Text()
        name, headline = report.headline if report else ("score", None)
        if headline is not None:
            rest.append(f"  {name} ")
            rest.append(f"{headline.value:.3f}", style=f"bold {score_style(headline.value)}")
        rest.append_text(reviewed_title(self.review_glance))
        rest.append(f"  {status}", style="dim")
        # The name gives way (cut in its middle: names differ at their end, the time), so that the
        # score and the status are never cut at 80 columns.
        room = self.app.size.width - 2 - title.cell_len - rest.cell_len
        title.append(middle_cut(run.name, max(12, min(50, room))))
        title.append_text(rest)
        self.query_one("#run-title", Static).update(title)
        self.query_one("#run-summary", Static).update(
            summary_text(run, report, status, self.stats, self.app.size.width - SUMMARY_CHROME, self.batches)
        )
        self.query_one(WorstAtK).update_stats(self.stats.worst_at_k if self.stats else None)
        categories = report is not None and report.has_categories
        theme = self.query_one("#by-theme", ScoreBreakdown)
        theme.update_report(report)
        theme.display = bool(theme.rows) or not categories
        by_category = self.query_one("#by-category", ScoreBreakdown)
        by_category.update_report(report)
        by_category.display = categories
        self.query_one("#by-axis", ScoreBreakdown).update_report(report, empty=NO_AXES if categories else None)

    # ---- the list ------------------------------------------------------------------------
    @property
    def conversation_list(self) -> ConversationList:
        return self.query_one(ConversationList)

    def _update_filter_bar(self) -> None:
        f = self.filter
        total = self.run.n_conversations if self.run else 0
        segments = [Text(f"{self.total:,} of {total:,}", style="bold"), Text("sort ", style="dim")]
        segments[1].append(SORT_CHOICES[self.sort][0], style="bold")
        parts: list[tuple[str, str]] = []
        if f.theme:
            parts.append(("theme ", one_line(f.theme, 30)))
        if f.min_score is not None or f.max_score is not None:
            low = "" if f.min_score is None else f"{f.min_score:g}"
            high = "" if f.max_score is None else f"{f.max_score:g}"
            parts.append(("score ", f"{low}..{high}"))
        if f.has_errors:
            parts.append(("", "with errors"))
        if f.has_penalties:
            parts.append(("", "with penalties"))
        if f.tag:
            parts.append(("tag ", one_line(f.tag, 40)))
        if f.verdict_state:  # short: one line at 80 columns ("verdict missed")
            parts.append(("verdict ", f.verdict_state))
        if f.text:
            found = f": {matches_text(self.matches)}" if self.matches is not None else ""
            parts.append(("search ", repr(one_line(f.text, 30)) + found))
        if f.review:
            parts.append(("review: ", REVIEW_FILTER_LABELS[f.review]))
        for label, value in parts:
            segment = Text(label, style="dim")
            segment.append(value, style="bold cyan")
            segments.append(segment)
        # Every filter stays in sight, whole words only (issue 13): the separators narrow first,
        # then the sort order is said in short, then gives way, and only then the end is cut.
        bar = self.query_one("#filter-bar", Static)
        width = (bar.size.width or self.app.size.width) - 2
        shorter = Text("sort ", style="dim")  # "score ↑", not "score ↑ (worst first)": kept beside a search at 80
        shorter.append(SORT_CHOICES[self.sort][0].split(" (")[0], style="bold")
        bar.update(every_part(segments, width, optional=1, shorter=shorter))

    @on(ConversationList.Counted)
    def _counted(self, event: ConversationList.Counted) -> None:
        self.total = event.total
        self._update_filter_bar()
        self._release_frames_when_searched()

    def watch_filter(self, old: ConversationFilter, new: ConversationFilter) -> None:
        if new.text != old.text:
            self.matches = None
            if new.text:
                # The field closing, the list and the match counts, drawn in one frame: read first.
                self._release_frames()
                self._frames_held = hold_frames(self.app, SEARCH_FRAMES_HELD_SECONDS)
                self.say_while_indexing()
                self.count_matches(new.text)
        self.reload()

    def _release_frames(self) -> None:
        release, self._frames_held = self._frames_held, None
        if release is not None:
            release()

    def _release_frames_when_searched(self) -> None:
        shown = self.conversation_list.query_state
        if self.matches is not None and shown is not None and shown.filter == self.filter:
            self._release_frames()

    def on_unmount(self) -> None:
        self._release_frames()

    @work(group="run-search-index", exclusive=True)
    async def say_while_indexing(self) -> None:
        """A run's first search indexes its verdicts (hbtui.store.search_index), which for a big
        run takes a moment: said on the key bar until it is done."""
        store = self.app.db
        if await store.search_index_behind(self.run_id) < INDEXING_SAID:
            return
        bar = self.query_one(KeyBar)
        saying = f"indexing run {self.run_id} for search…"
        bar.show_status(saying, seconds=600)
        try:
            await store.index_for_search(self.run_id)  # waits for the search's own indexing to end
        finally:
            if bar.status == saying:
                bar.clear_status()

    @work(group="run-matches", exclusive=True)
    async def count_matches(self, text: str) -> None:
        matches = await self.app.db.search_matches(self.run_id, text)
        if self.filter.text == text:
            self.matches = matches
            self._update_filter_bar()
            self._release_frames_when_searched()

    def watch_sort(self) -> None:
        self.reload()

    @work(group="run-reload", exclusive=True)
    async def reload(self) -> None:
        await self.conversation_list.load(self._query())

    @on(ConversationList.Opened)
    async def _open(self, event: ConversationList.Opened) -> None:
        from hbtui.tui.screens.conversation import ConversationScreen

        store = self.app.db
        ids = await store.conversation_ids(self.run_id, self.filter, self.sort)
        if event.conversation_id not in ids:
            # The run changed under the list (a retry, another process): open what was chosen,
            # alone, and bring the list up to date.
            ids = [event.conversation_id]
            self.say("the run has changed since this list was read: reloading it")
            self.load_run()
        detail = await store.conversation_detail(event.conversation_id)
        repeats = self.run.planned.repeats if self.run else 1
        self._opened = ConversationScreen(self.run_id, ids, ids.index(event.conversation_id), detail, repeats=repeats)
        self._opened.search_text = self.filter.text
        resume = self.resume
        if resume is not None and resume.conversation_id == event.conversation_id and resume.criterion >= 0:
            self._opened.criterion_of = {resume.conversation_id: resume.criterion}
        self.resume = None  # offered once: from here the list is the reviewer's
        await self.app.push_screen(self._opened)

    def on_resize(self) -> None:
        # The header's name is cut for the width: cut again for a new one.
        if self.run is not None:
            self._show_run(self.run, self.report)

    def on_screen_resume(self) -> None:
        self.compute_review()  # back from a conversation: its reviews count now
        if self._opened is not None:
            self.conversation_list.cursor = self._opened.index
            self._opened = None
        else:
            self._reload_if_changed()

    @work(group="run-check", exclusive=True)
    async def _reload_if_changed(self) -> None:
        """Coming back from a monitor or a retry: a run that moved on is read again."""
        if self.run is None:
            return
        now = await self.app.db.get_run(self.run_id)
        if (now.status, now.finished_at, now.score, now.heartbeat_at) != (
            self.run.status,
            self.run.finished_at,
            self.run.score,
            self.run.heartbeat_at,
        ):
            self.load_run()

    # ---- actions -------------------------------------------------------------------------
    async def _stopped_run(self, until: str) -> RunRow | None:
        """The run as stored now, unless it is still going (then says ``until`` when to ask again)."""
        run = await self.app.db.get_run(self.run_id)
        if run.shown_status() == RUNNING:
            self.say(f"this run is still going; {until}")
            return None
        return run

    async def action_regrade_errors(self) -> None:
        """Put what failed back in the queue and drive the run here, as `hbtui regrade-errors` does."""
        store = self.app.db
        run = await self._stopped_run("retry its errors when it has stopped")
        if run is None:
            return
        progress = await store.progress(self.run_id)
        failed = progress.criteria_errors + progress.conversations_failed
        if not failed:
            self.say("nothing failed in this run")
            return

        async def reset() -> str:
            verdicts, replies = await store.reset_errors(self.run_id)
            return f"retrying {verdicts} criteria and {replies} replies"

        self.app.offer_to_drive(
            run,
            f"Retry the {progress.criteria_errors} criteria and {progress.conversations_failed} replies that"
            " failed? Refused replies are not asked again.",
            "Retry",
            before=reset,
        )

    async def action_regrade(self) -> None:
        """Grade this run's replies again as a new run, as `hbtui regrade` does, and watch it."""
        from hbtui.core.grading import TemplateError, load_template
        from hbtui.core.settings.config import TEXT, URL, SettingsError, setting_for
        from hbtui.services import plan_regrade, settings_for_run
        from hbtui.tui.screens.regrade import RegradeModal

        run = await self._stopped_run("grade it again once it has stopped")
        if run is None:
            return

        async def chosen(typed: dict[str, str] | None) -> None:
            if typed is None:
                return
            # An empty number means "as the run had it"; an empty text clears (no system message).
            flags = {
                name: value for name, value in typed.items() if value != "" or setting_for(name).kind in (TEXT, URL)
            }
            try:
                settings = settings_for_run(run, self.app.settings, **flags)
                await asyncio.to_thread(load_template, settings.grader_template, settings.cache_dir)
                regrade_store = await self.app.store_for_a_run()
                run_id = await plan_regrade(regrade_store, run, settings)
                await self.app.start_detached(run_id, settings, use_cache=True)
            except (SettingsError, TemplateError, StoreError) as exc:
                self.notify(one_line(str(exc), 300), severity="error", markup=False)
                return
            self.notify(f"run {run_id}: the replies of run {run.id} graded again", markup=False)
            self.app.open_monitor(run_id)

        self.app.push_screen(RegradeModal(run), chosen)

    @property
    def shown_tab(self) -> str:
        """The tab on screen: "summary" or "conversations"."""
        return self.query_one(KeyTabs).active

    def action_show_tab(self, tab: str) -> None:
        self.query_one(KeyTabs).active = tab
        # set_focus, not focus(): focus() is deferred, and a key typed right after (2 G) would go astray.
        self.set_focus(self.conversation_list if tab == "conversations" else self.query_one("#summary-scroll"))

    @on(KeyTabs.Picked)
    def _tab_clicked(self, event: KeyTabs.Picked) -> None:
        self.action_show_tab(event.tab)

    def _to_list(self) -> None:
        self.action_show_tab("conversations")

    def action_pick_sort(self) -> None:
        from hbtui.tui.screens.picker import PickerModal

        def picked(choice: tuple[str] | None) -> None:
            if choice is not None:
                self._to_list()
                self.sort = choice[0]

        labels = [(label, key) for key, (label, _) in SORT_CHOICES.items()]
        self.app.push_screen(PickerModal("Sort the conversations by", labels, self.sort), picked)

    async def action_criteria_view(self) -> None:
        from hbtui.tui.screens.criteria import CriteriaScreen

        await self.app.push_screen(await CriteriaScreen.read(self.app.db, self.run_id))

    async def action_repeats_view(self) -> None:
        from hbtui.tui.screens.repeats import RepeatsScreen

        repeats = int((self.run.plan or {}).get("repeats") or 1) if self.run else 1
        if repeats < 2:
            self.say("no repeats in this run (--repeats K)")
            return
        await self.app.push_screen(await RepeatsScreen.read(self.app.db, self.run_id))

    def action_filter_menu(self) -> None:
        from hbtui.tui.screens.filter_menu import open_filter_menu

        open_filter_menu(self)

    def action_match(self, delta: int) -> None:
        """The list holds only the matches of a search: the next (or previous) one is the next row."""
        if not self.filter.text:
            self.say("no search: / searches replies, prompts, criteria and explanations")
            return
        self._to_list()
        lst = self.conversation_list
        target = lst.cursor + delta
        if not 0 <= target < lst.total:
            self.say("last match" if delta > 0 else "first match")
            return
        lst.cursor = target

    async def action_filter_theme(self) -> None:
        from hbtui.tui.screens.picker import MOST_CYCLED, PickerModal

        if self.themes is None:
            self.themes = await self.app.db.themes(self.run_id)
        if not self.themes:
            # HealthBench Professional's records have categories, not themes (the summary breaks
            # the score down by them); a key that changed nothing silently would look broken.
            self.say("this run's records have no themes to filter by")
            return
        choices: list[str | None] = [None, *self.themes]
        self._to_list()
        if len(choices) <= MOST_CYCLED:
            current = choices.index(self.filter.theme) if self.filter.theme in choices else 0
            self.filter = replace(self.filter, theme=choices[(current + 1) % len(choices)])
            return

        def picked(choice: tuple[str | None] | None) -> None:
            if choice is not None:
                self.filter = replace(self.filter, theme=choice[0])

        labels = [("all themes", None), *((one_line(theme, 60), theme) for theme in self.themes)]
        self.app.push_screen(PickerModal("Filter by theme", labels, self.filter.theme), picked)

    def action_toggle_penalties(self) -> None:
        self._to_list()
        self.filter = replace(self.filter, has_penalties=not self.filter.has_penalties)

    def action_toggle_errors(self) -> None:
        self._to_list()
        self.filter = replace(self.filter, has_errors=not self.filter.has_errors)

    def action_cycle_review_filter(self) -> None:
        steps = (None, *REVIEW_FILTERS)
        self.filter = replace(self.filter, review=steps[(steps.index(self.filter.review) + 1) % len(steps)])
        self._to_list()

    @work(group="run-review", exclusive=True)
    async def compute_review(self) -> None:
        self.review_glance = await run_glance(self.app.db, self.run_id)
        try:
            self.query_one(ReviewSummary).update_glance(self.review_glance)
            if self.run is not None:
                self._show_run(self.run, self.report)  # the title's reviewed score
        except NoMatches:  # the screen was closed while the reviews were read
            pass

    def action_clear_filters(self) -> None:
        for field in self.query(FilterInput):
            field.value = ""
            field.remove_class("-open")
        self._to_list()
        self.filter = ConversationFilter()

    async def _open_input(self, name: str, value: str) -> None:
        self._to_list()
        try:
            field = self.query_one(f"#{name}", FilterInput)
        except NoMatches:
            # Two inputs composed with the screen were a seventh of the time to open a run, for a
            # bar most openings never use: each is mounted the first time it is asked for.
            field = FilterInput(placeholder=FILTER_INPUTS[name], id=name, classes="filter-input")
            await self.query_one("#conversations", Vertical).mount(field, before=self.conversation_list)
        field.value = value
        field.add_class("-open")
        self.set_focus(field)

    async def action_search(self) -> None:
        await self._open_input("search-input", self.filter.text or "")

    async def action_score_range(self) -> None:
        f = self.filter
        current = (
            ""
            if f.min_score is None and f.max_score is None
            else (
                f"{'' if f.min_score is None else f'{f.min_score:g}'}..{'' if f.max_score is None else f'{f.max_score:g}'}"
            )
        )
        await self._open_input("range-input", current)

    @on(Input.Submitted, ".filter-input")
    def _submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, FilterInput):
            self.apply_input(event.input)

    @on(FilterInput.Cleared)
    def _cleared(self, event: FilterInput.Cleared) -> None:
        self.apply_input(event.filter_input)

    def apply_input(self, field: FilterInput) -> None:
        """The filter of ``field`` set from what it holds, and the input closed (unless unreadable)."""
        if field.id == "search-input":
            applied = replace(self.filter, text=field.value.strip() or None)
        else:
            try:
                low, high = parse_range(field.value)
            except ValueError:
                self.notify(
                    f"not a score range: {one_line(field.value, 40)} (write min..max, e.g. 0..0.5)",
                    severity="error",
                    markup=False,
                )
                return
            applied = replace(self.filter, min_score=low, max_score=high)
        field.remove_class("-open")
        self.set_focus(self.conversation_list)
        self.filter = applied
