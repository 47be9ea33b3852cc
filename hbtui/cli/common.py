"""What every command shares: exit codes, the one-line messages, settings from flags, the prices."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import textwrap
from dataclasses import replace
from typing import Any

from hbtui.core.dataset import Dataset, load_jsonl, load_subset
from hbtui.core.errors import EXIT_FAILED, EXIT_USAGE, HbtuiError  # noqa: F401 (the commands take every exit from here)
from hbtui.core.files import open_to_others
from hbtui.core.invocation import invoked_as  # noqa: F401 (the commands take it from here)
from hbtui.core.settings.config import SETTINGS, STORAGE, Setting, Settings
from hbtui.core.settings.loading import load_settings
from hbtui.core.settings.presets import preset_settings
from hbtui.core.settings.prices import PriceError, load_prices
from hbtui.core.text import visible_controls, visible_line
from hbtui.store import Store
from hbtui.store.schema import holds_our_header

EXIT_OK, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 3, 130
# EXIT_FAILED (1) and EXIT_USAGE (2) are core.errors', the exits of HbtuiError's two kinds.
# 128 + SIGPIPE: see main.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE

# Settings flags, from the settings' one description. API keys have none on purpose (a key on a
# command line ends up in shell history and `ps` output); --db is common to every command.
SETTING_FLAGS = [(setting.flag, setting) for setting in SETTINGS if setting.flag and setting.section is not STORAGE]


def flag_help(setting: Setting) -> str:
    default = f", default {setting.shown_default}" if setting.shown_default else ""
    return f"{setting.help} ({setting.key}{default})"


class UsageError(HbtuiError):
    """A command asked for what cannot be: a flag that does not fit, a run it cannot act on."""


def say(text: str = "", *, error: bool = False) -> None:
    """Print what a command reports. Names of runs, themes, axes, models and files come from
    datasets, models and users: their control characters are shown, never obeyed (an OSC 52
    sequence in a theme name would write the user's clipboard). On a terminal, a line longer than
    it is wrapped where a word ends: the terminal cut mid-word (healthbench_m / ain_subset.jsonl)."""
    stream = sys.stderr if error else sys.stdout
    shown = visible_controls(text)
    if stream.isatty():
        shown = wrapped(shown, shutil.get_terminal_size().columns)
    print(shown, file=stream)


def wrapped(text: str, width: int) -> str:
    """Each line of ``text`` longer than ``width`` broken at spaces, the rest indented two more
    than its first; a word longer than a line (a path) is left whole on a line of its own."""
    lines = []
    for line in text.split("\n"):
        if len(line) <= width:
            lines.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        lines += textwrap.wrap(
            line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        ) or [line]
    return "\n".join(lines)


def _complain(kind: str, message: object) -> None:
    """The one line of an error or a warning; a newline in a file name cannot start another."""
    say(f"hbtui: {kind}: {visible_line(str(message))}", error=True)


def _warn(message: str) -> None:
    _complain("warning", message)


def _warn_if_shared(db_path: str, warn) -> None:
    """A database that other users may read is said, not changed: it may be shared on purpose.

    Only one of ours: a file that is empty or not a database holds no prompts, and its problem is
    the one line its command reports."""
    mode = open_to_others(db_path)
    if mode is not None and holds_our_header(db_path):
        warn(
            f"database {db_path} is open to other users (mode {mode:04o}); it holds every prompt and reply"
            f" of its runs: `chmod 600 {db_path}` unless you share it on purpose"
        )


# The demo too: it uses no endpoint of .env, so a bad value there must not stop it.
READ_ONLY_COMMANDS = (None, "monitor", "runs", "show", "compare", "export", "demo")
DEFAULT_ENV_FILE = ".env"
# The app writes its settings to the file named (ctrl+g on its form), so that file may be new;
# `serve` names it to every tab's app.
ENV_FILE_WRITERS = (None, "serve")


def env_file_of(args: argparse.Namespace) -> str:
    return args.env_file or DEFAULT_ENV_FILE


def settings_from(args: argparse.Namespace, warn=_warn) -> Settings:
    # Browsing never needs an endpoint: a bad value elsewhere in .env must not lock the user out.
    lenient = args.command in READ_ONLY_COMMANDS
    must_exist = args.env_file is not None and args.command not in ENV_FILE_WRITERS
    settings = load_settings(env_file_of(args), warn=warn, lenient=lenient, must_exist=must_exist)
    if getattr(args, "preset", None):  # .env < environment < preset < flags
        settings = replace(settings, **preset_settings(args.preset, warn=warn))
    overrides = {setting.attribute: getattr(args, setting.attribute, None) for _, setting in SETTING_FLAGS}
    if args.db:
        overrides["db_path"] = args.db
    return settings.with_overrides(**overrides)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        setting.attribute: getattr(args, setting.attribute)
        for _, setting in SETTING_FLAGS
        if getattr(args, setting.attribute, None) is not None
    }


def prices_or_warn() -> dict:
    """The price table for a summary printed after the calls were paid: a broken table then is a
    warning (tokens only), never a failed command."""
    try:
        return load_prices()
    except PriceError as exc:
        _warn(f"{exc}; tokens shown without a cost")
        return {}


def _download_progress(done: int, total: int | None) -> None:
    if total:
        print(f"\rdownloading: {done / total:6.1%} of {total / 1e6:.1f} MB", end="", file=sys.stderr, flush=True)
        if done >= total:
            print(file=sys.stderr)


def records_of(args: argparse.Namespace, settings: Settings) -> Dataset:
    """The records `run` and its kin (`estimate`, `--batch-files`) are given: --data, or a subset
    (main by default), downloaded once."""
    if args.data:
        return load_jsonl(args.data)
    return load_subset(args.subset or "main", settings.cache_dir, _download_progress)


def open_for_reading(settings: Settings):
    """Read commands never create a file or write a schema, and read a read-only folder too."""
    return Store.open(settings.db_path, create=False, read_only=True)
