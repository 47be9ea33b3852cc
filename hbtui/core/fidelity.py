"""What a run's requests were, and how they differ from the reference's (openai/simple-evals).

A score stands beside a published one only when the grader saw the same words with the same
parameters. Each run records its grader template (name and sha256), its system messages and
sampling parameters, and what hbtui's negotiation with the provider changed on the way
(a parameter left out after a refusal, a cut-off verdict asked again with a larger budget,
reasoning removed from a reply): the requests as they were sent, not as they were meant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hbtui.core import reference
from hbtui.core.calls import CHAT_API, RESPONSES_API
from hbtui.core.run_records import RequestsRecord

REFERENCE_GRADER = "gpt-4.1-2025-04-14"  # the model the published HealthBench numbers were graded by


def sampling_text(value: float | None) -> str:
    """A temperature or token limit as the fidelity line says it: ``0.3``, or ``not sent``."""
    return "not sent" if value is None else f"{value:g}"


def grader_as_2026(settings: Any) -> bool:
    """Whether the grader is asked as simple-evals at 652c89d asks its GPT-5.4 grader (the
    template aside): the Responses API, no system message, temperature, token limit or schema,
    reasoning effort low."""
    return (
        settings.api_grader == RESPONSES_API
        and settings.system_message_grader is None
        and settings.temperature_grader is None
        and settings.max_tokens_grader is None
        and settings.reasoning_grader == reference.GRADER_2026_EFFORT
        and not settings.grader_json_schema
    )


def describe_requests(
    settings: Any,
    template_name: str,
    template_sha256: str,
    deviations: Iterable[str] = (),
    *,
    tested: bool | None = None,
) -> RequestsRecord:
    """The record of a run's requests; ``settings`` is a Settings, ``deviations`` what negotiation
    changed; ``tested``: whether a model under test is called (by default, unless the run grades
    the records' own completions)."""
    if grader_as_2026(settings):
        # Compared with the 2026 reference: its model under test is asked as the 2025 one's, so
        # the 2025 rules judge that side, with the 2025 grader put in for this one.
        as_2025 = replace(
            settings,
            api_grader=CHAT_API,
            system_message_grader=reference.SYSTEM_MESSAGE,
            temperature_grader=reference.TEMPERATURE,
            max_tokens_grader=reference.MAX_TOKENS,
            reasoning_grader=None,
        )
        record = describe_requests(as_2025, template_name, template_sha256, deviations, tested=tested)
        record.update(
            {
                "system_message_grader": None,
                "temperature_grader": None,
                "max_tokens_grader": None,
                "reasoning_grader": settings.reasoning_grader,
                "api_grader": settings.api_grader,
                "reference_commit": reference.COMMIT_2026[:7] if record["reference_identical"] else None,
            }
        )
        return record
    differences: list[str] = []
    if template_sha256 != reference.TEMPLATE_SHA256:
        shown = template_name if template_name in ("builtin", "reference") else f"file {Path(template_name).name}"
        differences.append(f"grader prompt {shown}")
    # Grading the records' own completions, no model under test is called: only the grader's
    # requests are compared (with the reference's physician-completion modes).
    completions = settings.completions
    tested = not completions if tested is None else tested
    for who, system in (("model under test", settings.system_message_test), ("grader", settings.system_message_grader)):
        if who != "grader" and not tested:
            continue
        if system is None:
            differences.append(f"no system message for the {who}")
        elif system != reference.SYSTEM_MESSAGE:
            differences.append(f"another system message for the {who}")
    for label, test, grader, expected in (
        ("temperature", settings.temperature_test, settings.temperature_grader, reference.TEMPERATURE),
        ("max tokens", settings.max_tokens_test, settings.max_tokens_grader, reference.MAX_TOKENS),
    ):
        if tested and test == grader and test != expected:
            differences.append(f"{label} {sampling_text(test)}")
        else:
            differences += [
                f"{label} {sampling_text(value)} for the {who}"
                for who, value in (("model under test", test if tested else expected), ("grader", grader))
                if value != expected
            ]
    if settings.grader_json_schema:
        differences.append("grader asked for json_schema output")
        if settings.grader_explanation_chars is not None:
            differences.append(f"verdict explanations bounded to {settings.grader_explanation_chars} characters")
    for who, api in (("model under test", settings.api_test if tested else CHAT_API), ("grader", settings.api_grader)):
        if api != CHAT_API:  # the reference at ee3b031 asks both through chat completions
            differences.append(f"the {api} API for the {who}")
    for who, effort in (
        ("model under test", settings.reasoning_test if tested else None),
        ("grader", settings.reasoning_grader),
    ):
        if effort:
            differences.append(f"reasoning effort {effort} for the {who}")
    deviations = sorted(set(deviations))
    return {
        **({"completions": completions} if completions else {}),
        "grader_template": {"name": template_name, "sha256": template_sha256},
        "system_message_test": settings.system_message_test,
        "system_message_grader": settings.system_message_grader,
        "temperature_test": settings.temperature_test,
        "temperature_grader": settings.temperature_grader,
        "max_tokens_test": settings.max_tokens_test,
        "max_tokens_grader": settings.max_tokens_grader,
        "reasoning_test": settings.reasoning_test,
        "reasoning_grader": settings.reasoning_grader,
        "api_test": settings.api_test,
        "api_grader": settings.api_grader,
        "grader_response_format": "json_schema" if settings.grader_json_schema else None,
        "model_grader": settings.model_grader,
        "deviations": deviations,
        "differences": differences + deviations,
        "reference_identical": not differences and not deviations,
        # Which reference they are identical to: simple-evals at this commit (the 2026 one,
        # 652c89d, sends its GPT-5.4 grader's requests through the Responses API).
        "reference_commit": reference.COMMIT[:7] if not differences and not deviations else None,
    }


def requests_line(requests: RequestsRecord | None) -> str:
    """One line for show, description.md and the app: ``requests: reference-identical``, or what differs."""
    if not requests:
        return "requests: not recorded (the run was made before hbtui recorded them; graded with the builtin prompt)"
    # The requests can be the reference's while the grader is another model: a score then still
    # does not stand beside the published ones, and the line says so.
    grader = requests.get("model_grader")
    # The 2026 reference grades with GPT-5.4 through the Responses API; the 2025 one with GPT-4.1.
    published = reference.GRADER_2026 if requests.get("api_grader") == RESPONSES_API else REFERENCE_GRADER
    other = f"; graded by {grader}, the published numbers by {published}" if grader and grader != published else ""
    completions = requests.get("completions")
    if completions:
        # No model was called: the replies are the records' own, graded as the reference grades them.
        other = f"; {completions} completions graded, no model under test{other}"
    if requests.get("reference_identical"):
        # The 2025 reference is the one meant unless said: the 2026 one is named.
        commit = requests.get("reference_commit")
        named = f" to simple-evals {commit}" if commit and commit != reference.COMMIT[:7] else ""
        return f"requests: reference-identical{named}{other}"
    return f"requests: differ from the reference ({', '.join(requests.get('differences', []))}){other}"
