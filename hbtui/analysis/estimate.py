"""What a run will ask for before it starts: its calls, tokens, cost and time, with no model called.

The calls are exact: one reply per conversation and repeat, one verdict per criterion (before
retries, and before the verdict cache, which may answer some). Tokens are estimated from the
characters each request holds, at ``CHARS_PER_TOKEN``, plus a few tokens a chat message. Earlier
runs of the same model in the database calibrate both: the tokens they measured against what this
estimate gives for the same requests (a factor per run), the tokens each reply and verdict took,
the replies' length (which the grader reads), and each call's latency. Every figure carries its
range: over the earlier runs where there are some, else over the characters a token holds in
common tokenizers; an output with no earlier run is unknown, bounded by the token limit asked for.
It is an estimate, never a bill.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hbtui.analysis.estimate_time import TimeEstimate, time_estimate
from hbtui.core.completions import plan_completions
from hbtui.core.dataset import Dataset, Record, sample
from hbtui.core.errors import HbtuiError
from hbtui.core.grading import CONVERSATION_SLOT, Template, load_template, render_conversation, render_criterion
from hbtui.core.settings.config import Settings
from hbtui.core.settings.prices import Price
from hbtui.store import Store

CHARS_PER_TOKEN = 4.0  # OpenAI's rule of thumb for English text
CHARS_PER_TOKEN_RANGE = (3.5, 4.5)  # what common tokenizers give on English text: the uncalibrated range
MESSAGE_TOKENS = 4  # a chat message's role and separators, as chat templates write them
REPLY_PRIMING_TOKENS = 3  # the assistant turn a chat template opens for the answer
REPLY_JOIN = "\n\nassistant: "  # what the graded conversation adds before the reply (render_conversation)


@dataclass(frozen=True, slots=True)
class Span:
    """An estimate and its range."""

    value: float
    low: float
    high: float

    def scaled(self, by: float) -> Span:
        return Span(self.value * by, self.low * by, self.high * by)

    def __add__(self, other: Span) -> Span:
        return Span(self.value + other.value, self.low + other.low, self.high + other.high)

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


ZERO = Span(0.0, 0.0, 0.0)


def spread(values: Sequence[float], pooled: float) -> Span:
    """``pooled`` with the range of ``values`` (one per earlier run) around it."""
    return Span(pooled, min(min(values), pooled), max(max(values), pooled))


@dataclass(slots=True)
class History:
    """What earlier runs measured of one model in one role (store.usage_history)."""

    runs: int = 0
    calls: int = 0
    input_factors: list[float] = field(default_factory=list)  # measured / estimated input tokens, a run each
    input_factor: float | None = None  # pooled over every sample
    output_per_call: list[float] = field(default_factory=list)  # a run each
    output_pooled: float | None = None
    latency_seconds: list[float] = field(default_factory=list)  # each run's median
    reply_chars: list[float] = field(default_factory=list)  # of the model under test: each run's mean reply
    reply_pooled: float | None = None


@dataclass(slots=True)
class RoleEstimate:
    role: str  # "model under test" or "grader"
    model: str
    calls: int
    input_tokens: Span
    output_tokens: Span | None  # None: unknown (no earlier run)
    output_limit: int | None  # tokens a call may take at most (MAX_TOKENS_*), where set
    history: History
    price: Price | None
    # False: the replies the grader reads are of unknown length, counted at their limit (an upper
    # estimate), the range running from empty replies.
    replies_known: bool = True

    @property
    def output_ceiling(self) -> float | None:
        """The output tokens of every call at its limit: what an unknown output is bounded by."""
        return None if self.output_limit is None else float(self.output_limit * self.calls)

    def cost(self, batch: bool = False) -> Span | None:
        """Dollars at the online price (or the batch API's); None where the table has no price.
        An unknown output counts from nothing to every call at its limit (infinite: no limit)."""
        price = self.price.batch if batch and self.price else self.price
        if price is None:
            return None
        output = self.output_tokens
        if output is None:
            ceiling = self.output_ceiling
            output = Span(0.0, 0.0, math.inf if ceiling is None else ceiling)
        return Span(
            *(
                (i * price.input + (o * price.output if o else 0.0)) / 1_000_000
                for i, o in zip(
                    (self.input_tokens.value, self.input_tokens.low, self.input_tokens.high),
                    (output.value, output.low, output.high),
                )
            )
        )

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "calls": self.calls,
            "input_tokens": self.input_tokens.as_dict(),
            "replies_known": self.replies_known,
            "output_tokens": self.output_tokens.as_dict() if self.output_tokens else None,
            "output_tokens_at_most": self.output_ceiling,
            "earlier_runs": self.history.runs,
            "cost": _cost_dict(self.cost(), self.figures_known),
            "batch_cost": _cost_dict(self.cost(batch=True), self.figures_known),
        }

    @property
    def figures_known(self) -> bool:
        """Whether its cost has a figure, beside its range: its input and output both known."""
        return self.output_tokens is not None


def _cost_dict(cost: Span | None, known: bool = True) -> dict | None:
    """A cost's JSON: ``value`` null where only its range is known; an end that has no bound null."""
    if cost is None:
        return None
    out = {name: (None if math.isinf(value) else value) for name, value in cost.as_dict().items()}
    return out if known else {**out, "value": None}


@dataclass(slots=True)
class Estimate:
    conversations: int  # planned, repeats included
    test: RoleEstimate | None  # None: the records' own completions are graded (no model under test)
    grader: RoleEstimate
    time: TimeEstimate
    notes: list[str]

    @property
    def roles(self) -> list[RoleEstimate]:
        return [*([self.test] if self.test else []), self.grader]

    def total_cost(self, batch: bool = False) -> Span | None:
        costs = [role.cost(batch) for role in self.roles]
        if any(cost is None for cost in costs):
            return None  # a partial sum would read as the whole
        total = ZERO
        for cost in costs:
            if cost is not None:
                total = total + cost
        return total

    def as_dict(self) -> dict:
        return {
            "conversations": self.conversations,
            "test": self.test.as_dict() if self.test else None,
            "grader": self.grader.as_dict(),
            "cost": _cost_dict(self.total_cost(), all(role.figures_known for role in self.roles)),
            "batch_cost": _cost_dict(self.total_cost(batch=True), all(role.figures_known for role in self.roles)),
            "time_seconds": self.time.seconds,
            "time_bound": self.time.bound,
            "notes": self.notes,
        }


# ---- the requests' characters --------------------------------------------------------------------


def sent_chars(prompt: Sequence[dict], system: str | None) -> tuple[int, int]:
    """(characters, messages) of what the model under test is sent for one conversation."""
    chars = sum(len(str(m.get("content") or "")) for m in prompt) + len(system or "")
    return chars, len(prompt) + (1 if system else 0)


def template_chars(template: Template) -> int:
    """The template's own characters, without its two slots."""
    return len(template.text) - len(CONVERSATION_SLOT) - len(template.criterion_slot)


def grade_chars(prompt: Sequence[dict], reply_chars: float, criteria_chars: int, verdicts: int, base: int) -> float:
    """Characters of ``verdicts`` grader prompts of one conversation, together."""
    conversation = len(render_conversation(prompt)) + len(REPLY_JOIN) + reply_chars
    return verdicts * (base + conversation) + criteria_chars


def tokens_at(chars: float, messages: int, calls: int, chars_per_token: float = CHARS_PER_TOKEN) -> float:
    return chars / chars_per_token + calls * REPLY_PRIMING_TOKENS + messages * MESSAGE_TOKENS


# ---- what earlier runs measured ----------------------------------------------------------------


def _prompt_of(body: str) -> list[dict]:
    try:
        return list(json.loads(body)["prompt"])
    except (ValueError, KeyError, TypeError):
        return []


def history_of_test_model(rows: Iterable[tuple[str, list[tuple]]]) -> History:
    history = History()
    measured_all = estimated_all = output_all = replies_all = 0.0
    replies_counted = 0
    for settings_json, samples in rows:
        replies_counted += len(samples)
        system = _system(settings_json, "system_message_test")
        measured = estimated = output = replies = 0.0
        latencies = []
        calls = 0
        for body, reply_chars, prompt_tokens, completion_tokens, latency_ms, attempts in samples:
            # Tokens add up over a reply's attempts: estimated as often as it was asked.
            chars, messages = sent_chars(_prompt_of(body), system)
            estimated += tokens_at(chars, messages, 1) * attempts
            measured += prompt_tokens
            output += completion_tokens
            calls += attempts
            replies += reply_chars or 0
            if latency_ms:
                latencies.append(latency_ms / 1000)
        n = len(samples)
        history.runs += 1
        history.calls += calls
        history.input_factors.append(measured / estimated if estimated else 1.0)
        history.output_per_call.append(output / calls)
        history.reply_chars.append(replies / n)
        if latencies:
            history.latency_seconds.append(statistics.median(latencies))
        measured_all, estimated_all = measured_all + measured, estimated_all + estimated
        output_all, replies_all = output_all + output, replies_all + replies
    if history.calls:
        history.input_factor = measured_all / estimated_all if estimated_all else 1.0
        history.output_pooled = output_all / history.calls
        history.reply_pooled = replies_all / replies_counted
    return history


def history_of_grader(rows: Iterable[tuple[str, list[tuple]]], base_of: Callable[[str], int]) -> History:
    """``base_of``: the characters of the grader template an earlier run (its settings' JSON)
    was graded with: each run's requests are estimated as they were made."""
    history = History()
    measured_all = estimated_all = output_all = 0.0
    for settings_json, samples in rows:
        system = _system(settings_json, "system_message_grader")
        base = base_of(settings_json)
        measured = estimated = output = 0.0
        calls = 0
        latencies = []
        for body, reply_chars, verdicts, criteria_chars, prompt_tokens, completion_tokens, latency_ms, asked in samples:
            chars = grade_chars(_prompt_of(body), reply_chars or 0, criteria_chars or 0, verdicts, base)
            chars += verdicts * len(system or "")
            # Tokens add up over each verdict's attempts (an answer that did not parse is asked again).
            estimated += tokens_at(chars, verdicts * (2 if system else 1), verdicts) * asked / verdicts
            measured += prompt_tokens
            output += completion_tokens
            calls += asked
            if latency_ms:
                latencies.append(latency_ms / 1000)
        history.runs += 1
        history.calls += calls
        history.input_factors.append(measured / estimated if estimated else 1.0)
        history.output_per_call.append(output / calls)
        if latencies:
            history.latency_seconds.append(statistics.median(latencies))
        measured_all, estimated_all, output_all = (
            measured_all + measured,
            estimated_all + estimated,
            output_all + output,
        )
    if history.calls:
        history.input_factor = measured_all / estimated_all if estimated_all else 1.0
        history.output_pooled = output_all / history.calls
    return history


def _system(settings_json: str, key: str) -> str | None:
    try:
        value = json.loads(settings_json).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


# ---- the estimate ------------------------------------------------------------------------------


def input_span(tokens_at_default: float, chars: float, history: History) -> Span:
    """The input tokens: calibrated by earlier runs (their factors' range), else the characters
    at 4 a token, between 3.5 and 4.5."""
    if history.input_factor is not None:
        return spread([tokens_at_default * f for f in history.input_factors], tokens_at_default * history.input_factor)
    overhead = tokens_at_default - chars / CHARS_PER_TOKEN
    low_cpt, high_cpt = CHARS_PER_TOKEN_RANGE
    return Span(tokens_at_default, chars / high_cpt + overhead, chars / low_cpt + overhead)


def grader_input(tokens: list[float], chars: list[float], repeats: int, history: History) -> Span:
    """The grader's input tokens, with the replies at their least and at their most (equal when
    their length is known): the low end of the one, the high end of the other."""
    least = input_span(tokens[0] * repeats, chars[0] * repeats, history)
    most = input_span(tokens[1] * repeats, chars[1] * repeats, history)
    if tokens[0] == tokens[1]:
        return least
    return Span(most.value, least.low, most.high)  # the figure: every reply at its limit


def output_span(calls: int, history: History, limit: int | None) -> Span | None:
    """The output tokens from earlier runs' per call, none above the token limit asked now."""
    if history.output_pooled is None:
        return None

    def capped(per_call: float) -> float:
        return calls * (per_call if limit is None else min(per_call, limit))

    return spread([capped(per_call) for per_call in history.output_per_call], capped(history.output_pooled))


@dataclass(frozen=True, slots=True)
class Planned:
    """One conversation to estimate: its record, and the reply when it is known (the record's
    own completion); None: the model under test writes it."""

    record: Record
    reply: str | None = None


def planned_records(dataset: Dataset, settings: Settings, limit: int | None, seed: int) -> list[Planned]:
    """The conversations `run` would plan, chosen as it chooses them."""
    if settings.completions:
        plan = plan_completions(dataset, settings.completions, limit, seed)
        return [Planned(c.record, c.text) for c in plan.chosen]
    return [Planned(record) for record in sample(dataset.records, limit, seed)]


async def estimate(
    store: Store | None,
    settings: Settings,
    planned: Sequence[Planned],
    repeats: int,
    template: Template,
    prices: Mapping[str, Price],
    latency: float | None = None,
) -> Estimate:
    """The estimate of a run of ``planned`` x ``repeats``; ``store``: the database whose earlier
    runs calibrate it (None: none); ``latency``: seconds a call, where the user gives one."""
    model_test, model_grader = settings.model_test or "", settings.model_grader or ""
    generates = any(p.reply is None for p in planned)
    base = template_chars(template)
    bases: dict[str, int] = {}

    def base_of(settings_json: str) -> int:
        name = _system(settings_json, "grader_template")  # a string setting, read as the system ones are
        if not name:
            return base
        if name not in bases:
            try:
                bases[name] = template_chars(load_template(name, settings.cache_dir))
            except (HbtuiError, OSError):  # gone since, or offline: the current one stands in
                bases[name] = base
        return bases[name]

    test_rows = await store.usage_history(model_test, grader=False) if store and generates else []
    grader_rows = await store.usage_history(model_grader, grader=True) if store else []
    test_hist, grader_hist = history_of_test_model(test_rows), history_of_grader(grader_rows, base_of)
    notes: list[str] = []

    # The replies the grader reads: known, or as long as earlier runs' replies; else between none
    # and every reply at its limit, the grader's input then a range without a figure between.
    replies_low = replies_high = test_hist.reply_pooled or 0.0
    if generates and test_hist.reply_pooled is None:
        if settings.max_tokens_test is not None:
            replies_high = settings.max_tokens_test * CHARS_PER_TOKEN
            notes.append(
                f"replies' length unknown (no earlier run of {model_test}): the grader's input counts each at"
                f" its limit (MAX_TOKENS_TEST {settings.max_tokens_test:,}), an upper estimate; its range runs"
                " from empty replies"
            )
        else:
            notes.append(
                f"replies' length unknown (no earlier run of {model_test}, no MAX_TOKENS_TEST): the grader's"
                " input leaves them out, so it is a lower estimate"
            )

    test_chars = test_tokens = 0.0
    grader_chars = [0.0, 0.0]  # with the replies at their least and at their most
    grader_tokens = [0.0, 0.0]
    test_calls = grader_calls = 0
    system_grader = settings.system_message_grader
    for item in planned:
        prompt = item.record.prompt
        if item.reply is None:
            chars, messages = sent_chars(prompt, settings.system_message_test)
            test_chars += chars
            test_tokens += tokens_at(chars, messages, 1)
            test_calls += 1
        verdicts = len(item.record.rubrics)
        criteria = sum(len(render_criterion(c.points, c.criterion)) for c in item.record.rubrics)
        for end, guess in enumerate((replies_low, replies_high)):
            reply = len(item.reply) if item.reply is not None else guess
            graded = grade_chars(prompt, reply, criteria, verdicts, base) + verdicts * len(system_grader or "")
            grader_chars[end] += graded
            grader_tokens[end] += tokens_at(graded, verdicts * (2 if system_grader else 1), verdicts)
        grader_calls += verdicts

    test = None
    if generates:
        test_calls *= repeats
        test = RoleEstimate(
            "model under test",
            model_test,
            test_calls,
            input_span(test_tokens * repeats, test_chars * repeats, test_hist),
            output_span(test_calls, test_hist, settings.max_tokens_test),
            settings.max_tokens_test,
            test_hist,
            prices.get(model_test),
        )
    grader_calls *= repeats
    grader = RoleEstimate(
        "grader",
        model_grader,
        grader_calls,
        grader_input(grader_tokens, grader_chars, repeats, grader_hist),
        output_span(grader_calls, grader_hist, settings.max_tokens_grader),
        settings.max_tokens_grader,
        grader_hist,
        prices.get(model_grader),
        replies_known=replies_low == replies_high,
    )
    return Estimate(len(planned) * repeats, test, grader, time_estimate(settings, test, grader, latency), notes)
