"""Score by theme or by axis: one row per tag with its clipped mean, n and 95% interval.

A run has a handful of themes and axes, so a Rich table in a Static is enough here.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.geometry import Size
from textual.widgets import Static

from hbtui.core.scoring import Metric
from hbtui.core.text import one_line
from hbtui.store.run_report import StoredReport

BAR_WIDTH = 20


def score_style(value: float | None) -> str:
    if value is None:
        return "dim"
    return "red" if value < 0.4 else "yellow" if value < 0.7 else "green"


def bar(value: float, width: int = BAR_WIDTH) -> Text:
    filled = round(max(0.0, min(1.0, value)) * width)
    return Text("█" * filled + "·" * (width - filled), style=score_style(value))


class ScoreBreakdown(Static):
    """The report's metrics whose name starts with ``prefix`` (``theme:``, ``axis:``), or with one
    of several prefixes (HealthBench Professional's categories: each row named ``use_case:
    consult``, grouped in the prefixes' order)."""

    DEFAULT_CSS = """
    ScoreBreakdown { height: auto; }
    """

    def __init__(
        self,
        prefix: str | tuple[str, ...],
        title: str,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.prefixes = (prefix,) if isinstance(prefix, str) else prefix
        self.title = title
        self.rows: list[tuple[str, Metric]] = []
        self._empty: str | None = None

    def update_report(self, report: StoredReport | None, empty: str | None = None) -> None:
        """The rows of ``report``; ``empty``: what to say where it has none (else "no scores yet")."""
        self.rows = []
        for prefix in self.prefixes:
            found = sorted(report.breakdown(prefix) if report else [], key=lambda item: item[1].value)
            named = len(self.prefixes) > 1
            self.rows += [(f"{prefix[:-1]}: {name}" if named else name, m) for name, m in found]
        self._empty = empty
        self.update(self._table())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Every column is no_wrap: the table is its title, its header and a line a row. Textual
        # would render the whole table to count that, each time the screen is laid out.
        if self.rows:
            return len(self.rows) + 2
        return super().get_content_height(container, viewport, width)

    def _table(self) -> Table | Text:
        if not self.rows:
            return Text(f"{self.title}: {self._empty or 'no scores yet'}", style="dim")
        table = Table(
            title=self.title, title_justify="left", expand=False, box=None, padding=(0, 1), title_style="bold"
        )
        table.add_column("name", no_wrap=True, overflow="ellipsis", max_width=28)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("n", justify="right", no_wrap=True)
        table.add_column("95% CI", no_wrap=True)
        table.add_column("", no_wrap=True)
        for name, m in self.rows:
            low, high = m.ci95
            table.add_row(
                Text(one_line(name, 40)),
                Text(f"{m.value:.3f}", style=score_style(m.value)),
                Text(str(m.n)),
                Text(f"{low:.3f}–{high:.3f}", style="dim"),
                bar(m.value, 12),
            )
        return table
