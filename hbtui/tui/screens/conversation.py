"""One conversation under review: the prompt, the reply, and every criterion's verdict.

The screen keeps the list order it was opened with (ids), so n/N step through exactly the
conversations the list showed, without going back to it. Wide terminals put the transcript
and the rubric side by side; narrow ones stack them in one scroll.
"""

from __future__ import annotations

import json

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from hbtui.prices import tokens_text
from hbtui.store import ConversationDetail
from hbtui.text import one_line, visible_controls
from hbtui.tui.breakpoints import NARROW, ResponsiveScreen
from hbtui.tui.reviewing import ReviewActions
from hbtui.tui.widgets.breakdown import score_style
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.verdict_list import KINDS, VerdictList

# What m, p and e say when the conversation has nothing of that kind (an avoided penalty is
# a penalty criterion too: "no triggered penalty", not "no penalty criterion").
NONE_OF_KIND = {
    "not-met": "no missed criterion",
    "penalty": "no triggered penalty",
    "grader-error": "no grader error",
}


# While its run is going, a conversation not yet answered and graded is read again this often.
LIVE_SECONDS = 2.0


def still_coming(detail: ConversationDetail) -> bool:
    """The reply or some verdict is still to come."""
    return detail.summary.status == "pending" or any(v.status == "pending" for v in detail.verdicts)


def answered(detail: ConversationDetail) -> tuple:
    """What changes as the run answers: the reply's arrival and each verdict's status."""
    return detail.summary.status, detail.reply is not None, tuple(v.status for v in detail.verdicts)


def message_text(role: str, content) -> Text:
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, indent=1)
    text = Text()
    text.append(visible_controls(str(role)).upper(), style="bold")
    text.append("\n")
    text.append(visible_controls(content))
    return text


def short_id(prompt_id: str) -> str:
    """A prompt id short enough to leave room: HealthBench's are 36-character UUIDs."""
    flat = one_line(prompt_id, 40)
    return flat if len(flat) <= 12 else flat[:8] + "…"


def header_text(detail: ConversationDetail, index: int, count: int, reviewed: Text | None = None) -> Text:
    s = detail.summary
    text = Text()
    text.append(f"Conversation {index + 1}/{count}", style="bold")
    text.append(f"  #{s.position + 1}", style="dim")
    if s.repeat:
        text.append(f" (repeat {s.repeat})", style="dim")
    # The score first: at 80 columns what comes last is cut.
    text.append("  score ")
    if s.score is not None:
        text.append(f"{s.score:.3f}", style=f"bold {score_style(s.score)}")
    elif s.status == "failed":
        text.append("— no reply", style="bold red")
    else:
        text.append("err" if s.n_errors else "—", style="bold magenta")
    if reviewed is not None:
        text.append_text(reviewed)
    met = s.n_met if s.n_met is not None else 0
    positives = sum(1 for v in detail.verdicts if v.points > 0)
    text.append(f"  {met}/{positives} met", style="green")
    text.append("  ")
    text.append(short_id(s.prompt_id), style="dim")
    text.append("  ")
    text.append(one_line(s.theme or "-", 30))
    if s.penalties:
        text.append(f"  {s.penalties} penalt{'y' if s.penalties == 1 else 'ies'}", style="red")
    if s.n_errors:
        text.append(f"  {s.n_errors} grader error{'s' if s.n_errors != 1 else ''}", style="magenta")
    return text


def reply_text(detail: ConversationDetail) -> Text:
    text = Text()
    text.append("REPLY", style="bold")
    if detail.finish_reason == "length":
        text.append("  ⚠ truncated (finish_reason: length)", style="bold yellow")
    prompt_tokens, completion_tokens = detail.tokens.reply
    if prompt_tokens or completion_tokens:
        text.append(f"  tokens {tokens_text(prompt_tokens)} in/{tokens_text(completion_tokens)} out", style="dim")
    text.append("\n")
    if detail.reply is None and detail.summary.status == "pending":
        text.append("not generated yet", style="dim")
        return text
    if detail.reply is None:
        text.append("no reply", style="bold red")
        if detail.error:
            text.append(": ")
            text.append(visible_controls(detail.error))
        return text
    text.append(visible_controls(detail.reply))
    return text


class ConversationScreen(ReviewActions, ResponsiveScreen):
    """A conversation's transcript, reply and verdicts; n/N step through the list."""

    BINDINGS = [
        Binding("n,right_square_bracket", "step(1)", "Next conversation", id="conversation.next"),
        Binding("N,left_square_bracket", "step(-1)", "Previous conversation", show=False, id="conversation.previous"),
        Binding("j,down", "criterion(1)", "Next criterion", show=False, id="conversation.down"),
        Binding(
            "k,up",
            "criterion(-1)",
            "Previous criterion (above the first: the conversation)",
            show=False,
            id="conversation.up",
        ),
        Binding("pagedown,space", "page(1)", "Scroll the conversation down", show=False, id="conversation.page_down"),
        Binding("pageup", "page(-1)", "Scroll the conversation up", show=False, id="conversation.page_up"),
        Binding("g,home", "scroll_home_all", "Go to the top", show=False, id="conversation.top"),
        Binding("G,end", "last_criterion", "Go to the last criterion", show=False, id="conversation.bottom"),
        Binding("m", "jump('not-met')", "Next missed criterion", id="conversation.missed"),
        Binding("p", "jump('penalty')", "Next penalty", id="conversation.penalty"),
        Binding("e", "jump('grader-error')", "Next error", id="conversation.error"),
        Binding("r", "toggle_reasoning", "Show reasoning", id="conversation.reasoning"),
        Binding("c", "copy_explanation", "Copy why", id="conversation.copy_explanation"),
        Binding("y", "copy_reply", "Copy reply", id="conversation.copy_reply"),
        Binding("w", "review('flip')", "Mark the verdict wrong (flip it)", show=False, id="conversation.review_flip"),
        Binding("f", "review('flag')", "Flag the verdict with a note", show=False, id="conversation.review_flag"),
        Binding("u", "review('undo')", "Undo my last review of the verdict", show=False, id="conversation.review_undo"),
    ]

    reasoning_shown: reactive[bool] = reactive(False, init=False)  # the model's reasoning unfolded (r)

    def __init__(
        self, run_id: int, conversation_ids: list[int], index: int, detail: ConversationDetail | None = None
    ) -> None:
        """``detail``, when the opener has read it already, is drawn in the first frame."""
        super().__init__()
        self.run_id = run_id
        self.conversation_ids = list(conversation_ids)
        self.index = index
        self.detail: ConversationDetail | None = None
        self.loaded = False
        self._preloaded = detail

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield Static(Text("Loading…", style="dim"), id="conversation-title")
        with Horizontal(id="conversation-body"):
            with VerticalScroll(id="transcript", can_focus=False):
                yield Static(id="messages")
                yield Static(id="reply", classes="reply")
                yield Static(id="reasoning")
            with VerticalScroll(id="criteria", can_focus=False):
                yield Static(Text("RUBRIC", style="bold"), id="criteria-title")
                yield VerdictList(id="verdicts")
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_interval(LIVE_SECONDS, self._follow)
        self.load_ledger()
        if self._preloaded is not None:
            # Filled before the first layout: one layout pass, and no "Loading…" frame.
            self._show(self._preloaded, self.index)
            self._preloaded = None
        else:
            self.show_conversation(self.index)

    @work(group="conversation-load", exclusive=True)
    async def show_conversation(self, index: int) -> None:
        detail = await self.app.db.conversation_detail(self.conversation_ids[index])
        self._show(detail, index)
        for pane in self.query(VerticalScroll):
            pane.scroll_home(animate=False, immediate=True)
        self.query_one("#conversation-body").scroll_home(animate=False, immediate=True)

    @work(group="conversation-follow", exclusive=True)
    async def _follow(self) -> None:
        """A conversation still being generated or graded (its run is going) is read again."""
        detail = self.detail
        if detail is None or not self.loaded or self.app.screen is not self or not still_coming(detail):
            return
        fresh = await self.app.db.conversation_detail(detail.summary.id)
        if self.detail is detail and answered(fresh) != answered(detail):  # not stepped away meanwhile
            self._show(fresh, self.index, keep_place=True)

    def _show(self, detail: ConversationDetail, index: int, keep_place: bool = False) -> None:
        """Fill the screen with ``detail``; ``keep_place`` keeps the selected criterion (a refresh)."""
        self.index = index
        self.detail = detail
        self.refresh_title()
        messages = Text("\n\n").join(message_text(m.get("role", "?"), m.get("content", "")) for m in detail.prompt)
        self.query_one("#messages", Static).update(messages)
        self.query_one("#reply", Static).update(reply_text(detail))
        if not keep_place:
            self.set_reactive(ConversationScreen.reasoning_shown, False)  # folded again, drawn just below
        self._show_reasoning()
        verdicts = self.query_one(VerdictList)
        selected = verdicts.selected
        verdicts.show(detail.verdicts, detail.tokens.verdicts)
        if keep_place and 0 <= selected < len(verdicts.items):
            verdicts.selected = selected
        counts = {kind: 0 for kind in KINDS}
        for item in verdicts.items:
            counts[item.kind] += 1
        title = Text("RUBRIC", style="bold")
        for kind, count in counts.items():
            if count:
                label, style = KINDS[kind]
                title.append("  ")
                title.append(f"{count} {label.split(' ', 1)[1]}", style=style)
        self.query_one("#criteria-title", Static).update(title)
        self.show_reviews()
        if not keep_place:
            self.load_hints(detail.summary.id)
        self.loaded = True

    def refresh_title(self) -> None:
        if self.detail is not None:
            title = header_text(self.detail, self.index, len(self.conversation_ids), self.review_score())
            self.query_one("#conversation-title", Static).update(title)

    def _show_reasoning(self) -> None:
        """The model's reasoning, folded to one line until `r` unfolds it."""
        reasoning = self.query_one("#reasoning", Static)
        text = self.detail.reasoning if self.detail else None
        reasoning.display = bool(text)
        if not text:
            return
        line = Text("▾ reasoning (r hides it)" if self.reasoning_shown else "▸ reasoning (r shows it)", style="bold")
        if self.reasoning_shown:
            line.append("\n")
            line.append(visible_controls(text), style="")
        reasoning.update(line)

    # ---- actions -------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        target = self.index + delta
        if not 0 <= target < len(self.conversation_ids):
            self.say("first conversation of the list" if delta < 0 else "last conversation of the list")
            return
        self.loaded = False
        self.show_conversation(target)

    def action_criterion(self, delta: int) -> None:
        verdicts = self.query_one(VerdictList)
        if delta < 0 and verdicts.selected <= 0:
            self.action_scroll_home_all()  # up from the first criterion: back to the conversation
            return
        verdicts.select(verdicts.selected + delta if verdicts.selected >= 0 else 0)

    def _conversation_scroll(self) -> Widget:
        """What scrolls the transcript: its own pane when wide, the whole body when narrow."""
        return self.query_one("#conversation-body" if self.has_class(NARROW) else "#transcript")

    def action_page(self, direction: int) -> None:
        scroll = self._conversation_scroll()
        if direction > 0:
            scroll.scroll_page_down(animate=False)
        else:
            scroll.scroll_page_up(animate=False)

    def action_last_criterion(self) -> None:
        verdicts = self.query_one(VerdictList)
        verdicts.select(len(verdicts.items) - 1)

    def action_scroll_home_all(self) -> None:
        """The top of the conversation and of the rubric, no criterion selected."""
        self.query_one(VerdictList).deselect()
        for pane in (*self.query(VerticalScroll), self.query_one("#conversation-body")):
            pane.scroll_home(animate=False)

    def action_jump(self, kind: str) -> None:
        if self.query_one(VerdictList).next_of({kind}) is None:
            self.say(f"{NONE_OF_KIND[kind]} in this conversation")

    def action_copy_explanation(self) -> None:
        verdicts = self.query_one(VerdictList)
        item = verdicts.current or verdicts.select(0)
        if item is None:
            return
        self.app.copy_to_clipboard(item.copy_text)
        self.say("copied the selected criterion's explanation")

    def action_copy_reply(self) -> None:
        if self.detail is None or self.detail.reply is None:
            self.say("no reply to copy")
            return
        self.app.copy_to_clipboard(self.detail.reply)
        self.say("copied the reply")

    def action_toggle_reasoning(self) -> None:
        if self.detail is None or not self.detail.reasoning:
            self.say("this reply has no reasoning")
            return
        self.reasoning_shown = not self.reasoning_shown

    def watch_reasoning_shown(self, shown: bool) -> None:
        self._show_reasoning()
        if shown:  # unfolded where it is seen, not below the fold
            reasoning = self.query_one("#reasoning", Static)
            self.call_after_refresh(lambda: reasoning.scroll_visible(top=True, animate=False))
