"""`hbtui run --batch-files DIR` and `hbtui batch import RUN FILE`: a run answered by an engine
of the user's own (vLLM's run-batch, Ray Data) through batch files (hbtui.engine.batch_files)."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Iterable
from pathlib import Path

from hbtui.analysis.run_stats import run_statistics
from hbtui.cli.common import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, UsageError, prices_or_warn, records_of, say
from hbtui.core.batch_files import DEFAULT_LABEL, GENERATE_FILE, GRADE_FILE, BatchFiles, awaiting_hint
from hbtui.core.grading import load_template
from hbtui.core.invocation import invoked_as
from hbtui.core.settings.config import Settings
from hbtui.core.text import one_line
from hbtui.core.verdicts import AWAITING_BATCH, CANCELLED, FINISHED, INCOMPLETE, INTERRUPTED
from hbtui.engine.batch_api import BatchRunner
from hbtui.engine.batch_files import (
    Written,
    after_import,
    run_settings,
    start_batch_files,
    store_output,
    write_request_files,
)
from hbtui.engine.batch_output import Imported, check_output
from hbtui.engine.batch_runs import cancel_batches, make_batch_run
from hbtui.engine.stopping import STOP_SIGNALS, drive_until_stopped
from hbtui.render.report import render_report
from hbtui.services import check_run_name, plan_run
from hbtui.store import RunBusy, RunRow, Store
from hbtui.store.owners import this_owner

CANCEL_PATIENCE_SECONDS = 10.0  # a look at the run's batches holds it for a moment


def next_step(run_id: int, folder: Path, written: Written) -> str:
    files = ", ".join(path.name for path in written.files)
    parts = []
    if written.generate:
        parts.append(f"{written.generate:,} repl{'y' if written.generate == 1 else 'ies'} to generate")
    if written.grade:
        parts.append(f"{written.grade:,} criteri{'on' if written.grade == 1 else 'a'} to grade")
    return (
        f"run {run_id} awaits its batch: {' and '.join(parts)} in {folder} ({files}); run each file through your"
        f' engine (docs/commands.md, "Offline engines"), then: {invoked_as()} batch import {run_id} OUTPUT_FILE'
    )


async def cmd_run_batch_files(args: argparse.Namespace, settings: Settings) -> int:
    """`hbtui run --batch-files DIR`: the run planned and its first request files written; no
    endpoint is needed, none is called."""
    settings.require_models(endpoints=False)
    check_run_name(args.name)
    folder = Path(args.batch_files)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--batch-files {folder}: not a folder")
    taken = [name for name in (GENERATE_FILE, GRADE_FILE) if (folder / name).exists()]
    if taken:
        raise UsageError(
            f"--batch-files {folder}: it holds {taken[0]} already (another run's requests?): give a folder of its own"
        )
    dataset = records_of(args, settings)
    template = load_template(settings.grader_template, settings.cache_dir)
    async with await Store.open(settings.db_path) as store:
        run_id = await plan_run(
            store,
            settings,
            dataset,
            limit=args.limit,
            seed=args.seed,
            repeats=args.repeats,
            name=args.name,
            endpoints=False,
        )
        written = await start_batch_files(store, run_id, settings, template, folder, args.batch_label or DEFAULT_LABEL)
        run = await store.get_run(run_id)
    say(f"run {run_id} {one_line(run.name, 200)}: {run.n_conversations:,} conversations, {run.n_criteria:,} criteria")
    say(next_step(run_id, folder.resolve(), written))
    return EXIT_OK


async def cmd_batch_import(args: argparse.Namespace, settings: Settings) -> int:
    """`hbtui batch import RUN FILE`: the engine's answers stored; then the next request files,
    or the run's end and its report."""
    path = Path(args.file)
    async with await Store.open(settings.db_path, create=False) as store:
        run = await store.resolve_run(args.run)
        batch = BatchFiles.of(run.plan)
        if batch is None:
            raise UsageError(f"run {run.id} was not made with --batch-files: its calls are its own, nothing to import")
        status = run.shown_status()
        if status in (FINISHED, INCOMPLETE):
            raise UsageError(awaiting_hint(run.id, run.plan, status))
        checked = await check_output(store, run, path)  # the whole file, before anything is stored
        if checked.sha256 in batch.imported:
            say(f"{path}: imported already (the same file): nothing changed")
            return EXIT_OK
        recorded = run_settings(run, settings)
        template = load_template(recorded.grader_template, recorded.cache_dir)
        lease = await store.claim_run(run.id, this_owner())  # refused while another process has it
        try:
            done = await store_output(store, run, recorded, template, checked, lease)
            written, again = await after_import(
                store, await store.get_run(run.id), recorded, template, lease, checked.sha256
            )
        except BaseException:
            await store.finish_run(run.id, AWAITING_BATCH, lease=lease)  # given back, as it was
            raise
        say(import_summary(path, done, again))
        if written is not None:
            say(next_step(run.id, batch.folder, written))
            return EXIT_OK
        final = await store.get_run(run.id)
        stats = await run_statistics(store, final, recorded, prices_or_warn())
    say(render_report(final, brief=True, stats=stats))
    if final.folder:
        say(f"results: {final.folder}")
    if final.status == INCOMPLETE:
        say(f"run {final.id} incomplete: {one_line(final.error or '', 400)}", error=True)
        return EXIT_INCOMPLETE
    return EXIT_OK


def plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def import_summary(path: Path, done: Imported, again: int) -> str:
    """What an import stored, and what became of the lines that got no answer that counts."""
    parts = [f"{plural(done.replies, 'reply', 'replies')} and {plural(done.verdicts, 'verdict', 'verdicts')} stored"]
    if again:
        parts.append(f"{plural(again, 'line', 'lines')} that got no answer asked again")
    spent = done.no_answer - again  # no answer, and no attempt left (MAX_ATTEMPTS, GRADER_PARSE_ATTEMPTS)
    if done.failed or spent > 0:
        parts.append(
            f"{plural(done.failed + max(spent, 0), 'failure', 'failures')} kept (no attempt left, or a refusal)"
        )
    if done.already:
        parts.append(f"{plural(done.already, 'line was', 'lines were')} answered by an earlier import")
    return f"{path}: " + "; ".join(parts)


async def resume_batch_files(store: Store, run: RunRow, settings: Settings, regrade: bool) -> int:
    """`resume` and `regrade-errors` of a batch-files run: its answers come from the user's engine.
    `regrade-errors` of one that ended puts what failed back into new request files."""
    status = run.shown_status()
    ended = status if status in (FINISHED, INCOMPLETE) else None
    if not regrade or status == AWAITING_BATCH:
        raise UsageError(awaiting_hint(run.id, run.plan, ended))
    verdicts, replies = await store.reset_errors(run.id, owner=this_owner())
    if not verdicts and not replies:
        say(f"run {run.id}: nothing failed, nothing to ask again")
        return EXIT_OK
    recorded = run_settings(run, settings)
    template = load_template(recorded.grader_template, recorded.cache_dir)
    written = await write_request_files(store, await store.get_run(run.id), recorded, template)
    await store.finish_run(run.id, AWAITING_BATCH)
    batch = BatchFiles.of(run.plan)
    assert batch is not None
    say(
        f"run {run.id}: {plural(verdicts, 'criterion', 'criteria')} and {plural(replies, 'reply', 'replies')}"
        " that failed asked again"
    )
    say(next_step(run.id, batch.folder, written))
    return EXIT_OK


async def drive_batches(
    store: Store,
    run: RunRow,
    settings: Settings,
    *,
    use_cache: bool,
    stop_signals: Iterable[signal.Signals] = STOP_SIGNALS,
) -> tuple[str, str | None]:
    """A run through the batch API looked at until it ends (a run of calls made one, when BATCH is
    asked of it now): its status and what stopped it."""
    if BatchFiles.online_of(run.plan) is None:  # a new run, or one of calls asked with --batch
        await make_batch_run(store, run.id, settings)
        run = await store.get_run(run.id)
        say(
            f"run {run.id} {one_line(run.name, 200)}: {run.n_conversations:,} conversations, {run.n_criteria:,}"
            f" criteria, through the batch API (answered within 24 h; Ctrl-C leaves its batches going,"
            f" {invoked_as()} resume {run.id} picks them up)"
        )
    template = load_template(settings.grader_template, settings.cache_dir)
    runner = BatchRunner(store, run, settings, template, this_owner(), say, use_cache=use_cache)
    status = await drive_until_stopped(runner.execute(), stop_signals, lambda text: say(text, error=True))
    if status == INTERRUPTED:
        status = (await store.get_run(run.id)).status  # awaiting its batches, as it was given back
    return status, runner.error


async def control_batch_run(store: Store, run: RunRow, settings: Settings, control: str | None, verb: str) -> int:
    """`hbtui cancel` of a run through the batch API cancels its batches at the provider itself,
    with this machine's keys (no process need be looking at the run); a batch has no pause."""
    if control != CANCELLED:
        raise UsageError(
            f"run {run.id} is answered through the batch API: its batches cannot be paused"
            f" ({invoked_as()} cancel {run.id} cancels them)"
        )
    if run.status in (FINISHED, INCOMPLETE, CANCELLED):
        raise UsageError(f"run {run.id} is {run.status}: there is nothing to {verb}")
    try:
        cancelled, problems = await cancel_batches(store, run, settings, this_owner(), CANCEL_PATIENCE_SECONDS)
    except RunBusy as exc:
        raise UsageError(f"{exc}; try again in a moment") from None
    for problem in problems:
        say(f"run {run.id}: {problem}", error=True)
    if problems:
        say(f"run {run.id} is not cancelled: try again when the provider answers", error=True)
        return EXIT_FAILED
    kept = (
        f" (what they answered before is kept there: {invoked_as()} resume {run.id} stores it and asks the rest again)"
        if cancelled
        else ""
    )
    say(f"run {run.id} cancelled: {plural(cancelled, 'batch', 'batches')} cancelled at the provider{kept}")
    return EXIT_OK
