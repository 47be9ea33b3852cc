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

from hbtui.core import reviews as rv
from hbtui.core.numbering import repeat_label
from hbtui.core.settings.prices import tokens_text
from hbtui.core.text import one_line, visible_controls
from hbtui.core.verdicts import FAILED, PENDING
from hbtui.store import ConversationDetail, IdealCompletions
from hbtui.tui.breakpoints import NARROW, ResponsiveScreen
from hbtui.tui.fit import fitted
from hbtui.tui.screens.reviewing import ReviewActions
from hbtui.tui.widgets.breakdown import score_style
from hbtui.tui.widgets.key_bar import KeyBar
from hbtui.tui.widgets.verdict_list import KINDS, VerdictList

# What m, p and e say when the conversation has nothing of that kind (an avoided penalty is
# a penalty criterion too: "no triggered penalty", not "no penalty criterion").
NONE_OF_KIND = {
    "missed": "no missed criterion",
    "penalty": "no triggered penalty",
    "grader-error": "no grader error",
}


# While its run is going, a conversation not yet answered and graded is read again this often.
LIVE_SECONDS = 2.0


def still_coming(detail: ConversationDetail) -> bool:
    """The reply or some verdict is still to come."""
    return detail.summary.status == PENDING or any(v.status == PENDING for v in detail.verdicts)


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


def header_text(
    detail: ConversationDetail,
    index: int,
    count: int,
    repeats: int = 1,
    width: int | None = None,
    reviewed: list[Text] | None = None,
) -> Text:
    """The conversation's one-line header, its parts by importance: given a ``width``, a part
    that does not fit is left out whole (the next may still fit), never cut mid-word. The
    reviewed score, once there is a review, stays with the graded one."""
    s = detail.summary
    where = Text(f"#{s.position + 1}", style="dim")
    if repeats > 1:
        where.append(f" ({repeat_label(s.repeat, repeats)})", style="dim")
    score = Text("score ")
    if s.score is not None:
        score.append(f"{s.score:.3f}", style=f"bold {score_style(s.score)}")
    elif s.status == FAILED:
        score.append("— no reply", style="bold red")
    else:
        score.append("err" if s.n_errors else "—", style="bold magenta")
    met = s.n_met if s.n_met is not None else 0
    positives = sum(1 for v in detail.verdicts if v.points > 0)
    mine, run_reviewed = (reviewed[0], reviewed[1:]) if reviewed else (None, [])
    parts = [Text(f"Conversation {index + 1}/{count}", style="bold"), where, score]
    if mine is not None:  # reviewing, the reviewed score is what moves: it goes right after the graded one
        parts.append(mine)
    parts.append(Text(f"{met}/{positives} met", style="green"))
    if s.penalties:
        parts.append(Text(f"{s.penalties} penalt{'y' if s.penalties == 1 else 'ies'}", style="red"))
    if s.n_errors:
        parts.append(Text(f"{s.n_errors} grader error{'s' if s.n_errors != 1 else ''}", style="magenta"))
    parts += [*run_reviewed, Text(short_id(s.prompt_id), style="dim"), Text(one_line(s.theme or "-", 30))]
    return fitted(parts, width)


def reply_text(detail: ConversationDetail) -> Text:
    text = Text()
    text.append("REPLY", style="bold")
    if detail.finish_reason == "length":
        text.append("  ⚠ truncated (finish_reason: length)", style="bold yellow")
    prompt_tokens, completion_tokens = detail.tokens.reply
    if prompt_tokens or completion_tokens:
        text.append(f"  tokens {tokens_text(prompt_tokens)} in/{tokens_text(completion_tokens)} out", style="dim")
    text.append("\n")
    if detail.reply is None and detail.summary.status == PENDING:
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


def ideal_text(ideal: IdealCompletions | None) -> Text:
    text = Text()
    text.append("IDEAL COMPLETION", style="bold")
    text.append("  (i hides it)", style="dim")
    text.append("\n")
    if ideal is None:
        text.append("This record has no ideal completion in the dataset.", style="bold yellow")
        return text
    if ideal.group:
        text.append("completion group ", style="dim")
        text.append(visible_controls(ideal.group))
        text.append("\n")
    text.append("Physician's completion", style="bold")
    text.append("\n")
    if ideal.ideal:
        text.append(visible_controls(ideal.ideal))
    else:
        text.append("none in the record", style="dim")
    for number, reference in enumerate(ideal.references, start=1):
        text.append(f"\n\nReference completion {number} of {len(ideal.references)}", style="bold")
        text.append("\n")
        text.append(visible_controls(reference))
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
        Binding("m", "jump('missed')", "Next missed criterion", id="conversation.missed"),
        Binding("p", "jump('penalty')", "Next penalty", id="conversation.penalty"),
        Binding("e", "jump('grader-error')", "Next error", id="conversation.error"),
        Binding("r", "toggle_reasoning", "Show reasoning", id="conversation.reasoning"),
        Binding("i", "toggle_ideal", "Ideal completion", show=False, id="conversation.ideal"),
        Binding("c", "copy_explanation", "Copy why", id="conversation.copy_explanation"),
        Binding("y", "copy_reply", "Copy reply", id="conversation.copy_reply"),
        Binding("T", "copy('criterion')", "Copy criterion text", show=False, id="conversation.copy_criterion"),
        Binding("P", "copy('prompt')", "Copy the prompt", show=False, id="conversation.copy_prompt"),
        Binding("I", "copy('prompt_id')", "Copy the prompt_id", show=False, id="conversation.copy_prompt_id"),
        Binding("M", "copy('markdown')", "Copy as Markdown with verdicts", show=False, id="conversation.copy_markdown"),
        Binding("greater_than_sign", "match(1)", "Next search match", show=False, id="conversation.next_match"),
        Binding("less_than_sign", "match(-1)", "Previous search match", show=False, id="conversation.previous_match"),
        Binding("w", "review('flip')", "Mark the verdict wrong (flip it)", show=False, id="conversation.review_flip"),
        Binding("f", "review('flag')", "Flag the verdict with a note", show=False, id="conversation.review_flag"),
        Binding("u", "review('undo')", "Undo my last review of the verdict", show=False, id="conversation.review_undo"),
    ]

    reasoning_shown: reactive[bool] = reactive(False, init=False)  # the model's reasoning unfolded (r)

    def __init__(
        self,
        run_id: int,
        conversation_ids: list[int],
        index: int,
        detail: ConversationDetail | None = None,
        *,
        repeats: int = 1,
    ) -> None:
        """``detail``, when the opener has read it already, is drawn in the first frame."""
        super().__init__()
        self.run_id = run_id
        self.repeats = repeats  # the run's --repeats: a repeat is labelled "repeat 1 of 2"
        self.conversation_ids = list(conversation_ids)
        self.index = index
        self.detail: ConversationDetail | None = None
        self.loaded = False
        self._preloaded = detail
        self.search_text: str | None = None  # the run screen's search: > and < step through its matches
        self.criterion_of: dict[int, int] = {}  # opened from the criteria view: its criterion in each
        self.ideal_shown = False  # i: the record's ideal completion below the reply, kept open by n/N
        self._last_selected = -1  # the criterion selected, kept as it changes: stored as the screen closes

    def compose(self) -> ComposeResult:
        self.apply_breakpoint()
        yield Static(Text("Loading…", style="dim"), id="conversation-title")
        with Horizontal(id="conversation-body"):
            with VerticalScroll(id="transcript", can_focus=False):
                yield Static(id="messages")
                yield Static(id="reply", classes="reply")
                yield Static(id="ideal", classes="reply")
                yield Static(id="reasoning")
            with VerticalScroll(id="criteria", can_focus=False):
                yield Static(Text("RUBRIC", style="bold"), id="criteria-title")
                yield VerdictList(id="verdicts")
        yield KeyBar()

    def on_resize(self) -> None:
        # The header's parts are chosen for the width: chosen again for a new one.
        if self.detail is not None:
            header = header_text(
                self.detail, self.index, len(self.conversation_ids), self.repeats, self.app.size.width - 2
            )
            self.query_one("#conversation-title", Static).update(header)

    def on_mount(self) -> None:
        self.query_one("#ideal").display = False
        self.watch(self.query_one(VerdictList), "selected", self._selected_changed, init=False)
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
        if self.ideal_shown and not keep_place:
            self.show_ideal(detail.summary.id)
        if not keep_place:
            self.set_reactive(ConversationScreen.reasoning_shown, False)  # folded again, drawn just below
        self._show_reasoning()
        verdicts = self.query_one(VerdictList)
        selected = verdicts.selected
        verdicts.show(detail.verdicts, detail.tokens.verdicts)
        if keep_place and 0 <= selected < len(verdicts.items):
            verdicts.selected = selected
        elif detail.summary.id in self.criterion_of:
            verdicts.select(self.criterion_of[detail.summary.id])
        if not keep_place:
            self._remember()
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

    def _remember(self) -> None:
        """Where the reviewer is, stored for the run's next opening (app-wide: it outlives the screen)."""
        if self.detail is None:
            return
        selected = self._last_selected = self.query_one(VerdictList).selected
        self.app.run_worker(
            self.app.db.remember_review_position(self.run_id, self.detail.summary.id, selected),
            group="remember-review-position",
        )

    def _selected_changed(self, selected: int) -> None:
        self._last_selected = selected

    def on_unmount(self) -> None:
        store = self.app.store
        if self.detail is not None and store is not None:
            self.app.run_worker(
                store.remember_review_position(self.run_id, self.detail.summary.id, self._last_selected),
                group="remember-review-position",
            )

    def refresh_title(self) -> None:
        if self.detail is not None:
            title = header_text(
                self.detail,
                self.index,
                len(self.conversation_ids),
                self.repeats,
                self.app.size.width - 2,
                self.review_score(),
            )
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

    @work(group="conversation-match", exclusive=True)
    async def action_match(self, delta: int) -> None:
        """The next (or previous) criterion whose text or explanation matches the search, on into
        the next conversations of the list (all of them matches: the list was searched)."""
        text = self.search_text
        if not text or self.detail is None:
            self.say("no search: / on the run screen searches everything")
            return
        store = self.app.db
        verdicts = self.query_one(VerdictList)
        index, selected = self.index, verdicts.selected
        while 0 <= index < len(self.conversation_ids):
            found = await store.matching_criteria(self.conversation_ids[index], text)
            if index != self.index:
                selected = -1 if delta > 0 else len(verdicts.items) + 10**6
            after = [i for i in found if (i > selected if delta > 0 else i < selected)]
            if after:
                target = after[0] if delta > 0 else after[-1]
                if index != self.index:
                    self._show(await store.conversation_detail(self.conversation_ids[index]), index)
                self.query_one(VerdictList).select(target)
                return
            index += delta
        self.say("no further match in the list" if delta > 0 else "no earlier match in the list")

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

    def action_copy(self, what: str) -> None:
        """T, P, I, M: the criterion text, the prompt, the prompt_id, the conversation as Markdown."""
        from hbtui.render.conversation_markdown import conversation_markdown, prompt_text

        detail = self.detail
        if detail is None:
            return
        if what == "criterion":
            verdicts = self.query_one(VerdictList)
            item = verdicts.current or verdicts.select(0)
            if item is None:
                self.say("no criterion to copy")
                return
            text, said = item.verdict.criterion, f"copied criterion {item.number}'s text"
        elif what == "prompt":
            text, said = prompt_text(detail), "copied the prompt"
        elif what == "prompt_id":
            text, said = detail.summary.prompt_id, "copied the prompt_id"
        else:
            states = rv.states(self.ledger.of_conversation(detail.summary.id)) if self.ledger else {}
            reviews = {idx: state for (_, idx), state in states.items()}
            text = conversation_markdown(detail, self.run_id, self.index + 1, self.repeats, reviews)
            said = "copied the conversation and its verdicts as Markdown"
        self.app.copy_to_clipboard(text)
        self.say(said)

    def action_toggle_ideal(self) -> None:
        self.ideal_shown = not self.ideal_shown
        panel = self.query_one("#ideal", Static)
        if not self.ideal_shown:
            panel.display = False
            return
        if self.detail is not None:
            self.show_ideal(self.detail.summary.id, reveal=True)

    @work(group="conversation-ideal", exclusive=True)
    async def show_ideal(self, conversation_id: int, reveal: bool = False) -> None:
        ideal = await self.app.db.ideal_completions(conversation_id)
        if not self.ideal_shown or self.detail is None or self.detail.summary.id != conversation_id:
            return
        panel = self.query_one("#ideal", Static)
        panel.update(ideal_text(ideal))
        panel.display = True
        if reveal:  # where it is seen, not below the fold
            self.call_after_refresh(lambda: panel.scroll_visible(top=True, animate=False))

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
