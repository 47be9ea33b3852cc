"""The labels of a screen's tabs, which number keys pick (1 Summary, 2 Conversations): one widget
drawing two lines, the labels and a bar under the one shown.

Textual's TabbedContent draws the same with ten widgets (tabs, their containers, an animated
underline) and a pane for each tab: a run's screen opened in 47 ms with it and in 35 ms without,
at 5,000 conversations. It names a ContentSwitcher, which shows one of its children by id:
setting ``active`` shows that child. A click on a label asks the screen for its tab
(``Picked``); the keys are the screen's own bindings, so the labels are not focusable.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import ContentSwitcher

BAR, HALF_BAR_LEFT, HALF_BAR_RIGHT = "━", "╺", "╸"


class KeyTabs(Widget):
    DEFAULT_CSS = """
    KeyTabs {
        height: 2;
        & > .key-tabs--tab { color: $foreground 50%; }
        & > .key-tabs--active { color: $foreground; }
        & > .key-tabs--bar { color: $foreground 10%; }
        & > .key-tabs--bar-active { color: $block-cursor-background; }
        &:ansi {
            & > .key-tabs--tab { text-style: dim; }
            & > .key-tabs--active { text-style: not dim bold; }
            & > .key-tabs--bar { color: $border-blurred; }
        }
    }
    """

    COMPONENT_CLASSES = {"key-tabs--tab", "key-tabs--active", "key-tabs--bar", "key-tabs--bar-active"}

    active: reactive[str] = reactive("")

    class Picked(Message):
        """A label was clicked: the screen shows its tab (``active``) and moves the focus there."""

        def __init__(self, key_tabs: KeyTabs, tab: str) -> None:
            super().__init__()
            self.key_tabs = key_tabs
            self.tab = tab

        @property
        def control(self) -> KeyTabs:
            return self.key_tabs

    def __init__(self, *tabs: tuple[str, str], switcher: str, active: str) -> None:
        """``tabs``: (the id of the tab's child in the ContentSwitcher, its label) in order;
        ``switcher``: that ContentSwitcher's id (its ``initial`` is ``active``)."""
        super().__init__()
        self.switcher = switcher
        # (tab, label as drawn, first cell, cell after its last) of each label.
        self.cells: list[tuple[str, str, int, int]] = []
        x = 0
        for tab, label in tabs:
            drawn = f" {label} "
            self.cells.append((tab, drawn, x, x + len(drawn)))
            x += len(drawn)
        self.set_reactive(KeyTabs.active, active)

    def watch_active(self, tab: str) -> None:
        """The tab's child shown: the labels and the switcher never disagree."""
        self.screen.query_one(f"#{self.switcher}", ContentSwitcher).current = tab

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        segments: list[Segment] = []
        if y == 0:
            for tab, drawn, _, _ in self.cells:
                part = "key-tabs--active" if tab == self.active else "key-tabs--tab"
                segments.append(Segment(drawn, base + self._color(part)))
        elif y == 1:
            bar = base + self._color("key-tabs--bar")
            spans = [(start + 1, end - 1) for tab, _, start, end in self.cells if tab == self.active]
            if not spans:
                segments.append(Segment(BAR * width, bar))
            else:
                # Under the label's text, between half bars, as Textual's own tabs draw it.
                (start, end), shown = spans[0], base + self._color("key-tabs--bar-active")
                segments += [Segment(BAR * (start - 1) + HALF_BAR_RIGHT, bar), Segment(BAR * (end - start), shown)]
                if end < width:
                    segments.append(Segment(HALF_BAR_LEFT + BAR * (width - end - 1), bar))
        return Strip(segments).extend_cell_length(width, base).crop(0, width)

    def _color(self, part: str) -> Style:
        """The part's colour (blended over the widget's background, as a translucent one is) and
        text style."""
        style = self.get_component_rich_style(part)
        return Style(color=style.color, bold=style.bold, dim=style.dim)

    def on_click(self, event: events.Click) -> None:
        for tab, _, start, end in self.cells:
            if start <= event.x < end:
                self.post_message(self.Picked(self, tab))
                return
