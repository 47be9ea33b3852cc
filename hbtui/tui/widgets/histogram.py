"""Conversation scores as a plotext bar chart, drawn to the widget's current size.

plotext keeps one global figure, so it is only ever touched on the UI thread (from render_line).
A chart depends only on its size, title and the counts per bin, and drawing one took 10-20 ms,
turning it into a screen's lines as many again (together a third of opening a run). The widget
draws its own lines (Textual's Line API) from strips kept app-wide by those keys, so a run opened
again, or a monitor whose new scores left every bin as it was, draws and converts nothing.
"""

from __future__ import annotations

import plotext as plt
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget

from hbtui.core.score_bins import TENTHS, histogram, round_step, round_ticks

BIN_WIDTH = 1 / TENTHS
X_LABEL_COLUMNS = 6  # "-1.5" and the space before the next label
CHARTS_KEPT = 32

# (width, height, title, n, bins, counts per bin, base style) -> the chart's lines
_charts: LRUCache[tuple, list[Strip]] = LRUCache(CHARTS_KEPT)


class ScoreHistogram(Widget):
    """Counts of conversation scores in bins of 0.1; ``update_scores`` replaces the data."""

    DEFAULT_CSS = """
    ScoreHistogram {
        height: 14;
        min-height: 6;
    }
    """

    def __init__(
        self,
        scores: list[float] | None = None,
        *,
        title: str = "conversation scores",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._scores: list[float] = list(scores or [])
        self._title = title
        self._cache: tuple[tuple, list[Strip]] | None = None
        # A monitor redraws its chart once a second while scores arrive faster: the count the rest
        # of the screen shows, to say the chart is behind it rather than give a second n.
        self._total: int | None = None

    @property
    def scores(self) -> list[float]:
        return self._scores

    def update_scores(self, scores: list[float]) -> None:
        """New data (a monitor calls this as scores arrive); repaints on the next refresh."""
        self._scores = list(scores)
        self._cache = None
        self.refresh()

    def note_total(self, total: int) -> None:
        """The scores counted elsewhere on the screen now: the title says "updating" while the
        chart has fewer (its n is then the one it was drawn from, as the interval's is)."""
        behind = self._behind()
        self._total = total
        if self._behind() != behind:
            self._cache = None
            self.refresh()

    def _behind(self) -> bool:
        return self._total is not None and self._total != len(self._scores)

    def _title_text(self) -> str:
        return f"{self._title} (n={len(self._scores)}{', updating' if self._behind() else ''})"

    def on_resize(self) -> None:
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        base = self.rich_style
        key = (width, height, len(self._scores), self._title_text(), base)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._draw(width, height, base))
        lines = self._cache[1]
        return lines[y] if y < len(lines) else Strip.blank(width, base)

    def _draw(self, width: int, height: int, base: Style) -> list[Strip]:
        if not self._scores:
            return self._strips(Text("no scored conversations yet", style="dim"), width, base)
        if width < 20 or height < 5:
            return self._strips(Text(f"{len(self._scores)} scores (too small to chart)", style="dim"), width, base)
        bins = histogram(self._scores)
        starts = [low for low, _, _ in bins]
        counts = [count for _, _, count in bins]
        key = (width, height, self._title_text(), tuple(starts), tuple(counts), base)
        lines = _charts.get(key)
        if lines is None:
            lines = _charts[key] = self._strips(self._chart(width, height, starts, counts), width, base)
        return lines

    def _strips(self, text: Text, width: int, base: Style) -> list[Strip]:
        """``text`` as the widget's lines: wrapped to ``width`` (a chart is not), on its style."""
        console = self.app.console
        return [
            Strip(line.render(console)).apply_style(base).extend_cell_length(width, base).crop(0, width)
            for line in text.wrap(console, width)
        ]

    def _chart(self, width: int, height: int, starts: list[float], counts: list[int]) -> Text:
        plt.clf()
        plt.limitsize(False, False)  # plotext otherwise caps the chart at its idea of the terminal size
        plt.plotsize(width, height)
        plt.theme("clear")
        plt.bar([low + BIN_WIDTH / 2 for low in starts], counts, color="green", width=0.6)
        # Ticks on round values only (hbtui.core.score_bins): as many as their labels have room for, and
        # none between two bins' edges (labels of one decimal would repeat: 0.9 0.9 1.0 1.0).
        most = max(1, min((width - 8) // X_LABEL_COLUMNS, len(starts)))
        xticks = round_ticks(starts[0], starts[-1] + BIN_WIDTH, most)
        plt.xticks(xticks, [f"{t:.1f}" for t in xticks])
        plt.xlim(starts[0], starts[-1] + BIN_WIDTH)
        # plotext's rows are points, the lowest at the low limit, and a bar fills each row at or
        # below its count. With 0 as that limit, the row labelled 0 was filled by every bar and a
        # bar of 2 read about 2.3. Here each step of the counts is a whole number of rows and the
        # lowest row stands for one row's worth: a bar of 2 ends at the top of the row labelled 2,
        # and the frame's bottom line is 0 (labelled so below). Rows left over are room above.
        rows = max(height - 4, 1)  # less the title, the frame's top and bottom, the scores' labels
        step = max(1, round(round_step(max(counts), max(min(rows // 2, 4), 1))))  # counts are whole
        steps = -(-max(counts) // step)
        rows_per_step = max(1, rows // steps)
        per_row = step / rows_per_step
        yticks = [i * step for i in range(1, steps + 1) if i * rows_per_step <= rows]
        plt.yticks(yticks, [str(t) for t in yticks])
        plt.ylim(per_row, rows * per_row)
        plt.title(self._title_text())
        chart = plt.build()
        plt.clf()
        label_width = len(str(yticks[-1])) if yticks else 1
        lines = chart.split("\n")
        for i, line in enumerate(lines):
            if line.startswith(" " * label_width + "└"):  # the bottom line: count 0
                lines[i] = "0".rjust(label_width) + line[label_width:]
        return Text.from_ansi("\n".join(lines), no_wrap=True, end="")
