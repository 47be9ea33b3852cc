"""How a setting's text becomes its value: one kind per way of reading, shared by every source.

The same text is read the same way from `.env`, the environment, a command-line flag, a preset
and a field on the configuration screen, and every problem is a :class:`SettingsError` naming
``where`` it came from (``KEY (.env:4)``, ``KEY (command line)``). An empty text means "not set".

List-valued settings (several endpoints, or their keys) are ``ListOf(item)``: the text is split
on commas, each part read by ``item`` (its error naming the part's position), and the value is a
tuple; ``text`` joins them with commas. The ``Settings`` field is then a ``tuple[...]`` and every
source, flag and form field follows from the kind.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from hbtui.core.errors import HbtuiError


class SettingsError(HbtuiError, ValueError):
    """A setting that cannot be used; the message names the key and where it came from."""


def _stripped(raw: Any) -> str:
    return str(raw).strip()


class NotSent:
    """What a sampling setting's ``not sent`` reads as: the parameter is left out of the request
    (the 2026 reference grader sends no temperature and no token limit). A value of its own,
    since None already means "not given: the default". Settings stores it as None."""

    def __repr__(self) -> str:
        return "NOT_SENT"


NOT_SENT = NotSent()
NOT_SENT_WORDS = ("not sent", "none")
NOT_SENT_TEXT = "not sent"


def _not_sent(text: str, allowed: bool) -> bool:
    return allowed and text.casefold() in NOT_SENT_WORDS


@dataclass(frozen=True)
class Kind:
    """Plain text (a model name, a system message, a path): any text, empty for unset."""

    # What docs/settings.md and .env.example say a value looks like; empty for free text.
    shape: str = ""

    def parse(self, raw: Any, where: str) -> Any:
        text = _stripped(raw)
        return text if text != "" else None

    def text(self, value: Any) -> str:
        """A value as it is typed back (into `.env`, a field on screen, a preset)."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Url(Kind):
    def parse(self, raw: Any, where: str) -> str | None:
        text = _stripped(raw)
        if text == "":
            return None
        parsed = urlparse(text)
        if "@" in parsed.netloc:
            # The API key is the Bearer token of the one Authorization header a request carries,
            # and the URL is stored with the run and shown wherever its endpoint is named.
            raise SettingsError(
                f"{where}: a user name or password in the URL ({_without_credentials(text)!r}) is not supported;"
                " give the endpoint's token as its API key (sent as a Bearer token)"
            )
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise SettingsError(
                f"{where}: {_without_credentials(str(raw))!r} is not an http(s) URL such as http://127.0.0.1:8080/v1"
            )
        return text.rstrip("/")


def _without_credentials(url: str) -> str:
    """``url`` with whatever stands before an ``@`` of its host part shown as ``…``: a password
    is never printed."""
    return re.sub(r"^([^/]*//)?[^/@]*@", lambda m: (m.group(1) or "") + "…@", url)


@dataclass(frozen=True)
class Choice(Kind):
    """One of a few words, or ``none`` (not sent)."""

    choices: tuple[str, ...] = ()
    what: str = "a choice"

    def parse(self, raw: Any, where: str) -> str | None:
        word = _stripped(raw).lower()
        if word in ("", "none"):
            return None
        if word not in self.choices:
            raise SettingsError(f"{where}: {raw!r} is not {self.what} ({', '.join(self.choices)})")
        return word


@dataclass(frozen=True)
class NameOrPath(Kind):
    """A built-in's name (any case) or a file's path, checked when it is used."""

    names: tuple[str, ...] = ()

    def parse(self, raw: Any, where: str) -> str | None:
        text = _stripped(raw)
        if text == "":
            return None
        return text.lower() if text.lower() in self.names else text


@dataclass(frozen=True)
class Bool(Kind):
    def parse(self, raw: Any, where: str) -> bool | None:
        if isinstance(raw, bool):
            return raw
        word = _stripped(raw).lower()
        if word in ("1", "true", "yes", "on"):
            return True
        if word in ("0", "false", "no", "off"):
            return False
        if word == "":
            return None
        raise SettingsError(f"{where}: {raw!r} is not true or false")


def _number_text(value: float) -> str:
    """A bound as the docs and errors write it: 4,096, 0.5, 86,400."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class WholeNumber(Kind):
    """A whole number from ``at_least`` to ``at_most``: every count is bounded, since a value
    far past sense (CONCURRENCY=1000000000) would otherwise be tried, and end in the kernel
    killing the process."""

    at_least: int = 1
    at_most: int = 1_000_000
    may_be_unsent: bool = False  # "not sent" is a value: the parameter left out of the request

    @property
    def range_text(self) -> str:
        return f"{_number_text(self.at_least)} to {_number_text(self.at_most)}"

    def text(self, value: Any) -> str:
        if self.may_be_unsent and (value is None or value is NOT_SENT):
            return NOT_SENT_TEXT  # typed back as it reads: an empty field would mean the default
        return super().text(value)

    def parse(self, raw: Any, where: str) -> Any:
        if isinstance(raw, bool):
            raise SettingsError(f"{where}: {raw!r} is not a whole number")
        text = _stripped(raw)
        if text == "":
            return None
        if _not_sent(text, self.may_be_unsent):
            return NOT_SENT
        try:
            value = int(text)
        except ValueError:
            raise SettingsError(f"{where}: {raw!r} is not a whole number") from None
        if not self.at_least <= value <= self.at_most:
            raise SettingsError(f"{where}: {value} is outside {self.range_text}")
        return value


@dataclass(frozen=True)
class Number(Kind):
    """A finite number from ``at_least`` to ``at_most``; ``at_least`` None: greater than 0."""

    at_most: float = 1e9
    at_least: float | None = None
    may_be_unsent: bool = False  # "not sent" is a value: the parameter left out of the request

    @property
    def range_text(self) -> str:
        if self.at_least is None:  # "0 is outside above 0 up to ..." read badly: a range named as one
            return f"the range above 0 to {_number_text(self.at_most)}"
        return f"{_number_text(self.at_least)} to {_number_text(self.at_most)}"

    def text(self, value: Any) -> str:
        if self.may_be_unsent and (value is None or value is NOT_SENT):
            return NOT_SENT_TEXT  # typed back as it reads: an empty field would mean the default
        return super().text(value)

    def parse(self, raw: Any, where: str) -> Any:
        if isinstance(raw, bool):
            raise SettingsError(f"{where}: {raw!r} is not a number")
        text = _stripped(raw)
        if text == "":
            return None
        if _not_sent(text, self.may_be_unsent):
            return NOT_SENT
        try:
            number = float(text)
        except ValueError:
            raise SettingsError(f"{where}: {raw!r} is not a number") from None
        if not math.isfinite(number):
            raise SettingsError(f"{where}: {raw!r} is not a finite number")
        low_ok = number > 0 if self.at_least is None else number >= self.at_least
        if not low_ok or number > self.at_most:
            raise SettingsError(f"{where}: {number:g} is outside {self.range_text}")
        return number


@dataclass(frozen=True)
class NamedNumber(Kind):
    """A number of 0 or more, or a name standing for one (a subset's default); ``off`` too
    where ``off_word`` allows it."""

    named: tuple[tuple[str, float], ...] = ()
    what: str = "a number"
    off_words: tuple[str, ...] = ()
    at_most: float = 1e9

    def parse(self, raw: Any, where: str) -> float | None:
        word = _stripped(raw).lower()
        if word in self.off_words or (not self.off_words and word == ""):
            return None
        if word in dict(self.named):
            return dict(self.named)[word]
        choices = ", ".join(name for name, _ in self.named) + (", or off" if self.off_words else "")
        problem = f"{where}: {raw!r} is not {self.what} (a number of 0 or more, {choices})"
        try:
            value = float(word)
        except ValueError:
            raise SettingsError(problem) from None
        if not math.isfinite(value) or value < 0:
            raise SettingsError(problem)
        if value > self.at_most:
            raise SettingsError(f"{where}: {value:g} is outside 0 to {_number_text(self.at_most)}")
        return value


@dataclass(frozen=True)
class ListOf(Kind):
    """Several values of ``item``, separated by commas; an empty part is an error (a stray comma
    would otherwise quietly drop an endpoint, or shift every key after it onto the wrong one)."""

    item: Kind = Kind()
    what: str = "entry"

    def parse(self, raw: Any, where: str) -> tuple[Any, ...] | None:
        if isinstance(raw, (tuple, list)):
            raw = ",".join(str(part) for part in raw)
        text = _stripped(raw)
        if text == "":
            return None
        parts = text.split(",")
        values = []
        for number, part in enumerate(parts, start=1):
            if part.strip() == "":
                raise SettingsError(f"{where}: {self.what} {number} of {len(parts)} is empty (a stray comma?)")
            values.append(self.item.parse(part, f"{where}, {self.what} {number}" if len(parts) > 1 else where))
        return tuple(values)

    def text(self, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, (tuple, list)):
            return ",".join(self.item.text(part) for part in value)
        return self.item.text(value)
