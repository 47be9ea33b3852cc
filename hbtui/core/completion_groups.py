"""The physicians' groups of HealthBench's ideal completions, and the two ways a run grades the
records' own completions instead of a model's replies (planned in hbtui.core.completions). Names and
words only, so that the report and the store can say them without loading the dataset code."""

from __future__ import annotations

from collections.abc import Iterable

from hbtui.core.plan import RunPlan

PHYSICIAN, REFERENCE = "physician", "reference"
PROFESSIONAL_GROUP = "Professional"
MODES = (PHYSICIAN, REFERENCE)
IDEAL = "ideal"  # the label of a group's ideal completion; a reference completion's is "reference N"

# The groups in the reference's order, with what each group's physicians had in front of them.
GROUPS = {
    "Group 1": "physicians wrote without reference completions",
    "Group 2": "physicians wrote with reference completions of Aug/Sep 2024 models (gpt-4o-2024-08-06, o1-preview)",
    "Group 3": "physicians wrote with reference completions of Apr 2025 models (o3, gpt-4.1)",
    # HealthBench Professional (2026): each record's physician_response, a group of its own.
    PROFESSIONAL_GROUP: "HealthBench Professional: the physician response of each task, written by its clinicians",
}
WITH_REFERENCES = ("Group 2", "Group 3")

# What stands where a model's name would (the runs list, show, compare): no model replied.
REPLIED_BY = {PHYSICIAN: "physician completions", REFERENCE: "reference completions"}
MEANINGS = {
    PHYSICIAN: "each group's physician-written ideal completion, graded in place of a model's reply",
    REFERENCE: "the four model completions Groups 2 and 3 were shown, graded in place of a model's reply",
}


def replied_by_of(settings) -> str:
    """Who replied, as a run names it where a model's name stands: the model under test, or
    whose completions a completions run grades (``settings`` is a Settings)."""
    return REPLIED_BY.get(settings.completions or "", settings.model_test or "")


def group_description(group: str) -> str:
    return GROUPS.get(group, "")


def skipped_line(plan: RunPlan) -> str | None:
    """One line saying what a completions run left out, from its recorded plan; None otherwise."""
    mode = plan.completions
    if not mode:
        return None
    without, groups = plan.without_completions, plan.groups
    chosen = ", ".join(f"{group} {info.get('sampled')} of {info.get('completions')}" for group, info in groups.items())
    # The reference's reference mode has no Group 1: its physicians were shown no model's completion.
    no_group_1 = "; Group 1 has no reference completions" if mode == REFERENCE else ""
    return (
        f"completions: {mode} ({REPLIED_BY.get(mode, mode)}; {chosen}); {without} records without completions"
        f" skipped{no_group_1}"
    )


def ordered_groups(names: Iterable[str]) -> list[str]:
    """The groups in the reference's order, any unknown name after them."""
    names = set(names)
    return [g for g in GROUPS if g in names] + sorted(n for n in names if n not in GROUPS)
