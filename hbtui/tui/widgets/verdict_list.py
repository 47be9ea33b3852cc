"""A conversation's rubric: each criterion with its points, verdict and the grader's reasons.

The colour of each criterion's bar says whether the verdict helped or hurt the score. The whole
rubric is one widget drawing its own lines (Textual's Line API) rather than a widget per
criterion: opening a conversation then costs one layout node instead of a dozen, each with its
own rich Table measured several times per layout (the difference between 55-64 ms and the
under-50 ms a key press to the next screen should take).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Offset, Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from hbtui.core.settings.prices import tokens_text
from hbtui.core.text import visible_controls
from hbtui.core.verdicts import verdict_kind as kind_of
from hbtui.store import VerdictRow

# The labels' colours are picked from the 256-colour cube, so that an SSH terminal draws them as
# they are, and each reads at a WCAG contrast of at least 4.5 on the selected block's tint as on
# the plain background (tests/tui/test_tui_contrast.py): the terminal theme's ANSI red and magenta
# (Monokai's #f4005f for both) fell under 4 on the tint.
PENALTY = "#ff8787"
GRADER_ERROR = "#d787ff"
# kind -> (label, rich style of the label)
KINDS = {
    "met": ("✔ met", "bold #87d75f"),
    "missed": ("✘ missed", "bold #ffaf00"),
    "penalty": ("▼ PENALTY", f"bold {PENALTY}"),
    "avoided": ("○ avoided", "#87af5f"),
    "grader-error": ("! error", f"bold {GRADER_ERROR}"),
    "pending": ("… pending", "dim"),
}

# Columns before the wrapped text: bar, space, number (3), space, label (9), space.
NUMBER_WIDTH, LABEL_WIDTH = 3, 9
INDENT = 1 + 1 + NUMBER_WIDTH + 1 + LABEL_WIDTH + 1
MIN_TEXT_WIDTH = 12

# The selected block is read closely: its dim parts (tags, tokens) are drawn at full strength,
# since a terminal's dim text on the tint falls under a readable contrast.
UNDIMMED = Style(dim=False)


def verdict_kind(v: VerdictRow) -> str:
    return kind_of(v.status, v.points)


def _data(text: str | None) -> Text:
    return Text(visible_controls(text or ""))


@dataclass(slots=True)
class Criterion:
    """One criterion of the rubric shown, with its verdict."""

    verdict: VerdictRow
    number: int
    kind: str
    tokens: tuple[int, int] = (0, 0)  # (prompt, completion) of its grading, retries included
    notes: list[Text] = field(default_factory=list)  # its reviews and hints (hbtui.tui.screens.reviewing)

    def paragraphs(self) -> list[Text]:
        """What is written right of the label, one paragraph a row (each wraps on its own)."""
        v = self.verdict
        head = Text()
        head.append(f"[{v.points:+g}] ", style=f"bold {PENALTY}" if v.points < 0 else "bold")
        head.append_text(_data(v.criterion))
        rows = [head, *self.notes]
        # Tokens first, then the tags on the same row: a row of its own would cost a line per
        # criterion, and tags that wrap read better than a count cut in two.
        detail = Text()
        if any(self.tokens):
            detail.append(f"tokens {tokens_text(self.tokens[0])} in/{tokens_text(self.tokens[1])} out", style="dim")
            detail.append("  ·  " if v.tags else "", style="dim")
        detail.append(visible_controls(" ".join(v.tags)), style="dim italic")
        if detail:
            rows.append(detail)
        if v.explanation:
            rows.append(_data(v.explanation))
        if self.kind == "grader-error":
            error = Text("error: ", style=f"bold {GRADER_ERROR}")
            error.append_text(
                _data(f"{v.error or 'unknown'} ({v.error_kind or 'unknown kind'}; {requests_sent(v.attempts)})")
            )
            rows.append(error)
            raw = Text("raw grader output: ", style=f"bold {GRADER_ERROR}")
            raw.append_text(_data(v.raw_output) if v.raw_output else Text("(none)", style="dim"))
            rows.append(raw)
        return rows

    @property
    def copy_text(self) -> str:
        """What `c` copies: the explanation, or the error and raw output of a failed grading."""
        v = self.verdict
        if self.kind == "grader-error":
            return f"{v.error or ''}\n{v.raw_output or ''}".strip()
        return v.explanation or ""


def requests_sent(attempts: int) -> str:
    """A verdict's attempts are HTTP requests, retries included, not the grader's tries that
    its error counts: "after 3 tries" took 8 requests when some of them were retried."""
    if attempts == 1:
        return "1 request to the grader"
    return f"{attempts} requests to the grader, retries included"


class VerdictList(Widget):
    """The criteria of one conversation with one selected (j/k and the jump keys move it)."""

    COMPONENT_CLASSES = {
        "verdict-list--met",
        "verdict-list--missed",
        "verdict-list--penalty",
        "verdict-list--avoided",
        "verdict-list--grader-error",
        "verdict-list--pending",
        "verdict-list--selected",
    }

    DEFAULT_CSS = """
    VerdictList {
        height: auto;
        & > .verdict-list--met { color: $success; }
        & > .verdict-list--missed { color: $warning; }
        & > .verdict-list--penalty { color: $error; }
        & > .verdict-list--avoided { color: $success-darken-2; }
        & > .verdict-list--grader-error { color: magenta; }
        & > .verdict-list--pending { color: $surface-lighten-2; }
        & > .verdict-list--selected { background: white 10%; }
    }
    """

    selected: reactive[int] = reactive(-1, init=False)  # the criterion's index, -1 for none; repaints

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.items: list[Criterion] = []
        self._width = -1
        self._lines: list[tuple[int, Strip]] = []  # (criterion index or -1 for a gap, text)
        self._first_line: list[int] = []  # criterion index -> its first line

    # ---- content -------------------------------------------------------------------------
    def show(self, verdicts: list[VerdictRow], tokens: dict[int, tuple[int, int]] | None = None) -> None:
        """Show another conversation's verdicts, none selected; ``tokens`` by criterion index."""
        tokens = tokens or {}
        self.items = [
            Criterion(v, number, verdict_kind(v), tokens.get(v.idx, (0, 0)))
            for number, v in enumerate(verdicts, start=1)
        ]
        self.selected = -1
        self._width = -1
        self.refresh(layout=True)

    def set_notes(self, notes: dict[int, list[Text]]) -> None:
        """Lines under each criterion's text by criterion index (its reviews), the others without."""
        if not notes and not any(item.notes for item in self.items):
            return  # nothing before, nothing now: no layout (each conversation shown asks)
        for item in self.items:
            item.notes = notes.get(item.verdict.idx, [])
        self._width = -1
        self.refresh(layout=True)

    @property
    def current(self) -> Criterion | None:
        return self.items[self.selected] if 0 <= self.selected < len(self.items) else None

    def select(self, index: int) -> Criterion | None:
        if not self.items:
            return None
        index = max(0, min(index, len(self.items) - 1))
        self.selected = index
        self._scroll_selected_into_view()
        return self.items[index]

    def deselect(self) -> None:
        self.selected = -1

    def next_of(self, kinds: set[str]) -> Criterion | None:
        """Select the next criterion of one of ``kinds`` after the selected one, wrapping."""
        count = len(self.items)
        for step in range(1, count + 1):
            index = (self.selected + step) % count
            if self.items[index].kind in kinds:
                return self.select(index)
        return None

    # ---- layout and drawing --------------------------------------------------------------
    def _layout(self, width: int) -> list[tuple[int, Strip]]:
        """The lines of every criterion at ``width``, computed once per width and content."""
        if width == self._width:
            return self._lines
        console = self.app.console
        text_width = max(width - INDENT - 1, MIN_TEXT_WIDTH)
        lines: list[tuple[int, Strip]] = []
        firsts: list[int] = []
        for index, item in enumerate(self.items):
            if index:
                lines.append((-1, Strip.blank(0)))  # a blank line between criteria
            firsts.append(len(lines))
            label, label_style = KINDS[item.kind]
            first = True
            for paragraph in item.paragraphs():
                for wrapped in paragraph.wrap(console, text_width, overflow="fold"):
                    if first:
                        prefix = [
                            Segment(f"{item.number}.".rjust(NUMBER_WIDTH), Style(dim=True)),
                            Segment(" "),
                            Segment(label.ljust(LABEL_WIDTH), Style.parse(label_style)),
                            Segment(" "),
                        ]
                        first = False
                    else:
                        prefix = [Segment(" " * (NUMBER_WIDTH + 1 + LABEL_WIDTH + 1))]
                    segments = prefix + list(wrapped.render(console))
                    lines.append((index, Strip(segments)))
        self._width, self._lines, self._first_line = width, lines, firsts
        return lines

    def lines_of(self, index: int) -> range:
        """The lines (y of this widget) that criterion ``index`` takes at the current width."""
        lines = self._layout(self.size.width)
        top = self._first_line[index]
        bottom = top
        while bottom + 1 < len(lines) and lines[bottom + 1][0] == index:
            bottom += 1
        return range(top, bottom + 1)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._layout(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self._layout(width)
        base = self.rich_style
        if y >= len(lines):
            return Strip.blank(width, base)
        index, text = lines[y]
        if index < 0:
            return Strip.blank(width, base)
        item = self.items[index]
        selected = index == self.selected
        if selected:
            base = base + self._selected_style()
            text = Strip(Segment.apply_style(text, post_style=UNDIMMED), text.cell_length)
        bar_style = base + self.get_component_rich_style(f"verdict-list--{item.kind}", partial=True)
        bar = Segment("█" if selected else "▌", bar_style)
        strip = Strip([bar, Segment(" ", base), *text.apply_style(base)])
        return strip.extend_cell_length(width, base).crop(0, width)

    def _selected_style(self) -> Style:
        """The selected block's background: the component's tint laid over the widget's own.

        A rich style has no alpha, so a tint handed over as it is (``$boost`` was white at 4%)
        is drawn solid: white behind light grey text, which nobody could read.
        """
        tint = self.get_component_styles("verdict-list--selected").background
        return Style(bgcolor=(self.background_colors[1] + tint).rich_color)

    def on_click(self, event: events.Click) -> None:
        lines = self._layout(self.size.width)
        if 0 <= event.y < len(lines) and lines[event.y][0] >= 0:
            self.select(lines[event.y][0])

    def _scroll_selected_into_view(self) -> None:
        """Scroll the ancestors so that the selected criterion's lines are in view.

        Widget.scroll_visible works on whole widgets; this is its walk up the ancestors, started
        from the region of one criterion inside this widget.
        """
        if self.selected < 0:
            return
        if not self.region:  # not laid out yet: after the next refresh it will be
            self.call_after_refresh(self._scroll_selected_into_view)
            return
        lines = self.lines_of(self.selected)
        region = Region(0, lines.start, self.size.width, len(lines)).translate(self.virtual_region.offset)
        widget: Widget = self
        while isinstance(widget.parent, Widget) and widget.parent is not self.screen:
            container = widget.parent
            scrolled = container.scroll_to_region(region, animate=False, immediate=True) or Offset(0, 0)
            region = (
                region.translate(-scrolled)
                .translate(container.styles.margin.top_left)
                .translate(container.styles.border.spacing.top_left)
                .translate(container.virtual_region_with_margin.offset)
                .grow(container.styles.margin)
                .intersection(container.virtual_region_with_margin)
            )
            widget = container
