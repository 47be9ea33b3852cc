"""`hbtui estimate`: what `hbtui run` with the same flags would ask for, before it starts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hbtui.analysis.estimate import Estimate, estimate, planned_records
from hbtui.cli.common import EXIT_OK, UsageError, open_for_reading, records_of, say
from hbtui.core.grading import load_template
from hbtui.core.settings.config import Settings
from hbtui.core.settings.prices import load_prices
from hbtui.render.estimate_report import estimate_lines


async def estimate_of(args: argparse.Namespace, settings: Settings) -> tuple[Estimate, str]:
    """The estimate of `run` with ``args``, and a line saying what it is of."""
    settings.require_models(endpoints=False)  # nothing is called: a batch-files run has no endpoint either
    if args.repeats < 1:
        raise UsageError(f"--repeats {args.repeats}: must be at least 1")
    if args.latency is not None and not 0 < args.latency <= 86_400:
        raise UsageError(f"--latency {args.latency:g}: must be a number of seconds above 0, at most a day")
    prices = load_prices()
    dataset = records_of(args, settings)
    template = load_template(settings.grader_template, settings.cache_dir)
    planned = planned_records(dataset, settings, args.limit, args.seed)
    if Path(settings.db_path).exists():  # earlier runs calibrate it; a database is never created for it
        async with await open_for_reading(settings) as store:
            result = await estimate(store, settings, planned, args.repeats, template, prices, args.latency)
    else:
        result = await estimate(None, settings, planned, args.repeats, template, prices, args.latency)
    what = f"of the records' own completions from {dataset.name}" if settings.completions else f"of {dataset.name}"
    head = (
        f"estimate of hbtui run: {len(planned):,} conversations {what} x {args.repeats} repeat"
        f"{'s' * (args.repeats != 1)} = {result.conversations:,}"
    )
    return result, head


async def cmd_estimate(args: argparse.Namespace, settings: Settings) -> int:
    result, head = await estimate_of(args, settings)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        say("\n".join(estimate_lines(result, head)))
    return EXIT_OK
