"""Every distinct criterion of a run with its outcomes: the orders the criteria view offers and
its CSV export ("which rubric items does this model miss most")."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

from hbtui.core.files import private_file
from hbtui.core.text import spreadsheet_cell, visible_controls, visible_line
from hbtui.store.browse_reads import CriterionStats


def _missed_first(c: CriterionStats) -> tuple:
    # Positive criteria the model misses most first; penalties (where "met" is bad) after them.
    fraction = c.met_fraction
    return (c.points < 0, fraction is None, fraction if fraction is not None else 0.0, -c.graded, c.criterion)


# key -> (label, sort key); the first is the view's order as it opens.
CRITERIA_SORTS: dict[str, tuple[str, Callable[[CriterionStats], tuple]]] = {
    "missed": ("met fraction ↑ (most missed first)", _missed_first),
    "missed-count": ("times missed (most first)", lambda c: (c.points < 0, -c.not_met, c.criterion)),
    "triggered": ("penalties triggered (most first)", lambda c: (c.points > 0, -c.met, c.criterion)),
    "errors": ("grader errors (most first)", lambda c: (-c.errors, c.criterion)),
    "conversations": ("conversations (most first)", lambda c: (-c.conversations, c.criterion)),
    "text": ("criterion text (A to Z)", lambda c: (c.criterion.casefold(), c.tags_json)),
}

CSV_COLUMNS = ("criterion", "tags", "points", "conversations", "met", "not_met", "errors", "met_fraction")


def sorted_criteria(stats: Sequence[CriterionStats], sort: str) -> list[CriterionStats]:
    return sorted(stats, key=CRITERIA_SORTS[sort][1])


def criteria_csv(stats: Sequence[CriterionStats]) -> str:
    """One row a distinct criterion; for a penalty (negative points) ``met`` counts the times it
    was triggered. Tags are joined with a space, as HealthBench writes none with one. Text is
    shown as the other exports show it (controls visible, a would-be formula after a ``'``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for c in stats:
        fraction = c.met_fraction
        writer.writerow(
            (
                spreadsheet_cell(visible_controls(c.criterion)),
                spreadsheet_cell(visible_line(" ".join(c.tags))),
                f"{c.points:g}",  # a number, negative for a penalty: never quoted as text
                c.conversations,
                c.met,
                c.not_met,
                c.errors,
                "" if fraction is None else f"{fraction:.4f}",
            )
        )
    return out.getvalue()


def write_criteria_csv(path: Path, stats: Sequence[CriterionStats]) -> None:
    """Written whole or not at all, owner-only as every export (it quotes the run's criteria and
    counts): hbtui.core.files.private_file writes beside it and moves it into place."""
    with private_file(path, newline="") as handle:
        handle.write(criteria_csv(stats))
