"""The commands that manage runs: `import`, `export`, `rename` and `delete`."""

from __future__ import annotations

import argparse
from pathlib import Path

from hbtui.cli.common import EXIT_OK, UsageError, open_for_reading, say
from hbtui.core.dataset import load_jsonl
from hbtui.core.run_kinds import refusal
from hbtui.core.settings.config import Settings
from hbtui.core.text import one_line, visible_line
from hbtui.core.verdicts import FINISHED
from hbtui.render.export_reference import write_reference
from hbtui.render.report import stated_score_note
from hbtui.store import Store


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
            if run.report is None or run.status != FINISHED:
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
