"""A run through the batch API, from outside its looks (hbtui.engine.batch_api): made one (its
UUID, token and folder), the client of each endpoint it names, and `hbtui cancel`, which cancels
its batches at the provider with this machine's keys (no process need be looking at the run) and
marks the run cancelled. What the batches answered before is kept at the provider, and `hbtui
resume` stores it."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from pathlib import Path

from hbtui.client.batches import Batch, BatchClient
from hbtui.client.wire import ChatError, Endpoint
from hbtui.core.batch_files import API_LABEL, API_PLAN_KEY, BatchFiles
from hbtui.core.errors import HbtuiError
from hbtui.core.invocation import invoked_as
from hbtui.core.settings.config import Settings
from hbtui.core.verdicts import AWAITING_BATCH, CANCELLED, RUNNING
from hbtui.store import RunBusy, RunRow, RunTakenOver, Store, Submission
from hbtui.store.batch_submissions import UPLOADED, WRITTEN


def start_batch_api(settings: Settings, run_id: int) -> BatchFiles:
    """A run's batch API entry: its UUID (unique across databases: each batch's metadata names
    it), the token its lines' custom_ids carry, and its folder of request and output files."""
    run_uuid = uuid.uuid4().hex
    folder = Path(settings.db_path).resolve().parent / "batches" / f"run-{run_id}-{run_uuid[:8]}"
    return BatchFiles(folder, API_LABEL, run_uuid[:8], (), run_uuid)


async def make_batch_run(store: Store, run_id: int, settings: Settings) -> BatchFiles:
    batch = start_batch_api(settings, run_id)
    await store.set_plan_entry(run_id, API_PLAN_KEY, batch.as_plan())
    return batch


def sha256_of(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def client_for(settings: Settings, base_url: str) -> BatchClient:
    """The batch API at ``base_url`` with the key these settings give it (none when they name it not)."""
    key = next((k for url, k in [*settings.test_endpoints, *settings.grader_endpoints] if url == base_url), None)
    return BatchClient(Endpoint(base_url, key), timeout=settings.timeout)


async def cancel_batches(
    store: Store, run: RunRow, settings: Settings, owner: str, patience: float
) -> tuple[int, list[str]]:
    """`hbtui cancel` of a run through the batch API: its batches cancelled at the provider (with
    this machine's keys: no process may be looking at the run now) and the run marked cancelled.
    What they answered before is kept at the provider, and `resume` stores it. (batches
    cancelled, what could not be: then the run is left as it was, to cancel again), or RunBusy
    while another process holds the run past ``patience``."""
    before = run.status
    deadline = time.monotonic() + patience
    while True:
        try:
            lease = await store.claim_run(run.id, owner)
            break
        except RunBusy:  # a look at its batches holds it for a moment
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.25)
    batch_files = BatchFiles.online_of(run.plan)
    assert batch_files is not None
    clients: dict[str, BatchClient] = {}
    cancelled, problems = 0, []
    try:
        for submission in await store.submissions(run.id):
            if not submission.open:
                continue
            client = clients.setdefault(submission.endpoint, client_for(settings, submission.endpoint))
            try:
                batch = await batch_of(client, batch_files, submission)
                if batch is None:
                    continue
                if not batch.ended and batch.status != "cancelling":
                    batch = await client.cancel(batch.id)
                    cancelled += 1
                await record_state(store, submission, batch, lease)  # as `runs` and `show` say it now
            except ChatError as exc:
                problems.append(f"batch {submission.number}: {exc.message}")
        if problems:  # not cancelled: a batch may still run, and a cancel asked again must reach it
            await store.finish_run(
                run.id, before if before != RUNNING else AWAITING_BATCH, error=run.error, lease=lease
            )
        else:
            what = f"{cancelled} batch{'es' if cancelled != 1 else ''} cancelled at the provider"
            await store.finish_run(run.id, CANCELLED, error=f"cancelled ({what})", lease=lease)
    except BaseException:
        with contextlib.suppress(RunTakenOver):
            await asyncio.shield(store.finish_run(run.id, AWAITING_BATCH, lease=lease))
        raise
    finally:
        for client in clients.values():
            await client.aclose()
    return cancelled, problems


async def batch_of(client: BatchClient, batch_files: BatchFiles, submission: Submission) -> Batch | None:
    """A submission's batch as the provider has it now: by its id, or, uploaded with no batch
    recorded (a process died between the creation and its record), found by its metadata."""
    if submission.batch_id is not None:
        return await client.get(submission.batch_id)
    if submission.state == UPLOADED:
        metadata = {"hbtui_run": batch_files.uuid or "", "hbtui_submission": str(submission.number)}
        return await client.find(metadata, submission.file_id)
    return None


async def record_state(store: Store, submission: Submission, batch: Batch, lease: str | None) -> None:
    """What the provider says of a submission's batch now, recorded (its id the first time)."""
    await store.record_batch(
        submission,
        lease,
        batch_id=batch.id,
        status=batch.status,
        total=batch.total,
        completed=batch.completed,
        failed=batch.failed,
        created_at=batch.created_at,
        expires_at=batch.expires_at,
        errors=batch.errors,
    )


class StillAtTheProvider(HbtuiError):
    """A run asked to go on without the batch API while a batch of it may still be at the provider."""


async def leave_batch_api(store: Store, run: RunRow, settings: Settings) -> RunRow:
    """A run through the batch API asked to go on by calls (`resume --batch false`: an endpoint
    without a batch API, say): the provider asked about each batch it may have, and, with none
    live there and none answered but not stored, its requests are freed and the run is a run of
    calls from now on. A cancelled, expired or failed batch is left (what it answered with it); a
    provider that no longer has a batch API has none."""
    batch_files = BatchFiles.online_of(run.plan)
    assert batch_files is not None
    again = f"{invoked_as()} resume {run.id}"
    for submission in await store.submissions(run.id):
        if not submission.open or submission.state == WRITTEN:
            continue
        async with client_for(settings, submission.endpoint) as client:
            try:
                batch = await batch_of(client, batch_files, submission)
            except ChatError as exc:
                if exc.status == 404:
                    continue  # no batch API there any more: nothing of it can run or be fetched
                raise StillAtTheProvider(
                    f"run {run.id}: could not ask the provider about batch {submission.number} ({exc.message});"
                    " try again when it answers"
                ) from None
        if batch is None:
            continue
        if batch.status in ("validating", "in_progress", "finalizing"):
            raise StillAtTheProvider(
                f"run {run.id} has batch {submission.number} {batch.status.replace('_', ' ')} at the provider:"
                f" cancel it first ({invoked_as()} cancel {run.id}), or let it end through the batch API ({again})"
            )
        if batch.status == "completed":
            raise StillAtTheProvider(
                f"run {run.id}'s batch {submission.number} is answered at the provider but not stored: {again}"
                " stores it (through the batch API), then --batch false goes on by calls"
            )
    await store.leave_batch_api(run.id)
    return await store.get_run(run.id)
