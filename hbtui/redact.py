"""Taking API keys out of what a provider sends back, before it is stored or shown.

Providers echo what they were sent: OpenAI's 401 repeats a masked form of the key
(``sk-proj-****abcd``), proxies and debug pages echo the ``Authorization`` header whole. Error
texts, log lines and notes that come from a provider go through ``redact``; replies and grader
explanations are data and are kept as received.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

REDACTED = "<redacted>"

# The token after "Bearer", up to whatever ends a header value inside a JSON or text body.
_BEARER = re.compile(r"(\bBearer\s+)[^\s\"'`,;<>(){}\[\]\\]+", re.IGNORECASE)
_WORD = r"A-Za-z0-9_\-"
# A token as a masked key is written: word characters, dots and mask characters.
_TOKEN = re.compile(r"[A-Za-z0-9_\-.*…•]+")
_MASK = re.compile(r"[*…•]|\.\.")
# Below this length a key may well be an ordinary word ("EMPTY", "token"): it is taken out only
# where it stands alone, and its last characters are no tell-tale of a masked form.
_SHORT = 12
_TAIL = 4


@lru_cache(maxsize=16)
def _exact(secret: str) -> re.Pattern[str]:
    if len(secret) < _SHORT:
        return re.compile(rf"(?<![{_WORD}]){re.escape(secret)}(?![{_WORD}])")
    return re.compile(re.escape(secret))


def _unmask(text: str, tail: str) -> str:
    """Masked renderings of a key ending with ``tail``: they tell little, but they confirm to
    anyone reading which key failed, and with a prefix and a tail, whose it is."""

    def replace(match: re.Match[str]) -> str:
        token = match.group()
        core = token.rstrip(".")  # a sentence's full stop is not part of the key
        if core.endswith(tail) and _MASK.search(core[: -len(tail)]):
            return REDACTED + token[len(core) :]
        return token

    return _TOKEN.sub(replace, text)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without any of ``secrets``, their masked forms, or any ``Bearer`` token."""
    for secret in secrets:
        if secret:
            text = _exact(secret).sub(REDACTED, text)
            if len(secret) >= _SHORT:
                text = _unmask(text, secret[-_TAIL:])
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def provider_text(text: str, secrets: Iterable[str | None], limit: int) -> str:
    """A provider's message, at most ``limit`` characters, for storing: redacted before it is
    cut, since a cut through a key leaves a piece of it that no longer matches it whole."""
    return redact(text, secrets)[:limit]
