"""The grader: its prompt template, verdict parsing (schema first, then a tolerant fallback) and
the bounded re-asking of a grader whose answer does not parse."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.core.calls import CHAT_API, GRADING, Completes, replace_lone_surrogates
from hbtui.core.errors import UNPARSEABLE, HbtuiError
from hbtui.core.files import read_user_file

if TYPE_CHECKING:
    from hbtui.core.settings.config import Settings

CONVERSATION_SLOT = "<<conversation>>"
CRITERION_SLOT = "<<criterion>>"
RUBRIC_ITEM_SLOT = "<<rubric_item>>"  # the reference's name for the criterion's slot

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


@functools.lru_cache(maxsize=8)
def verdict_format(explanation_chars: int | None = None) -> dict:
    """The verdict's json_schema response_format; ``explanation_chars`` bounds the explanation
    (maxLength), which llama.cpp's grammar enforces while the model writes. Made once per bound,
    since every grader call asks for it; the client only reads it."""
    if explanation_chars is None:
        return VERDICT_FORMAT
    bounded = json.loads(json.dumps(VERDICT_FORMAT))
    bounded["json_schema"]["schema"]["properties"]["explanation"]["maxLength"] = explanation_chars
    return bounded


class TemplateError(HbtuiError, ValueError):
    """A grader template that cannot be used; the message names the file and the slot."""


@dataclass(frozen=True, slots=True)
class Template:
    """A grader prompt: its name (``reference``, ``builtin`` or a file's path), its text, the
    slot it takes the criterion in, and its sha256 (what a run records of the words it used)."""

    name: str
    text: str
    criterion_slot: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def default_template() -> str:
    """hbtui's own wording (``builtin``)."""
    return resources.files("hbtui").joinpath("templates/grader.txt").read_text(encoding="utf-8")


def load_template(value: str | Path | None, cache_dir: str | Path | None = None) -> Template:
    """The template a GRADER_TEMPLATE value names: ``reference`` (the default: simple-evals' own
    prompt, fetched once into the cache), ``builtin``, or a file with ``<<conversation>>`` and
    the criterion's slot (``<<rubric_item>>`` or ``<<criterion>>``) once each."""
    from hbtui.core.reference import ReferenceUnavailable, reference_template

    name = "reference" if value is None else str(value)
    if name == "reference":
        try:
            return Template(name, reference_template(cache_dir or default_cache_dir()), RUBRIC_ITEM_SLOT)
        except ReferenceUnavailable as exc:
            raise TemplateError(f"GRADER_TEMPLATE reference: {exc}") from None
    if name == "builtin":
        return Template(name, default_template(), CRITERION_SLOT)
    path = Path(name).expanduser()
    data = read_user_file(
        path,
        TemplateError,
        label=f"GRADER_TEMPLATE {path}",
        kind="template file",
        missing=" (or give reference or builtin)",
    )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TemplateError(f"GRADER_TEMPLATE {path}: not UTF-8 text") from None
    count = text.count(CONVERSATION_SLOT)
    if count != 1:
        problem = "is missing" if count == 0 else f"appears {count} times"
        raise TemplateError(
            f"GRADER_TEMPLATE {path}: the placeholder {CONVERSATION_SLOT} {problem} (it must appear once)"
        )
    slots = [slot for slot in (RUBRIC_ITEM_SLOT, CRITERION_SLOT) if slot in text]
    if len(slots) != 1 or text.count(slots[0]) != 1:
        raise TemplateError(
            f"GRADER_TEMPLATE {path}: the criterion's placeholder ({RUBRIC_ITEM_SLOT} or"
            f" {CRITERION_SLOT}) must appear once, and only one of them"
        )
    return Template(str(path), text, slots[0])


def default_cache_dir() -> str:
    return os.environ.get("HBTUI_CACHE") or str(Path.home() / ".cache" / "hbtui")


def render_conversation(messages: Sequence[dict]) -> str:
    """As the reference renders it: ``role: content`` blocks joined by a blank line."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def render_criterion(points: float, criterion: str) -> str:
    """The reference's ``str(RubricItem)``: points as the record writes them (``[8]``, ``[-5]``)."""
    return f"[{points}] {criterion}"


def graded_conversation(conversation: Sequence[dict], reply: str) -> str:
    """The messages sent to the model under test with the reply as the last turn, rendered once
    for all its criteria."""
    return render_conversation([*conversation, {"role": "assistant", "content": reply}])


def fill_template(template: Template, rendered_conversation: str, points: float, criterion: str) -> str:
    """Filled as the reference fills it: two chained replacements, the conversation first, so a
    reply that holds the criterion's placeholder is treated exactly as the reference treats it."""
    return fill_criterion(template, with_conversation(template, rendered_conversation), points, criterion)


def with_conversation(template: Template, rendered_conversation: str) -> str:
    """The first of fill_template's replacements, the same for all of a conversation's criteria:
    made once for them (each replacement copies the whole prompt, a conversation and a reply)."""
    return template.text.replace(CONVERSATION_SLOT, rendered_conversation)


def fill_criterion(template: Template, conversation_filled: str, points: float, criterion: str) -> str:
    """The second of fill_template's replacements, in what ``with_conversation`` made."""
    return conversation_filled.replace(template.criterion_slot, render_criterion(points, criterion))


def grader_prompt(template: Template, conversation: Sequence[dict], reply: str, points: float, criterion: str) -> str:
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
                if depth > MAX_VERDICT_DEPTH:
                    break  # no verdict is nested this deep: the next brace, not a scan to the end
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : index + 1]
                    break
        start = text.find("{", start + 1)


# A verdict is one flat object; a candidate nested deeper than this is not one (a hostile answer
# nested 100,000 deep would otherwise be scanned to its end once per brace).
MAX_VERDICT_DEPTH = 64


def parse_verdict(text: str) -> Verdict | None:
    """Schema-shaped JSON first; else the first balanced object that parses and has a boolean
    ``criteria_met`` (code fences and prose around it are common)."""
    stripped = text.strip()
    try:
        verdict = _as_verdict(json.loads(stripped))
    except (ValueError, RecursionError):  # a grader's text nested past Python's stack: no verdict
        verdict = None
    if verdict:
        return verdict
    for candidate in _balanced_objects(stripped):
        try:
            verdict = _as_verdict(json.loads(candidate))
        except (ValueError, RecursionError):
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
    enlarged: bool = False  # a cut-off answer was asked again with a larger budget (not as the reference asks)
    invalid_text: bool = False  # the kept answer or its verdict held lone surrogates, replaced
    endpoint: str | None = None  # the label of the endpoint whose answer was kept


def grader_messages(prompt: str, system: str | None) -> list[dict]:
    """What the grader is sent: the reference sends its system message, then the filled prompt.

    Key order as the reference's own dicts have it (its sampler packs the system message role
    first; the prompt is ``dict(content=..., role="user")``), so the JSON on the wire is the same
    byte for byte."""
    return [*([{"role": "system", "content": system}] if system else []), {"content": prompt, "role": "user"}]


async def grade_criterion(
    client: Completes,
    model: str,
    prompt: str,
    *,
    temperature: float | None,
    max_tokens: int | None,
    reasoning_effort: str | None,
    parse_attempts: int,
    system: str | None = None,
    response_format: dict | None = VERDICT_FORMAT,
    slot: int | None = None,
    api: str = CHAT_API,
) -> GradeOutcome:
    """Ask the grader until its answer parses, at most ``parse_attempts`` times.

    A cut-off answer (finish_reason "length") is asked once more with twice the token budget;
    with no budget sent (``max_tokens`` None), the cut was the server's own limit, which no
    request changes: it counts as a try like any unparsed answer. Transport failures surface as
    ChatError from the client, already retried there.
    """
    outcome = GradeOutcome(None, "", None, 0, 0.0, 0, 0)
    budget = max_tokens
    enlarged = False
    tries = 0
    while tries < parse_attempts:
        tries += 1
        result = await client.complete(
            model,
            grader_messages(prompt, system),
            temperature=temperature,
            max_tokens=budget,
            reasoning_effort=reasoning_effort,
            response_format=response_format,
            priority=GRADING,
            slot=slot,
            api=api,
        )
        outcome.attempts += result.attempts
        outcome.latency_ms += result.latency_ms
        outcome.prompt_tokens += result.prompt_tokens
        outcome.completion_tokens += result.completion_tokens
        outcome.raw_output = result.content
        outcome.endpoint = result.endpoint or None
        outcome.reasoning = result.reasoning
        outcome.invalid_text = result.invalid_text
        verdict = parse_verdict(result.content)
        if verdict:
            outcome.verdict = verdict
            outcome.invalid_text |= verdict.invalid_text
            return outcome
        outcome.unparsed += 1
        if result.finish_reason == "length" and not enlarged and budget is not None:
            enlarged = outcome.enlarged = True
            budget *= 2
            tries -= 1  # the budget was at fault, not the grader: this try does not count
    outcome.error_kind = UNPARSEABLE
    outcome.error = f"no verdict in the grader's answer after {parse_attempts} tries"
    return outcome


async def grade_as_configured(
    client: Completes, settings: Settings, prompt: str, slot: int | None = None
) -> GradeOutcome:
    """``grade_criterion`` with the grader's settings of a run (a model run's, a meta-eval's);
    ``slot``: the server slot to ask (llama.cpp's id_slot), where GRADER_SLOTS is set."""
    return await grade_criterion(
        client,
        settings.model_grader or "",
        prompt,
        temperature=settings.temperature_grader,
        max_tokens=settings.max_tokens_grader,
        reasoning_effort=settings.reasoning_grader,
        parse_attempts=settings.grader_parse_attempts,
        system=settings.system_message_grader,
        response_format=verdict_format(settings.grader_explanation_chars) if settings.grader_json_schema else None,
        slot=slot,
        api=settings.api_grader,
    )
