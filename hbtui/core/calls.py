"""What grading (and anything else that asks a model) needs of a call, without the client.

The client answers to ``Completes``; a grader is given one. The priorities order the calls
of one endpoint: grading ahead of generation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

GRADING = 0
GENERATION = 1

# Which API a model is asked through (API_TEST, API_GRADER): chat completions, or OpenAI's
# Responses API (POST /responses), which the 2026 reference grader is asked through.
CHAT_API, RESPONSES_API = "chat", "responses"
APIS = (CHAT_API, RESPONSES_API)


# A lone surrogate (JSON's "\ud800", valid JSON) is not text: SQLite refuses to store it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> tuple[str, bool]:
    """``text`` with each lone surrogate replaced by U+FFFD, and whether there was one."""
    replaced = LONE_SURROGATE.sub("\ufffd", text)
    return replaced, replaced != text


class Completes(Protocol):
    """What asks a model: one endpoint's ChatClient, or several endpoints of one model."""

    async def complete(
        self,
        model: str,
        messages: list[dict],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        response_format: dict | None = None,
        priority: int = GENERATION,
        slot: int | None = None,
        api: str = CHAT_API,
    ) -> ChatResult: ...


@dataclass(slots=True)
class ChatResult:
    content: str
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    attempts: int
    json_schema_used: bool
    # The reply or its reasoning held lone surrogates, replaced by U+FFFD before anyone saw them.
    invalid_text: bool = False
    # Reasoning in <think> at the start of the content was taken out (the reference keeps it).
    think_stripped: bool = False
    endpoint: str = ""  # the label of the endpoint that answered
