"""`hbtui estimate` and the configuration screen's estimate, as lines of text."""

from __future__ import annotations

import math

from hbtui.analysis.estimate import CHARS_PER_TOKEN, CHARS_PER_TOKEN_RANGE, Estimate, RoleEstimate, Span
from hbtui.core.settings.prices import cost_text, tokens_text
from hbtui.core.text import one_line
from hbtui.render.run_metadata import duration_text


def span_text(span: Span, known: bool = True) -> str:
    """``1.02M (0.91M-1.17M)``: the estimate, then its range when it has one; ``known`` False:
    the range alone, ``1.42M to 1.83M``."""
    low, high = tokens_text(round(span.low)), tokens_text(round(span.high))
    if not known:
        return f"{low} to {high}"
    value = tokens_text(round(span.value))
    if low == high:
        return value
    return f"{value} ({low}-{high})"


def cost_range(low: float, high: float) -> str:
    """Both ends to the digits the larger needs: 0.0098 to 0.4220, not 0.009841 to 0.4220."""
    digits = 2 if high >= 100 else 4 if high >= 0.01 else 6
    return f"{low:.{digits}f} to {high:.{digits}f}"


def cost_span(cost: Span, known: bool = True) -> str:
    """The cost and its range; where a figure is unknown (an output, the replies' length), the
    range alone: a figure between would be a guess."""
    if math.isinf(cost.high):
        return f"at least {cost_text(cost.low)} (output unknown, no token limit)"
    if not known:
        return f"{cost_range(cost.low, cost.high)} (a range: see the notes)"
    if cost_text(cost.high) == cost_text(cost.low):
        return cost_text(cost.value)
    return f"{cost_text(cost.value)} ({cost_range(cost.low, cost.high).replace(' to ', '-')})"


def output_text(role: RoleEstimate) -> str:
    if role.output_tokens is not None:
        return span_text(role.output_tokens)
    ceiling = role.output_ceiling
    if ceiling is None:
        return "unknown"
    return f"unknown (at most {tokens_text(round(ceiling))})"


def role_cost_text(role: RoleEstimate) -> str:
    """The role's cost online and by batch, or why either is unknown: a discount is never guessed."""
    online, batch = role.cost(), role.cost(batch=True)
    if online is None:
        return f"unknown: {one_line(role.model, 40)} has no price in prices.json"
    known = role.figures_known
    if batch is None:
        return f"{cost_span(online, known)} online; batch price unknown (no batch_input and batch_output for it)"
    return f"{cost_span(online, known)} online, {cost_span(batch, known)} by batch"


def calibration_text(role: RoleEstimate) -> str:
    history = role.history
    if not history.runs:
        low, high = CHARS_PER_TOKEN_RANGE
        return f"uncalibrated, {CHARS_PER_TOKEN:g} characters a token ({low:g}-{high:g} in common tokenizers)"
    factors = history.input_factors
    if history.runs == 1:
        return f"calibrated by one earlier run of the model ({history.calls:,} calls; factor {factors[0]:.2f}, no spread known)"
    spread = (
        f"{min(factors):.2f}-{max(factors):.2f}"
        if f"{min(factors):.2f}" != f"{max(factors):.2f}"
        else f"{factors[0]:.2f}"
    )
    return f"calibrated by {history.runs} earlier runs of the model ({history.calls:,} calls; factor {spread})"


def estimate_lines(result: Estimate, head: str) -> list[str]:
    lines = [head, "an estimate, not a bill; no model was called"]
    # The role in a word, the model beside it: the table fits 80 columns with common model names.
    rows = [["", "model", "calls", "input tokens", "output tokens"]]
    rows += [
        [
            "test" if role is result.test else "grader",
            one_line(role.model, 28),
            f"{role.calls:,}",
            span_text(role.input_tokens),
            output_text(role),
        ]
        for role in result.roles
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.rjust(w) if i == 2 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    for role in result.roles:
        lines.append(f"tokens of the {role.role}: {calibration_text(role)}")
    for role in result.roles:
        lines.append(f"cost of the {role.role}: {role_cost_text(role)}")
    total, total_batch = result.total_cost(), result.total_cost(batch=True)
    if total is None:
        lines.append("cost in all: unknown until every model has a price in prices.json")
    else:
        known = all(role.figures_known for role in result.roles)
        lines.append(
            f"cost in all: {cost_span(total, known)} online, "
            + (f"{cost_span(total_batch, known)} by batch" if total_batch else "batch price unknown")
            + " (prices per million tokens from prices.json)"
        )
    if result.time.batch:
        lines.append("this run goes through the batch API: the batch price is the one it pays")
    if result.time.seconds is None:
        lines.append(f"time: {result.time.bound}")
    else:
        lines.append(f"time: {time_text(result.time.seconds)}, set by {result.time.bound}")
    lines += [f"note: {note}" for note in result.notes]
    return lines


def time_text(seconds: float) -> str:
    return "under a second" if seconds < 1 else f"about {duration_text(seconds)}"


def estimate_summary(result: Estimate) -> list[str]:
    """The estimate in a few lines short enough for a question at 80 columns: the configuration
    screen's, before Start. `hbtui estimate` gives the rest."""
    calls = sum(role.calls for role in result.roles)
    who = ", ".join(f"{role.calls:,} to {one_line(role.model, 24)}" for role in result.roles)
    inputs = sum((role.input_tokens for role in result.roles), Span(0.0, 0.0, 0.0))
    replies_known = all(role.replies_known for role in result.roles)
    outputs = [role.output_tokens for role in result.roles]
    if all(span is not None for span in outputs):
        output = span_text(sum((span for span in outputs if span is not None), Span(0.0, 0.0, 0.0)))
    else:
        ceilings = [role.output_ceiling for role in result.roles]
        output = "unknown" + (
            f", at most {tokens_text(round(sum(c for c in ceilings if c is not None)))}"
            if all(c is not None for c in ceilings)
            else ""
        )
    total, total_batch = result.total_cost(), result.total_cost(batch=True)
    known = all(role.figures_known for role in result.roles)
    if total is None:
        cost = "cost unknown: a model has no price in prices.json"
    else:
        cost = f"cost {cost_span(total, known)} online; " + (
            f"{cost_span(total_batch, known)} by batch" if total_batch else "batch price unknown"
        )
    if result.time.batch:
        time = f"time {result.time.bound.split(':')[0]} (the batch API's windows)"
    elif result.time.seconds is None:
        time = "time unknown (no latency or limit known: hbtui estimate --latency gives one)"
    else:
        time = f"time {time_text(result.time.seconds)}"
    lines = [
        f"About {calls:,} calls: {who}.",
        f"Tokens in {span_text(inputs)}, out {output}.",
        f"Estimated {cost}; {time}.",
    ]
    if not replies_known and result.test is not None:
        lines.append(
            f"The replies' length is unknown (no earlier run of {one_line(result.test.model, 24)}): the grader's"
            " tokens count each reply at its limit, an upper estimate."
        )
    return [*lines, "An estimate, not a bill (hbtui estimate with the same flags gives its details)."]
