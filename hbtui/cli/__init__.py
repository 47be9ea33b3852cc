"""`hbtui`: the terminal app with no command; headless commands for scripts and SSH sessions.

Every expected problem (a bad setting, a broken dataset line, a database that is not ours) ends
as one line on stderr naming what is wrong, and exit status 2. Tracebacks are for developers:
set HBTUI_DEBUG=1 to see them.

One module a command group: parser (the flags), common (what they share), runs, check,
control, reading, manage, app and demo. This module keeps ``main`` and ``entry``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from hbtui.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    _complain,
    _warn,
    _warn_if_shared,
    flag_help,
    settings_from,
)
from hbtui.cli.parser import build_parser
from hbtui.core.blas_threads import hold_blas_to_one_thread
from hbtui.core.errors import HbtuiError
from hbtui.core.files import stdout_to_devnull
from hbtui.core.settings.config import Settings, setting_for
from hbtui.core.settings.loading import load_settings
from hbtui.core.verdicts import CANCELLED, PAUSED
from hbtui.services import DRIVE_COMMAND

__all__ = [
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "flag_help",
    "load_settings",
]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`hbtui runs | head -1`): stop quietly, as Unix tools do. The status
        # is 141 (128 + SIGPIPE), what the shell reports for `cat`, `seq` or `grep` in the same
        # place, rather than 0: scripts then see us as they see those tools (`set -o pipefail`
        # flags them alike), and nobody is told that output nobody read was all delivered.
        stdout_to_devnull()
        return EXIT_BROKEN_PIPE


RUN_COMMANDS = ("run", "resume", "regrade-errors", "regrade")  # the commands that make calls


def entry() -> NoReturn:
    """The `hbtui` command and `python -m hbtui`: ``main``, then the exit.

    A process that drove a run ends without the interpreter's teardown, which frees the run's
    objects one by one (30 ms after the main subset's 738 conversations, a tenth of what was left
    of the run's finish) where the system frees the memory at once. Nothing is lost by it: every
    file the command wrote is closed by then, the database included, and its output is flushed
    here. Other commands exit as usual. Before anything runs, numpy's BLAS is held to one thread
    (hbtui.core.blas_threads).
    """
    hold_blas_to_one_thread()
    code = main()
    runs = sys.modules.get("hbtui.cli.runs")  # imported by the commands that drive runs
    if runs is not None and runs.drove_a_run:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # the reader went away after the last line was printed (see main)
            code = EXIT_BROKEN_PIPE
        os._exit(code)
    raise SystemExit(code)


def command_module(group: str) -> ModuleType:
    """The module of a command group, ``hbtui.cli.<group>``, imported when its command runs rather
    than at every start: `hbtui run` then never imports what only other commands need."""
    return importlib.import_module(f"hbtui.cli.{group}")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (everywhere but Windows, which it does not
    support), else asyncio's own (None): the same calls for 7-8% less CPU each, which at 256 in
    flight is time the calls wait less for the loop (docs/development.md, "Why these libraries")."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == DRIVE_COMMAND:
        # Not a command of the parser, so no list of commands names it: only the app starts it, to
        # drive a run apart from itself (hbtui.engine.detached), given its settings' snapshot.
        args = argparse.Namespace(command=DRIVE_COMMAND, snapshot=argv[1])
    else:
        args = parser.parse_args(argv)
    settings: Settings | None = None
    try:
        command = args.command
        if command == DRIVE_COMMAND:  # its settings are the app's snapshot, not .env's
            return asyncio.run(command_module("runs").cmd_drive_detached(args.snapshot))
        problems: list[str] = []
        warn = problems.append if command in (None, "monitor") else _warn
        settings = settings_from(args, warn=warn)
        if command in (None, "monitor"):
            _warn_if_shared(settings.db_path, warn)
            return command_module("app").run_app(args, settings, problems)
        commands = {
            "run": lambda: command_module("runs").cmd_run(args, settings),
            "resume": lambda: command_module("runs").cmd_resume(args, settings),
            "regrade-errors": lambda: command_module("runs").cmd_resume(args, settings, regrade=True),
            "regrade": lambda: command_module("runs").cmd_regrade(args, settings),
            "meta-eval": lambda: command_module("runs").cmd_meta_eval(args, settings),
            "runs": lambda: command_module("reading").cmd_runs(settings),
            "check": lambda: command_module("check").cmd_check(settings),
            "show": lambda: command_module("reading").cmd_show(args, settings),
            "compare": lambda: command_module("reading").cmd_compare(args, settings),
            "export": lambda: command_module("manage").cmd_export(args, settings),
            "rename": lambda: command_module("manage").cmd_rename(args, settings),
            "delete": lambda: command_module("manage").cmd_delete(args, settings),
            "pause": lambda: command_module("control").cmd_control(args, settings, PAUSED),
            "unpause": lambda: command_module("control").cmd_control(args, settings, None),
            "cancel": lambda: command_module("control").cmd_control(args, settings, CANCELLED),
            "import": lambda: command_module("manage").cmd_import(args, settings),
            "estimate": lambda: command_module("estimate").cmd_estimate(args, settings),
            "batch": lambda: command_module("batch").cmd_batch_import(args, settings),
        }
        # These two run an app after (demo) or instead of (serve) an event loop of their own.
        if command == "serve":
            return command_module("app")._serve(args, settings)
        if command == "demo":
            return command_module("app")._demo(args, settings)
        if command not in commands:
            parser.error(f"unknown command {command}")
        loop_factory = event_loop_factory() if command in RUN_COMMANDS else None
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            code = runner.run(commands[command]())
        # Said once the command has used the database: a file it could not use has one problem,
        # the one line its error gives.
        _warn_if_shared(settings.db_path, warn)
        return code
    except BrokenPipeError:
        raise  # not a problem of ours: see main
    except HbtuiError as exc:  # every error of hbtui's own: one line, and its kind's exit status
        _complain("error", exc)
        return exc.exit_code
    except sqlite3.Error as exc:
        # The settings already read (their warnings said once), else the default the flags name.
        database = settings.db_path if settings is not None else setting_for("db_path").default
        _complain("error", f"database {getattr(args, 'db', None) or database}: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        _complain("error", f"{exc.filename or ''}: {exc.strerror or exc}".replace(": : ", ": ").removeprefix(": "))
        return EXIT_USAGE
    except Exception as exc:
        if os.environ.get("HBTUI_DEBUG"):
            raise
        _complain("internal error", f"{type(exc).__name__}: {exc} (HBTUI_DEBUG=1 shows the traceback)")
        return EXIT_FAILED
    return EXIT_OK
