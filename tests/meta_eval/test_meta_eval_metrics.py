"""A meta-eval's metrics and requests equal the reference's (simple-evals' healthbench_meta_eval.py,
imported by path under stub modules; its text is never copied), on random labels."""

from __future__ import annotations

import json
import random
import statistics
import types

import pytest

from hbtui.core.grading import grader_messages, load_template
from hbtui.meta_eval.grading import meta_grader_prompt
from hbtui.meta_eval.metrics import (
    MODEL,
    LabelledRow,
    by_metric,
    majority_agreement,
    model_agreement,
    physician_agreement,
    physician_distribution,
    rater_metrics,
    row_aggregates,
    row_values,
)
from hbtui.meta_eval.summary import meta_eval_summary
from tests.conftest import REFERENCE_EVAL
from tests.support.reference_modules import reference_modules

REFERENCE_META = REFERENCE_EVAL.parent / "healthbench_meta_eval.py"
needs_reference = pytest.mark.skipif(
    not REFERENCE_META.exists(), reason=f"the reference's files are not at {REFERENCE_META.parent} (../shared absent)"
)
CATEGORIES = (
    "cluster_emergency_referrals_emergent",
    "cluster_communication_tailored",
    "cluster_hedging_any_reducible_uncertainty",
)
SEEDS = (0, 1, 7, 2025)


@pytest.fixture(scope="module")
def ref_meta():
    with reference_modules(REFERENCE_EVAL.parent, "healthbench_eval", "healthbench_meta_eval") as (_, meta):
        yield meta


def random_rows(seed: int, count: int = 300, physicians: int = 12) -> list[dict]:
    """Rows as the official file holds them: a conversation, a completion, a rubric, one to
    five physicians' labels (each physician at most once per row) and a category."""
    rng = random.Random(seed)
    rows = []
    for number in range(count):
        raters = rng.sample([f"phys-{i}" for i in range(physicians)], rng.randint(1, 5))
        lean = rng.random()
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"Question {number} <<rubric_item>>?"}],
                "completion": f"Completion {number} with <<conversation>> inside.",
                "rubric": f"Rubric {number}: advises seeing a doctor",
                "binary_labels": [rng.random() < lean for _ in raters],
                "anonymized_physician_ids": raters,
                "category": rng.choice(CATEGORIES),
                "grader": rng.random() < 0.6,
            }
        )
    return rows


def labelled(rows: list[dict]) -> list[LabelledRow]:
    return [
        LabelledRow(tuple(r["binary_labels"]), tuple(r["anonymized_physician_ids"]), r["category"], r["grader"])
        for r in rows
    ]


def assert_same_metrics(ours: dict, theirs: dict) -> None:
    assert set(ours) == set(theirs)
    for name, metric in theirs.items():
        assert ours[name]["n"] == pytest.approx(metric["n"], abs=1e-12), name
        if metric["value"] is None:
            assert ours[name]["value"] is None, name
        else:
            assert ours[name]["value"] == pytest.approx(metric["value"], abs=1e-12), name


@needs_reference
@pytest.mark.parametrize("seed", SEEDS)
def test_the_pairwise_metrics_equal_the_references_for_the_grader_and_for_a_physician(ref_meta, seed):
    rows = random_rows(seed)
    grader = [r["grader"] for r in rows]
    labels = [r["binary_labels"] for r in rows]
    categories = [r["category"] for r in rows]
    theirs = ref_meta.compute_metrics_for_rater_by_class(grader, labels, categories, "model")
    assert_same_metrics(rater_metrics(grader, labels, categories, MODEL), theirs)
    assert "pairwise_model_f1_balanced" in theirs and f"{CATEGORIES[0]}: pairwise_model_f1_balanced" in theirs
    # A rater that only ever says met: the negative precision is missing, and so are its F1 and balance.
    always = [True] * len(rows)
    assert_same_metrics(
        rater_metrics(always, labels, categories, MODEL),
        ref_meta.compute_metrics_for_rater_by_class(always, labels, categories, "model"),
    )


class LabelsFromRows:
    """The reference's grader sampler: checks that the request is the one hbtui sends for the
    same row (byte for byte), and answers that row's planned verdict."""

    def __init__(self, rows: list[dict], template, system: str):
        self.expected = {}
        for row in rows:
            prompt = meta_grader_prompt(template, row["prompt"], row["completion"], row["rubric"])
            self.expected[prompt] = row["grader"]
        self.system = system
        self.calls = 0

    def __call__(self, messages):
        self.calls += 1
        ours = grader_messages(messages[0]["content"], self.system)
        assert json.dumps(ours) == json.dumps([{"role": "system", "content": self.system}, *messages])
        label = self.expected[messages[0]["content"]]
        text = json.dumps({"explanation": "planned", "criteria_met": label})
        return types.SimpleNamespace(response_text=text, actual_queried_message_list=messages)


@needs_reference
@pytest.mark.parametrize("seed", SEEDS)
def test_a_whole_meta_eval_equals_the_references_requests_grader_and_physician_metrics_and_row_means(
    ref_meta, reference_cache, seed
):
    rows = random_rows(seed)
    template = load_template("reference", reference_cache)
    evaluation = object.__new__(ref_meta.HealthBenchMetaEval)
    evaluation.examples = rows
    grader = LabelsFromRows(rows, template, "You are a helpful assistant.")
    evaluation.n_threads = 1
    result = evaluation(grader)  # the reference grades with the sampler it is called with
    assert grader.calls == len(rows)

    ours = labelled(rows)
    assert_same_metrics(model_agreement(ours), result.metadata["model_agreement_metrics"])
    theirs_physicians = result.metadata["physician_agreement_metric_lists"]
    ours_physicians = by_metric(physician_agreement(ours))
    assert set(ours_physicians) == set(theirs_physicians)
    for name, per_physician in theirs_physicians.items():
        assert set(ours_physicians[name]) == set(per_physician), name
        for physician, metric in per_physician.items():
            assert_same_metrics({name: ours_physicians[name][physician]}, {name: metric})
    aggregates = row_aggregates(row_values(ours))
    means = {k: v for k, v in aggregates.items() if not k.endswith(":bootstrap_std")}
    # The reference's score is its model_predicted_positive again; its pairwise metrics are above.
    theirs_means = {k: v for k, v in result.metrics.items() if "pairwise" not in k and not k.startswith("score")}
    assert set(means) == set(theirs_means)
    for name, value in theirs_means.items():
        assert means[name] == pytest.approx(value, abs=1e-12), name
    # Per category, the grader's F1 beside the median of the reference's own per-physician F1 there,
    # over the physicians with more labels in all than the median physician (some left out).
    given = {}
    for row in rows:
        for physician in row["anonymized_physician_ids"]:
            given[physician] = given.get(physician, 0) + 1
    threshold = sorted(given.values())[len(given) // 2]
    summary = meta_eval_summary(ours, labels_over=threshold)
    assert result.score == pytest.approx(summary["pairwise_model_f1_balanced"], abs=1e-12)
    for category in CATEGORIES:
        theirs_category = theirs_physicians[f"{category}: pairwise_physician_f1_balanced"]
        kept = [m["value"] for p, m in theirs_category.items() if given[p] > threshold and m["value"] is not None]
        shown = summary["by_category"][category]
        assert shown["physicians"] == len(kept) > 0 and len(kept) < len(theirs_category)
        assert shown["physicians_median"] == pytest.approx(statistics.median(kept), abs=1e-12)
        assert shown["grader"] == pytest.approx(result.metrics[f"{category}: pairwise_model_f1_balanced"], abs=1e-12)


def test_the_bootstrap_is_seeded_and_spreads_like_the_standard_error():
    rows = labelled(random_rows(3, count=2000))
    first, again = row_aggregates(row_values(rows)), row_aggregates(row_values(rows))
    assert first == again
    share = first["model_predicted_positive"]
    standard_error = (share * (1 - share) / 2000) ** 0.5
    assert first["model_predicted_positive:bootstrap_std"] == pytest.approx(standard_error, rel=0.15)


def test_ungraded_rows_are_left_out_of_the_graders_metrics_but_not_the_physicians():
    rows = labelled(random_rows(5, count=50))
    cut = [LabelledRow(r.labels, r.physician_ids, r.category, None if i % 2 else r.grader) for i, r in enumerate(rows)]
    judged = [r for r in cut if r.grader is not None]
    assert model_agreement(cut) == model_agreement(judged)
    assert physician_agreement(cut) == physician_agreement(rows)
    summary = meta_eval_summary(cut)
    assert (summary["judged"], summary["unjudged"]) == (25, 25)


def test_the_majority_vote_leaves_ties_out_and_counts_them():
    rows = [
        LabelledRow((True, True, False), ("a", "b", "c"), "x", True),  # majority met, grader met: TP
        LabelledRow((False, False), ("a", "b"), "x", True),  # majority not met: FP
        LabelledRow((True, False), ("a", "b"), "x", False),  # a tie: left out
        LabelledRow((True,), ("a",), "x", False),  # FN
        LabelledRow((False, False, True), ("a", "b", "c"), "x", False),  # TN
        LabelledRow((False,), ("c",), "x", None),  # not judged
    ]
    result = majority_agreement(rows)
    assert (result.rows, result.ties) == (4, 1)
    assert result.f1_pos == pytest.approx(2 / 4) and result.f1_neg == pytest.approx(2 / 4)
    assert result.macro_f1 == pytest.approx(0.5)


def test_the_distribution_keeps_physicians_with_more_labels_than_the_threshold_and_places_the_grader():
    per_physician = {
        f"p{i}": {"pairwise_physician_f1_balanced": {"n": 10, "value": value}}
        for i, value in enumerate((0.5, 0.6, 0.7, 0.8, 0.9, 0.1))
    }
    labels = {"p0": 51, "p1": 60, "p2": 100, "p3": 51, "p4": 70, "p5": 50}
    shown = physician_distribution(per_physician, labels, grader=0.75)
    assert (shown.physicians, shown.left_out) == (5, 1)  # p5 has 50 labels, not more
    assert (shown.minimum, shown.median, shown.maximum) == (0.5, 0.7, 0.9)
    assert shown.below_grader == 3 and shown.within_range is True
    assert physician_distribution(per_physician, labels, grader=0.75, labels_over=0).physicians == 6
    assert physician_distribution(per_physician, labels, grader=0.95).within_range is False
