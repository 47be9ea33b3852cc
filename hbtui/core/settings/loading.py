"""Settings as a command reads them: the built-in defaults, then `.env`, then the environment.

`.env` is read as python-dotenv reads it, with the line of each key, and every line it would
skip or misread is one problem naming the file and line. The settings themselves, each described
once, are hbtui.core.settings.config.
"""

from __future__ import annotations

import difflib
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dotenv.main import resolve_variables
from dotenv.parser import Binding, parse_stream

from hbtui.core.settings.config import ALIASES, BY_KEY, Settings
from hbtui.core.settings.setting_kinds import (
    SettingsError,
)

_NEWLINE = re.compile(r"\r\n|\n|\r")  # python-dotenv's own


@dataclass(frozen=True)
class EnvFile:
    """A `.env` file as python-dotenv reads it, with the line of each key (the last one wins, as
    in python-dotenv) and one message per line it cannot use."""

    values: dict[str, str | None]
    line_of: dict[str, int]
    problems: list[str]


def _binding_line(binding: Binding) -> int:
    """The line a binding's text starts on: python-dotenv numbers it from the blank lines and
    comments it skipped first, so it would name a line above the one at fault."""
    text = binding.original.string
    skipped = text[: len(text) - len(text.lstrip())]
    return binding.original.line + len(_NEWLINE.findall(skipped))


def _unreadable_line(binding: Binding) -> str:
    first = binding.original.string.strip().splitlines()[0] if binding.original.string.strip() else ""
    key, equals, value = first.removeprefix("export ").partition("=")
    if equals and value.lstrip()[:1] in ("'", '"'):
        return f"the quote that opens the value of {key.strip()!r} is not closed"
    return "not a KEY=value line"


def read_env_file(path: Path) -> EnvFile:
    """Every line of ``path`` that python-dotenv would skip or misread is a problem here: a line
    without ``=`` (python-dotenv leaves its key unset, silently), a quote never closed (it drops
    the line with a message that names no file), a NUL byte (it would reach the provider)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    pairs: list[tuple[str, str | None]] = []
    line_of: dict[str, int] = {}
    problems: list[str] = []
    for binding in parse_stream(io.StringIO(text)):
        line = _binding_line(binding)
        if binding.error:
            problems.append(f"{path}:{line}: {_unreadable_line(binding)}")
        elif "\0" in binding.original.string:
            holder = f"the value of {binding.key!r}" if "\0" in (binding.value or "") else "the line"
            problems.append(f"{path}:{line}: {holder} holds a NUL byte")
        elif binding.key is not None and binding.value is None:
            problems.append(f"{path}:{line}: {binding.key!r} has no '=' (a line must be KEY=value)")
        elif binding.key is not None:
            pairs.append((binding.key, binding.value))
            line_of[binding.key] = line
    # python-dotenv's own `${NAME}` expansion, as dotenv_values does it.
    return EnvFile(values=dict(resolve_variables(pairs, override=True)), line_of=line_of, problems=problems)


def load_settings(
    env_file: str | Path | None = ".env",
    environ: Mapping[str, str] | None = None,
    warn=None,
    lenient: bool = False,
    must_exist: bool = False,
) -> Settings:
    """Merge `.env` < environment into validated Settings.

    Unknown `.env` keys that look like a misspelt known key are errors (a silently ignored
    ``MODLE_TEST`` would run the wrong model); other unknown keys are reported through ``warn``
    since a shared `.env` often holds other tools' settings.

    ``lenient`` (for browsing: `runs`, `show`, the app) reports a bad value through ``warn`` and
    leaves that setting at its default, so one typo in `.env` does not lock a user out of runs
    they already have; a run itself always loads strictly. The lines of `.env` that cannot be read
    are alike: errors, or warnings when ``lenient``.

    ``must_exist``: the file was named (``--env-file``), so its absence is an error; the default
    `.env` may be absent.
    """
    environ = os.environ if environ is None else environ
    raw: dict[str, tuple[Any, str]] = {}
    if env_file is not None:
        path = Path(env_file)
        if not path.exists() and must_exist:
            raise SettingsError(f"--env-file {path}: no such file")
        if path.exists():
            env = read_env_file(path)
            for problem in env.problems:
                if not lenient:
                    raise SettingsError(problem)
                if warn:
                    warn(problem + "; line ignored")
            for key, value in env.values.items():
                origin = f"{path}:{env.line_of[key]}"
                canonical = ALIASES.get(key, key)
                if canonical not in BY_KEY:
                    close = difflib.get_close_matches(key, list(BY_KEY) + list(ALIASES), n=1, cutoff=0.8)
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
    for key in list(BY_KEY) + list(ALIASES):
        if key in environ:
            canonical = ALIASES.get(key, key)
            if canonical != key and canonical in environ:
                continue
            raw[canonical] = (environ[key], "environment")
    values: dict[str, Any] = {}
    for key, (value, origin) in raw.items():
        setting = BY_KEY[key]
        try:
            parsed = setting.parse(value, origin)
        except SettingsError as exc:
            if not lenient:
                raise
            warn(str(exc) + "; using the default")
            continue
        if parsed is not None:
            values[setting.attribute] = parsed
    return Settings(**values)
