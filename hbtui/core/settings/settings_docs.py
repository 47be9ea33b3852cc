"""`.env.example` and the settings table of docs/settings.md, written from the settings' one description.

python -m hbtui.core.settings.settings_docs --write   # rewrite both after changing a setting
python -m hbtui.core.settings.settings_docs --check   # exit 1 if either is out of date (the tests do this)
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from hbtui.core.settings.config import SECTIONS, SETTINGS, Setting

ROOT = Path(__file__).resolve().parents[3]
ENV_EXAMPLE = ROOT / ".env.example"
DOCUMENT = ROOT / "docs" / "settings.md"
TABLE_START = "<!-- settings table: written by `python -m hbtui.core.settings.settings_docs --write` -->"
TABLE_END = "<!-- end of the settings table -->"

ENV_HEADER = """\
# hbtui settings. Copy to .env and fill in. Precedence: this file < environment < command line.
# API keys are kept in memory only: never written to the database, exports, logs or the screen.
# Every setting, its flag, values and default: docs/settings.md.
# Written by `python -m hbtui.core.settings.settings_docs --write` from hbtui/core/settings/config.py: edit the settings there.
"""


def _comment(text: str) -> list[str]:
    return [
        "# " + line
        for paragraph in text.splitlines()
        for line in textwrap.wrap(paragraph, 96, break_on_hyphens=False, break_long_words=False)
    ]


def _alias_note(setting: Setting) -> str:
    if not setting.aliases:
        return ""
    return f"(older files spell it {' / '.join(setting.aliases)}; both work)"


def _sentences(text: str, note: str) -> str:
    return f"{text}. {note}" if note else text


def env_example() -> str:
    lines = [ENV_HEADER.rstrip("\n")]
    for section in SECTIONS:
        lines += ["", *_comment(section.prose)]
        for setting in (s for s in SETTINGS if s.section is section):
            about = " ".join(part for part in (setting.help, _alias_note(setting)) if part)
            lines += _comment(f"{setting.key}: {_sentences(about, setting.note)}")
            if setting.example is not None:
                lines.append(f"{setting.key}={setting.example}")
            else:
                lines.append(f"# {setting.key}={setting.shown_default if setting.default is not None else ''}")
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def settings_table() -> str:
    rows = ["| key | flag | section | meaning | values | default |", "| --- | --- | --- | --- | --- | --- |"]
    for setting in SETTINGS:
        key = ", ".join(_code(name) for name in (setting.key, *setting.aliases))
        secret = "secret: kept in memory only, never stored or shown" if setting.secret else ""
        meaning = "; ".join(part for part in (setting.help, secret) if part)
        meaning = _sentences(meaning, setting.note).replace("|", "\\|")
        meaning = re.sub(r"(<<\w+>>)", r"`\1`", meaning)  # not taken for HTML tags
        rows.append(
            f"| {key} | {_code(setting.flag or '')} | {setting.section.name} | {meaning} |"
            f" {setting.kind.shape.replace('|', chr(92) + '|')} | {_code(setting.shown_default)} |"
        )
    return "\n".join([TABLE_START, *rows, TABLE_END])


def document_with_table(document: str) -> str:
    """docs/settings.md with its settings table (between the two markers) written anew."""
    before, found, rest = document.partition(TABLE_START)
    if not found or TABLE_END not in rest:
        raise ValueError(f"docs/settings.md lacks the settings table's markers {TABLE_START!r} ... {TABLE_END!r}")
    return before + settings_table() + rest.split(TABLE_END, 1)[1]


def out_of_date() -> list[Path]:
    stale = []
    if not ENV_EXAMPLE.exists() or ENV_EXAMPLE.read_text(encoding="utf-8") != env_example():
        stale.append(ENV_EXAMPLE)
    document = DOCUMENT.read_text(encoding="utf-8")
    if document_with_table(document) != document:
        stale.append(DOCUMENT)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except (OSError, ValueError) as exc:
        print(f"hbtui.core.settings.settings_docs: error: {exc}", file=sys.stderr)
        return 2


def _run(args: list[str]) -> int:
    if args == ["--check"]:
        stale = out_of_date()
        for path in stale:
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            print(f"{shown} is out of date: python -m hbtui.core.settings.settings_docs --write", file=sys.stderr)
        return 1 if stale else 0
    if args == ["--write"]:
        ENV_EXAMPLE.write_text(env_example(), encoding="utf-8")
        DOCUMENT.write_text(document_with_table(DOCUMENT.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    print("usage: python -m hbtui.core.settings.settings_docs --write|--check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
