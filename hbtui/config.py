"""Settings: `.env` (python-dotenv) < environment < command line, validated into one object.

Every problem is reported as a :class:`SettingsError` whose message names the key (and the
`.env` line when the value came from there), so the CLI can print one line and stop.
API keys live only in memory: :meth:`Settings.public_dict` is what gets stored or shown.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dotenv import dotenv_values

REASONING_EFFORTS = ("minimal", "low", "medium", "high")

# key -> (Settings attribute, parser name). Order is the order of .env.example.
KEYS: dict[str, tuple[str, str]] = {
    "BASE_URL": ("base_url", "url"),
    "API_KEY": ("api_key", "secret"),
    "MODEL_TEST": ("model_test", "str"),
    "MODEL_GRADER": ("model_grader", "str"),
    "GRADER_BASE_URL": ("grader_base_url", "url"),
    "GRADER_API_KEY": ("grader_api_key", "secret"),
    "REASONING_TEST": ("reasoning_test", "effort"),
    "REASONING_GRADER": ("reasoning_grader", "effort"),
    "TEMPERATURE_TEST": ("temperature_test", "temperature"),
    "TEMPERATURE_GRADER": ("temperature_grader", "temperature"),
    "MAX_TOKENS_TEST": ("max_tokens_test", "positive_int"),
    "MAX_TOKENS_GRADER": ("max_tokens_grader", "positive_int"),
    "CONCURRENCY": ("concurrency", "positive_int"),
    "GRADER_CONCURRENCY": ("grader_concurrency", "positive_int"),
    "TIMEOUT": ("timeout", "positive_float"),
    "MAX_ATTEMPTS": ("max_attempts", "positive_int"),
    "GRADER_PARSE_ATTEMPTS": ("grader_parse_attempts", "positive_int"),
    "UNREACHABLE_PATIENCE": ("unreachable_patience", "positive_float"),
    "DB_WRITE_PATIENCE": ("db_write_patience", "positive_float"),
    "GRADER_TEMPLATE": ("grader_template", "template"),
    "SYSTEM_MESSAGE_TEST": ("system_message_test", "str"),
    "SYSTEM_MESSAGE_GRADER": ("system_message_grader", "str"),
    "GRADER_JSON_SCHEMA": ("grader_json_schema", "bool"),
    "LENGTH_PENALTY": ("length_penalty", "length_penalty"),
    "LENGTH_CENTRE": ("length_centre", "length_centre"),
    "HBTUI_DB": ("db_path", "path"),
    "HBTUI_CACHE": ("cache_dir", "path"),
}
# Older .env files of the single-script harness spell these keys this way.
ALIASES = {"RESONING_TEST": "REASONING_TEST", "RESONING_GRADER": "REASONING_GRADER"}
SECRET_KEYS = {"API_KEY", "GRADER_API_KEY"}

# The length adjustment's defaults per subset, as third parties report upstream simple-evals
# (2026) to use them: a penalty per 500 characters of reply, around a centre of 2,000 characters.
# Not in the pinned reference code, hence named rather than on by default.
LENGTH_PENALTIES = {"main": 0.0299, "hard": 0.0392, "consensus": 0.0020}
LENGTH_CENTRE = 2000.0
LENGTH_OFF = ("", "off", "none")


class SettingsError(ValueError):
    """A setting that cannot be used; the message names the key and where it came from."""


@dataclass(frozen=True)
class Settings:
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model_test: str | None = None
    model_grader: str | None = None
    grader_base_url: str | None = None
    grader_api_key: str | None = field(default=None, repr=False)
    reasoning_test: str | None = None
    reasoning_grader: str | None = None
    temperature_test: float = 0.3
    temperature_grader: float = 0.3
    max_tokens_test: int = 2048
    max_tokens_grader: int = 1024
    concurrency: int = 8
    grader_concurrency: int | None = None
    timeout: float = 120.0
    max_attempts: int = 6
    grader_parse_attempts: int = 3
    # Seconds of nothing but connection failures from an endpoint that answered before, after
    # which the run stops (resumable) rather than burn every remaining conversation's attempts.
    unreachable_patience: float = 60.0
    # Seconds the engine keeps answers in memory while the database refuses its writes (another
    # process holds a lock) before it stops the run, saying so.
    db_write_patience: float = 300.0
    # reference (simple-evals' own prompt, fetched once), builtin (hbtui's wording), or a file.
    grader_template: str = "reference"
    # A system message sent first to each model; the reference sends "You are a helpful assistant."
    system_message_test: str | None = None
    system_message_grader: str | None = None
    # Ask the grader for its verdict with response_format json_schema (the reference does not).
    grader_json_schema: bool = True
    # Applied when reporting, never at grading time: off (None) unless set.
    length_penalty: float | None = None
    length_centre: float = LENGTH_CENTRE
    db_path: str = "runs/hbtui.sqlite"
    cache_dir: str = str(Path.home() / ".cache" / "hbtui")

    @property
    def effective_grader_base_url(self) -> str | None:
        return self.grader_base_url or self.base_url

    @property
    def effective_grader_api_key(self) -> str | None:
        # A grader on its own endpoint has its own key; on the same endpoint it shares it.
        if self.grader_base_url and self.grader_base_url != self.base_url:
            return self.grader_api_key
        return self.grader_api_key or self.api_key

    @property
    def effective_grader_concurrency(self) -> int:
        return self.grader_concurrency or self.concurrency

    def with_overrides(self, **values: Any) -> Settings:
        """Command-line values on top; None means "not given" and keeps the current value."""
        given = {k: v for k, v in values.items() if v is not None}
        for name, value in given.items():
            key = attribute_key(name)
            given[name] = parse_value(key, KEYS[key][1], value, origin="command line")
        return replace(self, **given)

    def require_models(self) -> None:
        """The checks that only a run needs (browsing a database needs no endpoint)."""
        for key in ("BASE_URL", "MODEL_TEST", "MODEL_GRADER"):
            if not getattr(self, KEYS[key][0]):
                raise SettingsError(f"{key} is not set (put it in .env, the environment, or a flag)")

    def public_dict(self) -> dict[str, Any]:
        """Settings as stored with a run and shown on screen: keys reduced to a mask."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("api_key", "grader_api_key"):
                value = mask_secret(value)
            out[f.name] = value
        return out


def attribute_key(attribute: str) -> str:
    for key, (attr, _) in KEYS.items():
        if attr == attribute:
            return key
    raise KeyError(attribute)


def mask_secret(secret: str | None) -> str | None:
    """``sk-…a1b2``: enough to tell two long keys apart, never enough to use one.

    A short key (a local server's ``--api-key token1234``) shows nothing: four characters of
    ten would give most of it away.
    """
    if not secret:
        return None
    if len(secret) < 20:
        return "…"
    return f"{secret[:3]}…{secret[-4:]}"


def parse_value(key: str, kind: str, raw: Any, origin: str) -> Any:
    where = f"{key} ({origin})"
    text = str(raw).strip() if not isinstance(raw, (int, float)) else raw
    if kind in ("str", "secret", "path"):
        return str(text) if text != "" else None
    if kind == "template":
        if str(text) == "":
            return None
        return str(text).lower() if str(text).lower() in ("reference", "builtin") else str(text)
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        word = str(text).lower()
        if word in ("1", "true", "yes", "on"):
            return True
        if word in ("0", "false", "no", "off"):
            return False
        if word == "":
            return None
        raise SettingsError(f"{where}: {raw!r} is not true or false")
    if kind == "url":
        if text == "":
            return None
        parsed = urlparse(str(text))
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise SettingsError(f"{where}: {raw!r} is not an http(s) URL such as http://127.0.0.1:8080/v1")
        return str(text).rstrip("/")
    if kind == "effort":
        if text == "" or str(text).lower() == "none":
            return None
        if str(text).lower() not in REASONING_EFFORTS:
            raise SettingsError(f"{where}: {raw!r} is not a reasoning effort ({', '.join(REASONING_EFFORTS)})")
        return str(text).lower()
    if kind in ("length_penalty", "length_centre"):
        return _length_value(where, kind, raw, str(text).lower())
    if kind in ("positive_int",):
        try:
            value = int(str(text))
        except ValueError:
            raise SettingsError(f"{where}: {raw!r} is not a whole number") from None
        if value < 1:
            raise SettingsError(f"{where}: {value} must be at least 1")
        return value
    if kind in ("positive_float", "temperature"):
        try:
            number = float(str(text))
        except ValueError:
            raise SettingsError(f"{where}: {raw!r} is not a number") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise SettingsError(f"{where}: {raw!r} is not a finite number")
        if kind == "temperature" and not 0 <= number <= 2:
            raise SettingsError(f"{where}: {number} is outside 0 to 2")
        if kind == "positive_float" and number <= 0:
            raise SettingsError(f"{where}: {number} must be greater than 0")
        return number
    raise AssertionError(kind)


def _length_value(where: str, kind: str, raw: Any, text: str) -> float | None:
    """A named default (main, hard, consensus), a number of 0 or more, or (the penalty) off."""
    if kind == "length_penalty" and text in LENGTH_OFF:
        return None
    if text in LENGTH_PENALTIES:
        return LENGTH_PENALTIES[text] if kind == "length_penalty" else LENGTH_CENTRE
    what = "a penalty per 500 characters" if kind == "length_penalty" else "a centre in characters"
    choices = ", ".join(LENGTH_PENALTIES) + (", or off" if kind == "length_penalty" else "")
    try:
        value = float(text)
    except ValueError:
        raise SettingsError(f"{where}: {raw!r} is not {what} (a number of 0 or more, {choices})") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise SettingsError(f"{where}: {raw!r} is not {what} (a number of 0 or more, {choices})")
    return value


def _env_file_lines(path: Path) -> dict[str, int]:
    """Line number of each key in a .env file, for error messages."""
    lines: dict[str, int] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("export "):
            stripped = stripped[len("export ") :]
        if "=" in stripped and not stripped.startswith("#"):
            lines[stripped.split("=", 1)[0].strip()] = number  # the last one wins, as in python-dotenv
    return lines


def load_settings(
    env_file: str | Path | None = ".env",
    environ: Mapping[str, str] | None = None,
    warn=None,
    lenient: bool = False,
) -> Settings:
    """Merge `.env` < environment into validated Settings.

    Unknown `.env` keys that look like a misspelt known key are errors (a silently ignored
    ``MODLE_TEST`` would run the wrong model); other unknown keys are reported through ``warn``
    since a shared `.env` often holds other tools' settings.

    ``lenient`` (for browsing: `runs`, `show`, the app) reports a bad value through ``warn`` and
    leaves that setting at its default, so one typo in `.env` does not lock a user out of runs
    they already have; a run itself always loads strictly.
    """
    environ = os.environ if environ is None else environ
    raw: dict[str, tuple[Any, str]] = {}
    if env_file is not None:
        path = Path(env_file)
        if path.exists():
            line_of = _env_file_lines(path)
            for key, value in dotenv_values(path).items():
                origin = f"{path}:{line_of.get(key, '?')}"
                canonical = ALIASES.get(key, key)
                if canonical not in KEYS:
                    close = difflib.get_close_matches(key, list(KEYS) + list(ALIASES), n=1, cutoff=0.8)
                    if close and not lenient:
                        raise SettingsError(f"{origin}: unknown key {key!r}; did you mean {close[0]}?")
                    if close:
                        warn(f"{origin}: unknown key {key!r}; did you mean {close[0]}?")
                        continue
                    if warn:
                        warn(f"{origin}: unknown key {key!r} ignored")
                    continue
                if value is None:
                    continue
                if canonical != key and canonical in raw:
                    continue  # the correct spelling wins over the old one
                raw[canonical] = (value, origin)
    for key in list(KEYS) + list(ALIASES):
        if key in environ:
            canonical = ALIASES.get(key, key)
            if canonical != key and canonical in environ:
                continue
            raw[canonical] = (environ[key], "environment")
    values: dict[str, Any] = {}
    for key, (value, origin) in raw.items():
        attr, kind = KEYS[key]
        try:
            parsed = parse_value(key, kind, value, origin)
        except SettingsError as exc:
            if not lenient:
                raise
            warn(str(exc) + "; using the default")
            continue
        if parsed is not None:
            values[attr] = parsed
    return Settings(**values)
