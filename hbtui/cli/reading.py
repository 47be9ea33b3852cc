"""The commands that read: `runs`, `show` and `compare`; they never write the database."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from hbtui.analysis.review_report import review_lines, review_of_run
from hbtui.analysis.run_stats import reporting_settings, run_statistics
from hbtui.cli.common import EXIT_OK, UsageError, open_for_reading, say
from hbtui.core.batch_files import BatchFiles
from hbtui.core.run_kinds import META_EVAL, refusal
from hbtui.core.scoring import OVERALL, OVERALL_LENGTH_ADJUSTED
from hbtui.core.settings.config import Settings
from hbtui.core.settings.prices import load_prices
from hbtui.core.verdicts import AWAITING_BATCH, FINISHED
from hbtui.render.batch_state import batch_json, batch_lines, batch_summary, look_json, look_line
from hbtui.render.report import driver_lines, render_report, render_runs
from hbtui.store import NoRunsYet


async def cmd_runs(settings: Settings) -> int:
    try:
        store = await open_for_reading(settings)
    except NoRunsYet:
        if not Path(settings.db_path).exists():
            raise
        runs, batches = [], []  # an empty file: it holds no runs, and stays as it is
    else:
        async with store:
            runs = await store.list_runs()
            batches = [  # runs through the batch API: what their open batches are doing
                f"run {run.id}: {summary}"
                for run in runs
                if BatchFiles.online_of(run.plan) is not None
                and (summary := batch_summary(await store.submissions(run.id)))
            ]
    # On a terminal the table fits its width; piped, every column stays whole.
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    say(render_runs(runs, width))
    drivers = driver_lines(runs) + batches
    if drivers:
        say("\n".join(["", *drivers]))
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    """The run's report, with the statistics computed now: the length adjustment the run was made
    with, if it recorded one, else the current settings' (`.env` < environment); flags of `show`
    win over both; and the current price table."""
    from hbtui.meta_eval.headless import show_meta_eval
    from hbtui.services import compute_report

    prices = load_prices()
    async with await open_for_reading(settings) as store:
        run = await store.resolve_run(args.run)
        if run.kind == META_EVAL:
            return await show_meta_eval(store, run, args.json, args.physician_labels_over, say)
        if run.report is None or run.status != FINISHED:
            run.report = await compute_report(store, run.id)  # a partial run: score what is there
        told = any(getattr(args, name, None) is not None for name in ("length_penalty", "length_centre"))
        stats = await run_statistics(store, run, reporting_settings(run, settings, told), prices)
        review = await review_of_run(store, run, args.reviewed)
        submissions = await store.submissions(run.id) if BatchFiles.online_of(run.plan) is not None else None
        if args.json:  # JSON escapes control characters itself, and keeps the text exact
            from hbtui.render.run_metadata import SHOW_JSON_VERSION, run_metadata

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
                            **({"completions": run.planned.completions} if run.planned.completions else {}),
                            **run_metadata(run, progress),
                        },
                        # The metric the run is known by: its length-adjusted score if made with one.
                        "headline_metric": (
                            OVERALL_LENGTH_ADJUSTED
                            if run.recorded_length is not None and stats.length_adjusted is not None
                            else OVERALL
                        ),
                        "requests": run.requests,
                        **(report := run.report.to_json()),
                        "metrics": stats.metrics_json(report["metrics"]),
                        **stats.as_json(),
                        **({"review": review.as_json()} if review else {}),
                        **({"batches": [batch_json(s) for s in submissions]} if submissions is not None else {}),
                        **(
                            {"batch_look": look_json((run.live or {}).get("batch_look"))}
                            if submissions is not None and run.status == AWAITING_BATCH
                            else {}
                        ),
                    },
                    indent=2,
                )
            )
        else:
            batches = batch_lines(submissions) if submissions else None
            if batches is not None and run.status == AWAITING_BATCH:  # whether a process looks at them
                batches.append(look_line(run.id, (run.live or {}).get("batch_look")))
            say(render_report(run, scores=await store.conversation_scores(run.id), stats=stats, batches=batches))
            if review:
                say("\n".join(["", *review_lines(review)]))
    return EXIT_OK


async def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    from hbtui.analysis.compare import compare_runs
    from hbtui.render.compare_report import render_comparison

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
