"""A run through a provider's batch API (`hbtui run --batch`, BATCH=true): both stages sent as
batch files (``POST /files``, ``POST /batches``), answered within the provider's window at its
batch price, and stored as calls' answers are (hbtui.engine.batch_files reads the output).

Nothing is lost and nothing is paid twice. Each look at the run, under its lease:

1. every submission still open moves on: a file written is uploaded and its file id committed; a
   file uploaded gets its batch (found first by its metadata, the run's UUID and the submission's
   number, when a process may have died between the creation and its record) and the batch id is
   committed; a batch submitted is asked how it is, and once it ended its output and error files
   are downloaded and stored, and any line of it still unanswered is a failure of its own;
2. lines that got no answer that counts go back in the queue while attempts are left;
3. what no open submission holds is written into new files (the replies still missing, and the
   criteria of the replies stored: grading overlaps generation), recorded with what each holds
   before its upload, then uploaded and submitted;
4. with nothing open and nothing left to ask, the run ends as a run of calls ends.

Between looks the run awaits its batches and holds no lease: `hbtui cancel` may take it, another
`hbtui resume` may look in its place, and a process killed then loses nothing. A 429 for too many
batches enqueued waits for earlier ones to end; the quota answer stops the run at once, as does
an endpoint without a batch API or one that refuses the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hbtui.client.batches import Batch, BatchClient
from hbtui.client.wire import ChatError
from hbtui.core.batch_files import BatchFiles, generation_id, grading_id
from hbtui.core.errors import (
    CLIENT_ERROR,
    CONNECTION,
    QUOTA,
    RATE_LIMITED,
    SERVER_ERROR,
    TIMEOUT,
    HbtuiError,
)
from hbtui.core.fidelity import describe_requests
from hbtui.core.grading import Template
from hbtui.core.invocation import invoked_as
from hbtui.core.run_records import RequestsRecord
from hbtui.core.settings.config import Settings
from hbtui.core.text import one_line
from hbtui.core.verdicts import AWAITING_BATCH, CANCELLED, FAILED, FINISHED, INCOMPLETE, INTERRUPTED
from hbtui.engine.batch_files import (
    RETRYABLE,
    ROUTES,
    _Files,
    batch_keys,
    generation_line,
    grading_lines,
    store_output,
)
from hbtui.engine.batch_output import CheckedOutput, Imported, OutputLine, check_output
from hbtui.engine.batch_runs import client_for, record_state, sha256_of
from hbtui.engine.run_finish import record_end, settle
from hbtui.engine.run_settings import record_changed_settings
from hbtui.render.batch_state import describe_batch, looking_process
from hbtui.store import RunBusy, RunRow, RunTakenOver, Store, Submission
from hbtui.store.batch_submissions import REPLY_IDX, SUBMITTED, UPLOADED, WRITTEN
from hbtui.store.work import ResultBatch

GENERATION_STAGE = "generation"
GRADING_STAGE = "grading"
WINDOW = "24h"
TRANSIENT = (CONNECTION, TIMEOUT, SERVER_ERROR)
HEARTBEAT_SECONDS = 5.0


class BatchRunStopped(HbtuiError):
    """What the batch API said that no wait cures (out of quota, no batch API, a key refused)."""


class _RoomWait(Exception):
    """The provider holds too many of this account's batches: submit again once some ended."""


class BatchRunner:
    """Drives a run through the batch API until it ends, or is cancelled or stopped."""

    def __init__(
        self,
        store: Store,
        run: RunRow,
        settings: Settings,
        template: Template,
        owner: str,
        say: Callable[[str], None],
        use_cache: bool = False,
    ) -> None:
        batch = BatchFiles.online_of(run.plan)
        assert batch is not None and batch.uuid is not None
        self.store, self.run, self.settings, self.template = store, run, settings, template
        self.batch, self.uuid = batch, batch.uuid
        self.owner, self.say, self.use_cache = owner, say, use_cache
        self.keys = batch_keys(settings, template, batch)
        self.clients: dict[str, BatchClient] = {}
        self.shown: dict[int, tuple] = {}  # each submission's state as this process last said it
        self.transient_since: float | None = None
        self.room_said = False
        self.error: str | None = None
        self.unsent = True  # requests may wait that no submission holds (at first, and after a failure)

    # ---- endpoints -----------------------------------------------------------------------------

    def endpoint_of(self, stage: str) -> str:
        pairs = self.settings.test_endpoints if stage == GENERATION_STAGE else self.settings.grader_endpoints
        return pairs[0][0]

    def client(self, base_url: str) -> BatchClient:
        if base_url not in self.clients:
            self.clients[base_url] = client_for(self.settings, base_url)
        return self.clients[base_url]

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    # ---- the loop --------------------------------------------------------------------------------

    async def execute(self) -> str:
        """The run's status once it ended (finished, incomplete), was cancelled, or stopped (failed)."""
        first = True
        try:
            while True:
                status = await self.look(first)
                first = False
                if status is not None:
                    return status
                await asyncio.sleep(self.settings.batch_poll)
        finally:
            await self.aclose()

    async def look(self, first: bool) -> str | None:
        """One look under the run's lease; the run's final status, or None while it awaits."""
        store, run_id = self.store, self.run.id
        now = await store.get_run(run_id)
        if not first and now.status == CANCELLED:  # by `hbtui cancel` while this process waited
            self.say(f"run {run_id} was cancelled: this process stops looking at its batches")
            return CANCELLED
        if not first and now.status in (FINISHED, INCOMPLETE):  # another process finished it
            return now.status
        looker = looking_process((now.live or {}).get("batch_look")) if now.status == AWAITING_BATCH else None
        if first and looker is not None:  # two processes looking would both store, both finish
            raise RunBusy(
                f"run {run_id}'s batches are looked at by {looker} already: watch it with"
                f" {invoked_as()} monitor {run_id}"
            )
        try:
            lease = await store.claim_run(run_id, self.owner, only_from=None if first else AWAITING_BATCH)
        except RunBusy:
            if first:
                raise
            return None  # another process looks at it now, or it was taken meanwhile: the next look decides
        beat = asyncio.create_task(self._heartbeat(lease))
        try:
            if first:  # what its requests are, from the start (`show` of a run still going)
                await store.set_requests(run_id, self.requests())
                await record_changed_settings(store, self.run, self.settings)
            status = await self._look(lease)
        except BatchRunStopped as stop:
            self.error = str(stop)
            await store.finish_run(run_id, FAILED, error=self.error, lease=lease)
            return FAILED
        except BaseException:
            with contextlib.suppress(RunTakenOver):  # given back: its batches go on, if it has any yet
                await asyncio.shield(self._give_back(lease))
            raise
        finally:
            beat.cancel()
        return status

    async def _give_back(self, lease: str) -> None:
        """A look stopped midway: the run awaits the batches it has at the provider, or is
        interrupted when it has none there yet (`resume` submits them)."""
        at_provider = any(s.open and s.batch_id for s in await self.store.submissions(self.run.id))
        await self.store.finish_run(self.run.id, AWAITING_BATCH if at_provider else INTERRUPTED, lease=lease)

    def requests(self) -> RequestsRecord:
        return describe_requests(
            self.settings, self.template.name, self.template.sha256, {"answered through the endpoint's batch API"}
        )

    async def _heartbeat(self, lease: str) -> None:
        """An upload or a download of 200 MB may take minutes: the run must not look abandoned."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            with contextlib.suppress(Exception):
                await self.store.heartbeat(self.run.id, lease, {})

    async def _look(self, lease: str) -> str | None:
        store, run_id = self.store, self.run.id
        stored = False
        try:
            for submission in await store.submissions(run_id):
                if submission.open:
                    stored = await self.advance(submission, lease) or stored
            again = await store.reset_batch_failures(
                run_id, RETRYABLE, self.settings.max_attempts, self.settings.grader_parse_attempts
            )
            # Reading the whole run's work is a second's CPU on a large run: only when something
            # can be asked now that was not (answers stored, failures back, a submission held back).
            if self.unsent or stored or any(again):
                self.unsent = True
                await self.submit_new(lease)
                self.unsent = False
            self.transient_since = None
        except _RoomWait:
            pass  # earlier batches must end first: the next look submits again
        except ChatError as exc:
            if exc.kind not in TRANSIENT:
                raise BatchRunStopped(stopped_by(exc, self.run.id)) from None
            self._transient(exc)
        if stored or self.unsent:
            await store.refresh_summaries(run_id)
        if not any(s.open for s in await store.submissions(run_id)):
            # Nothing at the provider and nothing left to ask (what no call cures stays failed).
            return await self.finish(lease)
        now = time.time()
        look = {"at": now, "next": now + self.settings.batch_poll, "by": self.owner}
        await store.heartbeat(run_id, lease, {"batch_look": look})
        await store.finish_run(run_id, AWAITING_BATCH, lease=lease)
        return None

    def _transient(self, exc: ChatError) -> None:
        """The batch API did not answer: say so, and look again; past UNREACHABLE_PATIENCE of
        nothing else, stop (resumable: the batches go on at the provider)."""
        now = time.monotonic()
        self.transient_since = self.transient_since or now
        self.say(f"run {self.run.id}: the batch API did not answer ({exc.message}); looking again")
        if now - self.transient_since > self.settings.unreachable_patience:
            raise BatchRunStopped(
                f"the batch API answered nothing but failures for {now - self.transient_since:.0f} s: {exc.message}"
                f" (its batches go on at the provider; {invoked_as()} resume {self.run.id} picks them up)"
            )

    async def finish(self, lease: str) -> str:
        run = await self.store.get_run(self.run.id)
        settled = await settle(self.store, run)
        await record_end(
            self.store,
            run.id,
            settled,
            lease=lease,
            requests=self.requests(),
            runs_root=Path(self.settings.db_path).parent,
        )
        with contextlib.suppress(OSError):  # its folder, empty once every batch is stored
            self.batch.folder.rmdir()
        return (await self.store.get_run(run.id)).status

    # ---- one submission ------------------------------------------------------------------------

    async def advance(self, submission: Submission, lease: str) -> bool:
        """The submission one step on; True when its batch's answers were stored."""
        store = self.store
        client = self.client(submission.endpoint)
        fresh = False
        if submission.state == WRITTEN:
            path = Path(submission.path)
            if sha256_of(path) != submission.sha256:  # gone or changed before its upload: written again
                await store.forget_unsent(submission, lease)
                self.unsent = True
                return False
            file_id = await client.upload(path)
            await store.record_upload(submission, lease, file_id)
            submission, fresh = replace(submission, state=UPLOADED, file_id=file_id), True
        if submission.state == UPLOADED:
            metadata = {"hbtui_run": self.uuid, "hbtui_submission": str(submission.number)}
            # A process may have died between the batch's creation and its record: found, not made twice.
            found = None if fresh else await client.find(metadata, submission.file_id)
            if found is None:
                try:
                    found = await client.create(
                        submission.file_id or "", ROUTES[self._api(submission)], metadata, WINDOW
                    )
                except ChatError as exc:
                    if exc.kind == RATE_LIMITED:
                        if not self.room_said:
                            self.say(
                                f"run {self.run.id}: the provider holds as many batches as it takes ({exc.message});"
                                " submitting again once earlier ones end"
                            )
                            self.room_said = True
                        raise _RoomWait from None
                    raise
            self.room_said = False
            await self._record(submission, found, lease)
            return False
        if submission.state == SUBMITTED:
            assert submission.batch_id is not None
            batch = await client.get(submission.batch_id)
            await self._record(submission, batch, lease)
            if batch.ended:
                await self.import_batch(replace(submission, batch_status=batch.status), batch, lease)
                return True
        return False

    def _api(self, submission: Submission) -> str:
        return self.settings.api_test if submission.stage == GENERATION_STAGE else self.settings.api_grader

    async def _record(self, submission: Submission, batch: Batch, lease: str) -> None:
        """What the provider says of the batch now, stored when it changed (a look a minute for a
        day writes nothing new), and said when this process has not said it yet."""
        now = (batch.id, batch.status, batch.completed, batch.failed)
        if (submission.batch_id, submission.batch_status, submission.completed, submission.failed) != now:
            await record_state(self.store, submission, batch, lease)
        if self.shown.get(submission.number) != now:
            self.shown[submission.number] = now
            recorded = replace(
                submission,
                state=SUBMITTED,
                submitted_at=submission.submitted_at or batch.created_at,
                batch_status=batch.status,
                total=batch.total,
                completed=batch.completed,
                failed=batch.failed,
                batch_id=batch.id,
                expires_at=batch.expires_at,
            )
            self.say(f"run {self.run.id}: {describe_batch(recorded)}")

    async def import_batch(self, submission: Submission, batch: Batch, lease: str) -> None:
        """An ended batch's output and error files stored; a line of it still unanswered then (a
        batch failed at validation, expired or cancelled) is a failure of its own."""
        store, run = self.store, await self.store.get_run(self.run.id)
        client = self.client(submission.endpoint)
        folder = self.batch.folder
        folder.mkdir(parents=True, exist_ok=True)
        done = Imported()
        downloaded: list[Path] = []
        for name, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
            if not file_id:
                continue
            path = folder / f"batch-{submission.number}-{name}.jsonl"
            await client.download(file_id, path)
            downloaded.append(path)
            checked = await check_output(store, run, path, self.batch)
            _add(done, await store_output(store, run, self.settings, self.template, checked, lease, self.batch))
        missing = await store.unanswered_requests(submission.id)
        if missing:
            if batch.status == "failed":  # refused at validation: the same file would be refused again
                why, kind = "; ".join(batch.errors) or "no reason given", CLIENT_ERROR
            else:
                why, kind = "no answer in its output", SERVER_ERROR
            lines = [
                OutputLine(
                    0,
                    generation_id(self.batch.token, position, repeat)
                    if idx == REPLY_IDX
                    else grading_id(self.batch.token, position, repeat, idx),
                    position,
                    repeat,
                    None if idx == REPLY_IDX else idx,
                    None,
                    b"",
                    f"batch {batch.id} {batch.status}: {why}",
                    kind,
                )
                for _conversation_id, idx, position, repeat in missing
            ]
            conversations, verdicts = await store.batch_targets(run.id)
            checked = CheckedOutput(Path(submission.path), "", self.batch.token, conversations, verdicts, lines)
            _add(done, await store_output(store, run, self.settings, self.template, checked, lease, self.batch))
        await store.record_imported(submission, lease)
        for path in [*downloaded, Path(submission.path)]:  # stored: the database holds every answer
            path.unlink(missing_ok=True)
        for file_id in (submission.file_id, batch.output_file_id, batch.error_file_id):
            if file_id:  # the provider's copies too, as far as it lets them go: nothing depends on them
                with contextlib.suppress(ChatError):
                    await client.delete_file(file_id)
        failures = done.failed + done.no_answer
        why = f" ({one_line('; '.join(batch.errors), 300)})" if batch.status == "failed" and batch.errors else ""
        self.say(
            f"run {self.run.id}: batch {submission.number} ({submission.stage}) {batch.status}{why}:"
            f" {done.replies:,} replies and {done.verdicts:,} verdicts stored"
            + (f", {failures:,} lines without an answer" if failures else "")
        )

    # ---- new submissions -----------------------------------------------------------------------

    async def submit_new(self, lease: str) -> None:
        """What no open submission holds, in new files (a provider's limits per file, one model a
        file), each recorded with its requests before its upload, then submitted."""
        store, run_id = self.store, self.run.id
        held = await store.held_requests(run_id)
        folder = self.batch.folder
        folder.mkdir(parents=True, exist_ok=True)
        generate, grade = _Files(folder, ".next-generation.jsonl"), _Files(folder, ".next-grading.jsonl")
        settings, template, keys, batch = self.settings, self.template, self.keys, self.batch
        after = -1
        try:
            while page := await store.pending_work(run_id, after):
                after = page[-1].position
                cached = await self._serve_cached(page, held, lease)
                for item in page:
                    if item.reply is None:
                        if (item.conversation_id, REPLY_IDX) not in held:
                            generate.add(
                                generation_line(settings, keys, batch, item), (item.conversation_id, REPLY_IDX)
                            )
                        continue
                    asked = [
                        c
                        for c in item.criteria
                        if (item.conversation_id, c[0]) not in held and (item.conversation_id, c[0]) not in cached
                    ]
                    if not asked:
                        continue
                    for line, (idx, _, _) in zip(
                        grading_lines(settings, template, keys, batch, replace(item, criteria=asked)),
                        asked,
                        strict=True,
                    ):
                        grade.add(line, (item.conversation_id, idx))
        finally:
            generate.close()
            grade.close()
        number = max((s.number for s in await store.submissions(run_id)), default=0)
        for stage, files in ((GENERATION_STAGE, generate), (GRADING_STAGE, grade)):
            model = (settings.model_test if stage == GENERATION_STAGE else settings.model_grader) or ""
            for written, requests in zip(files.written, files.requests, strict=True):
                number += 1
                path = folder / f"batch-{number}-{stage}.jsonl"
                os.replace(written, path)
                submission = await store.add_submission(
                    run_id,
                    lease,
                    stage=stage,
                    model=model,
                    endpoint=self.endpoint_of(stage),
                    path=str(path),
                    sha256=sha256_of(path) or "",
                    requests=requests,
                )
                await self.advance(submission, lease)

    async def _serve_cached(self, page, held: set[tuple[int, int]], lease: str) -> set[tuple[int, int]]:
        """Verdicts the cache holds (--reuse-verdicts, resume) are stored, never submitted."""
        if not self.use_cache:
            return set()
        replied = [item for item in page if item.reply is not None and item.criteria]
        if not replied:
            return set()
        keyed: dict[str, list[tuple[int, int]]] = {}
        for item in replied:
            digest = self.keys.digest(item.prompt, item.reply or "")
            for idx, key in self.keys.keys(digest, item.repeat, item.criteria).items():
                if (item.conversation_id, idx) not in held:
                    keyed.setdefault(key, []).append((item.conversation_id, idx))
        found = await self.store.cached_verdicts(list(keyed))
        results = [
            hit.result(conversation_id, idx, key) for key, hit in found.items() for conversation_id, idx in keyed[key]
        ]
        if results:
            await self.store.write_batch(ResultBatch(verdicts=results), run_id=self.run.id, lease=lease)
        return {(result.conversation_id, result.idx) for result in results}


def _add(total: Imported, more: Imported) -> None:
    total.replies += more.replies
    total.verdicts += more.verdicts
    total.failed += more.failed
    total.no_answer += more.no_answer
    total.already += more.already


def stopped_by(exc: ChatError, run_id: int) -> str:
    """A batch API's answer that stops the run, and what to do."""
    if exc.kind == QUOTA:
        return f"out of quota at the batch API: {exc.message}"
    if exc.status == 404:
        return (
            f"{exc.message}: the endpoint has no batch API here ({invoked_as()} resume {run_id} --batch false"
            " goes on by calls; --batch-files serves an engine of your own)"
        )
    return exc.message
