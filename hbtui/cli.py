"""`hbtui`: the terminal app with no command; headless commands for scripts and SSH sessions.

Every expected problem (a bad setting, a broken dataset line, a database that is not ours) ends
as one line on stderr naming what is wrong, and exit status 2. Tracebacks are for developers:
set HBTUI_DEBUG=1 to see them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from hbtui import __version__
from hbtui.client import ChatError, load_http_in_background
from hbtui.config import REPORTING, SETTINGS, STORAGE, Setting, Settings, SettingsError, load_settings, setting_for
from hbtui.dataset import SUBSETS, DatasetError, load_jsonl, load_subset
from hbtui.errors import TRANSIENT_KINDS
from hbtui.export_reference import write_reference
from hbtui.files import open_to_others, stdout_to_devnull
from hbtui.grading import TemplateError, load_template
from hbtui.meta_eval.metrics import MIN_PHYSICIAN_LABELS
from hbtui.presets import PresetError, preset_settings
from hbtui.prices import PriceError, load_prices
from hbtui.printer import ProgressPrinter
from hbtui.report import driver_lines, render_report, render_runs, stated_score_note
from hbtui.review_report import review_lines, review_of_run
from hbtui.run_kinds import IMPORTED, META_EVAL, not_repeatable, refusal
from hbtui.run_stats import run_statistics
from hbtui.schema import holds_our_header
from hbtui.services import (
    DRIVE_COMMAND,
    GRADER_SETTINGS,
    INCOMPLETE,
    TAKEN_OVER,
    Engine,
    HeadStart,
    check_run_name,
    plan_regrade,
    read_snapshot,
    refuse_measured_changes,
    resume_hint,
    settings_for_run,
    start_run,
)
from hbtui.store import NoRunsYet, RunBusy, RunRow, Store, StoreError
from hbtui.store.owners import this_owner
from hbtui.text import one_line, visible_controls, visible_line

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# 128 + SIGPIPE: see main.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
# Signals that stop a headless run cleanly (interrupted, resumable): Ctrl-C, kill, and the hangup
# of a terminal or SSH session that went away under a run started without nohup or tmux.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# A run the app started, driven in a session of its own: the hangup of the terminal or SSH session
# the app ran in must not stop it (it is ignored), a deliberate kill still does.
DETACHED_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Settings flags, from the settings' one description. API keys have none on purpose (a key on a
# command line ends up in shell history and `ps` output); --db is common to every command.
SETTING_FLAGS = [(setting.flag, setting) for setting in SETTINGS if setting.flag and setting.section is not STORAGE]


def flag_help(setting: Setting) -> str:
    default = f", default {setting.shown_default}" if setting.shown_default else ""
    return f"{setting.help} ({setting.key}{default})"


class UsageError(Exception):
    pass


class OneLineParser(argparse.ArgumentParser):
    """A mistyped command is one line too (argparse prints the whole usage first), what was
    typed shown as text: argparse quotes an unrecognised argument raw."""

    def error(self, message: str) -> NoReturn:
        print(f"hbtui: error: {visible_line(message)} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    def with_common(parser: argparse.ArgumentParser, defaults: bool) -> argparse.ArgumentParser:
        # Given before or after the command; a subcommand's unset copy must not erase the other.
        missing: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
        parser.add_argument(
            "--db",
            help=flag_help(setting_for("db_path")),
            **({"default": None} if defaults else missing),
        )
        parser.add_argument(
            # None: not named, so the default .env, which may be absent; a file named must exist.
            "--env-file",
            help="settings file (default .env)",
            **({"default": None} if defaults else missing),
        )
        return parser

    common = with_common(argparse.ArgumentParser(add_help=False), defaults=False)

    settings_flags = argparse.ArgumentParser(add_help=False)
    reporting_flags = argparse.ArgumentParser(add_help=False)
    for flag, setting in SETTING_FLAGS:
        settings_flags.add_argument(flag, dest=setting.attribute, help=flag_help(setting))
        if setting.section is REPORTING:  # `show` takes them too
            reporting_flags.add_argument(flag, dest=setting.attribute, help=flag_help(setting))

    parser = with_common(
        OneLineParser(
            prog="hbtui",
            description="Run HealthBench against any OpenAI-compatible API and review it in the terminal.",
        ),
        defaults=True,
    )
    parser.add_argument("--version", action="version", version=f"hbtui {__version__}")
    parser.add_argument("--no-mouse", action="store_true", help="do not capture the mouse (the app)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", parents=[common, settings_flags], help="start a run and print its progress")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--subset", choices=sorted(SUBSETS), help="official HealthBench file (default main)")
    source.add_argument("--data", help="a local HealthBench JSONL file")
    run.add_argument("--limit", type=int, help="sample this many records (as the reference samples)")
    run.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    run.add_argument("--repeats", type=int, default=1, help="run each conversation this many times")
    run.add_argument("--name", help="a unique name for the run")
    run.add_argument(
        "--preset",
        help="settings from a preset: reference (requests byte-identical to"
        " simple-evals'), or one saved in the app; flags still win",
    )
    run.add_argument(
        "--reuse-verdicts",
        action="store_true",
        help="take verdicts other runs paid for where the grader request is identical",
    )

    resume = sub.add_parser("resume", parents=[common, settings_flags], help="finish the missing work of a run")
    resume.add_argument("run", metavar="RUN", help="id, name or latest")

    regrade = sub.add_parser(
        "regrade-errors", parents=[common, settings_flags], help="retry the criteria (and replies) that failed"
    )
    regrade.add_argument("run", metavar="RUN")
    for command in (resume, regrade):
        command.add_argument(
            "--no-cache", action="store_true", help="ask the grader even where an identical request's verdict is cached"
        )

    grader_flags = OneLineParser(add_help=False)
    for flag, setting in SETTING_FLAGS:
        if setting.attribute in GRADER_SETTINGS:
            grader_flags.add_argument(flag, dest=setting.attribute, help=flag_help(setting))
    again = sub.add_parser(
        "regrade",
        parents=[common, grader_flags],
        help="grade a run's replies again (another grader, prompt...): a new run, no generation",
    )
    again.add_argument("run", metavar="RUN", help="the run whose replies are graded again")
    again.add_argument("--name", help="a unique name for the new run")
    again.add_argument("--preset", help="the grader's settings of a preset (reference: simple-evals' grader requests)")
    again.add_argument(
        "--no-cache", action="store_true", help="ask the grader even where an identical request's verdict is cached"
    )

    meta = sub.add_parser(
        "meta-eval",
        parents=[common, grader_flags],
        help="judge a grader against physicians' labels (the reference's meta-evaluation): a run of kind meta-eval",
    )
    meta.add_argument("--data", help="a local meta-eval JSONL file (default: the official file, downloaded once)")
    meta.add_argument("--limit", type=int, help="sample this many rows (as the reference samples)")
    meta.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    meta.add_argument("--name", help="a unique name for the run")
    meta.add_argument("--preset", help="the grader's settings of a preset (reference: simple-evals' grader requests)")
    meta.add_argument(
        "--physician-labels-over",
        type=int,
        default=MIN_PHYSICIAN_LABELS,
        metavar="N",
        help=f"the physicians' distribution keeps those with more than N labels (default {MIN_PHYSICIAN_LABELS})",
    )

    sub.add_parser("runs", parents=[common], help="list the runs in the database")

    show = sub.add_parser(
        "show",
        parents=[common, reporting_flags],
        help="a run's score, breakdowns, histogram, worst-at-k, tokens and cost",
    )
    show.add_argument("run", metavar="RUN")
    show.add_argument("--json", action="store_true", help="the full metrics as JSON")
    show.add_argument(
        "--physician-labels-over",
        type=int,
        metavar="N",
        help="a meta-eval: the physicians' distribution keeps those with more than N labels (default: the run's)",
    )
    show.add_argument(
        "--reviewed",
        action="store_true",
        help="the score as reviewed beside the score as graded, each reviewer's, the review's progress and agreement",
    )

    compare = sub.add_parser(
        "compare",
        parents=[common],
        help="two runs on the same conversations: the difference B - A, themes, axes, graders",
    )
    compare.add_argument("run_a", metavar="A", help="id, name or latest")
    compare.add_argument("run_b", metavar="B", help="id, name or latest")
    compare.add_argument("--json", action="store_true", help="the comparison as JSON")

    export = sub.add_parser("export", parents=[common], help="write a run's results to a file")
    export.add_argument("run", metavar="RUN")
    export.add_argument(
        "--format",
        choices=["jsonl", "csv", "reference"],
        default="jsonl",
        help="jsonl (one line per conversation), csv (one row per verdict), reference (simple-evals'"
        " allresults JSON, without its HTML)",
    )
    export.add_argument("--out", required=True, help="file to write")
    export.add_argument("--force", action="store_true", help="replace --out if it exists (refused otherwise)")

    rename = sub.add_parser("rename", parents=[common], help="give a run another name")
    rename.add_argument("run", metavar="RUN")
    rename.add_argument("new_name", metavar="NAME", help="unique; not all digits, nor latest")

    delete = sub.add_parser(
        "delete",
        parents=[common],
        help="delete a run and its rows for good, then reclaim the space (refused while it runs or a regrade uses it)",
    )
    delete.add_argument("run", metavar="RUN")
    delete.add_argument("--folder", action="store_true", help="remove its run folder too (files hbtui wrote there)")
    delete.add_argument("--yes", action="store_true", help="required: the run cannot be brought back")

    imports = sub.add_parser(
        "import",
        parents=[common],
        help="another harness's results (or hbtui's, from another machine) as a run of kind imported",
    )
    imports.add_argument(
        "path",
        metavar="PATH",
        help="a run folder (the single-script harness's or hbtui's), a simple-evals *_allresults.json,"
        " or an `hbtui export` JSONL file",
    )
    imports.add_argument(
        "--dataset",
        help="the HealthBench JSONL file the results were made on: criterion texts and tags (required for"
        " the single-script harness's folders), themes, and pairing with runs of that file in compare",
    )
    imports.add_argument("--name", help="a unique name for the imported run")

    demo = sub.add_parser(
        "demo",
        parents=[common],
        help="a whole run with a tiny local model (installed once): no endpoint of your own needed",
    )
    demo.add_argument("--limit", type=int, help="records of the main subset (default 5)")
    demo.add_argument("--data", help="a local HealthBench JSONL file, when the official one cannot be downloaded")
    demo.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    demo.add_argument("--headless", action="store_true", help="print the score and the run's folder; no app")

    serve = sub.add_parser(
        "serve", parents=[common], help="serve the app to a browser (each tab its own app, same database)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback)")
    serve.add_argument(
        "--port", type=port_number, default=8000, help="port to listen on (default 8000; 0 picks a free one)"
    )
    serve.add_argument(
        "--expose", action="store_true", help="allow a --host other machines can reach (prints a warning)"
    )

    for name, text in (
        ("pause", "pause a running run, from any process: its calls in flight finish, no new one starts"),
        ("unpause", "let a paused run go on"),
        ("cancel", "end a running run as cancelled once its calls in flight are answered"),
    ):
        control = sub.add_parser(name, parents=[common], help=text)
        control.add_argument("run", metavar="RUN")

    sub.add_parser(
        "check",
        parents=[common, settings_flags],
        help="ask each endpoint, before a run, whether it answers, takes its key and serves the models",
    )

    monitor = sub.add_parser("monitor", parents=[common], help="watch a run live in the app")
    monitor.add_argument("run", metavar="RUN", nargs="?", default="latest")
    monitor.add_argument("--no-mouse", action="store_true")
    return parser


def port_number(text: str) -> int:
    """A TCP port for argparse: a number that is not one is a usage error, not a traceback."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535)")
    return port


def invoked_as() -> str:
    """hbtui as the user invoked it, for the commands printed as next steps: ``hbtui`` when that
    name runs this very script (or it ran as ``python -m hbtui``), else the path they typed
    (``.venv/bin/hbtui`` in a venv not activated)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) != "hbtui":
        return "hbtui"  # python -m hbtui: which python is not known here; the name is what docs use
    found = shutil.which("hbtui")
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return "hbtui"
    return argv0


def say(text: str = "", *, error: bool = False) -> None:
    """Print what a command reports. Names of runs, themes, axes, models and files come from
    datasets, models and users: their control characters are shown, never obeyed (an OSC 52
    sequence in a theme name would write the user's clipboard)."""
    print(visible_controls(text), file=sys.stderr if error else sys.stdout)


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
        settings = replace(settings, **preset_settings(args.preset))
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


async def drive(
    store: Store,
    run: RunRow,
    settings: Settings,
    quiet: bool = False,
    prices: dict | None = None,
    use_cache: bool = False,
    stop_signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
    head_start: HeadStart | None = None,
) -> int:
    """Run the engine with a plain-text display; Ctrl-C (or SIGTERM) stops cleanly, resumable.

    ``prices``: the price table, read by the caller before any call so that a broken one stops
    the command first; read here (a broken one then only warned of) when not given."""
    global _drove_a_run
    _drove_a_run = True
    printer = ProgressPrinter(given_replies=bool(settings.completions))
    engine = Engine(store, run, settings, [printer] if not quiet else [], use_cache=use_cache, head_start=head_start)
    # What is loaded by now (modules, settings, the store) lives until the exit: out of the cyclic
    # collector's full passes, which otherwise rescan it and stall the event loop mid-run
    # (measured at 256 in flight: 93-97% of the ideal before, 97-98% after). Frozen without a
    # collection first: at this point one found 5 objects to free in 10 ms, spent while the first
    # calls waited to go out.
    gc.freeze()
    loop = asyncio.get_running_loop()
    runner = asyncio.ensure_future(engine.execute())
    stops = 0

    def stop() -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            try:
                say("\nstopping: saving what completed (Ctrl-C again to quit at once)", error=True)
            except OSError:
                pass  # the terminal is gone (SIGHUP): stop all the same
            runner.cancel()  # the engine catches it, flushes its writes and marks the run interrupted
        else:
            os._exit(EXIT_INTERRUPTED)

    for signum in stop_signals:
        loop.add_signal_handler(signum, stop)
    try:
        status = await runner
    finally:
        for signum in stop_signals:
            loop.remove_signal_handler(signum)
    if status == TAKEN_OVER:
        _complain("error", one_line(engine.error or "", 400))
        return EXIT_FAILED
    final = await store.get_run(run.id)
    if status in ("finished", INCOMPLETE):
        stats = await run_statistics(store, final, settings, prices_or_warn() if prices is None else prices)
        say(render_report(final, brief=True, stats=stats))
        say(f"results: {final.folder}")
        cached = final.report.criteria.from_cache if final.report else None
        if cached:
            say(f"{cached} verdicts came from the cache: requests identical to ones already paid for, not asked again")
        if status == INCOMPLETE:
            say(f"run {final.id} incomplete: {one_line(final.error or '', 400)}", error=True)
            return EXIT_INCOMPLETE
        return EXIT_OK
    if status == "failed":
        say(
            f"run {final.id} {one_line(final.name)} failed: {one_line(engine.error or final.error or '', 400)}",
            error=True,
        )
        say(resume_hint(final.id, engine.error or final.error, invoked_as()), error=True)
        return EXIT_FAILED
    say(f"run {final.id} {one_line(final.name)} {status}; continue with: hbtui resume {final.id}", error=True)
    return EXIT_INTERRUPTED


def _download_progress(done: int, total: int | None) -> None:
    if total:
        print(f"\rdownloading: {done / total:6.1%} of {total / 1e6:.1f} MB", end="", file=sys.stderr, flush=True)
        if done >= total:
            print(file=sys.stderr)


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    settings.require_models()
    check_run_name(args.name)  # before the database is opened: a refused run leaves no file behind
    prices = load_prices()  # a broken price table stops the run before any call
    load_http_in_background()  # while the dataset is read and the plan written
    if args.data:
        dataset = load_jsonl(args.data)
    else:
        dataset = load_subset(args.subset or "main", settings.cache_dir, _download_progress)
    load_template(settings.grader_template, settings.cache_dir)  # a missing or broken template: before any call
    async with await Store.open(settings.db_path) as store:
        # The first calls go out while the plan is stored (see start_run).
        run, head = await start_run(
            store,
            settings,
            dataset,
            this_owner(),
            limit=args.limit,
            seed=args.seed,
            repeats=args.repeats,
            name=args.name,
        )
        del dataset  # in the database (or on its way): the run reads its records from there, a page at a time
        return await drive(store, run, settings, prices=prices, use_cache=args.reuse_verdicts, head_start=head)


async def cmd_meta_eval(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.meta_eval.headless import start_meta_eval

    check_run_name(args.name)  # before the database is opened: a refused run leaves no file behind
    if args.preset:  # the grader's side of it, and flags still win
        grader_side = {k: v for k, v in preset_settings(args.preset).items() if k in GRADER_SETTINGS}
        settings = replace(settings, **grader_side).with_overrides(**_overrides(args))
    if args.physician_labels_over < 0:
        raise UsageError(f"--physician-labels-over {args.physician_labels_over}: must be 0 or more")
    return await start_meta_eval(
        settings,
        data=args.data,
        limit=args.limit,
        seed=args.seed,
        name=args.name,
        labels_over=args.physician_labels_over,
        say=say,
        download_progress=_download_progress,
    )


async def cmd_resume(args: argparse.Namespace, settings: Settings, regrade: bool = False) -> int:
    prices = load_prices()
    load_http_in_background()
    async with await Store.open(settings.db_path, create=False) as store:
        run = await store.resolve_run(args.run)
        if run.kind == META_EVAL:
            from hbtui.meta_eval.headless import drive_meta_eval, refuse_grader_changes

            if regrade:
                asked = await store.reset_meta_eval_failures(run.id, None)
                say(f"run {run.id}: retrying {asked} rows that got no verdict")
            meta_settings = settings_for_run(run, settings, **_overrides(args))
            await refuse_grader_changes(store, run, meta_settings)
            return await drive_meta_eval(store, run, meta_settings, say)
        refusal = not_repeatable(run.id, run.kind)
        if refusal:
            raise UsageError(refusal)
        run_settings = settings_for_run(run, settings, **_overrides(args))  # before anything changes
        run_settings.require_models()
        await refuse_measured_changes(store, run, run_settings)
        if not regrade and run.shown_status() == "finished":
            # As the app's `c`: a finished run is left as it is (its end time and duration are
            # what it measured), unless calls that got no answer are left to ask again.
            kinds = (await store.progress(run.id)).errors_by_kind
            if not any(kind.removeprefix("reply ") in TRANSIENT_KINDS for kind in kinds):
                hint = f" (hbtui regrade-errors {run.id} retries its errors)" if kinds else ""
                say(f"run {run.id} is finished: nothing to resume{hint}")
                return EXIT_OK
        if regrade:
            verdicts, replies = await store.reset_errors(run.id)
            say(f"run {run.id}: retrying {verdicts} criteria and {replies} replies that failed")
        return await drive(store, run, run_settings, prices=prices, use_cache=not args.no_cache)


async def cmd_regrade(args: argparse.Namespace, settings: Settings) -> int:
    load_http_in_background()
    async with await Store.open(settings.db_path, create=False) as store:
        source = await store.resolve_run(args.run)
        flags = {k: v for k, v in _overrides(args).items() if k in GRADER_SETTINGS}
        # The source's settings with this session's keys; a key never goes to another host.
        regrade_settings = settings_for_run(source, settings, **flags)
        if args.preset:  # the grader's side of it (the replies are the source's), and flags still win
            grader_side = {k: v for k, v in preset_settings(args.preset).items() if k in GRADER_SETTINGS}
            regrade_settings = replace(regrade_settings, **grader_side).with_overrides(**flags)
        load_template(regrade_settings.grader_template, regrade_settings.cache_dir)  # before anything is written
        if source.kind == META_EVAL:
            from hbtui.meta_eval.headless import regrade_meta_eval

            return await regrade_meta_eval(store, source, regrade_settings, args.name, say)
        prices = load_prices()
        run_id = await plan_regrade(store, source, regrade_settings, args.name)
        run = await store.get_run(run_id)
        stored = " (imported: the replies its file holds)" if source.kind == IMPORTED else ""
        say(
            f"run {run_id} {one_line(run.name)}: the replies of run {source.id}{stored} graded again by"
            f" {one_line(run.model_grader)} ({'no cache' if args.no_cache else 'verdicts already paid for come from the cache'})"
        )
        return await drive(store, run, regrade_settings, prices=prices, use_cache=not args.no_cache)


async def cmd_drive_detached(snapshot: str) -> int:
    """Drive a run the app started, with the settings it had then, its output going to the log."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    run_id, settings, use_cache = read_snapshot(snapshot)
    say(
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} run {run_id}: driven by process {os.getpid()} on"
        f" {socket.gethostname()}, apart from the app that started it"
    )
    async with await Store.open(settings.db_path, create=False) as store:
        run = await store.get_run(run_id)
        if run.kind == META_EVAL:
            from hbtui.meta_eval.headless import drive_meta_eval

            return await drive_meta_eval(store, run, settings, say, stop_signals=DETACHED_STOP_SIGNALS)
        return await drive(store, run, settings, use_cache=use_cache, stop_signals=DETACHED_STOP_SIGNALS)


PAUSED, CANCELLED = "paused", "cancelled"  # as runs.control holds them (hbtui.engine.driver)
CONTROL_PATIENCE_SECONDS = 5.0  # how long `hbtui pause` waits to see the driver apply it


async def cmd_control(args: argparse.Namespace, settings: Settings, control: str | None) -> int:
    """Ask the process driving a run, on this host or another, to pause, go on or stop. The
    request goes through the database; the driver reads it at least once a second and shows
    what it applied in its heartbeat, which this waits a few seconds to see."""
    verb = args.command
    async with await Store.open(settings.db_path, create=False) as store:
        run = await store.resolve_run(args.run)
        shown = run.shown_status()
        if run.status != "running":
            raise UsageError(f"run {run.id} is {shown}: there is nothing to {verb}")
        if shown == "interrupted":
            raise UsageError(
                f"run {run.id}'s driver ({run.owner_shown or 'unknown'}) is gone, or silent past its heartbeat:"
                f" nothing runs to {verb} (hbtui resume {run.id} continues the run)"
            )
        if not await store.request_control(run.id, control):
            raise UsageError(f"run {run.id} ended meanwhile, or is being cancelled: nothing to {verb}")
        say(f"run {run.id}: {verb} asked of its driver ({run.owner_shown})")
        deadline = time.monotonic() + CONTROL_PATIENCE_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            now = await store.get_run(run.id)
            if control == CANCELLED and now.status != "running":
                say(f"run {run.id} is {now.status}")
                return EXIT_OK
            if control != CANCELLED and bool((now.live or {}).get("paused")) == (control == PAUSED):
                say(
                    f"run {run.id} is {'paused: its calls in flight finish, no new one starts' if control else 'going on'}"
                )
                return EXIT_OK
        if control == CANCELLED:
            say(f"run {run.id} stops once its calls in flight are answered (they are paid for, and kept)")
        else:
            say(
                f"its driver has not shown it yet (its heartbeat comes every few seconds); `hbtui runs` shows"
                f" run {run.id} as {'paused' if control else 'running'} once it has"
            )
        return EXIT_OK


def open_for_reading(settings: Settings):
    """Read commands never create a file or write a schema, and read a read-only folder too."""
    return Store.open(settings.db_path, create=False, read_only=True)


async def cmd_check(settings: Settings) -> int:
    """The configuration screen's connection check, one line per check (each endpoint named when
    there are several); exit 0 when every check passed."""
    from hbtui.checks import check_connection

    settings.test_endpoints, settings.grader_endpoints  # noqa: B018 - keys that match no endpoint: one line, exit 2
    results = await check_connection(settings)
    for result in results:
        say(f"{'ok  ' if result.ok else 'FAIL'} {result.name}: {result.message}")
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


async def cmd_runs(settings: Settings) -> int:
    try:
        store = await open_for_reading(settings)
    except NoRunsYet:
        if not Path(settings.db_path).exists():
            raise
        runs = []  # an empty file: it holds no runs, and stays as it is
    else:
        async with store:
            runs = await store.list_runs()
    # On a terminal the table fits its width; piped, every column stays whole.
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    say(render_runs(runs, width))
    drivers = driver_lines(runs)
    if drivers:
        say("\n".join(["", *drivers]))
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    """The run's report, with the statistics computed now: the length adjustment of the current
    settings (`.env` < environment < flags of `show`) and the current price table."""
    from hbtui.meta_eval.headless import show_meta_eval
    from hbtui.services import compute_report

    prices = load_prices()
    async with await open_for_reading(settings) as store:
        run = await store.resolve_run(args.run)
        if run.kind == META_EVAL:
            return await show_meta_eval(store, run, args.json, args.physician_labels_over, say)
        if run.report is None or run.status != "finished":
            run.report = await compute_report(store, run.id)  # a partial run: score what is there
        stats = await run_statistics(store, run, settings, prices)
        review = await review_of_run(store, run, args.reviewed)
        if args.json:  # JSON escapes control characters itself, and keeps the text exact
            from hbtui.run_metadata import SHOW_JSON_VERSION, run_metadata

            progress = await store.progress(run.id)
            print(
                json.dumps(
                    {
                        "schema_version": SHOW_JSON_VERSION,
                        "run": {
                            "id": run.id,
                            "name": run.name,
                            "status": run.shown_status(),
                            "error": run.error,
                            "kind": run.kind,
                            **({"imported": run.imported} if run.imported else {}),
                            **({"completions": run.plan["completions"]} if run.plan.get("completions") else {}),
                            **run_metadata(run, progress),
                        },
                        "requests": run.requests,
                        **run.report.to_json(),
                        **stats.as_json(),
                        **({"review": review.as_json()} if review else {}),
                    },
                    indent=2,
                )
            )
        else:
            say(render_report(run, scores=await store.conversation_scores(run.id), stats=stats))
            if review:
                say("\n".join(["", *review_lines(review)]))
    return EXIT_OK


async def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.compare import compare_runs
    from hbtui.compare_report import render_comparison

    async with await open_for_reading(settings) as store:
        run_a, run_b = await store.resolve_run(args.run_a), await store.resolve_run(args.run_b)
        for run, other in ((run_a, run_b), (run_b, run_a)):
            refused = refusal(run.id, run.kind, "compare", other.kind)
            if refused:
                raise UsageError(refused)
        if run_a.kind == META_EVAL:
            from hbtui.meta_eval.compare import compare_meta_evals, render_meta_comparison

            meta = await compare_meta_evals(store, run_a, run_b)
            print(json.dumps({"meta_eval_comparison": meta}, indent=2)) if args.json else say(
                render_meta_comparison(meta)
            )
            return EXIT_OK
        result = await compare_runs(store, run_a, run_b)
    if args.json:  # JSON escapes control characters itself, and keeps the text exact
        print(json.dumps(result.as_json(), indent=2))
    else:
        say(render_comparison(result))
    return EXIT_OK


async def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.imports import import_run, read_import

    read = read_import(Path(args.path))  # read and checked whole before the database is opened
    dataset = load_jsonl(args.dataset) if args.dataset else None
    async with await Store.open(settings.db_path) as store:
        done = await import_run(store, read, dataset, settings, args.name)
    say(
        f"run {done.run_id}: imported {done.conversations} conversations ({done.format}) from"
        f" {visible_line(args.path)}; score {'-' if done.score is None else f'{done.score:.4f}'} by hbtui's scoring"
        + stated_score_note(done.score, done.stated_score)
    )
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.services import compute_report

    async with await open_for_reading(settings) as store:
        run = await store.resolve_run(args.run)
        refused = refusal(run.id, run.kind, "export")
        if refused:
            raise UsageError(refused)
        out = Path(args.out)
        if not out.parent.is_dir():
            raise UsageError(f"--out {out}: the folder {out.parent} does not exist")
        if out.is_file() and not args.force:
            # An earlier export (of another run, perhaps) is work too: never replaced unasked.
            raise UsageError(f"--out {out}: the file exists; add --force to replace it")
        if args.format == "reference":
            if run.report is None or run.status != "finished":
                run.report = await compute_report(store, run.id)  # a partial run: score what is there
            count = await write_reference(store, run, out)
            say(f"wrote {count} conversations of run {run.id} to {out}")
        else:
            from hbtui.services import export_run

            say(await export_run(store, run, out, args.format))
    return EXIT_OK


async def cmd_rename(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.services import rename_run

    async with await Store.open(settings.db_path, create=False) as store:
        say(await rename_run(store, await store.resolve_run(args.run), args.new_name))
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.services import delete_run

    async with await Store.open(settings.db_path, create=False) as store:
        run = await store.resolve_run(args.run)
        if not args.yes:
            raise UsageError(
                f"delete removes run {run.id} ({one_line(run.name, 60)}) and its {run.n_conversations} conversations"
                " for good: add --yes"
            )
        removal = await delete_run(store, run, remove_folder=args.folder)
    say(removal.message())
    return EXIT_OK


async def check_monitored_run(ref: str, settings: Settings) -> None:
    """A missing database or run is one line here, before the app takes the terminal."""
    async with await open_for_reading(settings) as store:
        await store.resolve_run(ref)


def run_app(args: argparse.Namespace, settings: Settings, problems: list[str]) -> int:
    if args.command == "monitor":
        asyncio.run(check_monitored_run(args.run, settings))
    load_http_in_background()  # for the connection check and the runs: loaded while the app starts
    # Textual is imported only here: headless commands never load it.
    from hbtui.tui.app import HBTuiApp

    app = HBTuiApp(
        settings=settings,
        env_file=env_file_of(args),
        monitor_run=getattr(args, "run", None) if args.command == "monitor" else None,
    )
    app.startup_problems = problems
    app.run(mouse=not args.no_mouse)
    if app.farewell:  # what to type next about the runs it leaves going, or stopped
        say(app.farewell)
    return app.return_code or EXIT_OK


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.demo import cmd_demo

    return cmd_demo(args, settings)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    # textual-serve (and aiohttp's web server) are loaded only by this command.
    from hbtui.serve import ServeError, serve

    try:
        return serve(
            host=args.host,
            port=args.port,
            expose=args.expose,
            db_path=settings.db_path,
            env_file=env_file_of(args),
            max_tabs=settings.serve_max_tabs,
            say=say,
        )
    except ServeError as exc:
        raise UsageError(str(exc)) from None


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
_drove_a_run = False  # set by drive(): see entry


def entry() -> NoReturn:
    """The `hbtui` command and `python -m hbtui`: ``main``, then the exit.

    A process that drove a run ends without the interpreter's teardown, which frees the run's
    objects one by one (30 ms after the main subset's 738 conversations, a tenth of what was left
    of the run's finish) where the system frees the memory at once. Nothing is lost by it: every
    file the command wrote is closed by then, the database included, and its output is flushed
    here. Other commands exit as usual.
    """
    code = main()
    if _drove_a_run:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # the reader went away after the last line was printed (see main)
            code = EXIT_BROKEN_PIPE
        os._exit(code)
    raise SystemExit(code)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (everywhere but Windows, which it does not
    support), else asyncio's own (None): the same calls for 7-8% less CPU each, which at 256 in
    flight is time the calls wait less for the loop (README, "Why these libraries")."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def caught(*kinds: type[BaseException] | str) -> tuple[type[BaseException], ...]:
    """The error classes an ``except`` takes: classes as given, and ``"module:Class"`` for the
    errors of a module that only some commands load (compare, import, the local model and its
    httpx), left unloaded to keep `hbtui run`'s start-up short. Until it is loaded, none of its
    errors can have been raised."""
    found: list[type[BaseException]] = []
    for kind in kinds:
        if not isinstance(kind, str):
            found.append(kind)
        elif (loaded := sys.modules.get(kind.partition(":")[0])) is not None:
            found.append(getattr(loaded, kind.partition(":")[2]))
    return tuple(found)


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
            return asyncio.run(cmd_drive_detached(args.snapshot))
        problems: list[str] = []
        warn = problems.append if command in (None, "monitor") else _warn
        settings = settings_from(args, warn=warn)
        if command in (None, "monitor"):
            _warn_if_shared(settings.db_path, warn)
            return run_app(args, settings, problems)
        commands = {
            "run": lambda: cmd_run(args, settings),
            "resume": lambda: cmd_resume(args, settings),
            "regrade-errors": lambda: cmd_resume(args, settings, regrade=True),
            "regrade": lambda: cmd_regrade(args, settings),
            "meta-eval": lambda: cmd_meta_eval(args, settings),
            "runs": lambda: cmd_runs(settings),
            "check": lambda: cmd_check(settings),
            "show": lambda: cmd_show(args, settings),
            "compare": lambda: cmd_compare(args, settings),
            "export": lambda: cmd_export(args, settings),
            "rename": lambda: cmd_rename(args, settings),
            "delete": lambda: cmd_delete(args, settings),
            "pause": lambda: cmd_control(args, settings, PAUSED),
            "unpause": lambda: cmd_control(args, settings, None),
            "cancel": lambda: cmd_control(args, settings, CANCELLED),
            "import": lambda: cmd_import(args, settings),
        }
        # These two run an app after (demo) or instead of (serve) an event loop of their own.
        if command == "serve":
            return _serve(args, settings)
        if command == "demo":
            return _demo(args, settings)
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
    except caught(
        SettingsError,
        DatasetError,
        StoreError,
        TemplateError,
        RunBusy,
        UsageError,
        PresetError,
        PriceError,
        "hbtui.compare:NothingToCompare",
        "hbtui.imports.common:ImportProblem",
        "hbtui.meta_eval.compare:NoRowsInCommon",
    ) as exc:
        _complain("error", exc)
        return EXIT_USAGE
    except caught(ChatError, "hbtui.llama_server:LlamaServerError") as exc:
        _complain("error", exc)
        return EXIT_FAILED
    # The platform, the build tools, the network: the user's to fix.
    except caught("hbtui.local_model:LocalModelError") as exc:
        _complain("error", exc)
        return EXIT_USAGE
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
