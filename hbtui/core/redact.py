"""Taking API keys out of what a provider sends back, before it is stored or shown.

Providers echo what they were sent: OpenAI's 401 repeats a masked form of the key
(``sk-proj-****abcd``), proxies and debug pages echo the ``Authorization`` header whole. Error
texts, log lines and notes that come from a provider go through ``redact``.

Replies and grader explanations are data and are kept as received, with one exception: a key
configured for this run (see ``redact_keys``). A provider can put it into a reply (a proxy that
answers ``Your key is Bearer sk-…``, a model shown its own request), and such a reply would
carry the key into the database, ``results.jsonl``, the screens and the grader's prompt. A
configured key is never data: only its forms are taken out, nothing else a reply says.
"""

from __future__ import annotations

import base64
import re
import string
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"

# The token after "Bearer", up to whatever ends a header value inside a JSON or text body.
_BEARER = re.compile(r"(\bBearer\s+)[^\s\"'`,;<>(){}\[\]\\]+", re.IGNORECASE)
_WORD = r"A-Za-z0-9_\-"
# A token as a masked key is written: word characters, dots and mask characters.
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-.*…•")
_MASK = re.compile(r"[*…•]|\.\.")
# Below this length a key may well be an ordinary word ("EMPTY", "token"): it is taken out only
# where it stands alone, and its last characters alone are no tell-tale of a masked form (its
# head must be shown too).
_SHORT = 12
_TAIL = 4
# A masked echo of any key: a head of the key, a run of mask characters, a tail of the key.
_HEAD_MASK_TAIL = re.compile(r"([^*…•]+?)((?:[*…•]|\.\.)[*…•.]*)([^*…•]+)")
# Fewer visible characters tell nothing of a key, and "a*b" or "x…y" is ordinary text.
_VISIBLE = 3
# A full stop after a masked key, or markdown emphasis around it, is not part of it.
_TRAILING = ".*"
_LEADING = ".*…•"
# Base64 of a shorter key is a few characters that ordinary text holds by chance.
_BASE64_MIN = 8
_BASE64_CHARS = frozenset(string.ascii_letters + string.digits + "+/-_")
_URLSAFE = str.maketrans("+/", "-_")


@lru_cache(maxsize=16)
def _exact(secret: str) -> re.Pattern[str]:
    if len(secret) < _SHORT:
        return re.compile(rf"(?<![{_WORD}]){re.escape(secret)}(?![{_WORD}])")
    return re.compile(re.escape(secret))


def _is_word(secret: str) -> bool:
    """A placeholder such as ``EMPTY``, ``x`` or ``1234`` (local servers take any key): in a
    reply it is far more often the word itself than the key, and it guards nothing."""
    return len(secret) < _SHORT and (secret.isalpha() or secret.isdigit())


@lru_cache(maxsize=16)
def _base64(secret: str) -> tuple[str, ...]:
    """The characters that base64 of any text holding ``secret`` always holds, standard and
    urlsafe: the key alone, ``Bearer <key>``, ``user:<key>`` of basic auth. The key starts at one
    of three alignments within a 3-byte group; encoded at each, the characters that mix in a
    neighbouring byte (at its edges, and the padding) are left out."""
    if len(secret) < _BASE64_MIN:
        return ()
    data = secret.encode()
    pieces = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode()
        first = -(-offset * 8 // 6)  # the first character whose 6 bits are all the key's
        end = (offset + len(data)) * 8 // 6  # after the last such character
        pieces |= {encoded[first:end], encoded[first:end].translate(_URLSAFE)}
    return tuple(sorted(pieces))


def _replace_runs(
    text: str, found: re.Pattern[str], chars: frozenset[str], replace: Callable[[str], str | None], padding: str = ""
) -> str:
    """``text`` with each run of ``chars`` around a match of ``found`` (and up to two ``padding``
    characters after it) given to ``replace``: kept where it returns None. Each character is
    walked once, so that a hostile reply of megabytes stays linear."""
    parts: list[str] = []
    kept = pos = 0
    while (match := found.search(text, pos)) is not None:
        start, end = match.span()
        while start > pos and text[start - 1] in chars:
            start -= 1
        while end < len(text) and text[end] in chars:
            end += 1
        if padding:
            end += len(text[end : end + 2]) - len(text[end : end + 2].lstrip(padding))
        pos = end
        replaced = replace(text[start:end])
        if replaced is not None:
            parts += [text[kept:start], replaced]
            kept = end
    return "".join([*parts, text[kept:]]) if parts else text


def _without_base64(text: str, secret: str) -> str:
    """``text`` with each base64 string that holds the key replaced whole: its other characters
    hold a few bits of the key at its edges, and what was encoded with it."""
    pieces = _base64(secret)
    if not any(piece in text for piece in pieces):  # the common case, at the speed of str.find
        return text
    found = re.compile("|".join(map(re.escape, pieces)))
    return _replace_runs(text, found, _BASE64_CHARS, lambda _: REDACTED, padding="=")


def _is_masked_echo(core: str, secret: str) -> bool:
    """Whether ``core`` shows a head and a tail of ``secret`` around mask characters
    (``sk-wr****ong`` of ``sk-wrong``), however short the key."""
    match = _HEAD_MASK_TAIL.fullmatch(core)
    if match is None:
        return False
    head, _, tail = match.groups()
    shown = len(head) + len(tail)
    return _VISIBLE <= shown <= len(secret) and secret.startswith(head) and secret.endswith(tail)


def _unmask(text: str, secrets: tuple[str, ...]) -> str:
    """Masked renderings of the keys: they tell little, but they confirm to anyone reading which
    key failed, and with a prefix and a tail, whose it is. A long key's last characters after a
    mask are enough (``sk-proj-****abcd``: the prefix is often the provider's, not the key's)."""
    # No mask is longer than what it hides: a longer token is no masked key (and a hostile one,
    # megabytes of "a..a..a", is not matched against a pattern that backtracks).
    longest = 2 * max(map(len, secrets)) + 16

    def replace(token: str) -> str | None:
        core = token.rstrip(_TRAILING)
        inner = core.lstrip(_LEADING)
        for secret in secrets:
            tail = secret[-_TAIL:]
            if len(secret) >= _SHORT and core.endswith(tail) and _MASK.search(core[: -len(tail)]):
                return REDACTED + token[len(core) :]
            if len(inner) <= longest and _is_masked_echo(inner, secret):
                return core[: len(core) - len(inner)] + REDACTED + token[len(core) :]
        return None

    return _replace_runs(text, _MASK, _TOKEN_CHARS, replace)


def _take_out(text: str, secrets: tuple[str, ...], *, words: bool) -> str:
    for secret in secrets:
        if secret in text and (words or not _is_word(secret)):
            text = _exact(secret).sub(REDACTED, text)
        text = _without_base64(text, secret)
    return _unmask(text, secrets) if secrets else text


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without any of ``secrets``, their masked and base64 forms, or any ``Bearer`` token."""
    text = _take_out(text, tuple(secret for secret in secrets if secret), words=True)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def redact_keys(text: str, secrets: Iterable[str | None]) -> str:
    """A reply or a grader's answer without ``secrets`` (the keys configured for the run), whole,
    masked or in base64. Nothing else is taken out: a ``Bearer`` of another token, or a key that
    is an ordinary word (``EMPTY``) standing as a word, is what the reply says."""
    return _take_out(text, tuple(secret for secret in secrets if secret), words=False)


def provider_text(text: str, secrets: Iterable[str | None], limit: int) -> str:
    """A provider's message, at most ``limit`` characters, for storing: redacted before it is
    cut, since a cut through a key leaves a piece of it that no longer matches it whole."""
    return redact(text, secrets)[:limit]


def without_credentials(url: Any) -> Any:
    """A URL without its user:password part (``https://user:pw@host/v1`` -> ``https://host/v1``)."""
    if not isinstance(url, str) or "@" not in url:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))
