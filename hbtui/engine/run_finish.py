"""A run's end: its status from what the database holds, its report, and its folder."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from hbtui.analysis.progress import Tally
from hbtui.analysis.run_stats import length_adjusted
from hbtui.core import scoring
from hbtui.core.completion_groups import ordered_groups
from hbtui.core.errors import TRANSIENT_KINDS
from hbtui.core.invocation import invoked_as
from hbtui.core.run_records import RequestsRecord
from hbtui.core.verdicts import FINISHED, INCOMPLETE, INTERRUPTED
from hbtui.render.export import write_run_folder
from hbtui.store import RunRow, Store
from hbtui.store.run_report import StoredReport

NO_SOURCE_REPLY = "no_source_reply"  # a regrade's conversation whose reply never came in the run it regrades


def incomplete_message(run_id: int, no_reply: int, unfinished: int, source_id: int | None = None) -> str:
    if source_id is not None and no_reply:
        # A regrade generates nothing: the replies it lacks are its source's to complete.
        return (
            f"{no_reply} conversation{'s' * (no_reply != 1)} got no reply in run {source_id}, which this one"
            f" grades again; complete it with: hbtui regrade-errors {source_id}, then regrade it again"
        )
    parts = []
    if no_reply:
        parts.append(f"{no_reply} conversation{'s' * (no_reply != 1)} got no reply")
    if unfinished:
        noun = "" if no_reply else f" conversation{'s' * (unfinished != 1)}"
        parts.append(f"{unfinished}{noun} ha{'ve' if unfinished != 1 else 's'} criteria that failed to grade")
    return f"{' and '.join(parts)}; complete them with: hbtui regrade-errors {run_id}"


async def compute_report(store: Store, run_id: int, tally: scoring.ReportTally | None = None) -> StoredReport:
    """The run's report, with the length-adjusted score where the run was made with a length
    adjustment. ``tally``: every conversation of the run, added up while its calls went on (a
    run with no completion groups: hbtui.engine.finish_ahead); only its bootstraps are left."""
    report = await _scored_report(store, run_id, tally)
    length = (await store.get_run(run_id)).recorded_length
    if length is None or report.overall is None:
        return report
    adjusted = length_adjusted(await store.scored_reply_lengths(run_id), *length)
    return report.with_length_adjusted(await asyncio.to_thread(scoring.metric, adjusted))


async def _scored_report(store: Store, run_id: int, tally: scoring.ReportTally | None) -> StoredReport:
    if tally is not None:
        result = await asyncio.to_thread(tally.report)
        return StoredReport.of(result, from_cache=await store.count_from_cache(run_id))
    inputs = await store.scoring_inputs(run_id)
    groups = await store.completion_groups(run_id)  # in the order of the inputs; None: a model's reply
    # The bootstraps take a quarter of a second for 5,000 conversations: off the event loop, so
    # a screen (or the engine's own calls) keeps going meanwhile.
    result = await asyncio.to_thread(scoring.run_report, inputs)
    # from_cache: verdicts no call of this run paid for
    report = StoredReport.of(result, from_cache=await store.count_from_cache(run_id))
    named = ordered_groups({group for group in groups if group is not None})
    if not named:
        return report

    def by_group() -> dict[str, StoredReport]:
        # Each group aggregated on its own, as the reference aggregates each of its runs.
        return {
            name: StoredReport.of(
                scoring.run_report([item for item, group in zip(inputs, groups) if group == name]), from_cache=None
            )
            for name in named
        }

    return replace(report, groups=await asyncio.to_thread(by_group))


@dataclass(frozen=True)
class Settled:
    status: str
    error: str | None
    report: StoredReport | None


async def settle(store: Store, run: RunRow, tally: scoring.ReportTally | None = None) -> Settled:
    """The status of a run whose calls all ended.

    Finished only when nothing is missing. Replies that never came for a transient reason
    (connection, timeout, 5xx, 429 after every retry) and criteria whose grading failed make
    it incomplete: scored on what is there, and completed by `regrade-errors`. Refusals
    (context too long, a content filter) are answers and leave it finished. ``tally``: see
    ``compute_report``.
    """
    run_id = run.id
    progress = await store.progress(run_id)
    left = Tally.from_progress(progress)
    if left.criteria_left or left.conversations_left:
        # Never call a run finished while work is missing, whatever stopped it.
        return Settled(
            INTERRUPTED,
            f"{left.criteria_left} criteria were left ungraded; {invoked_as()} resume {run_id} does them",
            None,
        )
    # Every summary is fresh here: those of earlier processes were refreshed as this one
    # started, and this one wrote its own with the verdicts they sum up.
    report = await compute_report(store, run_id, tally)
    no_reply, unfinished = await store.gaps(run_id, TRANSIENT_KINDS | {NO_SOURCE_REPLY})
    if no_reply or unfinished:
        return Settled(INCOMPLETE, incomplete_message(run_id, no_reply, unfinished, run.source_run_id), report)
    if progress.conversations_total and not report.conversations.scored:
        # Every reply refused (a request no conversation could pass): nothing was measured.
        return Settled(
            INCOMPLETE,
            f"no conversation could be scored: all {progress.conversations_failed} replies were"
            " refused (see `hbtui show` for why)",
            report,
        )
    return Settled(FINISHED, None, report)


async def record_end(
    store: Store,
    run_id: int,
    settled: Settled,
    *,
    lease: str | None,
    requests: RequestsRecord,
    runs_root: Path,
    results: TextIO | None = None,
) -> None:
    """The run's status, report and requests stored under its lease (RunTakenOver otherwise), and
    its folder (results.jsonl, description.md) written beside the database when it was scored.
    ``results``: results.jsonl written while the calls went on (hbtui.engine.finish_ahead)."""
    await store.finish_run(
        run_id, settled.status, error=settled.error, report=settled.report, lease=lease, requests=requests
    )
    if settled.report is not None:
        folder = await write_run_folder(store, await store.get_run(run_id), runs_root, results)
        await store.set_folder(run_id, str(folder))
