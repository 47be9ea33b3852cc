"""One conversation of a comparison: run A's reply beside run B's, and the criteria whose verdicts
differ, each with both graders' explanations.

Side by side from 100 columns, stacked below. Every reply, criterion and explanation is data:
it goes in as Text with its control characters made visible, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from hbtui.analysis.compare import Comparison, differing_criteria
from hbtui.core.text import one_line, visible_controls
from hbtui.render.compare_report import repeated
from hbtui.store import ConversationDetail, Store, VerdictRow
from hbtui.tui.breakpoints import NARROW, WIDE, ResponsiveScreen
from hbtui.tui.fit import fitted
from hbtui.tui.screens.conversation import message_text, reply_text
from hbtui.tui.widgets.breakdown import score_style
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.verdict_list import KINDS, verdict_kind


def score_text(label: str, detail: ConversationDetail) -> Text:
    text = Text()
    text.append(f"{label} ", style="bold reverse")
    score = detail.summary.score
    text.append(f" {score:.3f}" if score is not None else " —", style=f"bold {score_style(score)}")
    return text


def verdict_text(label: str, verdict: VerdictRow) -> Text:
    text = Text()
    text.append(f"  {label} ", style="bold")
    label_text, style = KINDS[verdict_kind(verdict)]  # as the rubric says it: a met penalty is a penalty
    text.append(label_text, style=style)
    why = verdict.explanation or verdict.error
    if why:
        text.append(": ")
        text.append(visible_controls(why))
    return text


def criteria_text(pairs: list[tuple[VerdictRow, VerdictRow]]) -> Text:
    text = Text()
    text.append(f"CRITERIA WHOSE VERDICTS DIFFER ({len(pairs)})", style="bold")
    if not pairs:
        text.append("\nnone: both graders gave every criterion the same verdict", style="dim")
    for a, b in pairs:
        text.append(f"\n\n[{a.points:g}] ", style="bold red" if a.points < 0 else "bold")
        text.append(visible_controls(a.criterion))
        text.append("\n")
        text.append_text(verdict_text("A", a))
        text.append("\n")
        text.append_text(verdict_text("B", b))
    return text


class PairScreen(ResponsiveScreen):
    """The two replies of one paired conversation; n/N step through the list it came from."""

    HORIZONTAL_BREAKPOINTS = [(0, NARROW), (100, WIDE)]
    BINDINGS = [
        Binding("n,right_square_bracket", "step(1)", "Next", id="pair.next"),
        Binding("N,left_square_bracket", "step(-1)", "Prev", id="pair.previous"),
        Binding("j,down", "scroll(1)", "Scroll down", show=False, id="pair.down"),
        Binding("k,up", "scroll(-1)", "Scroll up", show=False, id="pair.up"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="pair.page_down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="pair.page_up"),
        Binding("d", "to_criteria", "Differing criteria", id="pair.criteria"),
        Binding("g,home", "top", "Top", show=False, id="pair.top"),
    ]

    def __init__(
        self,
        result: Comparison,
        pairs: list[tuple[int, int, str]],
        index: int,
        details: tuple[ConversationDetail, ConversationDetail],
    ) -> None:
        super().__init__()
        self.result = result
        self.pairs = pairs
        self.index = index
        self.details = details

    @classmethod
    async def read(cls, store: Store, result: Comparison, pairs: list[tuple[int, int, str]], index: int) -> PairScreen:
        return cls(result, pairs, index, await read_pair(store, pairs[index]))

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield Static(id="pair-title")
        with VerticalScroll(id="pair-body"):
            yield Static(id="pair-prompt")
            with Horizontal(id="pair-replies"):
                yield Static(id="pair-reply-a", classes="pair-reply")
                yield Static(id="pair-reply-b", classes="pair-reply")
            yield Static(id="pair-criteria")
        yield KeyBar()

    def on_mount(self) -> None:
        self._show()
        self.set_focus(self.query_one("#pair-body"))

    def on_resize(self) -> None:
        if self.is_mounted:
            self._show()  # its header's parts are chosen for the width

    def _show(self) -> None:
        detail_a, detail_b = self.details
        summary = detail_a.summary
        pair = Text(f"Pair {self.index + 1}/{len(self.pairs)} ", style="bold")
        pair.append(one_line(self.pairs[self.index][2], 30), style="dim")
        prompt_id = Text(one_line(summary.prompt_id, 40), style="dim")
        prompt_id.append(repeated(summary.repeat, self.result.repeats), style="dim")
        parts = [pair, score_text("A", detail_a), score_text("B", detail_b), prompt_id]
        # Left out whole when it does not fit (80 columns): never "emergency_referr…".
        title = fitted([*parts, Text(one_line(summary.theme or "-", 30))], self.app.size.width - 2)
        self.query_one("#pair-title", Static).update(title)
        prompt = Text("\n\n").join(message_text(m.get("role", "?"), m.get("content", "")) for m in detail_a.prompt)
        self.query_one("#pair-prompt", Static).update(prompt)
        for widget_id, label, run, detail in (
            ("#pair-reply-a", "A", self.result.run_a, detail_a),
            ("#pair-reply-b", "B", self.result.run_b, detail_b),
        ):
            text = Text()
            text.append(f"{label} ", style="bold reverse")
            text.append(f" run {run.id} ", style="bold")
            text.append(one_line(run.model_test, 40), style="dim")
            text.append("\n")
            text.append_text(reply_text(detail))
            self.query_one(widget_id, Static).update(text)
        self.query_one("#pair-criteria", Static).update(
            criteria_text(differing_criteria(detail_a.verdicts, detail_b.verdicts))
        )

    # ---- actions -----------------------------------------------------------------------------
    async def action_step(self, delta: int) -> None:
        target = self.index + delta
        if not 0 <= target < len(self.pairs):
            self.say("first of the list" if delta < 0 else "last of the list")
            return
        self.details = await read_pair(self.app.db, self.pairs[target])
        self.index = target
        self._show()
        self.query_one("#pair-body", VerticalScroll).scroll_home(animate=False)

    def action_scroll(self, direction: int) -> None:
        body = self.query_one("#pair-body", VerticalScroll)
        (body.scroll_down if direction > 0 else body.scroll_up)(animate=False)

    def action_page(self, direction: int) -> None:
        body = self.query_one("#pair-body", VerticalScroll)
        (body.scroll_page_down if direction > 0 else body.scroll_page_up)(animate=False)

    def action_top(self) -> None:
        self.query_one("#pair-body", VerticalScroll).scroll_home(animate=False)

    def action_to_criteria(self) -> None:
        self.query_one("#pair-criteria").scroll_visible(top=True, animate=False)


async def read_pair(store: Store, pair: tuple[int, int, str]) -> tuple[ConversationDetail, ConversationDetail]:
    return await store.conversation_detail(pair[0]), await store.conversation_detail(pair[1])
