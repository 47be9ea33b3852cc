"""A reviewer's keys on the conversation screen: w flips the selected verdict (marks it wrong),
f flags it with a one-line note, u undoes the reviewer's last review of it.

The screen holds the run's verdicts and reviews (a ReviewLedger, read once), so that a review's
new reviewed score, of the conversation and of the run, is drawn in the frame after the key: one
conversation is scored again (hbtui.core.reviews, the reference's scoring), not the run.

Who reviews: REVIEWER, else $USER. Under `hbtui serve` every browser tab is an app of the
server's account, whose $USER is not the person at the browser: the tab asks once (Textual's
``App.is_web``: its driver is textual-serve's web driver) and keeps the answer for that tab.
"""

from __future__ import annotations

import getpass
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.css.query import NoMatches

from hbtui.core import reviews as rv
from hbtui.core.scoring import GradedCriterion
from hbtui.core.text import one_line
from hbtui.core.verdicts import FAILED
from hbtui.store import ERROR, MET, NOT_MET, NothingToReview, StoreError, verdict_met
from hbtui.tui.screens.review_question import ReviewQuestion
from hbtui.tui.widgets.breakdown import score_style
from hbtui.tui.widgets.verdict_list import VerdictList

REVIEWER_ATTRIBUTE = "reviewer_name"  # on the app: one name per app, so per browser tab when served


def served(app) -> bool:
    return bool(getattr(app, "is_web", False))


def configured_reviewer(app) -> str | None:
    settings = getattr(app, "settings", None)
    return getattr(settings, "reviewer", None) or None


def own_account() -> str | None:
    """$USER, else the account's name as the system knows it (a service or a container may set no $USER)."""
    try:
        return os.environ.get("USER") or getpass.getuser() or None
    except (OSError, KeyError):  # no name for this uid at all: the reviewer is asked
        return None


# Ids of reviews on screen before the store has them: after every stored one, so that the
# history's order (by id) is the order they were made in.
PROVISIONAL_IDS = 10**15


class ReviewLedger:
    """The run's scores as graded and its reviews, as the conversation screen holds them: the
    verdicts of the reviewed conversations alone are read (a run's 60,000 are not), the others
    keep the score their row holds, which is the same scoring's."""

    def __init__(
        self,
        graded: dict[int, float],
        reviewed: Sequence[rv.ScoredConversation],
        history: Sequence[rv.Review],
    ) -> None:
        self.conversations = {c.conversation_id: c for c in reviewed}
        self.history = list(history)
        self.graded = graded
        self.scores = rv.reviewed_scores(reviewed, rv.states(history), graded)
        self._provisionals = 0

    @classmethod
    async def read(cls, store, run_id: int) -> ReviewLedger:
        history = await store.run_reviews(run_id)
        reviewed = sorted({r.conversation_id for r in history})
        conversations = await store.review_inputs(run_id, reviewed) if reviewed else []
        return cls(await store.graded_scores(run_id), conversations, history)

    def of_conversation(self, conversation_id: int) -> list[rv.Review]:
        return [r for r in self.history if r.conversation_id == conversation_id]

    def add(self, review: rv.Review, conversation: rv.ScoredConversation | None = None) -> None:
        """A new review, and the reviewed score of its conversation again (the others keep theirs);
        ``conversation``: its verdicts, where the ledger does not hold them yet."""
        self.history.append(review)
        if conversation is not None:
            self.conversations.setdefault(conversation.conversation_id, conversation)
        self._rescore(review.conversation_id)

    def _rescore(self, conversation_id: int) -> None:
        held = self.conversations.get(conversation_id)
        if held is None or conversation_id not in self.scores:
            return
        score = rv.reviewed_score_of(held, rv.states(self.of_conversation(conversation_id)))
        if score is not None:  # keeps its place in the run's order: the mean sums in that order
            self.scores[conversation_id] = score

    def provisional(
        self, key: rv.VerdictKey, reviewer: str, action: str, note: str | None, graded: str
    ) -> rv.Review | None:
        """The review the store is about to append, worked out as it works it out, so that the new
        reviewed score is on screen in the frame after the key rather than after the write; None
        where the store will refuse it (an undo with nothing to undo: it says why)."""
        history = [r for r in self.history if r.key == key]
        met = undoes = None
        if action == rv.UNDO:
            last = rv.last_standing_of(history, reviewer, key)
            if last is None:
                return None
            undoes = last.id
        elif action == rv.FLIP:
            flips = [r for r in rv.standing(history) if r.action == rv.FLIP]
            met = not (flips[-1].met if flips else verdict_met(graded))
        self._provisionals += 1
        return rv.Review(
            id=PROVISIONAL_IDS + self._provisionals,
            conversation_id=key[0],
            idx=key[1],
            reviewer=reviewer,
            at=time.time(),
            action=action,
            met=met,
            note=note,
            undoes=undoes,
            graded_status=graded,
        )

    def settle(self, provisional: rv.Review, stored: rv.Review | None) -> None:
        """The stored review in the provisional one's place, or none where it was not stored.
        Found by its id: an undo of it made meanwhile (`w` then `u` before the flip was written)
        was given the stored id when the flip settled, so it is no longer equal to what its own
        write hands back here."""
        at = next(i for i, review in enumerate(self.history) if review.id == provisional.id)
        if stored is None:
            del self.history[at]
        else:
            self.history[at] = stored
            self.history = [replace(r, undoes=stored.id) if r.undoes == provisional.id else r for r in self.history]
        self._rescore(provisional.conversation_id)

    @property
    def run_score(self) -> float | None:
        return rv.overall_of(self.scores)


def scored_conversation(detail) -> rv.ScoredConversation:
    """A conversation on screen as scoring reads it (its verdicts are the detail's)."""
    verdicts = detail.verdicts
    return rv.ScoredConversation(
        detail.summary.id,
        detail.example_tags,
        [v.idx for v in verdicts],
        [GradedCriterion(v.points, tuple(v.tags), verdict_met(v.status)) for v in verdicts],
        detail.summary.status == FAILED,
        sum(v.status == ERROR for v in verdicts),
    )


def review_lines(state: rv.ReviewState, graded: bool | None) -> list[Text]:
    """What the rubric says of a verdict's reviews, a line each (names and notes are data)."""
    lines = []
    if state.decision is not None:
        verdict = "MET" if state.met(graded) else "NOT MET"
        how = "flipped" if state.flipped(graded) else "kept as graded"
        text = Text(f"{'⟲' if state.flipped(graded) else '✓'} reviewed {verdict}: {how}", style="bold cyan")
        text.append(f" by {one_line(state.decision.reviewer, 40)}", style="cyan")
        lines.append(text)
    if state.flag is not None:
        text = Text(f"⚑ flagged by {one_line(state.flag.reviewer, 40)}", style="bold yellow")
        if state.flag.note:
            text.append(": " + one_line(state.flag.note, 300), style="yellow")
        lines.append(text)
    return lines


def hint_line(earlier: Sequence[rv.Review]) -> Text | None:
    """The latest earlier run's reviews of the same reply and criterion: shown, not applied."""
    standing = rv.standing(earlier)
    if not standing:
        return None
    latest = standing[-1]
    state = rv.states([r for r in earlier if r.run_id == latest.run_id])[latest.key]
    parts = []
    if state.decision is not None:
        parts.append(f"{one_line(state.decision.reviewer, 40)} held it {'MET' if state.decision.met else 'NOT MET'}")
    if state.flag is not None:
        note = f": {one_line(state.flag.note, 200)}" if state.flag.note else ""
        parts.append(f"{one_line(state.flag.reviewer, 40)} flagged it{note}")
    text = Text(f"hint: in run {latest.run_id}, " + "; ".join(parts), style="dim italic")
    text.append(" (not applied)", style="dim")
    return text


def score_part(conversation_score: float | None, run_score: float | None) -> list[Text]:
    """The header's reviewed scores, after the graded one: the conversation's (kept with the
    graded score as long as the width allows) and the run's (given way first)."""
    mine = Text("reviewed ")
    if conversation_score is None:
        mine.append("—", style="bold magenta")
    else:
        mine.append(f"{conversation_score:.3f}", style=f"bold {score_style(conversation_score)}")
    if run_score is None:
        return [mine]
    return [mine, Text(f"(run reviewed {run_score:.3f})", style="dim")]


class ReviewActions:
    """The review keys' actions, mixed into the conversation screen (whose BINDINGS name them)."""

    ledger: ReviewLedger | None = None
    hints: dict[int, list[rv.Review]] = {}  # replaced as a whole, never mutated: shared empty default
    hints_for: int | None = None

    if TYPE_CHECKING:  # the conversation screen's own, which this is mixed into
        app: Any
        run_id: int
        detail: Any

        def say(self, message: str) -> None: ...
        def query_one(self, *args: Any, **kwargs: Any) -> Any: ...
        def refresh_title(self) -> None: ...

    @work(group="review-ledger", exclusive=True)
    async def load_ledger(self) -> None:
        self.ledger = await ReviewLedger.read(self.app.db, self.run_id)
        self.show_reviews()

    @work(group="review-hints", exclusive=True)
    async def load_hints(self, conversation_id: int) -> None:
        hints = await self.app.db.earlier_reviews(conversation_id)
        if self.detail is not None and self.detail.summary.id == conversation_id:
            self.hints, self.hints_for = hints, conversation_id
            self.show_reviews()

    def review_score(self) -> list[Text] | None:
        """The header's reviewed part, where the conversation or the run has a review."""
        ledger, detail = self.ledger, self.detail
        if ledger is None or detail is None or not ledger.history:
            return None
        conversation_id = detail.summary.id
        return score_part(ledger.scores.get(conversation_id), ledger.run_score)

    def show_reviews(self) -> None:
        """The rubric's review and hint lines, and the header's reviewed score, from what is held."""
        detail = self.detail
        if detail is None:
            return
        conversation_id = detail.summary.id
        if self.hints_for != conversation_id:
            self.hints, self.hints_for = {}, None
        states = rv.states(self.ledger.of_conversation(conversation_id)) if self.ledger else {}
        lines: dict[int, list[Text]] = {}
        for verdict in detail.verdicts:
            graded = verdict_met(verdict.status)
            found = review_lines(states.get((conversation_id, verdict.idx), rv.NOT_REVIEWED_STATE), graded)
            hint = hint_line(self.hints.get(verdict.idx, []))
            if hint is not None:
                found.append(hint)
            if found:
                lines[verdict.idx] = found
        try:
            self.query_one(VerdictList).set_notes(lines)
            self.refresh_title()
        except NoMatches:  # the screen was closed while its reviews were read or written
            pass

    # ---- the keys ------------------------------------------------------------------------
    def action_review(self, action: str) -> None:
        verdicts = self.query_one(VerdictList)
        item = verdicts.current
        if item is None:
            self.say("select a criterion first (j/k)")
            return
        if item.verdict.status not in (MET, NOT_MET):
            self.say("only a graded verdict (met or not met) can be reviewed")
            return
        key = (self.detail.summary.id, item.verdict.idx)
        if action == rv.FLAG:
            self.with_reviewer(lambda name: self.ask_note(name, key))
        else:
            self.with_reviewer(lambda name: self.record(key, name, action))

    def with_reviewer(self, then: Callable[[str], object]) -> None:
        """``then`` with the reviewer's name: asked once per app when served, else the setting or $USER."""
        app = self.app
        name = getattr(app, REVIEWER_ATTRIBUTE, None)
        if name:
            then(name)
            return
        if not served(app):
            name = configured_reviewer(app) or own_account()
            if name:
                setattr(app, REVIEWER_ATTRIBUTE, name)
                then(name)
                return

        def answered(answer: str | None) -> None:
            if answer:
                setattr(app, REVIEWER_ATTRIBUTE, answer)
                then(answer)

        question = "Your name on your reviews (asked once in this tab):"
        app.push_screen(ReviewQuestion(question, configured_reviewer(app) or "", "your name", required=True), answered)

    def ask_note(self, name: str, key: rv.VerdictKey) -> None:
        def answered(note: str | None) -> None:
            if note is not None:  # escape: no flag
                self.record(key, name, rv.FLAG, note or None)

        self.app.push_screen(
            ReviewQuestion("Flag this verdict; a note for whoever reads it (enter flags):", "", "a note (optional)"),
            answered,
        )

    @work(group="review-write", exclusive=False)
    async def record(self, key: rv.VerdictKey, name: str, action: str, note: str | None = None) -> None:
        ledger, shown = self.ledger, self.detail
        on_screen = shown is not None and shown.summary.id == key[0]
        conversation = scored_conversation(shown) if on_screen else None
        graded = next((v.status for v in shown.verdicts if v.idx == key[1]), "") if on_screen and shown else ""
        # Shown at once, stored after: the write is the store's (it has the last word below).
        provisional = ledger.provisional(key, name, action, note, graded) if ledger is not None else None
        if ledger is not None and provisional is not None:
            ledger.add(provisional, conversation)
            self.show_reviews()
        try:
            review = await self.app.db.add_review(*key, name, action, note=note)
        except (NothingToReview, StoreError, sqlite3.Error) as exc:
            if ledger is not None and provisional is not None:
                ledger.settle(provisional, None)
                self.show_reviews()
            self.say(str(exc) if isinstance(exc, NothingToReview) else f"the review was not saved: {exc}")
            return
        if ledger is not None:
            if provisional is not None:
                ledger.settle(provisional, review)
            else:
                ledger.add(review, conversation)
        self.show_reviews()
        done = {rv.FLIP: "marked wrong (flipped)", rv.FLAG: "flagged", rv.UNDO: "your last review undone"}[action]
        self.say(f"{done} by {one_line(name, 40)}")
