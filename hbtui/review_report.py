"""A run's review: its score as graded and as reviewed, each reviewer's own, their agreement and
the review's progress, as `show --reviewed`, `show --json` (its ``review`` key) and the run screen
give them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hbtui import reviews as rv
from hbtui.run_report import StoredReport
from hbtui.store import RunRow
from hbtui.text import one_line


@dataclass(slots=True)
class RunReview:
    graded: StoredReport
    reviewed: StoredReport
    by_reviewer: dict[str, float | None]  # each reviewer's own reviewed score (their reviews alone)
    reviews_by: dict[str, int]  # reviews standing, by reviewer
    progress: rv.Progress
    agreements: list[rv.Agreement]

    def as_json(self) -> dict:
        return {
            "graded_score": self.graded.score,
            "reviewed_score": self.reviewed.score,
            "progress": self.progress.as_json(),
            "reviewers": {
                name: {"reviewed_score": score, "reviews": self.reviews_by.get(name, 0)}
                for name, score in self.by_reviewer.items()
            },
            "agreement": [a.as_json() for a in self.agreements],
            "reviewed": self.reviewed.to_json(),
        }


async def run_review(store, run_id: int, from_cache: int = 0) -> RunReview:
    """Reads the run's verdicts and reviews once; the scorings run off the event loop."""
    conversations = await store.review_inputs(run_id)
    history = await store.run_reviews(run_id)

    def computed() -> RunReview:
        standing = rv.standing(history)
        reviewers = rv.reviewers_of(history)
        return RunReview(
            graded=StoredReport.of(rv.reviewed_report(conversations, []), from_cache),
            reviewed=StoredReport.of(rv.reviewed_report(conversations, history), from_cache),
            by_reviewer={
                name: rv.overall_of(rv.reviewed_scores(conversations, rv.states(history, name))) for name in reviewers
            },
            reviews_by={name: sum(r.reviewer == name for r in standing) for name in reviewers},
            progress=rv.review_progress(conversations, history),
            agreements=rv.agreements(conversations, history),
        )

    return await asyncio.to_thread(computed)


async def review_of_run(store, run: RunRow, asked: bool) -> RunReview | None:
    """The run's review when asked for (`show --reviewed`) or when the run has reviews (then
    `show --json` carries it under ``review`` unasked); None otherwise: `show` prints as before."""
    if not asked and not await store.run_reviews(run.id):
        return None
    from_cache = run.report.criteria.from_cache if run.report else 0
    return await run_review(store, run.id, from_cache or 0)


def score_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def tally_text(tally: rv.Tally) -> str:
    return f"{tally.reviewed:,} of {tally.verdicts:,} verdicts reviewed, {tally.flipped:,} flipped, {tally.flagged:,} flagged"


def agreement_text(agreement: rv.Agreement) -> str:
    kappa = agreement.kappa
    first, second = one_line(agreement.first, 40), one_line(agreement.second, 40)
    if not kappa.n:
        return f"{first} and {second}: no verdict reviewed by both"
    cohen = f"Cohen's kappa {kappa.kappa:.3f}" if kappa.kappa is not None else f"kappa undefined ({kappa.undefined})"
    return f"{first} and {second}: {kappa.observed:.1%} agreement on {kappa.n:,} verdicts both reviewed, {cohen}"


def review_lines(review: RunReview) -> list[str]:
    """What `show --reviewed` prints of the review (reviewer names are data: one line each)."""
    lines = [
        "Review",
        f"  score as graded    {score_text(review.graded.score)}",
        f"  score as reviewed  {score_text(review.reviewed.score)}",
        f"  {tally_text(review.progress.overall)}",
    ]
    for axis, tally in sorted(review.progress.by_axis.items()):
        lines.append(f"    {one_line(axis.removeprefix('axis:'), 30):<22} {tally_text(tally)}")
    for name, score in review.by_reviewer.items():
        lines.append(
            f"  reviewer {one_line(name, 40)}: reviewed score {score_text(score)}"
            f" ({review.reviews_by.get(name, 0):,} reviews)"
        )
    lines += [f"  {agreement_text(a)}" for a in review.agreements]
    return lines
