"""The grader: its prompt template, verdict parsing (schema first, then a tolerant fallback) and
the bounded re-asking of a grader whose answer does not parse."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from hbtui.client import UNPARSEABLE, ChatClient, replace_lone_surrogates
from hbtui.limiter import GRADING

CONVERSATION_SLOT = "<<conversation>>"
CRITERION_SLOT = "<<criterion>>"
_SLOTS = re.compile(re.escape(CONVERSATION_SLOT) + "|" + re.escape(CRITERION_SLOT))

VERDICT_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "criterion_verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "explanation": {"type": "string"},
                "criteria_met": {"type": "boolean"},
            },
            "required": ["explanation", "criteria_met"],
            "additionalProperties": False,
        },
    },
}


class TemplateError(ValueError):
    """A grader template that cannot be used; the message names the file and the slot."""


def default_template() -> str:
    return resources.files("hbtui").joinpath("templates/grader.txt").read_text(encoding="utf-8")


def load_template(path: str | Path | None) -> str:
    if path is None:
        return default_template()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TemplateError(f"GRADER_TEMPLATE {path}: no such file") from None
    except UnicodeDecodeError:
        raise TemplateError(f"GRADER_TEMPLATE {path}: not UTF-8 text") from None
    except OSError as exc:
        raise TemplateError(f"GRADER_TEMPLATE {path}: {exc.strerror}") from None
    for slot in (CONVERSATION_SLOT, CRITERION_SLOT):
        count = text.count(slot)
        if count != 1:
            problem = "is missing" if count == 0 else f"appears {count} times"
            raise TemplateError(f"GRADER_TEMPLATE {path}: the placeholder {slot} {problem} (it must appear once)")
    return text


def render_conversation(messages: Sequence[dict]) -> str:
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def render_criterion(points: float, criterion: str) -> str:
    return f"[{points}] {criterion}"


def graded_conversation(conversation: Sequence[dict], reply: str) -> str:
    """The conversation with the reply as its last turn, rendered once for all its criteria."""
    return render_conversation([*conversation, {"role": "assistant", "content": reply}])


def fill_template(template: str, rendered_conversation: str, points: float, criterion: str) -> str:
    """The template with both slots filled in one pass, so slot-like text inside a reply or a
    criterion is left as written instead of being substituted again."""
    values = {CONVERSATION_SLOT: rendered_conversation, CRITERION_SLOT: render_criterion(points, criterion)}
    return _SLOTS.sub(lambda match: values[match.group(0)], template)


def grader_prompt(template: str, conversation: Sequence[dict], reply: str, points: float, criterion: str) -> str:
    return fill_template(template, graded_conversation(conversation, reply), points, criterion)


@dataclass(frozen=True, slots=True)
class Verdict:
    criteria_met: bool
    explanation: str
    invalid_text: bool = False  # lone surrogates in the explanation, replaced by U+FFFD


def _as_verdict(value: object) -> Verdict | None:
    if isinstance(value, dict) and isinstance(value.get("criteria_met"), bool):
        explanation = value.get("explanation", "")
        explanation = explanation if isinstance(explanation, str) else json.dumps(explanation)
        # The answer's text held "\ud800" as an escape, which only this parse turns into one.
        explanation, invalid = replace_lone_surrogates(explanation)
        return Verdict(value["criteria_met"], explanation, invalid)
    return None


def _balanced_objects(text: str):
    """Every ``{...}`` span whose braces balance, skipping braces inside JSON strings."""
    start = text.find("{")
    tries = 0
    while start != -1 and tries < 500:
        tries += 1
        depth = 0
        in_string = escaped = False
        for index in range(start, len(text)):
            char = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield text[start:index + 1]
                    break
        start = text.find("{", start + 1)


def parse_verdict(text: str) -> Verdict | None:
    """Schema-shaped JSON first; else the first balanced object that parses and has a boolean
    ``criteria_met`` (code fences and prose around it are common)."""
    stripped = text.strip()
    try:
        verdict = _as_verdict(json.loads(stripped))
    except ValueError:
        verdict = None
    if verdict:
        return verdict
    for candidate in _balanced_objects(stripped):
        try:
            verdict = _as_verdict(json.loads(candidate))
        except ValueError:
            continue
        if verdict:
            return verdict
    return None


@dataclass(slots=True)
class GradeOutcome:
    verdict: Verdict | None
    raw_output: str
    reasoning: str | None
    attempts: int
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None
    error_kind: str | None = None
    unparsed: int = 0  # answers that held no verdict (each one asked again, if tries were left)
    invalid_text: bool = False  # the kept answer or its verdict held lone surrogates, replaced


async def grade_criterion(
    client: ChatClient,
    model: str,
    prompt: str,
    *,
    temperature: float | None,
    max_tokens: int,
    reasoning_effort: str | None,
    parse_attempts: int,
) -> GradeOutcome:
    """Ask the grader until its answer parses, at most ``parse_attempts`` times.

    A cut-off answer (finish_reason "length") is asked once more with twice the token budget.
    Transport failures surface as ChatError from the client, already retried there.
    """
    outcome = GradeOutcome(None, "", None, 0, 0.0, 0, 0)
    budget = max_tokens
    enlarged = False
    tries = 0
    while tries < parse_attempts:
        tries += 1
        result = await client.complete(
            model,
            [{"role": "user", "content": prompt}],
            temperature=temperature,
            max_tokens=budget,
            reasoning_effort=reasoning_effort,
            response_format=VERDICT_FORMAT,
            priority=GRADING,
        )
        outcome.attempts += result.attempts
        outcome.latency_ms += result.latency_ms
        outcome.prompt_tokens += result.prompt_tokens
        outcome.completion_tokens += result.completion_tokens
        outcome.raw_output = result.content
        outcome.reasoning = result.reasoning
        outcome.invalid_text = result.invalid_text
        verdict = parse_verdict(result.content)
        if verdict:
            outcome.verdict = verdict
            outcome.invalid_text |= verdict.invalid_text
            return outcome
        outcome.unparsed += 1
        if result.finish_reason == "length" and not enlarged:
            enlarged = True
            budget *= 2
            tries -= 1  # the budget was at fault, not the grader: this try does not count
    outcome.error_kind = UNPARSEABLE
    outcome.error = f"no verdict in the grader's answer after {parse_attempts} tries"
    return outcome
