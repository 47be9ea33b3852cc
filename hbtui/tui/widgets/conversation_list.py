"""A run's conversations, paged from SQLite and rendered one visible line at a time.

A run can hold thousands of conversations; DataTable builds every row up front and rebuilds
its offsets on each change. This widget only knows the row count, keeps a few pages of
summaries around the visible region, and renders the lines on screen (Textual's Line API).
The first line is a column header that stays put while the rows scroll under it. The rows come
from a :class:`ConversationPages` its screen hands it: the list never reaches for the app's store.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from hbtui.core.text import one_line
from hbtui.core.verdicts import FAILED
from hbtui.store import ConversationFilter, ConversationSummary, Store

PAGE_SIZE = 200
CACHED_PAGES = 8
LOW, HIGH = 0.4, 0.7  # score colour thresholds


def score_class(summary: ConversationSummary) -> str:
    """The component class that colours a row's score cell."""
    if summary.score is None:
        if summary.status == FAILED:
            return "--no-reply"
        return "--error" if summary.n_errors else "--dim"
    if summary.score < LOW:
        return "--low"
    if summary.score < HIGH:
        return "--mid"
    return "--high"


def score_text(summary: ConversationSummary) -> str:
    if summary.score is not None:
        return f"{summary.score:5.2f}"
    if summary.status == FAILED:
        return "    —"
    if summary.n_errors:
        return "  err"
    return "    …"


def theme_width(width: int) -> int:
    return 12 if width < 110 else 22


def header_line(width: int) -> str:
    """Column titles, cell for cell as wide as the row cells below them."""
    return f"{'#':>5} {'id':<8} {'theme':<{theme_width(width)}} score {'met':>5} {'pen':>3}   preview"


@dataclass(slots=True)
class Query:
    """What the list shows: the run, its filter and its order."""

    run_id: int
    filter: ConversationFilter
    sort: str = "position"


class ConversationPages:
    """Where a list's rows come from: pages of a query's conversations, read from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def first_page(self, query: Query, cursor: int = 0) -> tuple[int, list[ConversationSummary]]:
        """The row count of ``query`` and the page that holds row ``cursor`` (clamped to the count)."""
        total = await self.store.count_conversations(query.run_id, query.filter)
        if not total:
            return 0, []
        return total, await self.page(query, min(cursor, total - 1) // PAGE_SIZE)

    async def page(self, query: Query, page: int) -> list[ConversationSummary]:
        return await self.store.conversation_page(
            query.run_id, query.filter, query.sort, offset=page * PAGE_SIZE, limit=PAGE_SIZE
        )


class ConversationList(ScrollView, can_focus=True):
    """Conversations of one run: cursor with j/k, g/G, page keys; enter opens one."""

    BINDINGS = [
        Binding("j,down", "cursor_down", "Down", show=False),
        Binding("k,up", "cursor_up", "Up", show=False),
        Binding("g,home", "cursor_top", "Top", show=False),
        Binding("G,end", "cursor_bottom", "Bottom", show=False),
        Binding("pagedown,space", "page_down_rows", "Page down", show=False),
        Binding("pageup", "page_up_rows", "Page up", show=False),
        Binding("enter", "open", "Open", id="conversation_list.open"),
    ]

    COMPONENT_CLASSES = {
        "conversation-list--cursor",
        "conversation-list--header",
        "conversation-list--low",
        "conversation-list--mid",
        "conversation-list--high",
        "conversation-list--dim",
        "conversation-list--error",
        "conversation-list--no-reply",
        "conversation-list--penalty",
        "conversation-list--loading",
    }

    DEFAULT_CSS = """
    ConversationList {
        height: 1fr;
        scrollbar-size-vertical: 1;
        & > .conversation-list--cursor { background: $surface-lighten-2; }
        &:focus > .conversation-list--cursor { background: $accent 40%; }
        & > .conversation-list--low { color: $error; text-style: bold; }
        & > .conversation-list--mid { color: $warning; }
        & > .conversation-list--high { color: $success; text-style: bold; }
        & > .conversation-list--dim { color: $text-muted; }
        & > .conversation-list--header { color: $text-muted; text-style: bold; }
        & > .conversation-list--error { color: $error; text-style: reverse; }
        & > .conversation-list--no-reply { color: $error; text-style: bold; }
        & > .conversation-list--penalty { color: $error; }
        & > .conversation-list--loading { color: $text-disabled; }
    }
    """

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    class Opened(Message):
        """Enter on a row: the conversation at ``index`` in list order."""

        def __init__(self, conversation_list: ConversationList, index: int, conversation_id: int) -> None:
            super().__init__()
            self.conversation_list = conversation_list
            self.index = index
            self.conversation_id = conversation_id

        @property
        def control(self) -> ConversationList:
            return self.conversation_list

    class Counted(Message):
        """The query changed and the rows were counted."""

        def __init__(self, conversation_list: ConversationList, total: int) -> None:
            super().__init__()
            self.conversation_list = conversation_list
            self.total = total

        @property
        def control(self) -> ConversationList:
            return self.conversation_list

    def __init__(
        self, pages: ConversationPages, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.pages = pages
        self.query_state: Query | None = None
        self.total = 0
        self._pages: OrderedDict[int, list[ConversationSummary]] = OrderedDict()
        self._loading: set[int] = set()
        self._generation = 0  # bumps on every new query so that late pages of an old one are dropped
        self.loaded = False  # first page of the current query is in

    @property
    def generation(self) -> int:
        """Bumped by every new query: a reader compares it to know whether its result still applies."""
        return self._generation

    # ---- data ----------------------------------------------------------------------------
    async def load(self, query: Query, keep_cursor: bool = False) -> int:
        """Show ``query``: count its rows, fetch the page under the cursor, repaint."""
        self._generation += 1
        generation = self._generation
        cursor = self.cursor if keep_cursor else 0
        total, rows = await self.pages.first_page(query, cursor)
        if generation == self._generation:
            self.show_first_page(query, total, rows, keep_cursor)
        return total

    def show_first_page(
        self, query: Query, total: int, rows: list[ConversationSummary], keep_cursor: bool = False
    ) -> None:
        """Show ``query`` from what ``pages.first_page`` read (the page under the cursor)."""
        self._generation += 1  # pages of an earlier query still being read are dropped
        self.query_state = query
        self.total = total
        self._pages.clear()
        self._loading.clear()
        cursor = min(self.cursor, max(total - 1, 0)) if keep_cursor else 0
        if total:
            self._store_page(cursor // PAGE_SIZE, rows)
        self.loaded = True
        self.virtual_size = Size(self._line_width(), total + 1)
        self.cursor = cursor
        if not keep_cursor:
            self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()
        self.post_message(self.Counted(self, total))

    def row(self, index: int) -> ConversationSummary | None:
        """The summary at ``index`` if its page is cached (asks for the page otherwise)."""
        if not 0 <= index < self.total:
            return None
        page = index // PAGE_SIZE
        rows = self._pages.get(page)
        if rows is None:
            self._request(page)
            return None
        self._pages.move_to_end(page)
        offset = index - page * PAGE_SIZE
        return rows[offset] if offset < len(rows) else None

    def _store_page(self, page: int, rows: list[ConversationSummary]) -> None:
        self._pages[page] = rows
        self._pages.move_to_end(page)
        while len(self._pages) > CACHED_PAGES:
            self._pages.popitem(last=False)

    def _request(self, page: int) -> None:
        if page in self._loading or self.query_state is None:
            return
        self._loading.add(page)
        self._fetch(page, self._generation)

    @work(group="conversation-pages")
    async def _fetch(self, page: int, generation: int) -> None:
        query = self.query_state
        if query is None:  # nothing shown yet: no page to fetch
            return
        try:
            rows = await self.pages.page(query, page)
        finally:
            self._loading.discard(page)
        if generation == self._generation:
            self._store_page(page, rows)
            self.refresh()

    # ---- rendering -----------------------------------------------------------------------
    def _line_width(self) -> int:
        return max(self.scrollable_content_region.width, 40)

    @property
    def rows_height(self) -> int:
        """Lines available to rows: the header takes the first."""
        return max(self.scrollable_content_region.height - 1, 0)

    def on_resize(self) -> None:
        self.virtual_size = Size(self._line_width(), self.total + 1)
        self._scroll_cursor_into_view()

    def render_line(self, y: int) -> Strip:
        _scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if y == 0:
            style = self.rich_style + self.get_component_rich_style("conversation-list--header", partial=True)
            return Strip([Segment(header_line(width), style)]).extend_cell_length(width, style).crop(0, width)
        index = scroll_y + y - 1
        if index >= self.total:
            if self.total == 0 and y == 1 and self.loaded:
                style = self.get_component_rich_style("conversation-list--dim")
                return Strip([Segment(" No conversations match.", style)]).extend_cell_length(width).crop(0, width)
            return Strip.blank(width, self.rich_style)
        summary = self.row(index)
        # Prefetch the neighbouring page so that scrolling on does not show placeholders.
        next_page = (index + self.size.height) // PAGE_SIZE
        if y == 1 and next_page not in self._pages and next_page * PAGE_SIZE < self.total:
            self._request(next_page)
        base = self.rich_style
        if index == self.cursor:
            base = base + self.get_component_rich_style("conversation-list--cursor", partial=True)
        if summary is None:
            loading = self.get_component_rich_style("conversation-list--loading", partial=True)
            strip = Strip([Segment(f"{index + 1:>5}  …", base + loading)])
        else:
            strip = Strip(self._segments(summary, base, width))
        return strip.extend_cell_length(width, base).crop(0, width).simplify()

    def _segments(self, s: ConversationSummary, base: Style, width: int) -> list[Segment]:
        part = lambda name: base + self.get_component_rich_style(f"conversation-list{name}", partial=True)  # noqa: E731
        dim = part("--dim")
        columns = theme_width(width)
        theme = one_line(s.theme or "-", columns)
        met = f"{s.n_met if s.n_met is not None else '-'}/{s.n_positive}"  # as the conversation header counts
        no_reply = s.status == FAILED
        if no_reply:  # nothing was graded: not the same thing as a grader error
            marker = Segment(" ✗ ", part("--no-reply"))
        elif s.n_errors:
            marker = Segment(" ! ", part("--error"))
        else:
            marker = Segment("   ", base)
        segments = [
            Segment(f"{s.position + 1:>5} ", dim),
            Segment(f"{one_line(s.prompt_id, 8):<8} ", dim),
            Segment(f"{theme:<{columns}} ", base),
            Segment(score_text(s), part(score_class(s))),
            Segment(f" {met:>5} ", base),
            # A count of triggered penalties, not points: "2×", never "-2".
            Segment(f"{f'{s.penalties}×' if s.penalties else '':>3}", part("--penalty")),
            marker,
        ]
        if no_reply:
            segments.append(Segment("no reply  ", part("--no-reply")))
        used = sum(cell_len(seg.text) for seg in segments)
        room = max(width - used, 0)
        if room:
            segments.append(Segment(one_line(s.preview, max(room, 2))[:room], base))
        return segments

    # ---- cursor --------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        clamped = max(0, min(new, self.total - 1)) if self.total else 0
        if clamped != new:
            self.cursor = clamped
            return
        self.refresh_line(old - self.scroll_offset.y + 1)
        self.refresh_line(new - self.scroll_offset.y + 1)
        self._scroll_cursor_into_view()

    def refresh_line(self, y: int) -> None:
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def _scroll_cursor_into_view(self) -> None:
        height = self.rows_height
        if height <= 0:
            return
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_top(self) -> None:
        self.cursor = 0

    def action_cursor_bottom(self) -> None:
        self.cursor = max(self.total - 1, 0)

    def action_page_down_rows(self) -> None:
        self.cursor += max(self.rows_height - 1, 1)

    def action_page_up_rows(self) -> None:
        self.cursor -= max(self.rows_height - 1, 1)

    def action_open(self) -> None:
        summary = self.row(self.cursor)
        if summary is not None:
            self.post_message(self.Opened(self, self.cursor, summary.id))

    def on_click(self, event) -> None:
        if event.y < 1:
            return  # the header
        index = self.scroll_offset.y + event.y - 1
        if 0 <= index < self.total:
            if index == self.cursor and event.chain >= 2:
                self.action_open()
            self.cursor = index
