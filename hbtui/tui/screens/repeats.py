"""Repeats grouped (`K` on a run made with `--repeats K`): one line a prompt with its K scores
and their spread, the least stable first; enter opens its first repeat (n/N step through the
others), 1-9 open that repeat."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import Static

from hbtui.core.text import one_line
from hbtui.store import RepeatGroup
from hbtui.tui.breakpoints import ResponsiveScreen
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.line_table import LineTable

HEADER = f"{'#':>5} {'id':<8} {'spread':>6} {'mean':>6}  scores by repeat   theme"

# key -> (label, sort key)
REPEAT_SORTS = {
    "spread": ("spread (least stable first)", lambda g: (g.spread is None, -(g.spread or 0.0), g.position)),
    "mean": ("mean score ↑ (worst first)", lambda g: (g.mean is None, g.mean or 0.0, g.position)),
    "position": ("position", lambda g: (g.position,)),
}


def score_cell(score: float | None) -> str:
    return "    -" if score is None else f"{score:5.2f}"


def group_line(g: RepeatGroup) -> str:
    spread = "     -" if g.spread is None else f"{g.spread:6.2f}"
    mean = "     -" if g.mean is None else f"{g.mean:6.2f}"
    scores = " ".join(score_cell(s) for s in g.scores)
    return (
        f"{g.position + 1:>5} {one_line(g.prompt_id, 8):<8} {spread} {mean}  {scores}   {one_line(g.theme or '-', 40)}"
    )


class RepeatsScreen(ResponsiveScreen):
    """A run's prompts with the scores of their repeats."""

    BINDINGS = [
        Binding("s", "next_sort", "Sort: spread, mean, position", id="repeats.sort"),
        Binding("enter", "open(0)", "Open its first repeat", id="repeats.open"),
        *(
            Binding(str(k), f"open({k - 1})", f"Open repeat {k}", show=False, id=f"repeats.open_{k}")
            for k in range(1, 10)
        ),
    ]

    sort: reactive[str] = reactive("spread", init=False)

    def __init__(self, run_id: int, groups: list[RepeatGroup]) -> None:
        super().__init__()
        self.run_id = run_id
        self.groups = groups

    @classmethod
    async def read(cls, store, run_id: int) -> RepeatsScreen:
        return cls(run_id, await store.repeat_groups(run_id))

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield Static(id="repeats-title")
        yield LineTable(HEADER, group_line, lambda g: (g.spread or 0.0) >= 0.5, id="repeats-table")
        yield KeyBar()

    def on_mount(self) -> None:
        self._show()

    def help_lists(self, binding: Binding) -> bool:
        """The help lists the keys of the repeats this run has (1 to 3 of 3), not all nine."""
        if binding.id and binding.id.startswith("repeats.open_"):
            most = max((len(g.conversations) for g in self.groups), default=0)
            return int(binding.id.rsplit("_", 1)[1]) <= most
        return True

    @property
    def table(self) -> LineTable[RepeatGroup]:
        return self.query_one(LineTable)

    def _show(self) -> None:
        label, key = REPEAT_SORTS[self.sort]
        self.table.show(sorted(self.groups, key=key))
        repeats = max((len(g.conversations) for g in self.groups), default=0)
        title = Text()
        title.append(f"Repeats of run {self.run_id}", style="bold")
        title.append(f"  {len(self.groups):,} prompts × {repeats}", style="dim")
        title.append("  ·  sort ", style="dim")
        title.append(label, style="bold")
        self.query_one("#repeats-title", Static).update(title)
        self.set_focus(self.table)

    def watch_sort(self) -> None:
        self._show()

    def action_next_sort(self) -> None:  # three orders: a cycle, as the house rule has it
        keys = list(REPEAT_SORTS)
        self.sort = keys[(keys.index(self.sort) + 1) % len(keys)]

    @work(group="repeats-open", exclusive=True)
    async def action_open(self, repeat: int) -> None:
        from hbtui.tui.screens.conversation import ConversationScreen

        group = self.table.current
        if group is None:
            return
        if repeat >= len(group.conversations):
            self.say(f"this prompt has {len(group.conversations)} repeats")
            return
        ids = list(group.conversations)
        detail = await self.app.db.conversation_detail(ids[repeat])
        await self.app.push_screen(ConversationScreen(self.run_id, ids, repeat, detail, repeats=len(ids)))
