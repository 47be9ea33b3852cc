"""The grader's request for one meta-eval row, as the reference's meta-evaluation makes it: the
row's conversation with the physician-rated completion as the last assistant turn, and the
rubric text as it stands (no points prefix: a meta-eval rubric has none)."""

from __future__ import annotations

from collections.abc import Sequence

from hbtui.core.grading import CONVERSATION_SLOT, Template, render_conversation


def meta_grader_prompt(template: Template, prompt: Sequence[dict], completion: str, rubric: str) -> str:
    """Filled by two chained replacements, the conversation first, as the reference fills it."""
    conversation = render_conversation([*prompt, {"content": completion, "role": "assistant"}])
    return template.text.replace(CONVERSATION_SLOT, conversation).replace(template.criterion_slot, rubric)
