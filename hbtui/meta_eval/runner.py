"""A meta-eval run: its rows planned from a file into the store, then graded until none is left.

The grader is asked exactly what the reference's meta-evaluation asks it (hbtui.meta_eval.grading
with the run's template and system message). Results are written a batch at a time, each batch
fenced by the run's lease as a model run's are, so a stop (Ctrl-C, `hbtui cancel`, a killed
process) keeps every verdict already paid for and `hbtui resume` grades only the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from hbtui.client.wire import ChatError
from hbtui.core.calls import Completes
from hbtui.core.errors import TRANSIENT_KINDS
from hbtui.core.grading import Template, grade_as_configured, load_template
from hbtui.core.invocation import invoked_as
from hbtui.core.redact import redact_keys
from hbtui.core.settings.config import Settings
from hbtui.core.verdicts import CANCELLED, FAILED, FINISHED, INCOMPLETE, INTERRUPTED, PAUSED
from hbtui.engine.endpoint_pool import EndpointPool
from hbtui.meta_eval.grading import meta_grader_prompt
from hbtui.meta_eval.plan import meta_requests
from hbtui.meta_eval.summary import meta_eval_summary_of
from hbtui.store import ERROR, MET, NOT_MET, MetaEvalResult, MetaEvalWork, RunRow, Store
from hbtui.store.owners import this_owner


def _without_keys(text: str | None, keys: tuple[str, ...]) -> str | None:
    return redact_keys(text, keys) if text and keys else text


FLUSH_SECONDS = 0.5  # results reach the database this often (the workers never write: see execute)
HEARTBEAT_SECONDS = 2.0


@dataclass(slots=True)
class MetaProgress:
    total: int
    done: int = 0
    errors: int = 0


ProgressCallback = Callable[[MetaProgress], None]


class MetaEvalDriver:
    """Grades a meta-eval run's pending rows; ``execute`` returns the run's final status."""

    def __init__(
        self,
        store: Store,
        run: RunRow,
        settings: Settings,
        on_progress: ProgressCallback | None = None,
        backoff_base: float = 0.5,
    ) -> None:
        self.store, self.run, self.settings = store, run, settings
        self.on_progress = on_progress or (lambda progress: None)
        self.backoff_base = backoff_base
        self.owner = this_owner()
        self.lease = ""
        self.error: str | None = None
        self._pending: list[MetaEvalResult] = []
        self._pool: EndpointPool | None = None
        self._workers: list[asyncio.Task] = []
        self._fatal: ChatError | None = None
        self._unreachable: ChatError | None = None  # every endpoint of the grader stopped answering
        self._cancelled = False
        self._stop = asyncio.Event()  # the keeper's last flush, then its end

    async def execute(self) -> str:
        settings, run_id = self.settings, self.run.id
        template = load_template(settings.grader_template, settings.cache_dir)
        self.lease = await self.store.claim_run(run_id, self.owner)
        await self.store.set_requests(run_id, meta_requests(settings, template))
        await self.store.reset_meta_eval_failures(run_id, TRANSIENT_KINDS)
        work = await self.store.meta_eval_work(run_id)
        counts = await self.store.meta_eval_counts(run_id)
        self.progress = MetaProgress(
            total=sum(counts.values()), done=counts[MET] + counts[NOT_MET], errors=counts[ERROR]
        )
        self.on_progress(self.progress)
        # The grader's endpoints as a model run calls them: each with its own limit, one that
        # dies set aside and its unanswered calls sent to another.
        pool = self._pool = EndpointPool(
            settings,
            run_id,
            backoff_base=self.backoff_base,
            on_note=lambda text: None,
            emit=lambda event: None,
            on_unreachable=self._stop_unreachable,
        )
        client = pool.replicas(settings.grader_endpoints, settings.effective_grader_concurrency)
        queue: asyncio.Queue[MetaEvalWork] = asyncio.Queue()
        for item in work:
            queue.put_nowait(item)
        workers = self._workers = [
            asyncio.create_task(self._worker(client, template, queue)) for _ in range(min(len(work), client.capacity))
        ]
        keeper = asyncio.create_task(self._keep(workers))
        status = FINISHED
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            status = INTERRUPTED
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            # Asked to stop, never cancelled: cancelled in the middle of a write, the keeper
            # rolled back a batch it had taken, and those verdicts were lost (seen under load).
            self._stop.set()
            await asyncio.gather(keeper, return_exceptions=True)
            await pool.aclose()
        failure = keeper.exception() if not keeper.cancelled() else None
        if failure is not None:
            raise failure  # taken over by another process: the caller says so
        if self._fatal is not None:
            status, self.error = FAILED, f"the grader refused: {self._fatal}"
        elif self._unreachable is not None:
            status = INTERRUPTED
            self.error = f"{self._unreachable} ({invoked_as()} resume {run_id} continues where it stopped)"
        if self._cancelled:
            status = CANCELLED
        await self._flush()
        return await self._finish(status)

    def _stop_unreachable(self, exc: ChatError, endpoint: str) -> None:
        """Every endpoint of the grader stopped answering: stop (resumable) rather than spend
        every remaining row's attempts."""
        self._unreachable = exc
        for task in self._workers:
            task.cancel()

    async def _worker(self, client: Completes, template: Template, queue: asyncio.Queue[MetaEvalWork]) -> None:
        settings = self.settings
        while not queue.empty() and self._fatal is None:
            item = queue.get_nowait()
            prompt = meta_grader_prompt(template, item.prompt, item.completion, item.rubric)
            try:
                outcome = await grade_as_configured(client, settings, prompt)
            except ChatError as exc:
                if exc.fatal:
                    self._fatal = exc
                    return
                result = MetaEvalResult(
                    item.row_id,
                    ERROR,
                    error=exc.message,
                    error_kind=exc.kind,
                    attempts=exc.attempts,
                    graded_at=time.time(),
                )
            else:
                verdict = outcome.verdict
                keys = settings.configured_keys  # never stored, whatever the grader echoes
                result = MetaEvalResult(
                    item.row_id,
                    (MET if verdict.criteria_met else NOT_MET) if verdict else ERROR,
                    explanation=_without_keys(verdict.explanation, keys) if verdict else None,
                    raw_output=_without_keys(outcome.raw_output, keys),
                    reasoning=_without_keys(outcome.reasoning, keys),
                    error=outcome.error,
                    error_kind=outcome.error_kind,
                    attempts=outcome.attempts,
                    latency_ms=outcome.latency_ms,
                    prompt_tokens=outcome.prompt_tokens,
                    completion_tokens=outcome.completion_tokens,
                    graded_at=time.time(),
                )
            self._pending.append(result)
            self.progress.done += result.status != ERROR
            self.progress.errors += result.status == ERROR

    async def _flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            await self.store.write_meta_eval_results(self.run.id, self.lease, batch)
            self.on_progress(self.progress)

    async def _keep(self, workers: list[asyncio.Task]) -> None:
        """Writes what is pending, beats the heart, and applies a pause or cancel asked by any process."""
        beat = time.monotonic()
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), FLUSH_SECONDS)
            await self._flush()
            if time.monotonic() - beat >= HEARTBEAT_SECONDS:
                beat = time.monotonic()
                await self.store.heartbeat(self.run.id, self.lease, {"paused": bool(self._pool and self._pool.paused)})
                control = await self.store.control(self.run.id)
                if control == CANCELLED:
                    self._cancelled = True
                    for task in workers:
                        task.cancel()
                    return
                if self._pool is not None:  # paused: calls in flight finish; no new one leaves
                    self._pool.set_paused(control == PAUSED)
                    self._pool.gate(held_back=False)

    async def _finish(self, status: str) -> str:
        counts = await self.store.meta_eval_counts(self.run.id)
        labels_over = self.run.planned.labels_over
        stored = await self.store.meta_eval_labels(self.run.id)
        # The bootstraps take a few hundred ms for the whole file: off the event loop.
        summary = await asyncio.to_thread(meta_eval_summary_of, stored, labels_over)
        if status == FINISHED and (counts["pending"] or counts[ERROR]):
            status = INCOMPLETE
            self.error = (
                f"{counts[ERROR]} rows got no verdict"
                f" ({invoked_as()} resume {self.run.id} asks again those that got no answer)"
            )
        await self.store.finish_meta_eval(self.run.id, status, lease=self.lease, summary=summary, error=self.error)
        return status
