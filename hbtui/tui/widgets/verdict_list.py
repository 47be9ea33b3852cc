"""A conversation's rubric: each criterion with its points, verdict and the grader's reasons.

A rubric has tens of criteria at most, so each is a widget; the colour says whether the
verdict helped or hurt the score, and the state is a CSS class (.met, .not-met, .penalty,
.avoided, .grader-error, .pending).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from hbtui.store import ERROR, MET, NOT_MET, VerdictRow
from hbtui.text import visible_controls

# kind -> (label, rich style of the label)
KINDS = {
    "met": ("✔ met", "bold green"),
    "not-met": ("✘ missed", "bold yellow"),
    "penalty": ("▼ PENALTY", "bold red"),
    "avoided": ("○ avoided", "green"),
    "grader-error": ("! error", "bold magenta"),
    "pending": ("… pending", "dim"),
}


def verdict_kind(v: VerdictRow) -> str:
    """Whether the verdict helped (met, avoided), hurt (not-met, penalty) or is missing."""
    if v.status == ERROR:
        return "grader-error"
    if v.status == MET:
        return "penalty" if v.points < 0 else "met"
    if v.status == NOT_MET:
        return "avoided" if v.points < 0 else "not-met"
    return "pending"


def _data(text: str | None) -> Text:
    return Text(visible_controls(text or ""))


class CriterionView(Static):
    """One criterion and its verdict."""

    DEFAULT_CSS = """
    CriterionView { height: auto; padding: 0 1; border-left: outer $surface-lighten-1; }
    """

    def __init__(self, verdict: VerdictRow, number: int) -> None:
        self.verdict = verdict
        self.kind = verdict_kind(verdict)
        super().__init__(self._content(number), classes=self.kind)

    def set_verdict(self, verdict: VerdictRow, number: int) -> None:
        """Show another criterion in this widget (stepping conversations reuses the widgets)."""
        self.remove_class(self.kind, "-selected")
        self.verdict = verdict
        self.kind = verdict_kind(verdict)
        self.add_class(self.kind)
        self.update(self._content(number))

    def _content(self, number: int) -> Table:
        # A grid gives wrapped lines a hanging indent under the criterion, not under the label.
        v = self.verdict
        label, style = KINDS[self.kind]
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, width=3, justify="right")
        grid.add_column(no_wrap=True, width=9)
        grid.add_column(ratio=1)
        head = Text()
        head.append(f"[{v.points:+g}] ", style="bold red" if v.points < 0 else "bold")
        head.append_text(_data(v.criterion))
        grid.add_row(Text(f"{number}.", style="dim"), Text(label, style=style), head)
        if v.tags:
            grid.add_row("", "", Text(visible_controls(" ".join(v.tags)), style="dim italic"))
        if v.explanation:
            grid.add_row("", "", _data(v.explanation))
        if self.kind == "grader-error":
            error = Text("error: ", style="bold magenta")
            error.append_text(_data(f"{v.error or 'unknown'} ({v.error_kind or 'unknown kind'}, "
                                    f"{v.attempts} attempt{'s' if v.attempts != 1 else ''})"))
            grid.add_row("", "", error)
            raw = Text("raw grader output: ", style="bold magenta")
            raw.append_text(_data(v.raw_output) if v.raw_output else Text("(none)", style="dim"))
            grid.add_row("", "", raw)
        return grid

    @property
    def copy_text(self) -> str:
        """What `c` copies: the explanation, or the error and raw output of a failed grading."""
        v = self.verdict
        if self.kind == "grader-error":
            return f"{v.error or ''}\n{v.raw_output or ''}".strip()
        return v.explanation or ""


class VerdictList(Vertical):
    """The criteria of one conversation with one selected (j/k and the jump keys move it)."""

    DEFAULT_CSS = """
    VerdictList { height: auto; }
    VerdictList > CriterionView.-selected { background: $boost; border-left: outer $accent; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.selected = -1

    async def show(self, verdicts: list[VerdictRow]) -> None:
        # Reuse the widgets already mounted: n/N through a run should not rebuild the DOM.
        items = self.items
        for number, (item, verdict) in enumerate(zip(items, verdicts), start=1):
            item.set_verdict(verdict, number)
        if len(items) > len(verdicts):
            await self.remove_children(items[len(verdicts):])
        elif len(verdicts) > len(items):
            await self.mount_all(CriterionView(v, i + 1) for i, v in enumerate(verdicts[len(items):], start=len(items)))
        self.selected = -1

    @property
    def items(self) -> list[CriterionView]:
        return list(self.query_children(CriterionView))

    @property
    def current(self) -> CriterionView | None:
        items = self.items
        return items[self.selected] if 0 <= self.selected < len(items) else None

    def select(self, index: int) -> CriterionView | None:
        items = self.items
        if not items:
            return None
        index = max(0, min(index, len(items) - 1))
        if 0 <= self.selected < len(items):
            items[self.selected].remove_class("-selected")
        self.selected = index
        item = items[index]
        item.add_class("-selected")
        item.scroll_visible(animate=False)
        return item

    def next_of(self, kinds: set[str]) -> CriterionView | None:
        """Select the next criterion of one of ``kinds`` after the selected one, wrapping."""
        items = self.items
        count = len(items)
        for step in range(1, count + 1):
            index = (self.selected + step) % count
            if items[index].kind in kinds:
                return self.select(index)
        return None
