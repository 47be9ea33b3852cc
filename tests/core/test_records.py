"""Typed records across the layers (issue 24, item 3): a run's plan read by name, and one
vocabulary of statuses, spelt as the database stores them."""

from __future__ import annotations

import typing

from hbtui.core import verdicts
from hbtui.core.plan import MIN_PHYSICIAN_LABELS, RunPlan


def test_a_plan_of_an_older_version_reads_with_each_default():
    assert RunPlan.of({}) == RunPlan.of(None) == RunPlan()
    old = RunPlan.of({"limit": 5, "seed": 0, "repeats": None})
    assert (old.limit, old.seed, old.repeats, old.completions, old.labels_over) == (5, 0, 1, None, MIN_PHYSICIAN_LABELS)


def test_a_plan_keeps_what_the_run_recorded():
    plan = RunPlan.of(
        {
            "repeats": 3,
            "completions": "physician",
            "groups": {"Group 1": {"sampled": 2, "completions": 4}},
            "without_completions": 7,
            "labels_over": 10,
        }
    )
    assert (plan.repeats, plan.completions, plan.without_completions, plan.labels_over) == (3, "physician", 7, 10)
    assert plan.groups["Group 1"]["sampled"] == 2


def test_each_status_constant_is_a_value_of_its_literal():
    run_statuses = set(typing.get_args(verdicts.RunStatus))
    assert {verdicts.RUNNING, verdicts.FINISHED, verdicts.INCOMPLETE, verdicts.FAILED} <= run_statuses
    assert {verdicts.CANCELLED, verdicts.INTERRUPTED, verdicts.PENDING} <= run_statuses
    assert set(typing.get_args(verdicts.VerdictStatus)) == {
        verdicts.MET,
        verdicts.NOT_MET,
        verdicts.PENDING,
        verdicts.ERROR,
    }
    assert set(typing.get_args(verdicts.ReplyStatus)) == {verdicts.PENDING, verdicts.GENERATED, verdicts.FAILED}
    # Every stored ending, and the one shown for a process that lost its run, reads as ended.
    assert verdicts.ENDED == (run_statuses - {verdicts.PENDING, verdicts.RUNNING}) | {verdicts.TAKEN_OVER}
    assert verdicts.GOING.isdisjoint(verdicts.ENDED)


def test_a_verdict_kind_is_what_it_did_to_the_score():
    """One reading of (status, points) for the app's lists and the Markdown copy alike."""
    kinds = {
        (status, points): verdicts.verdict_kind(status, points)
        for status in (verdicts.MET, verdicts.NOT_MET, verdicts.ERROR, verdicts.PENDING)
        for points in (5.0, -3.0)
    }
    assert kinds == {
        ("met", 5.0): "met",
        ("met", -3.0): "penalty",
        ("not_met", 5.0): "missed",
        ("not_met", -3.0): "avoided",
        ("error", 5.0): "grader-error",
        ("error", -3.0): "grader-error",
        ("pending", 5.0): "pending",
        ("pending", -3.0): "pending",
    }
