"""A run's batches as the monitor, `hbtui runs`, `show` and the app say them (a run through a
provider's batch API: hbtui.engine.batch_api)."""

from __future__ import annotations

import time

from hbtui.core.invocation import invoked_as
from hbtui.store import Submission
from hbtui.store.batch_submissions import IMPORTED, SUBMITTED, UPLOADED, WRITTEN

ENDED = ("completed", "failed", "expired", "cancelled")


def describe_batch(submission: Submission, now: float | None = None) -> str:
    """One submission as the monitor, `runs`, `show` and the app say it: its stage, its state with
    its counts, when it was submitted and the window it has left."""
    now = time.time() if now is None else now
    head = f"batch {submission.number} ({submission.stage}, {submission.lines:,} requests)"
    if submission.state == WRITTEN:
        return f"{head}: written, not yet uploaded"
    if submission.state == UPLOADED:
        return f"{head}: uploaded, not yet submitted"
    status = (submission.batch_status or "submitted").replace("_", " ")
    counts = f" {submission.completed + submission.failed:,}/{submission.total:,}" if submission.total else ""
    failed = f" ({submission.failed:,} failed)" if submission.failed else ""
    when = ""
    if submission.submitted_at:
        when = f", submitted {time.strftime('%Y-%m-%d %H:%M', time.localtime(submission.submitted_at))}"
    window = ""
    if submission.state == SUBMITTED and submission.expires_at and submission.batch_status not in ENDED:
        left = max(0.0, submission.expires_at - now)
        window = (
            f", {left / 3600:.0f} h of its window left" if left >= 3600 else f", {left / 60:.0f} min of its window left"
        )
    stored = ", stored" if submission.state == IMPORTED else ""
    return f"{head}: {status}{counts}{failed}{when}{window}{stored}"


def batch_lines(submissions: list[Submission], now: float | None = None) -> list[str]:
    """Each batch still open, then how many are stored: a run of many batches stays short."""
    open_ones = [describe_batch(s, now) for s in submissions if s.open]
    stored = [s for s in submissions if not s.open]
    if stored:
        open_ones.append(f"{len(stored):,} batch{'es' if len(stored) != 1 else ''} stored")
    return open_ones


def batch_summary(submissions: list[Submission]) -> str:
    """A few words for a list of runs: what its open batches are doing."""
    open_ones = [s for s in submissions if s.open]
    if not open_ones:
        return ""
    states: dict[str, int] = {}
    for s in open_ones:
        word = (s.batch_status or s.state).replace("_", " ")
        states[word] = states.get(word, 0) + 1
    return ", ".join(f"{count} {word}" for word, count in states.items())


def look_line(run_id: int, look: dict | None, now: float | None = None) -> str | None:
    """Whether a process looks at a run's batches while it awaits them: its last look, and its next
    (``look``: None when the run is not awaiting them)."""
    if not look or not isinstance(look.get("at"), (int, float)):
        return f"no process looks at them now: {invoked_as()} resume {run_id} does"
    now = time.time() if now is None else now
    at = time.strftime("%H:%M:%S", time.localtime(look["at"]))
    following = look.get("next")
    if isinstance(following, (int, float)) and now <= following + max(30.0, following - look["at"]):
        return f"looked at {at}, next look {time.strftime('%H:%M:%S', time.localtime(following))}"
    return f"looked at {at}; no process looks at them now: {invoked_as()} resume {run_id} does"


def batch_json(submission: Submission) -> dict:
    """`show --json`'s view of one submission."""
    return {
        "number": submission.number,
        "stage": submission.stage,
        "model": submission.model,
        "endpoint": submission.endpoint,
        "requests": submission.lines,
        "state": submission.state,
        "batch_id": submission.batch_id,
        "batch_status": submission.batch_status,
        "total": submission.total,
        "completed": submission.completed,
        "failed": submission.failed,
        "submitted_at": submission.submitted_at,
        "expires_at": submission.expires_at,
        "ended_at": submission.ended_at,
        "error": submission.error,
    }
