"""Conversation scores as a plotext bar chart, drawn to the widget's current size.

plotext keeps one global figure, so it is only ever touched on the UI thread (from render).
A chart depends only on its size, title and the counts per bin, and drawing one takes 10-20 ms
(a third of opening a run): charts drawn are kept app-wide by those, so a run opened again, or
a monitor whose new scores left every bin as it was, draws nothing.
"""

from __future__ import annotations

import plotext as plt
from rich.text import Text
from textual.cache import LRUCache
from textual.widget import Widget

from hbtui.scoring import histogram

BIN_WIDTH = 0.1
CHARTS_KEPT = 32

# (width, height, title, n, counts per bin) -> the chart drawn
_charts: LRUCache[tuple, Text] = LRUCache(CHARTS_KEPT)


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
        self._cache: tuple[tuple, Text] | None = None

    @property
    def scores(self) -> list[float]:
        return self._scores

    def update_scores(self, scores: list[float]) -> None:
        """New data (a monitor calls this as scores arrive); repaints on the next refresh."""
        self._scores = list(scores)
        self._cache = None
        self.refresh()

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_region.size
        key = (width, height, len(self._scores), self._title)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        text = self._draw(width, height)
        self._cache = (key, text)
        return text

    def _draw(self, width: int, height: int) -> Text:
        if not self._scores:
            return Text("no scored conversations yet", style="dim")
        if width < 20 or height < 5:
            return Text(f"{len(self._scores)} scores (too small to chart)", style="dim")
        bins = histogram(self._scores, BIN_WIDTH)
        starts = [low for low, _, _ in bins]
        counts = [count for _, _, count in bins]
        key = (width, height, self._title, len(self._scores), tuple(starts), tuple(counts))
        chart = _charts.get(key)
        if chart is None:
            chart = _charts[key] = self._chart(width, height, starts, counts)
        return chart

    def _chart(self, width: int, height: int, starts: list[float], counts: list[int]) -> Text:
        plt.clf()
        plt.limitsize(False, False)  # plotext otherwise caps the chart at its idea of the terminal size
        plt.plotsize(width, height)
        plt.theme("clear")
        plt.bar([low + BIN_WIDTH / 2 for low in starts], counts, color="green", width=0.6)
        step = 2 if len(starts) * 6 > width else 1
        ticks = [low for low in starts[::step]] + [starts[-1] + BIN_WIDTH]
        plt.xticks(ticks, [f"{t:.1f}" for t in ticks])
        top = max(counts)
        rows = max(min(height - 5, 4), 1)
        yticks = sorted({round(top * i / rows) for i in range(rows + 1)})
        plt.yticks(yticks, [str(t) for t in yticks])
        plt.title(f"{self._title} (n={len(self._scores)})")
        chart = plt.build()
        plt.clf()
        return Text.from_ansi(chart, no_wrap=True, end="")
