"""A run's report as the store keeps it (``runs.report_json``) and hands it back: named fields,
not a dict addressed by strings across the report, the exports, the CLI and the screens.

Its JSON is what `show --json` prints and what every database holds, key for key and in the
same order: a stored report read and written again gives the same bytes. Reports written before
skipped criteria or the verdict cache were counted lack those two keys; they read as None and
are written without them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hbtui.core.completion_groups import group_description
from hbtui.core.dataset import PROFESSIONAL_CATEGORIES
from hbtui.core.scoring import OVERALL, OVERALL_LENGTH_ADJUSTED, Metric, RunReport

THEME_PREFIX, AXIS_PREFIX = "theme:", "axis:"
# HealthBench Professional's categories, example tags of its records (hbtui.core.dataset): broken
# down as themes are, in this order. Its criteria carry no axes.
CATEGORY_PREFIXES = tuple(f"{category}:" for category in PROFESSIONAL_CATEGORIES)
HEADLINE_ADJUSTED = "length-adjusted score"
ADJUSTED_MARK = "adj"  # before a length-adjusted score in a list of runs, as "F1" before a meta-eval's
NO_AXES = "none: HealthBench Professional's criteria have no axes"


def metric_from_json(data: Mapping[str, Any]) -> Metric:
    low, high = data["ci95"]
    return Metric(value=data["value"], n=data["n"], bootstrap_std=data["bootstrap_std"], ci95=(low, high))


@dataclass(frozen=True, slots=True)
class ConversationCounts:
    total: int
    scored: int
    incomplete: int  # a verdict missing: no score yet
    excluded: int  # no reply to grade (generation refused or failed)

    def to_json(self) -> dict[str, int]:
        return {"total": self.total, "scored": self.scored, "incomplete": self.incomplete, "excluded": self.excluded}


@dataclass(frozen=True, slots=True)
class CriterionCounts:
    positive: int  # graded criteria worth positive points
    positive_met: int
    negative: int  # graded criteria worth negative points (penalties)
    negative_triggered: int
    errors: int  # grading failed
    pending: int
    skipped: int | None = None  # of conversations without a reply; None in reports older than the count
    from_cache: int | None = None  # verdicts no call of this run paid for; None in reports older than the cache

    @property
    def positive_met_share(self) -> float | None:
        return self.positive_met / self.positive if self.positive else None

    @property
    def negative_triggered_share(self) -> float | None:
        return self.negative_triggered / self.negative if self.negative else None

    def to_json(self) -> dict[str, int | float | None]:
        out: dict[str, int | float | None] = {
            "positive": self.positive,
            "positive_met": self.positive_met,
            "positive_met_share": self.positive_met_share,
            "negative": self.negative,
            "negative_triggered": self.negative_triggered,
            "negative_triggered_share": self.negative_triggered_share,
            "errors": self.errors,
            "pending": self.pending,
        }
        if self.skipped is not None:
            out["skipped"] = self.skipped
        if self.from_cache is not None:
            out["from_cache"] = self.from_cache
        return out


@dataclass(frozen=True, slots=True)
class StoredReport:
    """The scores and counts of a run: its overall score first among ``metrics`` (the reference's
    metric names: ``overall_score``, example tags such as ``theme:...``, rubric tags such as
    ``axis:...``), the median conversation score, and what was counted."""

    metrics: Mapping[str, Metric]
    median: float | None
    conversations: ConversationCounts
    criteria: CriterionCounts
    # A run of the records' own completions (hbtui.core.completions): each physicians' group scored
    # apart, as the reference scores them, by group name in the reference's order; None otherwise.
    groups: Mapping[str, StoredReport] | None = None

    @property
    def overall(self) -> Metric | None:
        """None while no conversation is scored."""
        return self.metrics.get(OVERALL)

    @property
    def score(self) -> float | None:
        return self.overall.value if self.overall else None

    @property
    def length_adjusted(self) -> Metric | None:
        """``overall_score_length_adjusted``: kept in the report of a run made with a length
        adjustment, after the overall score, where simple-evals at 652c89d puts it."""
        return self.metrics.get(OVERALL_LENGTH_ADJUSTED)

    @property
    def headline(self) -> tuple[str, Metric | None]:
        """(name, metric) of the score to lead with: the length-adjusted score when the report
        has one, else the overall score."""
        adjusted = self.length_adjusted
        if adjusted is not None:
            return HEADLINE_ADJUSTED, adjusted
        return "score", self.overall

    def with_length_adjusted(self, adjusted: Metric | None) -> StoredReport:
        """This report with ``adjusted`` as its length-adjusted score, right after the overall
        score (none: without one)."""
        metrics: dict[str, Metric] = {}
        for name, m in self.metrics.items():
            if name == OVERALL_LENGTH_ADJUSTED:
                continue
            metrics[name] = m
            if name == OVERALL and adjusted is not None:
                metrics[OVERALL_LENGTH_ADJUSTED] = adjusted
        return replace(self, metrics=metrics)

    def breakdown(self, prefix: str) -> list[tuple[str, Metric]]:
        """(name without ``prefix``, metric) of the metrics named ``prefix...``, in stored order."""
        return [(name[len(prefix) :], m) for name, m in self.metrics.items() if name.startswith(prefix)]

    @property
    def has_categories(self) -> bool:
        """A run of HealthBench Professional's records: scored by its categories."""
        return any(name.startswith(CATEGORY_PREFIXES) for name in self.metrics)

    @classmethod
    def of(cls, result: RunReport, from_cache: int | None) -> StoredReport:
        """The report of a scoring, with how many of its verdicts came from the cache."""
        return cls(
            metrics=dict(result.metrics),
            median=result.median,
            conversations=ConversationCounts(
                total=result.conversations_total,
                scored=result.conversations_scored,
                incomplete=result.conversations_incomplete,
                excluded=result.conversations_excluded,
            ),
            criteria=CriterionCounts(
                positive=result.positive_criteria,
                positive_met=result.positive_met,
                negative=result.negative_criteria,
                negative_triggered=result.negative_triggered,
                errors=result.criterion_errors,
                pending=result.criteria_pending,
                skipped=result.criteria_skipped,
                from_cache=from_cache,
            ),
        )

    def to_json(self) -> dict[str, Any]:
        out = {
            "overall_score": self.score,
            "metrics": {name: m.as_dict() for name, m in self.metrics.items()},
            "median": self.median,
            "conversations": self.conversations.to_json(),
            "criteria": self.criteria.to_json(),
        }
        if self.groups is not None:
            out["groups"] = {
                name: {"description": group_description(name), **group.to_json()} for name, group in self.groups.items()
            }
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredReport:
        # The shares and the overall score are derived, not read: they are written back from the
        # counts and the metric they were computed from, so they cannot disagree with them.
        conversations, criteria = data["conversations"], data["criteria"]
        return cls(
            metrics={name: metric_from_json(m) for name, m in data["metrics"].items()},
            median=data["median"],
            conversations=ConversationCounts(
                total=conversations["total"],
                scored=conversations["scored"],
                incomplete=conversations["incomplete"],
                excluded=conversations["excluded"],
            ),
            criteria=CriterionCounts(
                positive=criteria["positive"],
                positive_met=criteria["positive_met"],
                negative=criteria["negative"],
                negative_triggered=criteria["negative_triggered"],
                errors=criteria["errors"],
                pending=criteria["pending"],
                skipped=criteria.get("skipped"),
                from_cache=criteria.get("from_cache"),
            ),
            groups=(
                {name: cls.from_json(group) for name, group in data["groups"].items()} if "groups" in data else None
            ),
        )
