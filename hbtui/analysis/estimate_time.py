"""The time an estimated run takes (hbtui.analysis.estimate): the slowest of its stages' calls at
their concurrency and latency and of the endpoints' limits; through the batch API, the provider's
windows, which no figure here can shorten."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hbtui.core.settings.config import Settings

if TYPE_CHECKING:
    from hbtui.analysis.estimate import RoleEstimate


@dataclass(slots=True)
class TimeEstimate:
    seconds: float | None  # None: nothing to reckon it from
    bound: str  # what sets it, in words; or why it is unknown
    batch: bool = False  # through the batch API: ``bound`` says the windows, which set no estimate


GRADING_WINDOW = (
    "at most 24 h through the batch API: the grading within the provider's 24-hour window (often far sooner)"
)
BATCH_WINDOWS = (
    "at most 48 h through the batch API: the replies within the provider's 24-hour window, then their"
    " grading within another (often far sooner)"
)


def time_estimate(
    settings: Settings, test: RoleEstimate | None, grader: RoleEstimate, latency: float | None
) -> TimeEstimate:
    """The slowest of what bounds the run: each stage's calls at its concurrency and latency, and
    the endpoints' limits (RPM, TPM) where they are given. A grader on the test model's endpoints
    shares their concurrency and limits with it; on endpoints of its own, the two stages overlap."""
    if settings.batch:  # the provider answers each batch within its window, at its own pace
        if test is None:  # the records' own completions: grading alone
            return TimeEstimate(None, GRADING_WINDOW, batch=True)
        return TimeEstimate(None, BATCH_WINDOWS, batch=True)
    shared = settings.grader_shares_endpoints
    bounds: list[tuple[float, str]] = []
    stages = [
        (role, settings.concurrency if role is test else settings.effective_grader_concurrency)
        for role in (test, grader)
        if role
    ]

    def seconds_a_call(role: RoleEstimate) -> tuple[float | None, str]:
        if latency is not None:
            return latency, f"{latency:g} s a call (given)"
        if role.history.latency_seconds:
            median = statistics.median(role.history.latency_seconds)
            runs = len(role.history.latency_seconds)
            return median, f"{median:.2f} s a call (median of {runs} earlier run{'s' * (runs != 1)})"
        return None, ""

    work = []
    for role, concurrency in stages:
        per_call, how = seconds_a_call(role)
        if per_call is not None:
            work.append(
                (
                    role,
                    role.calls * per_call / concurrency,
                    f"{role.calls:,} {role.role} calls at concurrency {concurrency}, {how}",
                )
            )
    if shared and len(work) == 2:
        total = sum(seconds for _, seconds, _ in work)
        bounds.append((total, " then ".join(words for _, _, words in work) + " (sharing the endpoints)"))
    else:
        bounds += [(seconds, words) for _, seconds, words in work]
    for stage in (test, grader):
        if stage is None:
            continue
        role = stage
        rpm, tpm = settings.rate_limits(grader=role is grader)
        calls = role.calls + (test.calls if shared and role is grader and test else 0)
        tokens = role.input_tokens.value + (role.output_tokens.value if role.output_tokens else 0)
        if shared and role is grader and test:
            tokens += test.input_tokens.value + (test.output_tokens.value if test.output_tokens else 0)
        if shared and role is test:
            continue  # counted with the grader's, whose limits these are
        who = "both models'" if shared and test else f"the {role.role}'s"
        if rpm:
            bounds.append((calls / sum(rpm) * 60, f"{calls:,} calls at RPM {sum(rpm):g} ({who} endpoints)"))
        if tpm:
            bounds.append((tokens / sum(tpm) * 60, f"{tokens:,.0f} tokens at TPM {sum(tpm):g} ({who} endpoints)"))
    if not bounds:
        return TimeEstimate(
            None,
            "unknown: no earlier run of these models gives a latency, and no RPM or TPM is set;"
            " give --latency SECONDS for the time at CONCURRENCY",
        )
    seconds, words = max(bounds)
    return TimeEstimate(seconds, words)
