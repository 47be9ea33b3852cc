"""What a run was, beside what it scored: its models, endpoints, dataset, settings, times and
counts, as `show --json` gives them under "run" (docs/commands.md's "show --json" section describes
the document; SHOW_JSON_VERSION changes when a key moves or changes meaning, not when one is added).

No key appears here: the keys (and where this machine keeps the database and cache) are left
out, as a resume leaves them; an endpoint's URL loses any user:password part.
"""

from __future__ import annotations

import datetime
from typing import Any

from hbtui.core.redact import without_credentials
from hbtui.core.settings.config import UNRECORDED_SETTINGS
from hbtui.store.rows import Progress, RunRow

SHOW_JSON_VERSION = 1


def duration_text(seconds: float | None) -> str:
    """45s, 3m 07s, 2h 05m: short enough for a status line."""
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds}s"


def run_duration(run: RunRow) -> float | None:
    """Seconds from the run's creation to its end (pauses and interruptions included); None
    until it has ended."""
    if run.finished_at is None:
        return None
    return max(run.finished_at - run.created_at, 0.0)


def _moment(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="seconds")


def run_metadata(run: RunRow, progress: Progress) -> dict[str, Any]:
    """The keys `show --json` adds to its "run" object."""
    settings = {
        name: without_credentials(value) for name, value in run.settings.items() if name not in UNRECORDED_SETTINGS
    }
    base_url = without_credentials(run.settings.get("base_url"))
    return {
        "created_at": _moment(run.created_at),
        "finished_at": _moment(run.finished_at),
        "duration_seconds": run_duration(run),
        "models": {"test": run.model_test, "grader": run.model_grader},
        "endpoints": {
            "test": base_url,
            "grader": without_credentials(run.settings.get("grader_base_url")) or base_url,
        },
        "dataset": {
            "name": run.dataset_name,
            "path": run.dataset_path,
            "sha256": run.dataset_sha256,
            **{key: run.plan.get(key) for key in ("records", "limit", "seed", "repeats")},
        },
        "settings": settings,
        "counts": {
            "conversations": progress.conversations_total,
            "replies": progress.conversations_generated,
            "without_reply": progress.conversations_failed,
            "scored": progress.conversations_scored,
            "criteria": progress.criteria_total,
            "graded": progress.criteria_graded,
            "grading_errors": progress.criteria_errors,
            "skipped": progress.criteria_skipped,
        },
    }
