"""A long list of rows, one line each, with a cursor: the criteria view's distinct criteria and
the repeats view's prompts. Only the lines on screen are rendered (Textual's Line API), from
rows held in memory: tens of thousands of them cost nothing until scrolled to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from rich.cells import cell_len
from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

Row = TypeVar("Row")


class LineTable(ScrollView, Generic[Row], can_focus=True):
    """Rows under a header line, a cursor moved with j/k, g/G and the page keys."""

    BINDINGS = [
        Binding("j,down", "move(1)", "Down", show=False),
        Binding("k,up", "move(-1)", "Up", show=False),
        Binding("g,home", "top", "Top", show=False),
        Binding("G,end", "bottom", "Bottom", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
    ]
    COMPONENT_CLASSES = {"line-table--cursor", "line-table--header", "line-table--warn"}
    DEFAULT_CSS = """
    LineTable {
        height: 1fr;
        & > .line-table--cursor { background: $accent 40%; }
        & > .line-table--header { color: $text-muted; text-style: bold; }
        & > .line-table--warn { color: $error; }
    }
    """

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    def __init__(
        self, header: str, line: Callable[[Row], str], warn: Callable[[Row], bool], *, id: str | None = None
    ) -> None:
        """``line``: a row's text; ``warn``: whether it is drawn in the error colour."""
        super().__init__(id=id)
        self.header = header
        self.line = line
        self.warn = warn
        self.rows: list[Row] = []

    def show(self, rows: list[Row]) -> None:
        self.rows = rows
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()

    @property
    def current(self) -> Row | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            style = self.rich_style + self.get_component_rich_style("line-table--header", partial=True)
            return Strip([Segment(self.header, style)]).extend_cell_length(width, style).crop(0, width)
        index = self.scroll_offset.y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        row = self.rows[index]
        style = self.rich_style
        if self.warn(row):
            style = style + self.get_component_rich_style("line-table--warn", partial=True)
        if index == self.cursor:
            style = style + self.get_component_rich_style("line-table--cursor", partial=True)
        text = self.line(row)
        if cell_len(text) > width:
            text = text[: max(width - 1, 0)] + "…"
        return Strip([Segment(text, style)]).extend_cell_length(width, style).crop(0, width)

    def watch_cursor(self, old: int, new: int) -> None:
        clamped = max(0, min(new, len(self.rows) - 1)) if self.rows else 0
        if clamped != new:
            self.cursor = clamped
            return
        for index in (old, new):
            line = index - self.scroll_offset.y + 1
            if 1 <= line < self.size.height:
                self.refresh(Region(0, line, self.size.width, 1))
        height = max(self.scrollable_content_region.height - 1, 1)
        top = self.scroll_offset.y
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + height:
            self.scroll_to(y=new - height + 1, animate=False, immediate=True)

    def action_move(self, delta: int) -> None:
        self.cursor += delta

    def action_top(self) -> None:
        self.cursor = 0

    def action_bottom(self) -> None:
        self.cursor = max(len(self.rows) - 1, 0)

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(self.scrollable_content_region.height - 2, 1)
