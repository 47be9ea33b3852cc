"""The command line's parser: every command, its flags, and the settings' flags."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from hbtui import __version__
from hbtui.cli.common import EXIT_USAGE, SETTING_FLAGS, flag_help
from hbtui.core.dataset import SUBSETS
from hbtui.core.settings.config import REPORTING, setting_for
from hbtui.core.settings.setting_kinds import Bool
from hbtui.core.text import visible_line
from hbtui.meta_eval.metrics import MIN_PHYSICIAN_LABELS
from hbtui.services import GRADER_SETTINGS


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
        # A yes-or-no setting's flag alone says yes: `--batch` is `--batch true`.
        if isinstance(setting.kind, Bool):
            settings_flags.add_argument(flag, dest=setting.attribute, help=flag_help(setting), nargs="?", const="true")
        else:
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

    run_flags = argparse.ArgumentParser(add_help=False)  # `run`'s own, which `estimate` takes too
    source = run_flags.add_mutually_exclusive_group()
    source.add_argument(
        "--subset",
        choices=sorted(SUBSETS),
        help="official HealthBench file (default main; professional: HealthBench Professional, 2026)",
    )
    source.add_argument("--data", help="a local HealthBench JSONL file")
    run_flags.add_argument("--limit", type=int, help="sample this many records (as the reference samples)")
    run_flags.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    run_flags.add_argument("--repeats", type=int, default=1, help="run each conversation this many times")
    run_flags.add_argument("--name", help="a unique name for the run")
    run_flags.add_argument(
        "--preset",
        help="settings from a preset: reference (requests byte-identical to"
        " simple-evals'), or one saved in the app; flags still win",
    )
    run_flags.add_argument(
        "--reuse-verdicts",
        action="store_true",
        help="take verdicts other runs paid for where the grader request is identical",
    )
    run = sub.add_parser("run", parents=[common, settings_flags, run_flags], help="start a run and print its progress")
    run.add_argument(
        "--batch-files",
        metavar="DIR",
        help="write the run's requests into DIR as batch files (OpenAI's batch input format) for an engine of"
        " your own (vLLM run-batch, Ray Data), then exit; import its answers with `hbtui batch import`",
    )
    run.add_argument(
        "--batch-label",
        metavar="LABEL",
        help="what the verdict cache's key names in place of an endpoint for a --batch-files run (default offline)",
    )
    estimate = sub.add_parser(
        "estimate",
        parents=[common, settings_flags, run_flags],
        help="a run's calls, tokens, cost and time before it starts (run's flags; no model is called)",
    )
    estimate.add_argument(
        "--latency", type=float, metavar="SECONDS", help="seconds a call takes, for the time at CONCURRENCY"
    )
    estimate.add_argument("--json", action="store_true", help="the estimate as JSON")

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
    # A regrade's verdicts through the batch API, or by calls (by default as its source was asked).
    grader_flags.add_argument("--batch", dest="batch", nargs="?", const="true", help=flag_help(setting_for("batch")))
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

    batch = sub.add_parser("batch", parents=[common], help="the batch files of a run made with --batch-files")
    batch_commands = batch.add_subparsers(dest="batch_command", metavar="COMMAND", required=True)
    batch_import = batch_commands.add_parser(
        "import",
        parents=[common],
        help="store an engine's output file (OpenAI's batch output format), then write the next request files",
    )
    batch_import.add_argument("run", metavar="RUN", help="id, name or latest")
    batch_import.add_argument("file", metavar="FILE", help="the output file (or an error file) of the engine")

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
