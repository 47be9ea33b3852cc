"""The statuses of verdicts, replies and runs, one vocabulary for every layer; and how far two
graders (or reviewers) agree on the same criteria.

Each status is a ``Literal`` type with a constant per value: the values are what the database
stores, so they never change spelling. Cohen's kappa serves a comparison of two runs and the
reviewers of one run alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

# ---- statuses, as stored -------------------------------------------------------------------------

VerdictStatus = Literal["pending", "met", "not_met", "error"]
MET: Final = "met"
NOT_MET: Final = "not_met"
PENDING: Final = "pending"  # a verdict, a reply or a run not begun
ERROR: Final = "error"  # a verdict whose grading failed

ReplyStatus = Literal["pending", "generated", "failed"]  # a conversation's reply; failed: none came
GENERATED: Final = "generated"
FAILED: Final = "failed"  # a conversation without a reply, or a run stopped on what every call would hit

RunStatus = Literal[
    "pending", "running", "finished", "incomplete", "failed", "cancelled", "interrupted", "awaiting batch"
]
RUNNING: Final = "running"
FINISHED: Final = "finished"
INCOMPLETE: Final = "incomplete"  # ended, scored on what is there, with replies or verdicts missing
CANCELLED: Final = "cancelled"
INTERRUPTED: Final = "interrupted"
# A run whose requests wait in batch files for an engine of the user's own (hbtui.core.batch_files):
# no process drives it, and it holds no lease, until its answers are imported.
AWAITING_BATCH: Final = "awaiting batch"
# Shown, never stored: a running run whose driver was asked to pause, and a process that lost its
# run to another (it writes no status of its own).
PAUSED: Final = "paused"
TAKEN_OVER: Final = "taken over"
ENDED: Final = frozenset({FINISHED, INCOMPLETE, FAILED, CANCELLED, INTERRUPTED, TAKEN_OVER, AWAITING_BATCH})
GOING: Final = frozenset({RUNNING, PAUSED})


def verdict_kind(status: str, points: float) -> str:
    """What a verdict did to the score, as the rubric says it: helped (met, avoided), hurt
    (missed, penalty: a met criterion of negative points) or is missing (grader-error, pending)."""
    if status == ERROR:
        return "grader-error"
    if status == MET:
        return "penalty" if points < 0 else "met"
    if status == NOT_MET:
        return "avoided" if points < 0 else "missed"
    return "pending"


# ---- grader agreement ----------------------------------------------------------------------------


@dataclass(slots=True)
class Kappa:
    """Cohen's kappa of two graders' met / not met over the same criteria.

    Undefined (None, with the reason) where either grader gave every criterion the same verdict:
    kappa then says nothing about agreement (it is 0 or 0/0 whatever the other grader did).
    """

    n: int
    both_met: int
    only_a_met: int
    only_b_met: int
    neither_met: int

    @property
    def observed(self) -> float | None:
        return (self.both_met + self.neither_met) / self.n if self.n else None

    @property
    def expected(self) -> float | None:
        if not self.n:
            return None
        a_met = (self.both_met + self.only_a_met) / self.n
        b_met = (self.both_met + self.only_b_met) / self.n
        return a_met * b_met + (1 - a_met) * (1 - b_met)

    @property
    def undefined(self) -> str | None:
        if not self.n:
            return "no criterion graded by both"
        constant = []
        for name, met in (("A", self.both_met + self.only_a_met), ("B", self.both_met + self.only_b_met)):
            if met in (0, self.n):
                constant.append(f"grader {name} gave every criterion {'met' if met else 'not met'}")
        return "; ".join(constant) + " (a constant grader)" if constant else None

    @property
    def kappa(self) -> float | None:
        observed, expected = self.observed, self.expected
        if self.undefined is not None or observed is None or expected is None:
            return None
        return (observed - expected) / (1 - expected)

    def as_dict(self) -> dict:
        return {
            "criteria": self.n,
            "kappa": self.kappa,
            "undefined": self.undefined,
            "observed": self.observed,
            "expected": self.expected,
            "table": {
                "both_met": self.both_met,
                "only_a_met": self.only_a_met,
                "only_b_met": self.only_b_met,
                "neither_met": self.neither_met,
            },
        }


def kappa_of(verdicts: Iterable[tuple[bool, bool]]) -> Kappa:
    counts = [0, 0, 0, 0]
    for met_a, met_b in verdicts:
        counts[cell(met_a, met_b)] += 1
    return Kappa(sum(counts), *counts)


def cell(met_a: bool, met_b: bool) -> int:
    """Index of a verdict pair in (both met, only A met, only B met, neither)."""
    return (0 if met_a else 2) + (0 if met_b else 1)
