"""The driver: one run from its plan to its end, or to a stop, in the calling event loop.

The work is read from the database a page at a time in plan order (what is held does not grow
with the run). Generation and grading overlap: a conversation's criteria are graded
(concurrently) as soon as its reply exists, and grading waits ahead of generation for a shared
endpoint (see hbtui.client.limiter), so that scores appear as the run goes and the run ends on one
generate-then-grade chain. Every answer goes to the result writer.

Longer than most modules (about 900 lines) because :class:`Engine` is one state machine whose
steps all read and change the same state: the gate every call waits on, the writer's backlog,
the live figures, the controls and the first fatal error. What does not touch that state lives
beside it: the endpoints and their limits (endpoint_pool), the writes (result_writer), the
report made during the calls (finish_ahead), the end (run_finish) and the stop (stopping).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

from hbtui.client.chat import CLIENT_ERROR, CONNECTION, CONTEXT_LENGTH, DAILY_LIMIT, QUOTA, RATE_LIMITED
from hbtui.client.wire import ChatError
from hbtui.core.background_import import import_in_background
from hbtui.core.calls import GENERATION
from hbtui.core.errors import TRANSIENT_KINDS, UNPARSEABLE
from hbtui.core.events import (
    ConversationScored,
    CriterionGraded,
    Event,
    GenerationFailed,
    Noted,
    Observer,
    PauseChanged,
    ReplyGenerated,
    RunFinished,
    RunStarted,
)
from hbtui.core.fidelity import describe_requests
from hbtui.core.grading import (
    fill_criterion,
    grade_as_configured,
    graded_conversation,
    load_template,
    with_conversation,
)
from hbtui.core.invocation import invoked_as
from hbtui.core.live import LiveSnapshot
from hbtui.core.numbering import conversation_label, criterion_label
from hbtui.core.rate_limits import merge_summaries
from hbtui.core.redact import redact_keys
from hbtui.core.run_records import RequestsRecord
from hbtui.core.settings.config import Settings
from hbtui.core.verdict_cache import RequestKeys, conversation_digest
from hbtui.core.verdicts import CANCELLED, FAILED, FINISHED, INTERRUPTED, PAUSED, PENDING, TAKEN_OVER
from hbtui.engine.endpoint_pool import EndpointPool, LiveStats, Replicas
from hbtui.engine.finish_ahead import FinishAhead
from hbtui.engine.grader_slots import GraderSlots
from hbtui.engine.result_writer import HEARTBEAT_SECONDS, ResultWriter
from hbtui.engine.run_finish import Settled, record_end, settle
from hbtui.engine.run_plan import HeadStart
from hbtui.engine.run_settings import record_changed_settings
from hbtui.store import (
    ERROR,
    MET,
    NOT_MET,
    ConversationScore,
    ReplyResult,
    RunRow,
    RunTakenOver,
    Store,
    StoreError,
    VerdictResult,
    WorkItem,
    conversation_outcome,
)
from hbtui.store.disk_reserve import keep_reserve, remove_reserve
from hbtui.store.owners import this_owner
from hbtui.store.work import WORK_PAGE

CACHE_WRITE_CHUNK = 2048  # verdicts served from the cache between two chances for the writer to run
CONTROL_SECONDS = 0.5  # how often the driver reads what other processes ask of its run
FIRST_PAGE = 32  # the first page small: calls go out while the next is read
# The run's deviation for replies a configured key was taken out of, with their number (a resume
# reads it back and adds its own).
KEYS_REDACTED = "{} had a configured key redacted before grading: the grader saw the redacted text"
_KEYS_REDACTED = re.compile(r"(\d+) repl(?:y|ies) had a configured key redacted before grading")


def _replies(count: int) -> str:
    return f"{count} {'reply' if count == 1 else 'replies'}"


async def _stored(plan: asyncio.Task[int]) -> bool:
    """Whether the plan's transaction committed; waits for it (a cancel does not cut it short)."""
    await asyncio.gather(asyncio.shield(plan), return_exceptions=True)
    return not plan.cancelled() and plan.exception() is None


class Engine:
    """Drives one run to the end (or to a stop) in the calling event loop."""

    def __init__(
        self,
        store: Store,
        run: RunRow,
        settings: Settings,
        observers: Sequence[Observer] = (),
        *,
        backoff_base: float = 0.5,
        use_cache: bool = False,
        head_start: HeadStart | None = None,
    ) -> None:
        """``head_start``: the run was just created by ``start_run``, its plan still being stored."""
        self.store = store
        self.run = run
        self.repeats = run.planned.repeats  # read once: every verdict's label names its repeat
        self.head_start = head_start
        self.settings = settings
        self.observers = list(observers)
        self.owner = this_owner()
        self.pool = EndpointPool(
            settings,
            run.id,
            backoff_base=backoff_base,
            on_note=self._note,
            emit=self.emit,
            on_unreachable=lambda exc, endpoint: self._stop(exc, stop_calls=True, endpoint=endpoint),
            # A process stopped (SIGSTOP, a suspended laptop) past its lease sends nothing more
            # until a write confirms the lease is still its own.
            before_send=self._update_gate,
        )
        self.writer = ResultWriter(
            store,
            run.id,
            patience=settings.db_write_patience,
            # While the writer cannot commit (another process holds a lock) answers wait in
            # memory; past this many unwritten, no new call is sent until they are stored.
            max_unwritten=max(32, 2 * (settings.concurrency + settings.effective_grader_concurrency)),
            on_written=self._update_gate,
            on_warning=lambda message: self.emit(Noted(self.run.id, "warning", message)),
            ready=head_start.stored if head_start else None,
        )
        self.taken_over = False
        # Verdicts found in the cache for this run's pending criteria (see hbtui.core.verdict_cache)
        # are served without a call. Regrades, resumes and retries look; a fresh run only when asked.
        self.use_cache = use_cache
        self._fatal: ChatError | None = None
        self._drive_task: asyncio.Task | None = None  # cancelled by a fatal error: see _stop
        self._template = load_template(settings.grader_template, settings.cache_dir)
        self.keys = RequestKeys(settings, self._template)
        # A conversation's criteria share its prompt's prefix: llama.cpp's slot that holds it.
        self.grader_slots = GraderSlots(settings.grader_slots) if settings.grader_slots else None
        # What hbtui's negotiation changed in the requests (see hbtui.core.fidelity), for the run's record.
        self.deviations: set[str] = set((run.requests or {}).get("deviations", []))
        self.api_keys = settings.configured_keys
        self.replies_redacted = 0  # replies a configured key was taken out of, over the run's processes
        for deviation in list(self.deviations):
            if counted := _KEYS_REDACTED.match(deviation):
                self.deviations.discard(deviation)
                self.replies_redacted += int(counted.group(1))
        self._explanation_redacted = False  # said once in the run's log
        self.cancel_status = INTERRUPTED
        self._control_seen: str | None = None  # the control last applied (see _watch_controls)
        self._stopping = False  # cancelled: the calls in flight finish, no new one starts
        self._background: set[asyncio.Task] = set()  # the controls' watcher and what it starts
        self._control_pending = 0  # controls of this process still being recorded
        self.error: str | None = None
        # Run folders (results.jsonl, description.md) go beside the database, as the old harness had them.
        self.runs_root = Path(settings.db_path).parent
        # The report and results.jsonl made while the calls go on: for a run driven from its start.
        self.ahead: FinishAhead | None = None

    # ---- control: from a display of this process, or from any process through the database ----
    def pause(self) -> None:
        """No new call starts until resume(); the calls in flight are answered and stored."""
        self._ask(PAUSED)

    def resume(self) -> None:
        self._ask(None)

    def cancel(self) -> None:
        """End the run as cancelled: no new call starts, the calls in flight are answered and
        stored (they are paid for), then the run stops."""
        self._ask(CANCELLED)

    def _ask(self, control: str | None) -> None:
        """Apply a control here at once, and record it in the database, so that every monitor
        and `hbtui pause|unpause|cancel` from elsewhere starts from the same state."""
        self._apply_control(control)
        self._control_pending += 1  # the watcher leaves the database's older value alone meanwhile
        task = asyncio.get_running_loop().create_task(self._record_control(control))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _record_control(self, control: str | None) -> None:
        # Its own connection: the engine's is the writer's, whose transactions this must not join.
        try:
            async with await Store.open(self.store.path, create=False) as store:
                await store.request_control(self.run.id, control)
        except (sqlite3.Error, StoreError):
            pass  # applied here all the same; other processes then see the live figures' pause
        finally:
            self._control_pending -= 1

    def _apply_control(self, control: str | None) -> None:
        self._control_seen = control
        if self._stopping:
            return  # a cancel is final
        if control == CANCELLED:
            self._stopping = True
            self.cancel_status = CANCELLED
            self._set_paused(True)
            self._update_gate()
            self._note("cancel asked: no new call starts; the calls in flight finish, then the run stops")
            task = asyncio.get_running_loop().create_task(self._stop_when_answered())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        if self.pool.paused != (control == PAUSED):
            self._set_paused(control == PAUSED)
            self._update_gate()
            self._note("paused: calls in flight finish, no new call starts" if self.pool.paused else "resumed")

    def _set_paused(self, paused: bool) -> None:
        """The pool holds new calls back; the displays (the headless lines) leave the paused
        seconds out of their rate, as the monitor does with the pool's record of them."""
        if paused != self.pool.paused:
            self.pool.set_paused(paused)
            self.emit(PauseChanged(self.run.id, paused))
            # Written now, not with the next heartbeat: a monitor elsewhere said "paused" for two
            # seconds after an unpause while the verdicts rose.
            self.writer.heartbeat(self.pool.snapshot())

    async def _stop_when_answered(self) -> None:
        while self.pool.in_flight():
            await asyncio.sleep(0.05)
        if self._drive_task is not None:
            self._drive_task.cancel()

    async def _watch_controls(self) -> None:
        """Apply what another process asks of this run (a pause, a resume, a cancel), read from
        the database at least once a second, apart from the heartbeat."""
        while True:
            await asyncio.sleep(CONTROL_SECONDS)
            if self._control_pending:
                continue
            try:
                control = await self.store.control(self.run.id)
            except sqlite3.Error:
                continue  # the database busy: asked again shortly
            if control != self._control_seen:
                self._apply_control(control)

    @property
    def paused(self) -> bool:
        return self.pool.paused

    @property
    def live(self) -> LiveStats:
        return self.pool.live

    @property
    def max_unwritten(self) -> int:
        return self.writer.max_unwritten

    def live_snapshot(self) -> LiveSnapshot:
        return self.pool.snapshot()

    def _update_gate(self) -> None:
        unconfirmed = self.writer.lease_unconfirmed(self.pool.snapshot)
        self.pool.gate(held_back=self.writer.behind or unconfirmed)

    def _store_answer(self, answer: ReplyResult | VerdictResult) -> None:
        self.writer.put_answer(answer)
        self._update_gate()

    def emit(self, event: Event) -> None:
        for observer in self.observers:
            observer.on_event(event)

    def sent_messages(self, prompt: list[dict]) -> list[dict]:
        """What the model under test is sent: its system message, if any, then the conversation."""
        return self.keys.sent_messages(prompt)

    def requests_record(self) -> RequestsRecord:
        """What this run's requests were, from the settings and what the providers made of them."""
        self.deviations |= self.pool.deviations()
        deviations = self.deviations | (
            {KEYS_REDACTED.format(_replies(self.replies_redacted))} if self.replies_redacted else set()
        )
        record = describe_requests(self.settings, self._template.name, self._template.sha256, deviations)
        # The limits' figures add up over the run's processes (a resume keeps its earlier ones).
        limits = merge_summaries((self.run.requests or {}).get("limits"), self.pool.limits())
        if limits:
            record["limits"] = limits
        return record

    async def _record_changed_settings(self) -> None:
        """A resume given other settings (--base-url, --model-test...) records them on the run,
        and says what changed: its description and summary then name what answered."""
        changed = await record_changed_settings(self.store, self.run, self.settings)
        if not changed:
            return
        self.run = await self.store.get_run(self.run.id)
        self._note(
            "settings changed for this resume: " + "; ".join(f"{name} {old!r} -> {new!r}" for name, old, new in changed)
        )

    def _note(self, message: str) -> None:
        self.writer.log("info", message)
        self.emit(Noted(self.run.id, "info", message))

    def _label(self, item: WorkItem, idx: int | None = None) -> str:
        """The conversation (or its criterion) as the browser numbers it, for messages."""
        if idx is None:
            return conversation_label(item.position, item.repeat, self.repeats)
        return criterion_label(idx, item.position, item.repeat, self.repeats)

    def _without_keys(self, text: str) -> str:
        """A provider's text (a reply, a grader's answer) without the run's keys: it is stored,
        shown, and a reply is sent to the grader (see hbtui.core.redact)."""
        return redact_keys(text, self.api_keys) if text and self.api_keys else text

    def _note_invalid_text(self, what: str) -> None:
        self._note(f"{what} held invalid characters (lone surrogates), stored with U+FFFD")

    # ---- the run -------------------------------------------------------------------------
    async def execute(self) -> str:
        """Run until every call is done, or until cancelled; returns the final status."""
        run_id = self.run.id
        settings = self.settings
        head = self.head_start
        if head is not None:
            # Created under this process's lease, with what its requests are, and nothing done yet.
            self.writer.lease = head.lease
            self.writer.confirmed_at = time.monotonic()
            self.writer.start_journal(self.run.created_at)
            run = self.run
            self.emit(
                RunStarted(
                    run_id,
                    run.name,
                    conversations_total=run.n_conversations,
                    criteria_total=run.n_criteria,
                    replies=0,
                    no_reply=0,
                    criteria_graded=0,
                    criteria_skipped=0,
                    grading_errors=0,
                )
            )
            self._finish_ahead()
        else:
            await self._claim_and_recover()
        keep_reserve(self.store.path, run_id)  # room for the end, should the disk fill (hbtui.store.disk_reserve)
        limits = settings.endpoint_rate_limits()
        test = self.pool.replicas(
            settings.test_endpoints, settings.concurrency, model=settings.model_test, rate_limits=limits[False]
        )
        grader = self.pool.replicas(
            settings.grader_endpoints,
            settings.effective_grader_concurrency,
            model=settings.model_grader,
            rate_limits=limits[True],
            key_name="API_KEY" if settings.grader_shares_endpoints else "GRADER_API_KEY",
        )
        writer = asyncio.create_task(self.writer.run(), name="hbtui-writer")
        if self.ahead is not None:
            self.ahead.start()
        heartbeat = asyncio.create_task(self._heartbeat(), name="hbtui-heartbeat")
        controls = asyncio.create_task(self._watch_controls(), name="hbtui-controls")
        self._background.add(controls)
        drive = asyncio.create_task(self._drive(test, grader), name="hbtui-drive")
        self._drive_task = drive
        # A database that stops taking writes (disk full, read-only) stops the calls at once:
        # answers that cannot be stored would be paid for again on resume.
        writer.add_done_callback(lambda task: drive.cancel() if not task.cancelled() and task.exception() else None)
        status, error = FINISHED, None
        try:
            await drive
            if self._fatal is not None:
                status, error = FAILED, str(self._fatal)
        except asyncio.CancelledError:
            if self._fatal is not None and not self._cancelled_from_outside():
                status, error = FAILED, str(self._fatal)
            else:
                status = self.cancel_status
        except Exception as exc:  # noqa: BLE001 - the run must end with a status, whatever broke
            status, error = FAILED, f"{type(exc).__name__}: {exc}"
        finally:
            # Shielded: a second cancel (Ctrl-C twice, the app stopping a run it just cancelled)
            # must not cut the final writes and leave the run marked as running.
            status = await asyncio.shield(self._close(writer, heartbeat, status, error))
        return status

    async def _claim_and_recover(self) -> None:
        """Take the run (RunBusy if another process drives it) and make its stored state the
        work still to do, before any call."""
        run_id = self.run.id
        self.writer.lease = await self.store.claim_run(run_id, self.owner)
        self.writer.confirmed_at = time.monotonic()
        # Before the errors are put back in the queue: a recovered answer is stored as received.
        if recovered := await self.writer.recover_journal(self.run.created_at):
            self._note(f"journal: {recovered} answers received before the stop stored, not asked again")
        await self._record_changed_settings()
        await self.store.set_requests(run_id, self.requests_record())
        # Calls that got no answer (timeouts, refused connections, 5xx, 429 after every retry) are
        # work still missing, so a resume asks them again; refusals and unparseable verdicts are
        # answers, kept until `regrade-errors` asks for them.
        await self.store.reset_errors(run_id, TRANSIENT_KINDS, owner=self.owner)
        await self.store.refresh_summaries(run_id)
        progress = await self.store.progress(run_id)
        if not (
            progress.conversations_generated
            or progress.conversations_failed
            or progress.criteria_graded
            or progress.criteria_errors
            or self.run.source_run_id
            or self.run.planned.completions
        ):
            self._finish_ahead()  # nothing done yet: every conversation completes in this process
        self.emit(
            RunStarted(
                run_id,
                self.run.name,
                progress.conversations_total,
                progress.criteria_total,
                progress.conversations_generated,
                progress.conversations_failed,
                progress.criteria_graded,
                progress.criteria_skipped,
                progress.criteria_errors,
                await self.store.conversation_scores(run_id),
            )
        )

    def _finish_ahead(self) -> None:
        self.ahead = FinishAhead(self.store, self.run.id, self.run.n_conversations, self.writer, self.runs_root)

    def _completed(self, item: WorkItem) -> None:
        """The conversation's last record was just handed to the writer."""
        if self.ahead is not None:
            self.ahead.done(item.position)

    async def _close(self, writer: asyncio.Task, heartbeat: asyncio.Task, status: str, error: str | None) -> str:
        """Flush what completed, close the clients, decide the final status and record it."""
        try:
            return await self._close_run(writer, heartbeat, status, error)
        finally:
            if self.ahead is not None:
                await self.ahead.close()
            if not self.taken_over:  # else the reserve is the new driver's
                remove_reserve(self.store.path, self.run.id)

    async def _close_run(self, writer: asyncio.Task, heartbeat: asyncio.Task, status: str, error: str | None) -> str:
        run_id = self.run.id
        heartbeat.cancel()
        background = list(self._background)
        for task in background:
            task.cancel()
        await asyncio.gather(heartbeat, *background, return_exceptions=True)
        head = self.head_start
        if head is not None and not await _stored(head.stored):
            # The run never existed for anyone else: nothing to flush or mark. The calls it had
            # answered are lost, as on a crash; the plan's error is the command's.
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            await self.pool.aclose()
            if head.stored.cancelled():
                raise asyncio.CancelledError
            raise head.stored.exception() or StoreError("the run's plan was not stored")
        if not writer.done():
            # Whatever completed reaches the database before the run is closed, even on Ctrl-C,
            # with the final live figures for monitors in other processes.
            self.writer.heartbeat(self.pool.snapshot())
            await self.writer.close()
            await asyncio.gather(asyncio.shield(writer), return_exceptions=True)
        await self.pool.aclose()
        store_error = writer.exception() if not writer.cancelled() else None
        if isinstance(store_error, RunTakenOver):
            return self._taken_over(str(store_error))
        settled, prepared = Settled(status, error, None), None
        if isinstance(store_error, StoreError):
            settled = Settled(FAILED, str(store_error), None)
        elif store_error is not None:
            settled = Settled(
                FAILED,
                f"cannot write to the database {self.store.path}: {store_error}; the run stopped and"
                f" resumes with {invoked_as()} resume {run_id} once that is fixed",
                None,
            )
        elif status == FINISHED:
            prepared = await self.ahead.finish() if self.ahead is not None else None
            settled = await settle(self.store, self.run, prepared.tally if prepared else None)
        self.error = settled.error
        if store_error is not None:
            remove_reserve(self.store.path, run_id)  # the room it kept is this end's: the disk may be full
        try:
            await record_end(
                self.store,
                run_id,
                settled,
                lease=self.writer.lease,
                requests=self.requests_record(),
                runs_root=self.runs_root,
                results=prepared.results if prepared else None,
            )
        except RunTakenOver as exc:
            return self._taken_over(str(exc))
        except sqlite3.Error:
            pass  # the same fault: the stale heartbeat will show the run as interrupted
        name, headline = settled.report.headline if settled.report else ("score", None)
        self.emit(RunFinished(run_id, settled.status, headline.value if headline else None, settled.error, name))
        return settled.status

    def _taken_over(self, error: str) -> str:
        """Another process drives the run now: its status, owner and results are its own."""
        self.taken_over, self.error = True, error
        self.emit(RunFinished(self.run.id, TAKEN_OVER, None, error))
        return TAKEN_OVER

    def _check_fatal(self, exc: ChatError) -> bool:
        """True (and the run stops) on what every later call would hit too.

        A wrong key or model, and an endpoint that has not answered once since the run started
        (wrong URL, server down): recording every conversation as failed would only hide that.
        The conversation stays pending, for a resume once that is fixed.
        """
        if self._fatal is not None and exc.kind in TRANSIENT_KINDS:
            return True  # the run is stopping: no answer came, so the work stays pending for a resume
        if exc.kind == CONNECTION and self.pool.never_answered(exc.endpoint):
            unreachable = ChatError(CONNECTION, f"cannot reach {exc.endpoint}: {exc.message}", exc.status, exc.attempts)
            self._stop(unreachable, stop_calls=True)
            return True
        if exc.kind == CLIENT_ERROR and self.pool.refuses_every_call(exc.endpoint):
            # A 4xx that every call gets (a proxy refusing the requests' shape): stop, resumable,
            # rather than fail thousands of conversations one by one.
            refusing = ChatError(
                CLIENT_ERROR,
                f"{exc.endpoint} refused every call with HTTP {exc.status}: {exc.message}",
                exc.status,
                exc.attempts,
            )
            self._stop(refusing, stop_calls=True)
            return True
        if exc.kind == RATE_LIMITED:
            # Only after RATE_LIMIT_PATIENCE of nothing but 429s: no call fails on rate limits alone.
            self._stop(exc, stop_calls=True)
            return True
        if exc.fatal:
            # A quota or daily limit refuses every call after it: those waiting are stopped now.
            self._stop(exc, stop_calls=exc.kind in (QUOTA, DAILY_LIMIT))
            return True
        return False

    def _stop(self, exc: ChatError, stop_calls: bool = False, endpoint: str | None = None) -> None:
        """The run stops: no new calls. ``stop_calls``: an endpoint never reached, whose calls in
        flight or waiting their turn would each retry the same failure (5 conversations took
        56 s to give up) are stopped now, unless calls to another endpoint are in flight: those
        are paid for and are let finish (so are the calls of any other fatal error, a 401 or an
        unknown model, which fail at once anyway). What was not answered stays pending."""
        if self._fatal is None:
            self._fatal = exc
            self._note(f"stopping: {exc}")
            if stop_calls and not self.pool.busy_besides(endpoint or exc.endpoint) and self._drive_task is not None:
                self._drive_task.cancel()

    def _cancelled_from_outside(self) -> bool:
        """Whether the task running the engine was cancelled too (Ctrl-C, the app), not just the drive."""
        current = asyncio.current_task()
        return current is not None and current.cancelling() > 0

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            self.writer.heartbeat(self.pool.snapshot())

    # ---- the work ------------------------------------------------------------------------
    async def _work(self) -> AsyncGenerator[WorkItem, None]:
        """The run's pending work in plan order, read a page at a time as it is taken."""
        after, size = -1, FIRST_PAGE
        if (head := self.head_start) is not None:
            for item in head.items:
                yield item
            if head.items:
                after, size = head.items[-1].position, WORK_PAGE
            # The rest of the plan, once stored whole: until then this connection would read it half written.
            await asyncio.shield(head.stored)  # a worker cancelled here must not cancel the plan
        while page := await self.store.pending_work(self.run.id, after, size):
            after, size = page[-1].position, WORK_PAGE
            if self.use_cache:
                await self._look_up_cached(page)
            for item in page:
                yield item

    async def _look_up_cached(self, page: list[WorkItem]) -> None:
        """Cache keys of the page's criteria whose reply exists (hashed in a thread), and one
        lookup of them all."""
        replied = [item for item in page if item.reply is not None]
        if not replied:
            return
        await asyncio.to_thread(self._set_keys, replied)
        cached = await self.store.cached_verdicts([key for item in replied for key in (item.keys or {}).values()])
        for item in replied:
            item.cached = {key: cached[key] for key in (item.keys or {}).values() if key in cached}

    def _set_keys(self, items: list[WorkItem]) -> None:
        for item in items:
            digest = self.keys.digest(item.prompt, item.reply or "")
            item.keys = self.keys.keys(digest, item.repeat, item.criteria) if item.criteria else {}

    async def _drive(self, test: Replicas, grader: Replicas) -> None:
        work = self._work()
        taking = asyncio.Lock()  # one worker at a time reads the next page
        grading: set[asyncio.Task] = set()
        failures: list[BaseException] = []

        def graded(task: asyncio.Task) -> None:
            grading.discard(task)
            # A grading task that broke must stop the run, not vanish with its criteria pending.
            error = None if task.cancelled() else task.exception()
            if error is not None and not failures:
                failures.append(error)
                for other in [*workers, *grading]:
                    other.cancel()

        async def worker() -> None:
            while self._fatal is None:
                async with taking:
                    item = await anext(work, None)
                if item is None:
                    return
                if item.reply is None:
                    reply = await self._generate(test, item)
                    if reply is None:
                        continue
                    item.reply = reply
                task = asyncio.create_task(self._grade_conversation(grader, item))
                grading.add(task)
                task.add_done_callback(graded)

        workers = [asyncio.create_task(worker()) for _ in range(max(1, test.capacity))]
        # The report at the end needs numpy (0.1-0.15 s of CPU to import, which `hbtui run` no
        # longer spends at start), its random generators for the bootstraps and numpy.ma, which
        # np.percentile loads: imported while the first calls wait for their answers, when the
        # process has little else to do, rather than after the last verdict (the two submodules
        # alone were 35 ms of the finish).
        import_in_background("numpy.random", "numpy.ma")
        try:
            await asyncio.gather(*workers)
            while grading:
                await asyncio.gather(*list(grading))
        except BaseException:
            for task in [*workers, *grading]:
                task.cancel()
            await asyncio.gather(*workers, *grading, return_exceptions=True)
            if failures:
                raise failures[0] from None
            raise
        finally:
            await work.aclose()
        if failures:
            raise failures[0]

    async def _generate(self, client: Replicas, item: WorkItem) -> str | None:
        self._update_gate()
        await self.pool.calls_open.wait()
        settings = self.settings
        try:
            result = await client.complete(
                settings.model_test or "",
                self.sent_messages(item.prompt),
                temperature=settings.temperature_test,
                max_tokens=settings.max_tokens_test,
                reasoning_effort=settings.reasoning_test,
                priority=GENERATION,
                api=settings.api_test,
            )
        except ChatError as exc:
            if self._check_fatal(exc):
                return None
            message = exc.message if exc.kind != CONTEXT_LENGTH else f"context too long: {exc.message}"
            self._store_answer(
                ReplyResult(
                    item.conversation_id,
                    FAILED,
                    time.time(),
                    error=message,
                    error_kind=exc.kind,
                    attempts=exc.attempts,
                )
            )
            self._completed(item)
            self.emit(
                GenerationFailed(
                    self.run.id, item.conversation_id, exc.kind, message, len(item.all_criteria), self._label(item)
                )
            )
            return None
        content, reasoning = (
            self._without_keys(result.content),
            result.reasoning and self._without_keys(result.reasoning),
        )
        if content != result.content or reasoning != result.reasoning:
            self.replies_redacted += 1
        self._store_answer(
            ReplyResult(
                item.conversation_id,
                "generated",
                time.time(),
                reply=content,
                reasoning=reasoning,
                finish_reason=result.finish_reason,
                attempts=result.attempts,
                latency_ms=result.latency_ms,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                endpoint=result.endpoint,
            )
        )
        if result.invalid_text:
            self._note_invalid_text(f"reply of {self._label(item)}")
        if result.think_stripped:
            self.deviations.add("reasoning (<think>) removed from replies before grading")
        self.emit(
            ReplyGenerated(
                self.run.id,
                item.conversation_id,
                result.latency_ms,
                result.prompt_tokens,
                result.completion_tokens,
                result.finish_reason == "length",
            )
        )
        return content

    async def _grade_conversation(self, client: Replicas, item: WorkItem) -> None:
        statuses = {idx: status for idx, _, status in item.all_criteria}
        # The grader sees the messages the model under test was sent (its system message first,
        # as the reference renders them), then the reply.
        rendered = None  # rendered once, when a key or a call needs it: not for verdicts from the cache
        keys = item.keys
        if keys is None:  # not looked up as the work was read (a reply generated just now): hashed here, once
            rendered = graded_conversation(self.sent_messages(item.prompt), item.reply or "")
            keys = self.keys.keys(conversation_digest(rendered), item.repeat, item.criteria)
            if self.use_cache:  # its criteria may still be asked already (--reuse-verdicts)
                item.cached = await self.store.cached_verdicts(list(keys.values()))
        # Verdicts served from the cache need no task of their own: a regrade of 60,000 from the
        # cache spent a second creating and gathering tasks that never awaited anything.
        asked = [
            (idx, text, points)
            for idx, text, points in item.criteria
            if not self._serve_cached(item, idx, keys[idx], statuses)
        ]
        if not asked and self.writer.unwritten >= CACHE_WRITE_CHUNK:
            # Served without a call, nothing here awaits: let the writer take what piled up, so
            # that SQLite writes one chunk while the next is served (rather than all at the end).
            await asyncio.sleep(0)
        if asked:
            conversation_filled = with_conversation(
                self._template, rendered or graded_conversation(self.sent_messages(item.prompt), item.reply or "")
            )
            if self.grader_slots is None:
                await asyncio.gather(
                    *(
                        self._grade_one(client, item, conversation_filled, keys[idx], idx, text, points, statuses)
                        for idx, text, points in asked
                    )
                )
            else:
                async with self.grader_slots.slot_for(item.conversation_id) as slot:
                    await asyncio.gather(
                        *(
                            self._grade_one(
                                client, item, conversation_filled, keys[idx], idx, text, points, statuses, slot
                            )
                            for idx, text, points in asked
                        )
                    )
        if self._fatal is not None and any(s == PENDING for s in statuses.values()):
            return
        # The one summary rule, as a refresh recomputes it from the database.
        outcome = conversation_outcome((points, statuses[idx]) for idx, points, _ in item.all_criteria)
        self.writer.put(ConversationScore(item.conversation_id, outcome))
        self._completed(item)
        self.emit(ConversationScored(self.run.id, item.conversation_id, outcome.score))

    def _serve_cached(self, item: WorkItem, idx: int, key: str, statuses: dict[int, str]) -> bool:
        """Store the cached verdict of this request, if there is one; True when there was."""
        cached = item.cached.get(key)  # get: two identical criteria of one conversation share a key
        if cached is None:
            return False
        statuses[idx] = cached.status
        self._store_answer(cached.result(item.conversation_id, idx, key))
        self.emit(CriterionGraded(self.run.id, item.conversation_id, idx, cached.status == MET, None, 0.0, 0, 0))
        return True

    async def _grade_one(
        self,
        client: Replicas,
        item: WorkItem,
        conversation_filled: str,
        key: str,
        idx: int,
        text: str,
        points: float,
        statuses: dict[int, str],
        slot: int | None = None,
    ) -> None:
        """``conversation_filled``: the grader's template with the conversation in (with_conversation);
        ``slot``: the llama.cpp slot this conversation's criteria go to (GRADER_SLOTS)."""
        self._update_gate()
        await self.pool.calls_open.wait()
        if self._fatal is not None:
            return
        settings = self.settings
        prompt = fill_criterion(self._template, conversation_filled, points, text)
        try:
            outcome = await grade_as_configured(client, settings, prompt, slot)
        except ChatError as exc:
            if self._check_fatal(exc):
                return
            statuses[idx] = ERROR
            self._store_answer(
                VerdictResult(
                    ERROR,
                    item.conversation_id,
                    idx,
                    key,
                    error=exc.message,
                    error_kind=exc.kind,
                    attempts=exc.attempts,
                    graded_at=time.time(),
                )
            )
            self.emit(
                CriterionGraded(
                    self.run.id,
                    item.conversation_id,
                    idx,
                    None,
                    exc.kind,
                    0.0,
                    0,
                    0,
                    exc.message,
                    self._label(item, idx),
                )
            )
            return
        verdict = outcome.verdict
        if outcome.enlarged:
            self.deviations.add("a cut-off verdict was asked again with a larger token budget")
        if outcome.invalid_text:
            self._note_invalid_text(f"grader's answer on {self._label(item, idx)}")
        if outcome.unparsed:
            errors = self.live.errors_by_kind
            errors[UNPARSEABLE] = errors.get(UNPARSEABLE, 0) + outcome.unparsed
        status = ERROR if verdict is None else MET if verdict.criteria_met else NOT_MET
        statuses[idx] = status
        now = time.time()
        explanation = self._without_keys(verdict.explanation) if verdict else None
        raw_output, reasoning = (
            self._without_keys(outcome.raw_output),
            outcome.reasoning and self._without_keys(outcome.reasoning),
        )
        if (raw_output, reasoning) != (outcome.raw_output, outcome.reasoning) and not self._explanation_redacted:
            self._explanation_redacted = True
            self._note(f"a configured key was redacted from the grader's answer on {self._label(item, idx)}")
        self._store_answer(
            VerdictResult(
                status,
                item.conversation_id,
                idx,
                key,
                explanation,
                raw_output,
                reasoning,
                outcome.error,
                outcome.error_kind,
                outcome.attempts,
                outcome.latency_ms,
                outcome.prompt_tokens,
                outcome.completion_tokens,
                now,
                endpoint=outcome.endpoint,
            )
        )
        self.emit(
            CriterionGraded(
                self.run.id,
                item.conversation_id,
                idx,
                verdict.criteria_met if verdict else None,
                outcome.error_kind,
                outcome.latency_ms,
                outcome.prompt_tokens,
                outcome.completion_tokens,
                outcome.error,
                self._label(item, idx),
            )
        )
