"""What a run is: a model run hbtui made, a meta-evaluation of a grader, or results imported from
another harness. The kind decides what can be done again: a model run's requests can be repeated
(resume, regrade-errors), an imported run's cannot (hbtui never sent them), though its stored
replies can be graded again by any grader (regrade) and it pairs with any run in a comparison.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hbtui.core.run_records import ImportedFrom

MODEL_RUN = "model"  # replies generated and graded by hbtui; runs older than kinds are these
META_EVAL = "meta-eval"  # a grader judged against physicians' labels (issue 14, section 1)
IMPORTED = "imported"  # replies and verdicts read from another harness's files (hbtui import)

KINDS = (MODEL_RUN, META_EVAL, IMPORTED)

MEANINGS = {
    MODEL_RUN: "replies generated and graded by hbtui",
    META_EVAL: "a grader judged against physicians' labels",
    IMPORTED: "replies and verdicts imported from another harness's files; hbtui sent none of their requests",
}

# What a run's score is, where it is not a HealthBench score.
META_EVAL_SCORE = "score is the grader's pairwise balanced F1 against physicians' labels, not a HealthBench score"


def kind_label(kind: str, imported: ImportedFrom | None = None) -> str:
    """``imported`` (with its format when known) or the kind as stored."""
    if kind == IMPORTED and imported and imported.get("format"):
        return f"imported ({imported['format']})"
    return kind


def not_repeatable(run_id: int, kind: str) -> str | None:
    """Why a run's own requests cannot be sent again (resume, regrade-errors), or None."""
    if kind == IMPORTED:
        return (
            f"run {run_id} is imported: hbtui never sent its requests, so there are none to repeat;"
            f" its stored replies can be graded again with: hbtui regrade {run_id}"
        )
    return None


def refusal(run_id: int, kind: str, action: str, other_kind: str | None = None) -> str | None:
    """Why ``action`` (compare, export) makes no sense for a run of ``kind``, or None. A
    comparison (``other_kind``: the other run's) pairs a meta-eval with another meta-eval only."""
    if kind != META_EVAL:
        return None
    if action == "compare" and other_kind != META_EVAL:
        return (
            f"run {run_id} is a meta-eval ({MEANINGS[META_EVAL]}): it has no HealthBench score to compare with"
            f" a {other_kind} run; compare it with another meta-eval of the same rows, or see its grader's F1"
            f" beside the physicians' range: hbtui show {run_id}"
        )
    if action == "export":
        return (
            f"run {run_id} is a meta-eval: export writes a model run's conversations and verdicts;"
            f" its report and metrics as JSON: hbtui show {run_id} --json"
        )
    return None
