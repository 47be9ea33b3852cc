"""The run list's review filter (key v) as SQL over a conversation row (``conversations``): the
rules of hbtui.core.reviews, where an undo takes back one review and a verdict's latest standing flip
decides it, said in SQL so that the list pages and counts as with any other filter."""

from __future__ import annotations

from hbtui.core.reviews import FLAGGED, FLIPPED, NOT_REVIEWED

_STANDING = "r.action != 'undo' AND NOT EXISTS (SELECT 1 FROM reviews u WHERE u.undoes = r.id)"
_GRADED = "v.conversation_id = conversations.id AND v.status IN ('met', 'not_met')"

REVIEW_CLAUSES = {
    FLAGGED: "EXISTS (SELECT 1 FROM reviews r WHERE r.conversation_id = conversations.id"
    f" AND r.action = 'flag' AND {_STANDING})",
    # The latest standing flip holds the verdict the other way from the grader's.
    FLIPPED: f"EXISTS (SELECT 1 FROM verdicts v WHERE {_GRADED} AND (SELECT r.met FROM reviews r"
    f" WHERE r.conversation_id = v.conversation_id AND r.idx = v.idx AND r.action = 'flip' AND {_STANDING}"
    " ORDER BY r.id DESC LIMIT 1) = (v.status = 'not_met'))",
    NOT_REVIEWED: f"EXISTS (SELECT 1 FROM verdicts v WHERE {_GRADED} AND NOT EXISTS (SELECT 1 FROM reviews r"
    f" WHERE r.conversation_id = v.conversation_id AND r.idx = v.idx AND {_STANDING}))",
}
