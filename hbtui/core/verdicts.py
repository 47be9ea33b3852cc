"""Verdicts of two graders (or reviewers) on the same criteria, and how far they agree.

Cohen's kappa, for a comparison of two runs and for the reviewers of one run alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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
