"""Scoring against hand-computed cases and against the reference implementation's own formulas."""

import json
import random
from collections import defaultdict

import numpy as np
import pytest

from hbtui.core.scoring import (
    ConversationInput,
    GradedCriterion,
    conversation_metrics,
    conversation_score,
    metric,
    metrics_of,
    run_report,
)
from tests.conftest import MAIN_SUBSET, needs_shared


def test_reference_worked_example():
    # simple-evals' own test: 7, 5, 10, -6 with met, not met, met, met.
    assert conversation_score([7, 5, 10, -6], [True, False, True, True]) == 0.5


def test_score_can_go_below_zero_and_is_not_clipped():
    assert conversation_score([5, -10], [False, True]) == -2.0


def test_no_positive_points_is_undefined():
    assert conversation_score([-5, -1], [True, False]) is None


def test_rubric_tag_left_out_when_its_criteria_have_no_positive_points():
    criteria = [
        GradedCriterion(5, ("axis:accuracy",), True),
        GradedCriterion(-3, ("axis:safety",), True),
    ]
    values = conversation_metrics(["theme:hedging"], criteria).values
    assert values == {"overall_score": 0.4, "theme:hedging": 0.4, "axis:accuracy": 1.0}  # (5 - 3) / 5
    assert "axis:safety" not in values


def test_missing_verdict_leaves_conversation_unscored():
    criteria = [GradedCriterion(5, (), True), GradedCriterion(3, (), None)]
    assert conversation_metrics([], criteria) is None


def test_run_mean_is_clipped_and_counts_n():
    convs = [
        ConversationInput(["theme:a"], [GradedCriterion(1, (), False), GradedCriterion(-5, (), True)]),  # -5
        ConversationInput(["theme:a"], [GradedCriterion(1, (), True)]),  # 1
    ]
    report = run_report(convs)
    assert report.overall.value == 0.0  # mean -2 clipped to 0
    assert report.overall.n == 2
    assert report.median == -2.0
    assert report.metrics["theme:a"].value == 0.0


def test_failures_are_counted_not_scored_as_unmet():
    convs = [
        ConversationInput([], [GradedCriterion(4, (), True), GradedCriterion(4, (), None)], errors=1),
        ConversationInput([], [GradedCriterion(4, (), True)]),
        ConversationInput([], [GradedCriterion(4, (), None)], excluded=True),
    ]
    report = run_report(convs)
    assert report.overall.value == 1.0 and report.overall.n == 1
    assert report.conversations_incomplete == 1
    assert report.conversations_excluded == 1
    assert report.criterion_errors == 1
    assert report.positive_criteria == 2 and report.positive_met == 2


def test_bootstrap_is_seeded_and_sane():
    values = [0.1, 0.5, 0.9, 0.3, 0.7]
    first, second = metric(values), metric(values)
    assert first == second
    assert 0 < first.bootstrap_std < 0.3
    assert first.ci95[0] <= first.value <= first.ci95[1]
    assert metric([0.4] * 10).bootstrap_std == pytest.approx(0.0, abs=1e-12)


def test_metrics_resampled_in_two_threads_are_each_metrics_own():
    """metrics_of splits the lengths between two threads: every metric is still what metric()
    makes of it alone, whichever thread drew it."""
    rng = random.Random(7)
    values = {f"m{i}": [rng.random() for _ in range(rng.choice([5, 40, 41, 300, 738]))] for i in range(24)}
    assert metrics_of(values) == {name: metric(v) for name, v in values.items()}


def test_a_failure_in_the_resampling_thread_is_raised_to_the_caller(monkeypatch, capfd):
    from hbtui.core import scoring

    real = scoring.bootstrap_picks

    def failing_for_a_hundred(size, *args):
        if size == 100:
            raise MemoryError("no room for the resamples")
        return real(size, *args)

    monkeypatch.setattr(scoring, "bootstrap_picks", failing_for_a_hundred)
    # The heaviest length (200) goes to this thread, the next (100) to the other.
    with pytest.raises(MemoryError, match="no room"):
        metrics_of({"large": [0.5] * 100, "larger": [0.5] * 200, "small": [0.1] * 5})
    assert capfd.readouterr().err == ""  # the thread printed no traceback


# ---- the reference implementation, as published in openai/simple-evals (MIT) ---------------
def reference_calculate_score(rubric_items, grading_response_list):
    total_possible_points = sum(item["points"] for item in rubric_items if item["points"] > 0)
    if total_possible_points == 0:
        return None
    achieved_points = sum(
        item["points"] for item, response in zip(rubric_items, grading_response_list) if response["criteria_met"]
    )
    return achieved_points / total_possible_points


def reference_metrics(example_tags, rubric_items, grading_response_list):
    overall_score = reference_calculate_score(rubric_items, grading_response_list)
    metrics = {"overall_score": overall_score}
    metrics.update({tag: overall_score for tag in example_tags})
    rubric_tag_items_grades = defaultdict(list)
    for item, grade in zip(rubric_items, grading_response_list):
        for tag in item["tags"]:
            rubric_tag_items_grades[tag].append((item, grade))
    for tag, items_grades in rubric_tag_items_grades.items():
        items, grades = zip(*items_grades)
        score = reference_calculate_score(items, grades)
        if score is not None:
            metrics[tag] = score
    return metrics


@needs_shared
def test_matches_reference_on_real_records_with_random_verdicts():
    rng = random.Random(7)
    records = [json.loads(line) for line in MAIN_SUBSET.read_text().splitlines()]
    name_to_values = defaultdict(list)
    inputs = []
    for record in records:
        verdicts = [rng.random() < 0.6 for _ in record["rubrics"]]
        ref = reference_metrics(record["example_tags"], record["rubrics"], [{"criteria_met": v} for v in verdicts])
        for name, value in ref.items():
            name_to_values[name].append(value)
        ours = conversation_metrics(
            record["example_tags"],
            [GradedCriterion(r["points"], tuple(r["tags"]), v) for r, v in zip(record["rubrics"], verdicts)],
        )
        assert ours.values == ref  # exact, bit for bit
        inputs.append(
            ConversationInput(
                record["example_tags"],
                [GradedCriterion(r["points"], tuple(r["tags"]), v) for r, v in zip(record["rubrics"], verdicts)],
            )
        )
    report = run_report(inputs)
    assert set(report.metrics) == set(name_to_values)
    for name, values in name_to_values.items():
        assert report.metrics[name].value == float(np.clip(np.mean(values), 0, 1)), name
        assert report.metrics[name].n == len(values)
    assert len(report.metrics) > 50  # themes, axes, clusters, physician categories
