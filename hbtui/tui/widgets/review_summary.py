"""The run summary's review: the score as reviewed beside the score as graded, the progress (by
axis too), each reviewer's own score and two reviewers' agreement. Hidden while the run has none."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from hbtui.analysis.review_report import ReviewGlance, agreement_text
from hbtui.core.text import one_line
from hbtui.tui.widgets.breakdown import score_style


def glance_text(g: ReviewGlance) -> Text:
    text = Text()
    text.append("Score as reviewed ", style="bold")
    if g.reviewed_score is None:
        text.append("—", style="dim")
    else:
        text.append(f"{g.reviewed_score:.3f}", style=f"bold {score_style(g.reviewed_score)}")
    if g.graded_score is not None:
        text.append(f"   as graded {g.graded_score:.3f}", style="dim")
    p = g.progress.overall
    text.append("\nReviewed ", style="bold")
    text.append(f"{p.reviewed:,} of {p.verdicts:,} verdicts")
    text.append(f", {p.flipped:,} flipped", style="cyan" if p.flipped else "")
    text.append(f", {p.flagged:,} flagged", style="yellow" if p.flagged else "")
    axes = [
        f"{one_line(axis.removeprefix('axis:'), 24)} {t.reviewed}/{t.verdicts}"
        + (f" ({t.flipped} flipped)" if t.flipped else "")
        for axis, t in sorted(g.progress.by_axis.items())
    ]
    if axes:
        text.append("\n  by axis: ", style="dim")
        text.append(" · ".join(axes))
    if g.by_reviewer:
        text.append("\nReviewers ", style="bold")
        text.append(
            " · ".join(
                f"{one_line(name, 30)} {'—' if score is None else f'{score:.3f}'} ({g.reviews_by.get(name, 0)})"
                for name, score in g.by_reviewer.items()
            )
        )
    for agreement in g.agreements:
        text.append("\n")
        text.append(agreement_text(agreement))
    return text


def reviewed_title(g: ReviewGlance | None) -> Text:
    """The run title's second score, beside the graded one, once the run has a review."""
    text = Text()
    if g is not None and g.reviews and g.reviewed_score is not None:
        text.append("  reviewed ")
        text.append(f"{g.reviewed_score:.3f}", style=f"bold {score_style(g.reviewed_score)}")
    return text


class ReviewSummary(Static):
    DEFAULT_CSS = "ReviewSummary { height: auto; margin-top: 1; display: none; }"

    def update_glance(self, glance: ReviewGlance | None) -> None:
        shown = glance is not None and glance.reviews > 0
        self.display = shown
        if shown and glance is not None:
            self.update(glance_text(glance))
