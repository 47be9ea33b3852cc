"""What a run planned, as its ``plan_json`` keeps it: read by name, with one default each.

The plan is written once, when the run is made (hbtui.engine.run_plan, hbtui.meta_eval.plan,
hbtui.imports), and read by every layer above the store; each key's default is said here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# A physician counted in a meta-eval's distribution has more labels than this (the reference's
# notebook keeps those with more than 50).
MIN_PHYSICIAN_LABELS = 50


@dataclass(frozen=True, slots=True)
class RunPlan:
    limit: int | None = None  # records sampled (--limit); None: every record
    seed: int | None = None
    repeats: int = 1  # each conversation answered and graded this many times
    records: int | None = None  # records in the run
    completions: str | None = None  # "physician" or "reference": the records' own completions graded
    groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # completions per group
    without_completions: int = 0  # records a completions run skipped
    labels_over: int = MIN_PHYSICIAN_LABELS  # a meta-eval's threshold for a physician's labels

    @classmethod
    def of(cls, plan: Mapping[str, Any] | None) -> RunPlan:
        plan = plan or {}
        return cls(
            limit=plan.get("limit"),
            seed=plan.get("seed"),
            repeats=int(plan.get("repeats") or 1),
            records=plan.get("records"),
            completions=plan.get("completions") or None,
            groups=plan.get("groups") or {},
            without_completions=int(plan.get("without_completions") or 0),
            labels_over=int(plan.get("labels_over", MIN_PHYSICIAN_LABELS)),
        )
