"""A run's batches as the monitor, `hbtui runs`, `show` and the app say them (a run through a
provider's batch API: hbtui.engine.batch_api)."""

from __future__ import annotations

import time

from hbtui.core.invocation import invoked_as
from hbtui.store import Submission
from hbtui.store.batch_submissions import IMPORTED, SUBMITTED, UPLOADED, WRITTEN
from hbtui.store.owners import owner_alive, owner_label

ENDED = ("completed", "failed", "expired", "cancelled")
LIVE = ("validating", "in_progress", "finalizing")  # running at the provider, and billed


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
    at = clock(submission.submitted_at, now) if submission.submitted_at else None
    if submission.state == SUBMITTED and (submission.batch_status or "validating") in LIVE:
        # Short enough for a progress line at 80 columns: "in progress 40/95 since 17:21, 24 h left".
        window = ""
        if submission.expires_at:
            left = max(0.0, submission.expires_at - now)
            window = f", {left / 3600:.0f} h left" if left >= 3600 else f", {left / 60:.0f} min left"
        return f"{head}: {status}{counts}{failed}{f' since {at}' if at else ''}{window}"
    stored = ", stored" if submission.state == IMPORTED else ""
    why = f" ({submission.error})" if submission.error and submission.batch_status == "failed" else ""
    return f"{head}: {status}{why}{counts}{failed}{f', submitted {at}' if at else ''}{stored}"


def clock(moment: float, now: float) -> str:
    """A time of today as 17:21, of another day as 12-05 17:21."""
    same_day = time.localtime(moment)[:3] == time.localtime(now)[:3]
    return time.strftime("%H:%M" if same_day else "%m-%d %H:%M", time.localtime(moment))


def batch_lines(submissions: list[Submission], now: float | None = None) -> list[str]:
    """Each batch still open, then how many are stored: a run of many batches stays short."""
    open_ones = [describe_batch(s, now) for s in submissions if s.open]
    # A batch refused whole says why: its lines are errors with the provider's message.
    open_ones += [describe_batch(s, now) for s in submissions if not s.open and s.batch_status == "failed"]
    stored = [s for s in submissions if not s.open]
    if stored:
        open_ones.append(f"{len(stored):,} batch{'es' if len(stored) != 1 else ''} stored")
    return open_ones


def batch_summary(submissions: list[Submission]) -> str:
    """A few words for a list of runs: its batches at the provider, and what they are doing
    ("2 batches at the provider: 1 in progress, 1 validating"); empty when it has none there."""
    there = [s for s in submissions if s.state == SUBMITTED and (s.batch_status or "validating") in LIVE]
    if not there:
        return ""
    states: dict[str, int] = {}
    for s in there:
        word = (s.batch_status or "submitted").replace("_", " ")
        states[word] = states.get(word, 0) + 1
    counts = ", ".join(f"{count} {word}" for word, count in states.items())
    return f"{len(there)} batch{'es' if len(there) != 1 else ''} at the provider: {counts}"


LOOK_GRACE_SECONDS = 10.0  # past its next look by this much, a process looks no more


def looking_process(look: dict | None, now: float | None = None) -> str | None:
    """The process that looks at a run's batches while it awaits them (host:pid), or None when
    none does: it said when it looks next, and that time has not long passed, and its process is
    alive where this machine can tell."""
    if not look or not isinstance(look.get("next"), (int, float)):
        return None
    now = time.time() if now is None else now
    by = look.get("by")
    if now > look["next"] + LOOK_GRACE_SECONDS or not owner_alive(by):
        return None
    return owner_label(by) or "another process"


def look_line(run_id: int, look: dict | None, now: float | None = None) -> str:
    """Whether a process looks at a run's batches while it awaits them: its last look and its next."""
    now = time.time() if now is None else now
    if looking_process(look, now) is None or look is None:
        last = ""
        if look and isinstance(look.get("at"), (int, float)):
            last = f"last looked at {time.strftime('%H:%M:%S', time.localtime(look['at']))}; "
        return f"{last}no process looks at them now: {invoked_as()} resume {run_id} does"
    at = time.strftime("%H:%M:%S", time.localtime(look["at"]))
    following = time.strftime("%H:%M:%S", time.localtime(look["next"]))
    return f"looked at {at} by {looking_process(look, now)}, next look {following}"


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


def look_json(look: dict | None) -> dict:
    """`show --json`'s view of the last look at a run's batches, and whether a process looks now."""
    look = look or {}
    return {
        "looked_at": look.get("at"),
        "next_look_at": look.get("next"),
        "by": owner_label(look.get("by")),
        "looking": looking_process(look) is not None,
    }
