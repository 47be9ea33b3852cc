"""Writing settings back to a `.env` file, when the user asks for it.

The file keeps everything it had that is not ours (other tools' keys, comments, blank lines) in
place; our keys are updated where they stand, new ones are appended. Only here do API keys reach
a file, because the user asked for exactly that; the file is owner-only (0600).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from pathlib import Path

from hbtui.core.files import private_file
from hbtui.core.settings.config import ALIASES, SETTINGS, STORAGE, Settings, SettingsError
from hbtui.core.settings.loading import read_env_file

_PLAIN = re.compile(r"^[A-Za-z0-9_./:@+,%=-]*$")
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


class EnvFileError(ValueError):
    pass


def quote(value: str) -> str:
    """A value as python-dotenv reads it back unchanged."""
    if _PLAIN.match(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def env_values(settings: Settings, present: AbstractSet[str] = frozenset()) -> dict[str, str | None]:
    """KEY -> text for every key that differs from the default or is already in the file
    (None: the setting is unset, so its line goes)."""
    defaults = Settings()
    values: dict[str, str | None] = {}
    for setting in SETTINGS:
        key, value = setting.key, getattr(settings, setting.attribute)
        # Where this machine keeps things, not how a run behaves: written only when the file has them.
        if key not in present and (value == getattr(defaults, setting.attribute) or setting.section is STORAGE):
            continue
        values[key] = None if value is None else setting.kind.text(value)
    return values


def env_file_values(path: str | Path | None) -> dict[str, str | None]:
    """KEY -> text as the file holds it now (older spellings under today's key); {} without one."""
    if path is None or not Path(path).is_file():
        return {}
    try:
        values = read_env_file(Path(path)).values  # its problems were said when the settings were read
    except (OSError, SettingsError):
        return {}
    return {ALIASES.get(key, key): value for key, value in values.items()}


def changed_meanwhile(path: str | Path, read_before: dict[str, str | None], settings: Settings) -> list[str]:
    """Our keys that someone changed in the file since ``read_before`` and that writing
    ``settings`` would replace: the user's say is needed before their edit goes."""
    now = env_file_values(path)
    ours = env_values(settings, set(now))
    return [key for key, value in ours.items() if now.get(key) != read_before.get(key) and now.get(key) != value]


def write_env(path: str | Path, settings: Settings, keep: AbstractSet[str] = frozenset()) -> Path:
    """``keep``: our keys whose lines stay as the file has them (edits made there meanwhile)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvFileError(f"{path}: cannot read ({exc})") from None
    present = set()
    for line in lines:
        match = _ASSIGNMENT.match(line)
        if match:
            present.add(ALIASES.get(match.group(1), match.group(1)))
    values = env_values(settings, present)
    out: list[str] = []
    written: set[str] = set()
    for line in lines:
        match = _ASSIGNMENT.match(line)
        key = ALIASES.get(match.group(1), match.group(1)) if match else None
        if key not in values or key in keep:
            out.append(line)  # not ours: a comment, a blank line, another tool's key
            continue
        value = values[key]
        if key in written or value is None:
            continue  # a duplicate or an old spelling of a key already written; or now unset
        out.append(f"{key}={quote(value)}")
        written.add(key)
    for key, value in values.items():
        if key not in written and key not in keep and value is not None:
            out.append(f"{key}={quote(value)}")
    text = "\n".join(out) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with private_file(path) as handle:
            handle.write(text)
    except OSError as exc:
        raise EnvFileError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return path
