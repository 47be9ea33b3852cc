"""The SQL of the browser's search, verdict filters and sort orders (rows.py's filter uses it).

Search runs two ways at once: a substring of the prompt preview, reply or prompt_id (LIKE, as
before), and the words of criterion texts and grader explanations through the FTS5 index
``verdict_text``, where every word typed must start a word of the text. The index holds a run
once it has been searched: the store brings it up to date before each search (search_index.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

# A word as FTS5's unicode61 tokenizer cuts them: letters and digits, the rest separates.
WORD = re.compile(r"\w+", re.UNICODE)

# A verdict state the list can be filtered by: what it means, on a verdict row ``v``.
VERDICT_STATES = {
    "met": "v.points > 0 AND v.status = 'met'",
    "missed": "v.points > 0 AND v.status = 'not_met'",
    "penalty": "v.points < 0 AND v.status = 'met'",
    "error": "v.status = 'error'",
}
VERDICT_STATE_LABELS = {
    "met": "a criterion met",
    "missed": "a criterion missed",
    "penalty": "a penalty triggered",
    "error": "a grader error",
}

# Met positive criteria over all positive criteria (NULL when none are positive).
MET_FRACTION = (
    "n_met * 1.0 / nullif((SELECT count(*) FROM verdicts pv WHERE pv.conversation_id = conversations.id"
    " AND pv.points > 0), 0)"
)

# Every order of the list, as the sort picker offers them: key -> (label, ORDER BY). Position
# breaks every tie, so that the order is the same each time a page is read.
SORT_CHOICES: dict[str, tuple[str, str]] = {
    "position": ("position", "position"),
    "score": ("score ↑ (worst first)", "score IS NULL, score, position"),
    "-score": ("score ↓ (best first)", "score IS NULL, score DESC, position"),
    "met": ("met fraction ↑ (fewest met first)", f"{MET_FRACTION} IS NULL, {MET_FRACTION}, position"),
    "-met": ("met fraction ↓ (most met first)", f"{MET_FRACTION} IS NULL, {MET_FRACTION} DESC, position"),
    "penalties": ("penalties triggered (most first)", "penalties DESC, position"),
    "errors": ("errors (most first, no reply on top)", "status = 'failed' DESC, n_errors DESC, position"),
    "-length": ("reply length (longest first)", "length(reply) IS NULL, length(reply) DESC, position"),
    "length": ("reply length (shortest first)", "length(reply) IS NULL, length(reply), position"),
    "theme": ("theme (A to Z)", "theme IS NULL, theme, position"),
}
SORTS = {key: order for key, (_, order) in SORT_CHOICES.items()}


def match_expression(text: str, column: str | None = None) -> str | None:
    """An FTS5 query for ``text``: each word as a quoted prefix, all of them required (None
    when the text holds no word). Quoting makes the user's text data: no FTS5 operator in it
    (AND, NEAR, ``*``, ``:``, quotes) has any effect. ``column`` restricts it to one column."""
    words = WORD.findall(text)
    if not words:
        return None
    query = " ".join(f'"{word}"*' for word in words)
    return f"{{{column}}} : ({query})" if column else query


def like_pattern(text: str) -> str:
    """``text`` as a LIKE substring pattern, its wildcards escaped (with ``ESCAPE '\\'``)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def like_clause(text: str) -> tuple[str, list[Any]]:
    """Conversations whose preview, reply or prompt_id holds ``text`` (a condition to bracket)."""
    pattern = like_pattern(text)
    return (
        "preview LIKE ? ESCAPE '\\' OR reply LIKE ? ESCAPE '\\' OR prompt_id LIKE ? ESCAPE '\\'",
        [pattern, pattern, pattern],
    )


def text_clause(text: str) -> tuple[str, list[Any]]:
    """Conversations whose preview, reply or prompt_id holds ``text``, or one of whose criteria
    or explanations has its words: the search as one condition (``search_hits`` reads it once
    per text and version; this is what it reads)."""
    clause, args = like_clause(text)
    expression = match_expression(text)
    if expression is not None:
        # Uncorrelated: the index is asked once, not once per conversation.
        clause += (
            " OR id IN (SELECT v.conversation_id FROM verdicts v"
            " WHERE v.id IN (SELECT rowid FROM verdict_text WHERE verdict_text MATCH ?))"
        )
        args.append(expression)
    return f"({clause})", args


def verdict_clause(tag: str | None, state: str | None) -> tuple[str, list[Any]]:
    """Conversations with a criterion carrying ``tag`` and in ``state`` (the same criterion, when
    both are given: "missed an accuracy criterion")."""
    conditions = ["v.conversation_id = conversations.id"]
    args: list[Any] = []
    if tag:
        conditions.append("v.tags LIKE ? ESCAPE '\\'")
        args.append(like_pattern(json.dumps(tag)))
    if state:
        conditions.append(VERDICT_STATES[state])
    return f"EXISTS (SELECT 1 FROM verdicts v WHERE {' AND '.join(conditions)})", args
