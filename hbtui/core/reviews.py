"""Human review of a grader's verdicts: what each review decided, and the scores it makes.

Reviews are an append-only history beside the verdicts, never written into them:

* ``flip``: the reviewer says the grader's verdict is wrong; the review carries the verdict the
  reviewer holds right (``met``), so a second reviewer who disagrees with a first one's flip
  flips it back rather than flipping the grader's verdict a second time;
* ``flag``: a note asking for attention; it decides nothing, so it changes no score;
* ``undo``: takes back the reviewer's own latest review of that verdict that still stands.

Of the reviews that stand, the latest ``flip`` of a verdict decides its reviewed verdict (the
latest review wins), and the latest ``flag`` gives its note. The reviewed score is the
reference's scoring (hbtui.core.scoring) over the reviewed verdicts; each reviewer's own reviewed score
takes that reviewer's reviews alone. Pure functions over plain values: no I/O, no store, no UI.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from hbtui.core.scoring import (
    ConversationInput,
    GradedCriterion,
    RunReport,
    clipped_mean,
    conversation_score,
    run_report,
)
from hbtui.core.verdicts import Kappa, kappa_of

FLIP, FLAG, UNDO = "flip", "flag", "undo"
ACTIONS = (FLIP, FLAG, UNDO)

# The run screen's review filter (key v), in the order v steps through them.
FLAGGED, FLIPPED, NOT_REVIEWED = "flagged", "flipped", "not-reviewed"
REVIEW_FILTERS = (FLAGGED, FLIPPED, NOT_REVIEWED)
# What each shows: conversations with a flag standing, with a verdict flipped, and with a graded
# verdict nobody has reviewed yet (a conversation half reviewed is still to do).
REVIEW_FILTER_LABELS = {FLAGGED: "flagged", FLIPPED: "flipped", NOT_REVIEWED: "some verdicts not yet reviewed"}

VerdictKey = tuple[int, int]  # (conversation id, criterion index)


@dataclass(frozen=True, slots=True)
class Review:
    """One row of the review history."""

    id: int
    conversation_id: int
    idx: int
    reviewer: str
    at: float
    action: str
    met: bool | None = None  # flip: the verdict the reviewer holds right
    note: str | None = None
    undoes: int | None = None  # undo: the id of the review taken back
    graded_status: str = ""  # the grader's verdict when it was reviewed
    run_id: int = 0

    @property
    def key(self) -> VerdictKey:
        return self.conversation_id, self.idx


@dataclass(frozen=True, slots=True)
class ReviewState:
    """What the reviews that stand say of one verdict."""

    decision: Review | None  # the latest flip standing: its ``met`` is the reviewed verdict
    flag: Review | None  # the latest flag standing: its note
    reviewers: tuple[str, ...]  # whoever has a review of it standing, first reviewer first

    @property
    def reviewed(self) -> bool:
        return bool(self.reviewers)

    def met(self, graded: bool | None) -> bool | None:
        """The reviewed verdict: a flip decides; otherwise the grader's stands (an error stays one)."""
        if graded is None or self.decision is None or self.decision.met is None:
            return graded
        return self.decision.met

    def flipped(self, graded: bool | None) -> bool:
        return graded is not None and self.met(graded) != graded


NOT_REVIEWED_STATE = ReviewState(None, None, ())


def standing(reviews: Iterable[Review]) -> list[Review]:
    """The flips and flags not taken back, oldest first (an undo takes back one review)."""
    ordered = sorted(reviews, key=lambda r: r.id)
    undone = {r.undoes for r in ordered if r.action == UNDO}
    return [r for r in ordered if r.action != UNDO and r.id not in undone]


def states(reviews: Iterable[Review], reviewer: str | None = None) -> dict[VerdictKey, ReviewState]:
    """Each reviewed verdict's state; ``reviewer``: that reviewer's reviews alone."""
    by_key: dict[VerdictKey, list[Review]] = defaultdict(list)
    for review in standing(reviews):
        if reviewer is None or review.reviewer == reviewer:
            by_key[review.key].append(review)
    out = {}
    for key, items in by_key.items():
        flips = [r for r in items if r.action == FLIP]
        flags = [r for r in items if r.action == FLAG]
        out[key] = ReviewState(
            decision=flips[-1] if flips else None,
            flag=flags[-1] if flags else None,
            reviewers=tuple(dict.fromkeys(r.reviewer for r in items)),
        )
    return out


def last_standing_of(reviews: Iterable[Review], reviewer: str, key: VerdictKey) -> Review | None:
    """What `u` takes back: ``reviewer``'s latest review of the verdict still standing."""
    mine = [r for r in standing(reviews) if r.reviewer == reviewer and r.key == key]
    return mine[-1] if mine else None


def reviewers_of(reviews: Iterable[Review]) -> list[str]:
    """Reviewers with a review standing, in the order they first reviewed."""
    return list(dict.fromkeys(r.reviewer for r in standing(reviews)))


def subject_of(prompt_id: str, reply: str | None, criterion: str) -> str:
    """What a review is about, independent of the run and the grader: the same reply of the same
    prompt judged on the same criterion. A regrade of those finds the earlier review by it."""
    digest = hashlib.sha256()
    for part in (prompt_id, reply or "", criterion):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


# ---- the reviewed score -------------------------------------------------------------------


@dataclass(slots=True)
class ScoredConversation:
    """A conversation as scoring reads it, with the keys of its criteria (rubric order)."""

    conversation_id: int
    example_tags: Sequence[str]
    indexes: Sequence[int]
    criteria: Sequence[GradedCriterion]
    excluded: bool = False
    errors: int = 0

    def reviewed(self, by_key: Mapping[VerdictKey, ReviewState]) -> ConversationInput:
        conversation_id = self.conversation_id
        found = [by_key.get((conversation_id, idx)) for idx in self.indexes] if by_key else []
        if not any(found):  # most conversations of a run under review: its criteria as graded, not copied
            return ConversationInput(self.example_tags, self.criteria, self.excluded, self.errors)
        criteria = [
            c if state is None else GradedCriterion(c.points, c.tags, state.met(c.met))
            for c, state in zip(self.criteria, found)
        ]
        return ConversationInput(self.example_tags, criteria, self.excluded, self.errors)


def reviewed_report(
    conversations: Sequence[ScoredConversation], reviews: Iterable[Review], reviewer: str | None = None
) -> RunReport:
    """The run's report with each verdict's latest standing flip applied (``reviewer``: theirs alone),
    by the same scoring as the graded report."""
    by_key = states(reviews, reviewer)
    return run_report(c.reviewed(by_key) for c in conversations)


def reviewed_score_of(conversation: ScoredConversation, by_key: Mapping[VerdictKey, ReviewState]) -> float | None:
    """One conversation's reviewed score, as run_report scores it: none without a reply, or with a
    verdict missing; otherwise the reference's conversation score over the reviewed verdicts."""
    if conversation.excluded:
        return None
    criteria = conversation.reviewed(by_key).criteria
    if any(c.met is None for c in criteria):
        return None
    return conversation_score([c.points for c in criteria], [bool(c.met) for c in criteria])


def reviewed_scores(
    conversations: Sequence[ScoredConversation],
    by_key: Mapping[VerdictKey, ReviewState],
    graded: Mapping[int, float] | None = None,
) -> dict[int, float]:
    """Each scored conversation's reviewed score by id, in the run's order. Without the bootstraps,
    so a flip's new score is drawn at once; with ``graded`` (these scores without reviews), only
    the conversations with a review are scored again (a review never makes a score appear or go:
    that depends on which verdicts exist and on points, not on met)."""
    if graded is None:
        scored = ((c.conversation_id, reviewed_score_of(c, by_key)) for c in conversations)
        return {conversation_id: score for conversation_id, score in scored if score is not None}
    touched = {conversation_id for conversation_id, _ in by_key}
    out = dict(graded)
    for conversation in conversations:
        if conversation.conversation_id in touched and conversation.conversation_id in out:
            score = reviewed_score_of(conversation, by_key)
            if score is not None:
                out[conversation.conversation_id] = score
    return out


def overall_of(scores: Mapping[int, float]) -> float | None:
    """The run's overall score of conversation scores: their clipped mean, as run_report takes it."""
    return clipped_mean(list(scores.values())) if scores else None


# ---- progress and agreement ---------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """Review progress over some verdicts: how many can be reviewed, are, were flipped or flagged."""

    verdicts: int = 0  # graded (met or not met): what a reviewer can judge
    reviewed: int = 0
    flipped: int = 0
    flagged: int = 0

    def as_json(self) -> dict[str, int]:
        return {"verdicts": self.verdicts, "reviewed": self.reviewed, "flipped": self.flipped, "flagged": self.flagged}


@dataclass(slots=True)
class Progress:
    overall: Tally = field(default_factory=Tally)
    by_axis: dict[str, Tally] = field(default_factory=dict)  # rubric tags "axis:..."

    def as_json(self) -> dict:
        return {**self.overall.as_json(), "by_axis": {k: v.as_json() for k, v in sorted(self.by_axis.items())}}


def review_progress(conversations: Sequence[ScoredConversation], reviews: Iterable[Review]) -> Progress:
    by_key = states(reviews)
    progress = Progress()
    # A run's criteria share a few tag lists: each one's tallies are found once, not per verdict.
    tallies_of: dict[tuple[str, ...], list[Tally]] = {}
    for conversation in conversations:
        conversation_id = conversation.conversation_id
        for idx, criterion in zip(conversation.indexes, conversation.criteria):
            if criterion.met is None:
                continue
            tags = tuple(criterion.tags)
            tallies = tallies_of.get(tags)
            if tallies is None:
                tallies = tallies_of[tags] = [progress.overall] + [
                    progress.by_axis.setdefault(tag, Tally()) for tag in dict.fromkeys(tags) if tag.startswith("axis:")
                ]
            state = by_key.get((conversation_id, idx))
            for tally in tallies:
                tally.verdicts += 1
                if state is not None:
                    tally.reviewed += state.reviewed
                    tally.flipped += state.flipped(criterion.met)
                    tally.flagged += state.flag is not None
    return progress


@dataclass(frozen=True, slots=True)
class Agreement:
    """Two reviewers on the verdicts both reviewed: how often their reviewed verdicts agree, and
    Cohen's kappa (the comparison's, as two graders' agreement is measured)."""

    first: str
    second: str
    kappa: Kappa

    @property
    def percent(self) -> float | None:
        return self.kappa.observed

    def as_json(self) -> dict:
        return {
            "reviewers": [self.first, self.second],
            "verdicts": self.kappa.n,
            "percent_agreement": self.kappa.observed,
            "cohen_kappa": self.kappa.kappa,
            "kappa_undefined": self.kappa.undefined,
        }


def agreements(conversations: Sequence[ScoredConversation], reviews: Sequence[Review]) -> list[Agreement]:
    """Each pair of reviewers, on the verdicts both have a review of standing. A reviewer's verdict
    is their own latest flip, or the grader's where they only flagged it (kept as graded)."""
    graded = {
        (c.conversation_id, idx): criterion.met
        for c in conversations
        for idx, criterion in zip(c.indexes, c.criteria)
        if criterion.met is not None
    }
    names = reviewers_of(reviews)
    own = {name: states(reviews, name) for name in names}
    out = []
    for first, second in combinations(names, 2):
        both = sorted(set(own[first]) & set(own[second]) & set(graded))
        pairs = [(bool(own[first][k].met(graded[k])), bool(own[second][k].met(graded[k]))) for k in both]
        out.append(Agreement(first, second, kappa_of(pairs)))
    return out
