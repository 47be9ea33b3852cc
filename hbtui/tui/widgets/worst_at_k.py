"""Worst-at-k of a run with repeats: k = 1..K and the expected worst score of k repeats."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from hbtui.tui.widgets.breakdown import score_style


class WorstAtK(Static):
    """A small table, hidden for a run without repeats."""

    DEFAULT_CSS = """
    WorstAtK { height: auto; margin-bottom: 1; }
    """

    def update_stats(self, worst: dict | None) -> None:
        self.display = worst is not None
        if worst is None:
            return
        ks = [k for k in worst if k != "n_prompts"]
        title = Text(f"Worst-at-k over {len(ks)} repeats", style="bold")
        title.append(f"  ({worst['n_prompts']:,} prompts with every repeat scored)", style="dim")
        table = Table(box=None, padding=(0, 1), expand=False, show_edge=False)
        table.add_column("k", style="bold", no_wrap=True)
        for k in ks:
            table.add_column(k, justify="right", no_wrap=True)
        table.add_row(
            "score",
            *(
                Text("–", style="dim") if worst[k] is None else Text(f"{worst[k]:.3f}", style=score_style(worst[k]))
                for k in ks
            ),
        )
        self.update(Group(title, table))
