"""The key of a grader request in the verdict cache: everything that changes the grader's answer.

A verdict already paid for is not asked again when a regrade, a resume or a retry sends the same
request: the same endpoint and model, the same messages byte for byte, the same parameters. The
messages are a function of the template, the system message, the rendered conversation and the
criterion, so the key is made of those (the conversation by its digest, computed once for all its
criteria) rather than of the whole prompt each time: equal keys mean equal requests.

The repeat is part of the key: repeats exist to measure variance, so two repeats of one run
never share a verdict, even when a deterministic model gave both the same reply.
"""

from __future__ import annotations

import hashlib
import json


def conversation_digest(rendered_conversation: str) -> str:
    return hashlib.sha256(rendered_conversation.encode("utf-8", "surrogatepass")).hexdigest()


def request_prefix(
    *,
    endpoint: str,
    model: str,
    template_sha256: str,
    system: str | None,
    conversation: str,
    temperature: float | None,
    max_tokens: int,
    reasoning_effort: str | None,
    json_schema: bool | int,
    repeat: int,
    api: str = "chat",
) -> hashlib._Hash:
    """The hash of everything but the criterion; ``conversation`` is the rendered conversation's
    digest. Copied and fed each criterion, it gives that criterion's key (computed 60,000 times
    in a regrade: one JSON document per criterion cost a second)."""
    material = json.dumps(
        [
            endpoint.rstrip("/"),
            model,
            template_sha256,
            system,
            conversation,
            temperature,
            max_tokens,
            reasoning_effort,
            json_schema,
            repeat,
            # The API is part of what was asked; chat adds nothing, so older keys still hit.
            *([api] if api != "chat" else []),
        ],
        ensure_ascii=True,
    )
    return hashlib.sha256(material.encode() + b"\x00")


def verdict_key(prefix: hashlib._Hash, criterion: str) -> str:
    """``criterion`` is the rendered criterion (``[points] text``), as the grader is sent it."""
    digest = prefix.copy()
    digest.update(criterion.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class RequestKeys:
    """The cache keys of a run's grader requests, from its settings and its grader template."""

    def __init__(self, settings, template, endpoint: str | None = None) -> None:
        """``endpoint``: what the keys hold in place of the grader's base URLs (a batch-files
        run's label: hbtui.core.batch_files)."""
        self.settings, self.template, self.endpoint = settings, template, endpoint

    def sent_messages(self, prompt: list[dict]) -> list[dict]:
        """What the model under test is sent: its system message, if any, then the conversation.
        A record's own completion answered the conversation alone: no system line (as the
        reference grades its physician-completion modes)."""
        system = self.settings.system_message_test
        return [{"role": "system", "content": system}, *prompt] if system and not self.settings.completions else prompt

    def digest(self, prompt: list[dict], reply: str) -> str:
        from hbtui.core.grading import graded_conversation

        return conversation_digest(graded_conversation(self.sent_messages(prompt), reply))

    def prefix(self, digest: str, repeat: int) -> hashlib._Hash:
        settings = self.settings
        return request_prefix(
            endpoint=self.endpoint if self.endpoint is not None else ",".join(settings.effective_grader_base_url or ()),
            model=settings.model_grader or "",
            template_sha256=self.template.sha256,
            system=settings.system_message_grader,
            conversation=digest,
            temperature=settings.temperature_grader,
            max_tokens=settings.max_tokens_grader,
            reasoning_effort=settings.reasoning_grader,
            # The schema asked for: True as it always was (older keys still hit), or the bound on
            # the explanation that changes what the grader may write (GRADER_EXPLANATION_CHARS).
            json_schema=(settings.grader_explanation_chars or True) if settings.grader_json_schema else False,
            repeat=repeat,
            api=settings.api_grader,
        )

    def keys(self, digest: str, repeat: int, criteria) -> dict[int, str]:
        """The keys of one conversation's criteria, given as (idx, text, points), by idx."""
        from hbtui.core.grading import render_criterion

        prefix = self.prefix(digest, repeat)
        return {idx: verdict_key(prefix, render_criterion(points, text)) for idx, text, points in criteria}
