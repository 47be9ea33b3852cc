"""HealthBench scoring, numerically identical to the reference (openai/simple-evals).

Pure functions over plain values: no I/O, no store, no UI. The reference's rules:

* a conversation scores ``sum(points of met criteria) / sum(positive points)`` (not clipped);
* example-level tags take the conversation's score;
* a rubric-level tag scores only the criteria that carry it, and is left out where those
  criteria have no positive points;
* a metric over a run is the mean of its defined values, clipped to [0, 1], with ``n`` and a
  bootstrap standard deviation of 1,000 clipped resample means.

The reference bootstraps with an unseeded global generator; we seed ours so that a report is
reproducible, and add a 95% percentile interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0
OVERALL = "overall_score"
# simple-evals' name since 652c89d for the overall score less a penalty on each reply's length:
# a run made with length settings (--preset professional) has it as its headline.
OVERALL_LENGTH_ADJUSTED = "overall_score_length_adjusted"
LENGTH_UNIT = 500.0  # the penalty is per this many characters beyond the centre


def length_adjusted_score(score: float, characters: int, penalty: float, centre: float) -> float:
    """One conversation's score less the penalty on its reply's length, unclipped, computed in
    the reference's order of operations (``calculate_length_adjusted_score``), so that the
    floating-point result is the reference's to the last bit."""
    return score - penalty * ((characters - centre) / LENGTH_UNIT)


@dataclass(frozen=True, slots=True)
class GradedCriterion:
    """One rubric item of one conversation with its verdict (``met`` is None when ungraded)."""

    points: float
    tags: tuple[str, ...]
    met: bool | None


def conversation_score(points: Sequence[float], met: Sequence[bool]) -> float | None:
    """``S(I)``: points met over positive points available; None where none are positive.

    Summation order follows the rubric order, as the reference's generator expressions do, so
    that floating-point results agree to the last bit.
    """
    possible = sum(p for p in points if p > 0)
    if possible == 0:
        return None
    achieved = sum(p for p, m in zip(points, met) if m)
    return achieved / possible


@dataclass(slots=True)
class ConversationMetrics:
    """What one complete conversation contributes to a run: its score and its tag values."""

    score: float
    values: dict[str, float]  # metric name -> value, "overall_score" included


def conversation_metrics(
    example_tags: Sequence[str], criteria: Sequence[GradedCriterion]
) -> ConversationMetrics | None:
    """The reference's ``grade_sample`` metrics; None if a verdict is missing or undefined.

    A criterion whose grading failed is neither met nor unmet, so a conversation with any
    missing verdict has no score at all rather than a pessimistic one.
    """
    if any(c.met is None for c in criteria):
        return None
    score = conversation_score([c.points for c in criteria], [bool(c.met) for c in criteria])
    if score is None:
        return None
    values: dict[str, float] = {OVERALL: score}
    for tag in example_tags:
        values[tag] = score
    by_tag: dict[str, list[GradedCriterion]] = defaultdict(list)
    for criterion in criteria:
        for tag in dict.fromkeys(criterion.tags):  # a tag counts once per criterion
            by_tag[tag].append(criterion)
    for tag, items in by_tag.items():
        tag_score = conversation_score([c.points for c in items], [bool(c.met) for c in items])
        if tag_score is not None:
            values[tag] = tag_score
    return ConversationMetrics(score=score, values=values)


@dataclass(frozen=True, slots=True)
class Metric:
    """A clipped mean over the conversations where the metric is defined."""

    value: float
    n: int
    bootstrap_std: float
    ci95: tuple[float, float]

    def as_dict(self) -> dict:
        return {
            "value": self.value,
            "n": self.n,
            "bootstrap_std": self.bootstrap_std,
            "ci95": [self.ci95[0], self.ci95[1]],
        }


def clipped_mean(values: Sequence[float] | np.ndarray) -> float:
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    return float(np.clip(np.mean(values), 0, 1))


def bootstrap_picks(
    size: int, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> Iterator[tuple[int, int, np.ndarray]]:
    """(start, stop, indices) of resamples ``start:stop`` with replacement of ``size`` rows,
    drawn in chunks to bound memory. One seeded stream for every bootstrap (a run's metrics, a
    comparison's paired differences), so that each report is reproducible."""
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    rng = np.random.default_rng(seed)
    # 100,000 indices a chunk (0.8 MB, and as much again gathered): at 500,000, the report's
    # bootstraps set a large run's peak memory (5,166 conversations at 256 in flight: 149-153
    # MiB against 131-141). The chunks draw the same stream as one draw would: same numbers.
    chunk = max(1, min(samples, 100_000 // max(size, 1)))
    for start in range(0, samples, chunk):
        stop = min(samples, start + chunk)
        yield start, stop, rng.integers(0, size, size=(stop - start, size))


def bootstrap_means(
    values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """Clipped means of ``samples`` resamples with replacement."""
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    data = np.asarray(values, dtype=float)
    means = np.empty(samples)
    for start, stop, picks in bootstrap_picks(len(data), samples, seed):
        means[start:stop] = data[picks].mean(axis=1)
    return np.clip(means, 0, 1)


def metric(values: Sequence[float], seed: int = BOOTSTRAP_SEED) -> Metric:
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    means = bootstrap_means(values, seed=seed)
    low, high = np.percentile(means, [2.5, 97.5])
    return Metric(
        value=clipped_mean(values),
        n=len(values),
        bootstrap_std=float(np.std(means)),
        ci95=(float(low), float(high)),
    )


def metrics_of(values_by_name: dict[str, Sequence[float]], seed: int = BOOTSTRAP_SEED) -> dict[str, Metric]:
    """``metric`` of each list, the same numbers: lists of one length share their resamples.

    Every metric is bootstrapped from the same seed, so lists of equal length are resampled with
    the same indices; drawing them once per length rather than once per metric saved most of a
    report's time (a run's overall score and most of its axes have the same n).
    """
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    by_length: dict[int, list[str]] = defaultdict(list)
    arrays = {name: np.asarray(values, dtype=float) for name, values in values_by_name.items()}
    for name, data in arrays.items():
        by_length[len(data)].append(name)
    means = {name: np.empty(BOOTSTRAP_SAMPLES) for name in arrays}

    def resample(lengths: list[tuple[int, list[str]]]) -> None:
        for size, names in lengths:
            for start, stop, picks in bootstrap_picks(size, BOOTSTRAP_SAMPLES, seed):
                for name in names:
                    means[name][start:stop] = arrays[name][picks].mean(axis=1)

    # Each length draws from a generator of its own, so the lengths may be resampled in any order
    # and in two threads at once: numpy lets go of the GIL while it draws, gathers and averages,
    # and the run's finish waits for this on a machine whose other core is then idle. The lengths,
    # heaviest first, go to the two threads in turn; an error in either is raised here.
    lengths = sorted(by_length.items(), key=lambda item: item[0] * len(item[1]), reverse=True)
    with ThreadPoolExecutor(1, thread_name_prefix="hbtui-bootstrap") as beside:
        other = beside.submit(resample, lengths[1::2])
        resample(lengths[::2])
        other.result()
    out = {}
    for name, values in values_by_name.items():
        clipped = np.clip(means[name], 0, 1)
        low, high = np.percentile(clipped, [2.5, 97.5])
        out[name] = Metric(
            value=clipped_mean(values),
            n=len(values),
            bootstrap_std=float(np.std(clipped)),
            ci95=(float(low), float(high)),
        )
    return out


@dataclass(slots=True)
class RunReport:
    """A run's scores and counts as the scoring makes them; hbtui.store.run_report.StoredReport is
    what the store keeps of them and hands out."""

    overall: Metric | None
    metrics: dict[str, Metric]
    median: float | None
    scores: list[float]
    conversations_total: int
    conversations_scored: int
    conversations_incomplete: int
    conversations_excluded: int  # generation refused or failed: no reply to grade
    positive_criteria: int
    positive_met: int
    negative_criteria: int
    negative_triggered: int
    criterion_errors: int
    criteria_pending: int = 0
    criteria_skipped: int = 0  # of conversations without a reply: never graded, not pending either


@dataclass(slots=True)
class ConversationInput:
    """One conversation (one repeat) as the store hands it to the scorer."""

    example_tags: Sequence[str]
    criteria: Sequence[GradedCriterion]
    excluded: bool = False  # no reply exists (refused or failed generation)
    errors: int = 0  # criteria whose grading failed


@dataclass
class ReportTally:
    """A run's report, added up one conversation at a time in plan order: what ``run_report``
    does in one go, so that an engine can add each conversation as it completes and leave only
    the bootstraps for the end. The same numbers either way: the same code adds them up."""

    name_to_values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    scores: list[float] = field(default_factory=list)
    total: int = 0
    incomplete: int = 0
    excluded: int = 0
    positive: int = 0
    positive_met: int = 0
    negative: int = 0
    negative_met: int = 0
    errors: int = 0
    pending: int = 0
    skipped: int = 0

    def add(self, conv: ConversationInput) -> None:
        self.total += 1
        if conv.excluded:
            self.excluded += 1
            self.skipped += len(conv.criteria)
            return
        self.errors += conv.errors
        for c in conv.criteria:
            if c.met is None:
                continue
            if c.points > 0:
                self.positive += 1
                self.positive_met += bool(c.met)
            elif c.points < 0:
                self.negative += 1
                self.negative_met += bool(c.met)
        self.pending += sum(1 for c in conv.criteria if c.met is None) - conv.errors
        result = conversation_metrics(conv.example_tags, conv.criteria)
        if result is None:
            self.incomplete += 1
            return
        self.scores.append(result.score)
        name_to_values = self.name_to_values
        for name, value in result.values.items():
            name_to_values[name].append(value)

    def report(self, seed: int = BOOTSTRAP_SEED) -> RunReport:
        """The metrics of what was added, with their bootstraps."""
        import numpy as np  # loaded when first needed: `hbtui run` starts without it

        metrics = metrics_of(dict(sorted(self.name_to_values.items())), seed)
        if OVERALL in metrics:  # the reference lists overall_score first
            metrics = {OVERALL: metrics[OVERALL], **{k: v for k, v in metrics.items() if k != OVERALL}}
        scores = self.scores
        return RunReport(
            overall=metrics.get(OVERALL),
            metrics=metrics,
            median=float(np.median(scores)) if scores else None,
            scores=scores,
            conversations_total=self.total,
            conversations_scored=len(scores),
            conversations_incomplete=self.incomplete,
            conversations_excluded=self.excluded,
            positive_criteria=self.positive,
            positive_met=self.positive_met,
            negative_criteria=self.negative,
            negative_triggered=self.negative_met,
            criterion_errors=self.errors,
            criteria_pending=max(self.pending, 0),
            criteria_skipped=self.skipped,
        )


def run_report(conversations: Iterable[ConversationInput], seed: int = BOOTSTRAP_SEED) -> RunReport:
    """Aggregate conversations into run metrics, the reference's ``_aggregate_get_clipped_mean``."""
    tally = ReportTally()
    for conv in conversations:
        tally.add(conv)
    return tally.report(seed)
