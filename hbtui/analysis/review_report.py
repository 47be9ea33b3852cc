"""A run's review: its score as graded and as reviewed, each reviewer's own, their agreement and
the review's progress, as `show --reviewed`, `show --json` (its ``review`` key) and the run screen
give them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hbtui.core import reviews as rv
from hbtui.core.text import one_line
from hbtui.store import RunRow
from hbtui.store.run_report import StoredReport


@dataclass(slots=True)
class ReviewGlance:
    """What the run screen shows of a review: its scores without the bootstraps (drawn at once)."""

    graded_score: float | None
    reviewed_score: float | None
    by_reviewer: dict[str, float | None]  # each reviewer's own reviewed score (their reviews alone)
    reviews_by: dict[str, int]  # reviews standing, by reviewer
    progress: rv.Progress
    agreements: list[rv.Agreement]
    reviews: int  # the history's rows, undos included: none means nothing to show


def glance(conversations: list[rv.ScoredConversation], history: list[rv.Review]) -> ReviewGlance:
    standing = rv.standing(history)
    reviewers = rv.reviewers_of(history)
    # Every conversation scored once, as graded; each reviewed score then scores again only the
    # conversations its reviews touch (four full passes took most of `show --reviewed`'s second).
    graded = rv.reviewed_scores(conversations, {})

    def overall(reviewer: str | None = None) -> float | None:
        return rv.overall_of(rv.reviewed_scores(conversations, rv.states(history, reviewer), graded))

    return ReviewGlance(
        graded_score=rv.overall_of(graded),
        reviewed_score=overall(),
        by_reviewer={name: overall(name) for name in reviewers},
        reviews_by={name: sum(r.reviewer == name for r in standing) for name in reviewers},
        progress=rv.review_progress(conversations, history),
        agreements=rv.agreements(conversations, history),
        reviews=len(history),
    )


async def run_glance(store, run_id: int) -> ReviewGlance | None:
    """None for a run without reviews, read without its verdicts (a run screen opens as fast)."""
    history = await store.run_reviews(run_id)
    if not history:
        return None
    conversations = await store.review_inputs(run_id)
    return await asyncio.to_thread(glance, conversations, history)


@dataclass(slots=True)
class RunReview:
    """The review with the full reports (metrics, bootstraps) as graded and as reviewed."""

    graded: StoredReport
    reviewed: StoredReport
    glance: ReviewGlance

    def as_json(self) -> dict:
        g = self.glance
        return {
            "graded_score": self.graded.score,
            "reviewed_score": self.reviewed.score,
            "progress": g.progress.as_json(),
            "reviewers": {
                name: {"reviewed_score": score, "reviews": g.reviews_by.get(name, 0)}
                for name, score in g.by_reviewer.items()
            },
            "agreement": [a.as_json() for a in g.agreements],
            "reviewed": self.reviewed.to_json(),
        }


async def run_review(store, run_id: int, from_cache: int = 0, graded: StoredReport | None = None) -> RunReview:
    """Reads the run's verdicts and reviews once; the scorings run off the event loop. ``graded``:
    the run's report as it stands (`show` has it), else it is computed as the reviewed one is."""
    conversations = await store.review_inputs(run_id)
    history = await store.run_reviews(run_id)

    def computed() -> RunReview:
        return RunReview(
            graded=graded or StoredReport.of(rv.reviewed_report(conversations, []), from_cache),
            reviewed=StoredReport.of(rv.reviewed_report(conversations, history), from_cache),
            glance=glance(conversations, history),
        )

    return await asyncio.to_thread(computed)


async def review_of_run(store, run: RunRow, asked: bool) -> RunReview | None:
    """The run's review when asked for (`show --reviewed`) or when the run has reviews (then
    `show --json` carries it under ``review`` unasked); None otherwise: `show` prints as before."""
    if not asked and not await store.run_reviews(run.id):
        return None
    from_cache = run.report.criteria.from_cache if run.report else 0
    return await run_review(store, run.id, from_cache or 0, graded=run.report)


def score_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def tally_text(tally: rv.Tally) -> str:
    return f"{tally.reviewed:,} of {tally.verdicts:,} verdicts reviewed, {tally.flipped:,} flipped, {tally.flagged:,} flagged"


def agreement_text(agreement: rv.Agreement) -> str:
    kappa = agreement.kappa
    first, second = one_line(agreement.first, 40), one_line(agreement.second, 40)
    if not kappa.n or kappa.observed is None:
        return f"{first} and {second}: no verdict reviewed by both"
    cohen = f"Cohen's kappa {kappa.kappa:.3f}" if kappa.kappa is not None else f"kappa undefined ({kappa.undefined})"
    return f"{first} and {second} agree on {kappa.observed:.1%} of {kappa.n:,} verdicts both reviewed, {cohen}"


def review_lines(review: RunReview) -> list[str]:
    """What `show --reviewed` prints of the review (reviewer names are data: one line each)."""
    lines = [
        "Review",
        f"  score as graded    {score_text(review.graded.score)}",
        f"  score as reviewed  {score_text(review.reviewed.score)}",
        f"  {tally_text(review.glance.progress.overall)}",
    ]
    g = review.glance
    for axis, tally in sorted(g.progress.by_axis.items()):
        lines.append(f"    {one_line(axis.removeprefix('axis:'), 30):<22} {tally_text(tally)}")
    for name, score in g.by_reviewer.items():
        count = g.reviews_by.get(name, 0)
        lines.append(
            f"  reviewer {one_line(name, 40)}: reviewed score {score_text(score)}"
            f" ({count:,} review{'' if count == 1 else 's'})"
        )
    lines += [f"  {agreement_text(a)}" for a in g.agreements]
    return lines
