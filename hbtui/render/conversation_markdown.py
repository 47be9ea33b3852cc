"""A conversation under review as Markdown, with its verdicts: what `M` copies, for pasting into
notes or a bug report; and the prompt as plain text, what `P` copies.

Model and dataset text is data: control characters are shown as symbols (a pasted escape
would act in the terminal it is pasted into), and nothing is interpreted as markup here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from hbtui.core.numbering import conversation_label
from hbtui.core.reviews import ReviewState
from hbtui.core.text import visible_controls, visible_line
from hbtui.core.verdicts import FAILED, verdict_kind
from hbtui.store import ERROR, ConversationDetail, VerdictRow, verdict_met

# Each kind of verdict (core.verdicts.verdict_kind) as the Markdown copy says it: what hurt, loud.
WORDS = {
    "grader-error": "grader error",
    "penalty": "PENALTY triggered",
    "met": "met",
    "avoided": "penalty avoided",
    "missed": "MISSED",
    "pending": "pending",
}


def verdict_word(v: VerdictRow) -> str:
    return WORDS[verdict_kind(v.status, v.points)]


def _content(content) -> str:
    return visible_controls(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))


def prompt_text(detail: ConversationDetail) -> str:
    """The prompt's messages, each as ``role: content``, a blank line between them."""
    return "\n\n".join(f"{m.get('role', '?')}: {_content(m.get('content', ''))}" for m in detail.prompt)


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines()) or ">"


def _review_items(state: ReviewState, graded: bool | None) -> list[str]:
    """A verdict's reviews as the rubric shows them: the decision standing, then the flag."""
    items = []
    if state.decision is not None:
        verdict = "MET" if state.met(graded) else "NOT MET"
        how = "flipped" if state.flipped(graded) else "kept as graded"
        items.append(f"- reviewed {verdict}: {how} by {visible_line(state.decision.reviewer)}")
    if state.flag is not None:
        note = f": {visible_controls(' '.join(state.flag.note.split()))}" if state.flag.note else ""
        items.append(f"- flagged by {visible_line(state.flag.reviewer)}{note}")
    return items


def conversation_markdown(
    detail: ConversationDetail,
    run_id: int,
    number: int | None = None,
    repeats: int = 1,
    reviews: Mapping[int, ReviewState] | None = None,
) -> str:
    """``number``: the conversation's place in the browser's list (1-based), when known;
    ``repeats``: the run's, for "repeat 1 of 2" as the browser numbers a repeat; ``reviews``:
    what the reviews standing say of each criterion, by its index."""
    s = detail.summary
    title = f"Run {run_id}, {conversation_label(s.position, s.repeat, repeats)}"
    if number is not None:
        title += f" (list {number})"
    lines = [f"## {title}", ""]
    score = f"{s.score:.3f}" if s.score is not None else ("no reply" if s.status == FAILED else "none")
    positives = sum(1 for v in detail.verdicts if v.points > 0)
    met = s.n_met if s.n_met is not None else 0
    lines.append(
        f"- prompt_id: `{visible_line(s.prompt_id)}`  \n- theme: {visible_line(s.theme or '-')}  \n"
        f"- score: {score}, {met} of {positives} positive criteria met, {s.penalties} penalties triggered,"
        f" {s.n_errors} grader errors"
    )
    lines += ["", "### Prompt", ""]
    for message in detail.prompt:
        lines += [
            f"**{visible_controls(str(message.get('role', '?')))}**",
            "",
            _quoted(_content(message.get("content", ""))),
            "",
        ]
    lines += ["### Reply", ""]
    if detail.reply is None:
        lines.append(f"(no reply{': ' + visible_controls(detail.error) if detail.error else ''})")
    else:
        lines.append(_quoted(visible_controls(detail.reply)))
    lines += ["", "### Verdicts", ""]
    for v in detail.verdicts:
        item = f"{v.idx + 1}. "
        # A criterion's own lines stay inside its item, indented as its first: at the margin, a
        # line of it starting "- " began a list of its own.
        first, *more = visible_controls(v.criterion).splitlines() or [""]
        lines.append(f"{item}**{verdict_word(v)}** [{v.points:+g}] {first}")
        lines += [f"{' ' * len(item)}{line}" if line.strip() else "" for line in more]
        why = v.explanation if v.status != ERROR else v.error
        if why:
            lines.append(f"{' ' * len(item)}- why: {visible_controls(' '.join(why.split()))}")
        state = (reviews or {}).get(v.idx)
        if state is not None:
            lines += [f"{' ' * len(item)}{line}" for line in _review_items(state, verdict_met(v.status))]
    return "\n".join(lines) + "\n"
