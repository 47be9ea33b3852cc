"""The app's commands: the terminal app (no command, `monitor`), `serve`, and the demo's entry."""

from __future__ import annotations

import argparse
import asyncio

from hbtui.cli.common import EXIT_OK, UsageError, env_file_of, open_for_reading, say
from hbtui.core.settings.config import Settings


async def check_monitored_run(ref: str, settings: Settings) -> None:
    """A missing database or run is one line here, before the app takes the terminal."""
    async with await open_for_reading(settings) as store:
        await store.resolve_run(ref)


def run_app(args: argparse.Namespace, settings: Settings, problems: list[str]) -> int:
    if args.command == "monitor":
        asyncio.run(check_monitored_run(args.run, settings))
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
    from hbtui.cli.demo import cmd_demo

    return cmd_demo(args, settings)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    # textual-serve (and aiohttp's web server) are loaded only by this command.
    from hbtui.web.serve import ServeError, serve

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
