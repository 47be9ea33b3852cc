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
from hbtui.core.settings.config import Settings
from hbtui.core.verdicts import AWAITING_BATCH, CANCELLED
from hbtui.store import RunBusy, RunRow, RunTakenOver, Store, Submission
from hbtui.store.batch_submissions import SUBMITTED, UPLOADED


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
    cancelled, what could not be), or RunBusy while another process holds the run past ``patience``."""
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
            batch_id = submission.batch_id
            try:
                batch = None
                if batch_id is None and submission.state == UPLOADED:  # made before a process died?
                    metadata = {"hbtui_run": batch_files.uuid or "", "hbtui_submission": str(submission.number)}
                    batch = await client.find(metadata, submission.file_id)
                elif batch_id is not None:
                    batch = await client.get(batch_id)
                if batch is None:
                    continue
                if not batch.ended and batch.status != "cancelling":
                    batch = await client.cancel(batch.id)
                    cancelled += 1
                await record_state(store, submission, batch, lease)  # as `runs` and `show` say it now
            except ChatError as exc:
                problems.append(f"batch {submission.number}: {exc.message}")
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


async def leave_batch_api(store: Store, run: RunRow) -> RunRow:
    """A run through the batch API asked to go on by calls (`resume --batch false`: an endpoint
    without a batch API, say): its requests not yet at the provider are freed, and the run is a
    run of calls from now on. Refused while a batch of it may be there (submitted, or uploaded
    with a batch made before a process died, unless the run was cancelled since)."""
    for submission in await store.submissions(run.id):
        if submission.state == SUBMITTED or (submission.state == UPLOADED and run.status != CANCELLED):
            raise StillAtTheProvider(
                f"run {run.id} has batch {submission.number} at the provider (or may have): cancel it first"
                f" (hbtui cancel {run.id}), or let it end through the batch API (hbtui resume {run.id})"
            )
    await store.leave_batch_api(run.id)
    return await store.get_run(run.id)
