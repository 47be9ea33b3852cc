"""The commands that make calls: `run`, `resume`, `regrade-errors`, `regrade`, `meta-eval`, and the
detached driver of a run the app started; `drive` shows a run's progress as plain text.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import socket
import time
from dataclasses import replace

from hbtui.analysis.run_stats import run_statistics
from hbtui.cli.common import (
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    _complain,
    _download_progress,
    _overrides,
    invoked_as,
    prices_or_warn,
    records_of,
    say,
)
from hbtui.core.batch_files import BatchFiles
from hbtui.core.errors import TRANSIENT_KINDS
from hbtui.core.grading import load_template
from hbtui.core.run_kinds import IMPORTED, META_EVAL, not_repeatable
from hbtui.core.settings.config import Settings
from hbtui.core.settings.presets import preset_settings
from hbtui.core.settings.prices import load_prices
from hbtui.core.text import one_line
from hbtui.core.verdicts import AWAITING_BATCH, FAILED, FINISHED
from hbtui.engine.stopping import DETACHED_STOP_SIGNALS, STOP_SIGNALS, drive_until_stopped
from hbtui.render.printer import ProgressPrinter
from hbtui.render.report import render_report
from hbtui.services import (
    GRADER_SETTINGS,
    INCOMPLETE,
    TAKEN_OVER,
    Engine,
    HeadStart,
    check_run_name,
    plan_regrade,
    plan_run,
    read_snapshot,
    refuse_measured_changes,
    resume_hint,
    settings_for_run,
    start_run,
)
from hbtui.store import RunRow, Store
from hbtui.store.owners import this_owner

RUN_GC_THRESHOLD = 100_000  # allocations between young collections while a run's calls go (default 700)


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
    global drove_a_run
    drove_a_run = True
    if BatchFiles.online_of(run.plan) is not None and not settings.batch:  # `resume --batch false`
        from hbtui.engine.batch_runs import leave_batch_api

        run = await leave_batch_api(store, run, settings)
    batch = BatchFiles.online_of(run.plan) is not None or settings.batch
    if batch:  # through the endpoint's batch API: its batches are looked at until they end
        gc.enable()  # its process may look for hours: the collector as usual
        from hbtui.cli.batch import drive_batches

        status, error = await drive_batches(store, run, settings, use_cache=use_cache, stop_signals=stop_signals)
    else:
        printer = ProgressPrinter(given_replies=bool(settings.completions))
        engine = Engine(
            store, run, settings, [printer] if not quiet else [], use_cache=use_cache, head_start=head_start
        )
        # What is loaded by now (modules, settings, the store) lives until the exit: out of the cyclic
        # collector's full passes, which otherwise rescan it and stall the event loop mid-run
        # (measured at 256 in flight: 93-97% of the ideal before, 97-98% after). Frozen without a
        # collection first: at this point one found 5 objects to free in 10 ms, spent while the first
        # calls waited to go out.
        gc.freeze()
        # Young collections a hundred times rarer, and no full one: the calls make few cycles (about
        # 1,400 objects of garbage in the main subset's run), and at the default thresholds the
        # collector took 180-250 ms of the main thread's CPU, its full passes stalling the calls
        # 20-35 ms at a time. Cycles of the young are still collected.
        thresholds = gc.get_threshold()
        gc.set_threshold(RUN_GC_THRESHOLD, 20, 1_000)
        gc.enable()
        try:
            # The engine catches the stop's cancellation: its status says how the run ended.
            status = await drive_until_stopped(engine.execute(), stop_signals, lambda text: say(text, error=True))
        finally:
            gc.set_threshold(*thresholds)
        error = engine.error
    if status == TAKEN_OVER:
        _complain("error", one_line(error or "", 400))
        return EXIT_FAILED
    final = await store.get_run(run.id)
    if status in (FINISHED, INCOMPLETE):
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
    if status == FAILED:
        say(f"run {final.id} {one_line(final.name)} failed: {one_line(error or final.error or '', 400)}", error=True)
        if not (batch and f"resume {final.id}" in (error or "")):  # a batch API's stop says what to do itself
            say(resume_hint(final.id, error or final.error, invoked_as()), error=True)
        return EXIT_FAILED
    if batch and final.status == AWAITING_BATCH:
        say(
            f"run {final.id} {one_line(final.name)} awaits its batches, which go on at the provider: {invoked_as()}"
            f" resume {final.id} picks them up ({invoked_as()} cancel {final.id} cancels them)",
            error=True,
        )
        return EXIT_INTERRUPTED
    say(f"run {final.id} {one_line(final.name)} {status}; continue with: {invoked_as()} resume {final.id}", error=True)
    return EXIT_INTERRUPTED


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if args.batch_files is not None:  # an engine of the user's own answers it: no endpoint, no call
        from hbtui.cli.batch import cmd_run_batch_files

        return await cmd_run_batch_files(args, settings)
    if args.batch_label is not None:
        raise UsageError("--batch-label names the answers of --batch-files: give both, or neither")
    settings.require_models()
    check_run_name(args.name)  # before the database is opened: a refused run leaves no file behind
    prices = load_prices()  # a broken price table stops the run before any call
    # No cyclic collection while the dataset is read and the plan made: what they allocate lives
    # until the exit, and the full collections it set off (20-25 ms each, none finding anything)
    # came before the first call. drive() turns the collector on again, frozen past all of it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        dataset = records_of(args, settings)
        load_template(settings.grader_template, settings.cache_dir)  # a missing or broken template: before any call
        # A model name mistyped: the check's own line, before the run is planned (no run, no file).
        from hbtui.client.checks import ModelNotServed, models_not_served  # which a run needs not otherwise

        missing = await models_not_served(settings)
        if missing:
            raise ModelNotServed(f"{'; '.join(missing)} (`{invoked_as()} check` asks every endpoint)")
        async with await Store.open(settings.db_path) as store:
            if settings.batch:  # through the batch API: planned whole, then submitted (hbtui.cli.batch)
                run_id = await plan_run(
                    store, settings, dataset, limit=args.limit, seed=args.seed, repeats=args.repeats, name=args.name
                )
                del dataset
                run = await store.get_run(run_id)
                return await drive(store, run, settings, prices=prices, use_cache=args.reuse_verdicts)
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
    finally:
        if collecting:  # as it was, in a process that goes on (tests call main())
            gc.enable()


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
        if BatchFiles.of(run.plan) is not None:  # answered by the user's engine, never by calls
            from hbtui.cli.batch import resume_batch_files

            return await resume_batch_files(store, run, settings, regrade)
        run_settings = settings_for_run(run, settings, **_overrides(args))  # before anything changes
        run_settings.require_models()
        await refuse_measured_changes(store, run, run_settings)
        if not regrade and run.shown_status() == FINISHED:
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
    async with await Store.open(settings.db_path, create=False) as store:
        source = await store.resolve_run(args.run)
        flags = {k: v for k, v in _overrides(args).items() if k in GRADER_SETTINGS or k == "batch"}
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


drove_a_run = False  # set by drive(): see entry
