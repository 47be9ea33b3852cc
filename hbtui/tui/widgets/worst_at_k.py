"""Worst-at-k of a run with repeats: k = 1..K and the expected worst score of k repeats."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from hbtui.analysis.run_stats import WorstAtKScores
from hbtui.tui.widgets.breakdown import score_style


class WorstAtK(Static):
    """A small table, hidden for a run without repeats."""

    DEFAULT_CSS = """
    WorstAtK { height: auto; margin-bottom: 1; }
    """

    def update_stats(self, worst: WorstAtKScores | None) -> None:
        self.display = worst is not None
        if worst is None:
            return
        title = Text(f"Worst-at-k over {worst.repeats} repeats", style="bold")
        title.append(f"  ({worst.n_prompts:,} prompts with every repeat scored)", style="dim")
        table = Table(box=None, padding=(0, 1), expand=False, show_edge=False)
        table.add_column("k", style="bold", no_wrap=True)
        for k, _ in worst.by_k():
            table.add_column(str(k), justify="right", no_wrap=True)
        table.add_row(
            "score",
            *(
                Text("–", style="dim") if score is None else Text(f"{score:.3f}", style=score_style(score))
                for _, score in worst.by_k()
            ),
        )
        self.update(Group(title, table))
