"""`hbtui meta-eval` and the resume of a meta-eval run, with progress lines for a terminal or a
log; Ctrl-C (or SIGTERM, SIGHUP) stops cleanly and the run resumes where it stopped."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hbtui.core.grading import load_template
from hbtui.core.invocation import invoked_as
from hbtui.core.run_kinds import MEANINGS, META_EVAL
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.core.text import one_line
from hbtui.engine.stopping import STOP_SIGNALS, drive_until_stopped
from hbtui.meta_eval import data as meta_data
from hbtui.meta_eval.data import check_file, official_cached, official_path
from hbtui.meta_eval.plan import plan_meta_eval, require_grader
from hbtui.meta_eval.report import render_meta_eval
from hbtui.meta_eval.runner import (
    CANCELLED,
    FAILED,
    FINISHED,
    INCOMPLETE,
    MetaEvalDriver,
    MetaProgress,
)
from hbtui.meta_eval.summary import current_summary
from hbtui.store import RunRow, Store

PROGRESS_SECONDS = 2.0


class ProgressLines:
    """A line at most every two seconds, and the last one always."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say, self.last = say, 0.0

    def __call__(self, progress: MetaProgress) -> None:
        now = time.monotonic()
        finished = progress.done + progress.errors >= progress.total
        if now - self.last >= PROGRESS_SECONDS or finished:
            self.last = now
            errors = f", {progress.errors:,} without a verdict" if progress.errors else ""
            self.say(f"meta-eval: {progress.done:,} of {progress.total:,} rows graded{errors}")


async def start_meta_eval(
    settings: Settings,
    *,
    data: str | None,
    limit: int | None,
    seed: int,
    name: str | None,
    labels_over: int,
    say: Callable[..., None],
    download_progress=None,
) -> int:
    """Plans the run (the file checked whole first) and drives it; returns the exit status."""
    require_grader(settings)
    load_template(settings.grader_template, settings.cache_dir)  # a missing or broken template: before any call
    if data is None and not official_cached(settings.cache_dir):
        size = f"{meta_data.OFFICIAL_BYTES / 1e6:.0f} MB"
        say(f"downloading the official meta-eval file ({size}), once: it is kept in {settings.cache_dir}")
    path = Path(data) if data else official_path(settings.cache_dir, download_progress)
    count = await asyncio.to_thread(check_file, path)  # a bad line: before the database is even opened
    async with await Store.open(settings.db_path) as store:
        run_id = await plan_meta_eval(
            store,
            settings,
            path,
            official=data is None,
            limit=limit,
            seed=seed,
            name=name,
            labels_over=labels_over,
            count=count,
        )
        run = await store.get_run(run_id)
        say(f"run {run.id} {one_line(run.name)}: {run.n_conversations:,} rows of {one_line(str(path), 200)} to grade")
        return await drive_meta_eval(store, run, settings, say)


async def drive_meta_eval(
    store: Store,
    run: RunRow,
    settings: Settings,
    say: Callable[..., None],
    stop_signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
) -> int:
    """Grade the run's pending rows; ``stop_signals`` stop it cleanly (a driver the app started
    leaves the hangup out: the terminal it came from may go, the run does not)."""
    require_grader(settings)
    driver = MetaEvalDriver(store, run, settings, ProgressLines(lambda text: say(text, error=True)))
    status = await drive_until_stopped(driver.execute(), stop_signals, lambda text: say(text, error=True))
    final = await store.get_run(run.id)
    say(render_meta_eval(final, final.meta_eval))
    if status == FINISHED:
        return 0
    if status == INCOMPLETE:
        say(f"run {final.id} incomplete: {one_line(final.error or '', 400)}", error=True)
        return 3
    if status == FAILED:
        say(f"run {final.id} failed: {one_line(driver.error or final.error or '', 400)}", error=True)
        return 1
    verb = "cancelled" if status == CANCELLED else "interrupted"
    say(f"run {final.id} {verb}; continue with: {invoked_as()} resume {final.id}", error=True)
    return 130


async def show_meta_eval(
    store: Store, run: RunRow, as_json: bool, labels_over: int | None, say: Callable[..., None]
) -> int:
    if labels_over is not None and labels_over < 0:
        raise SettingsError(f"--physician-labels-over {labels_over}: must be 0 or more")
    summary = await current_summary(store, run, labels_over)
    if as_json:  # JSON escapes control characters itself, and keeps the text exact
        document = {
            "run": {
                "id": run.id,
                "name": run.name,
                "status": run.shown_status(),
                "error": run.error,
                "kind": run.kind,
                "meaning": MEANINGS[META_EVAL],
                "model_grader": run.model_grader,
                "data": run.dataset_name,
                "plan": run.plan,
            },
            "requests": run.requests,
            "meta_eval": summary,
        }
        print(json.dumps(document, indent=2))
    else:
        say(render_meta_eval(run, summary))
    return 0


async def regrade_meta_eval(
    store: Store, source: RunRow, settings: Settings, name: str | None, say: Callable[..., None]
) -> int:
    """The same rows judged by another grader (or prompt): a new meta-eval run, linked to its source."""
    require_grader(settings)
    model = (settings.model_grader or "grader").split("/")[-1]
    run_id = await store.create_meta_eval_regrade(
        source.id,
        name=name,
        name_base=f"{source.name}-regrade-{model}",
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
    )
    run = await store.get_run(run_id)
    say(
        f"run {run.id} {one_line(run.name)}: the {run.n_conversations:,} rows of meta-eval {source.id} judged"
        f" again by {one_line(run.model_grader)}"
    )
    return await drive_meta_eval(store, run, settings, say)


async def refuse_grader_changes(store: Store, run: RunRow, settings: Settings) -> None:
    """A resume may change how a meta-eval reaches its grader, never which grader or how it is
    asked (one verdict of another grader would mix two graders in one F1); the grader's name may
    be corrected while no row has a verdict, as a model run's may."""
    from hbtui.core.settings.config import attribute_key
    from hbtui.engine.run_settings import MEASURED_GRADER

    counts = await store.meta_eval_counts(run.id)
    graded = counts["met"] + counts["not_met"]
    stored: Mapping[str, object] = run.settings  # read by each measured setting's name
    for name in MEASURED_GRADER:
        if name not in stored:
            continue
        before, now = stored[name], getattr(settings, name)
        if before == now or (name == "model_grader" and not graded):
            continue
        raise SettingsError(
            f"{attribute_key(name)} {now!r}: meta-eval {run.id} was made with {before!r}; a resume may change how"
            f" the grader is reached, not which grader it is or how it is asked: judge its rows with"
            f" {now!r} as a new run (hbtui regrade {run.id})"
        )
