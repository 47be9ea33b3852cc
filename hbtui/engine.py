"""The run: plan, generate, grade, persist, resume.

Generation and grading overlap: a conversation's criteria are graded (concurrently) as soon as
its reply exists, and grading waits ahead of generation for a shared endpoint so that scores
appear as the run goes. Each completed call is handed to one writer task that commits in
batches (group commit): under light load every result commits at once, under heavy load many
results share one transaction. What is committed is never asked again, so resuming a killed run
does only the missing work.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import socket
import sqlite3
import time
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from hbtui import scoring
from hbtui.client import CONNECTION, CONTEXT_LENGTH, TRANSIENT_KINDS, UNPARSEABLE, CallRecord, ChatClient, ChatError, Endpoint
from hbtui.config import Settings, SettingsError
from hbtui.dataset import Dataset, Record, sample
from hbtui.events import (
    CallFailed,
    ConversationScored,
    CriterionGraded,
    Event,
    GenerationFailed,
    Noted,
    Observer,
    ReplyGenerated,
    RunFinished,
    RunStarted,
)
from hbtui.export import write_run_folder
from hbtui.grading import fill_template, grade_criterion, graded_conversation, load_template
from hbtui.limiter import GENERATION, AdaptiveLimiter
from hbtui.store import MET, NOT_MET, ERROR, PlannedConversation, RunRow, Store, WorkItem

HEARTBEAT_SECONDS = 2.0


def preview_of(record: Record) -> str:
    text = record.prompt[-1]["content"]
    return " ".join(text.split())[:200]


def default_run_name(settings: Settings, dataset_name: str) -> str:
    model = (settings.model_test or "model").split("/")[-1]
    return f"{model}-{Path(dataset_name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a run, or None: a run is referred to by id, name or `latest`,
    so a name that reads as one of the others would point at another run."""
    if not name.strip():
        return "is empty"
    if name.strip().isdigit():
        return "is all digits, which reads as a run id"
    if name.strip() == "latest":
        return "means the newest run"
    return None


def check_run_name(name: str | None) -> None:
    if name is not None and (problem := run_name_problem(name)):
        raise SettingsError(f"--name {name!r}: {problem}; choose another name")


async def plan_run(
    store: Store,
    settings: Settings,
    dataset: Dataset,
    *,
    limit: int | None = None,
    seed: int = 0,
    repeats: int = 1,
    name: str | None = None,
) -> int:
    """Choose the records (exactly as the reference samples them) and create the run."""
    settings.require_models()
    if repeats < 1:
        raise SettingsError(f"--repeats {repeats}: must be at least 1")
    chosen = sample(dataset.records, limit, seed)
    planned: list[PlannedConversation] = []
    # The reference repeats the whole sampled list (examples * n_repeats), so repeat is the outer loop.
    for repeat in range(repeats):
        for record in chosen:
            planned.append(
                PlannedConversation(
                    position=len(planned),
                    repeat=repeat,
                    prompt_id=record.prompt_id,
                    record_body=record.raw,
                    record_sha256=hashlib.sha256(record.raw.encode()).hexdigest(),
                    theme=record.theme,
                    example_tags=record.example_tags,
                    preview=preview_of(record),
                    criteria=[(c.criterion, c.points, c.tags) for c in record.rubrics],
                )
            )
    check_run_name(name)
    return await store.create_run(
        name=name,
        name_base=default_run_name(settings, dataset.name),
        dataset_name=dataset.name,
        dataset_path=str(dataset.path),
        dataset_sha256=dataset.sha256,
        model_test=settings.model_test,
        model_grader=settings.model_grader,
        settings=settings.public_dict(),
        plan={"limit": limit, "seed": seed, "repeats": repeats, "records": len(chosen)},
        conversations=planned,
    )


def settings_for_run(run: RunRow, current: Settings, **overrides: Any) -> Settings:
    """The run's stored settings, with the current API keys (never stored) and any overrides.

    A key goes only to the endpoint it was configured for: when the current settings point at
    another URL than the run's, their key would leak to the run's host, so that is refused.
    The database is the one open now, wherever the run was made.
    """
    stored = {k: v for k, v in run.settings.items() if k in Settings.__dataclass_fields__}
    stored.update(api_key=None, grader_api_key=None, db_path=current.db_path)
    merged = Settings(**stored).with_overrides(**overrides)
    pairs = [("BASE_URL", "API_KEY", current.base_url, merged.base_url, current.api_key)]
    if current.grader_api_key or current.grader_base_url:
        pairs.append(("GRADER_BASE_URL", "GRADER_API_KEY", current.effective_grader_base_url,
                      merged.effective_grader_base_url, current.effective_grader_api_key))
    keys = {}
    for url_key, key_name, current_url, run_url, key in pairs:
        if key and current_url and current_url != run_url:
            raise SettingsError(
                f"run {run.id} calls {run_url}, but {url_key} is {current_url} now: {key_name} is not sent to"
                f" another host. Set {url_key}={run_url} with its key, or resume with --base-url {current_url}"
            )
        keys[key_name] = key
    grader_key = keys.get("GRADER_API_KEY", current.grader_api_key)
    return replace(merged, api_key=keys.get("API_KEY"), grader_api_key=grader_key)


# Settings that may differ on a resume without changing what the run is: where its database
# and cache are found, and the keys (stored masked; a new session brings them again).
UNRECORDED_SETTINGS = {"db_path", "cache_dir", "api_key", "grader_api_key"}


def resume_hint(run_id: int, error: str | None) -> str:
    """What to do about a run that stopped on ``error``, as one line naming the command.

    A resume keeps the run's endpoint and model names (they are part of what the run is), so
    fixing BASE_URL in .env does not move it: the hint says which flag does.
    """
    kind = (error or "").split(":", 1)[0]
    if kind == "connection":
        return (f"once the server answers: hbtui resume {run_id} (a run keeps its endpoint; to move it:"
                f" hbtui resume {run_id} --base-url URL, or --grader-base-url URL)")
    if kind == "auth":
        return f"set the key (API_KEY, or GRADER_API_KEY, in .env or the environment), then: hbtui resume {run_id}"
    if kind == "not_found":
        return (f"a run keeps its endpoint and model names; to correct one: hbtui resume {run_id} --model-test NAME"
                " (or --model-grader NAME, or --base-url URL if the address lacks its /v1)")
    return f"fix the cause, then: hbtui resume {run_id}"


@dataclass
class EndpointStats:
    """Live figures of one endpoint, for the monitor of this process and the heartbeat row."""

    in_flight: int = 0
    limit: int = 0
    calls: int = 0
    failures: int = 0
    successes: int = 0


@dataclass
class LiveStats:
    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    endpoints: dict[str, EndpointStats] = field(default_factory=dict)


class Engine:
    """Drives one run to the end (or to a stop) in the calling event loop."""

    def __init__(self, store: Store, run: RunRow, settings: Settings, observers: Sequence[Observer] = (), *,
                 backoff_base: float = 0.5) -> None:
        self.store = store
        self.run = run
        self.settings = settings
        self.observers = list(observers)
        self.backoff_base = backoff_base
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.live = LiveStats()
        self._writes: asyncio.Queue = asyncio.Queue()
        self._unpaused = asyncio.Event()
        self._unpaused.set()
        self._fatal: ChatError | None = None
        self._drive_task: asyncio.Task | None = None  # cancelled by a fatal error: see _stop
        self._clients: dict[str, ChatClient] = {}
        self._limiters: dict[str, AdaptiveLimiter] = {}
        self._template = load_template(settings.grader_template)
        self.cancel_status = "interrupted"
        self.error: str | None = None
        # Run folders (results.jsonl, description.md) go beside the database, as the old harness had them.
        self.runs_root = Path(settings.db_path).parent

    # ---- control from a display --------------------------------------------------------
    def pause(self) -> None:
        self._unpaused.clear()

    def resume(self) -> None:
        self._unpaused.set()

    @property
    def paused(self) -> bool:
        return not self._unpaused.is_set()

    def emit(self, event: Event) -> None:
        for observer in self.observers:
            observer.on_event(event)

    # ---- clients ---------------------------------------------------------------------------
    def _client(self, base_url: str, api_key: str | None, concurrency: int) -> ChatClient:
        if base_url not in self._clients:
            limiter = AdaptiveLimiter(concurrency)
            self._limiters[base_url] = limiter
            self.live.endpoints[base_url] = EndpointStats(limit=concurrency)
            self._clients[base_url] = ChatClient(
                Endpoint(base_url, api_key),
                limiter=limiter,
                timeout=self.settings.timeout,
                max_attempts=self.settings.max_attempts,
                backoff_base=self.backoff_base,
                on_note=self._note,
                on_call=self._on_call,
                gate=self._unpaused,
            )
        return self._clients[base_url]

    async def _record_changed_settings(self) -> None:
        """A resume given other settings (--base-url, --model-test...) records them on the run,
        and says what changed: its description and summary then name what answered."""
        now = self.settings.public_dict()
        before = self.run.settings
        # Only what the run recorded: a setting added to hbtui since is no change of the user's.
        changed = [(name, before[name], value) for name, value in now.items()
                   if name in before and name not in UNRECORDED_SETTINGS and before[name] != value]
        if not changed:
            return
        await self.store.update_run_settings(self.run.id, now, self.settings.model_test, self.settings.model_grader)
        self.run = await self.store.get_run(self.run.id)
        self._note("settings changed for this resume: "
                   + "; ".join(f"{name} {old!r} -> {new!r}" for name, old, new in changed))

    def _note(self, message: str) -> None:
        self._writes.put_nowait(("log", (self.run.id, time.time(), "info", message)))
        self.emit(Noted(self.run.id, "info", message))

    def _note_invalid_text(self, what: str) -> None:
        self._note(f"{what} held invalid characters (lone surrogates), stored with U+FFFD")

    def _on_call(self, record: CallRecord) -> None:
        stats = self.live.endpoints[record.endpoint]
        stats.calls += 1
        stats.successes += record.ok
        if not record.ok:
            stats.failures += 1
            self.live.errors_by_kind[record.kind] = self.live.errors_by_kind.get(record.kind, 0) + 1
            self.emit(CallFailed(self.run.id, record.endpoint, record.kind, record.message))

    def live_snapshot(self) -> dict:
        for url, limiter in self._limiters.items():
            stats = self.live.endpoints[url]
            stats.in_flight, stats.limit = limiter.in_flight, limiter.limit
        return {
            "paused": self.paused,
            "started_at": self.live.started_at,  # when this process took the run up
            "endpoints": {url: vars(s).copy() for url, s in self.live.endpoints.items()},
            "call_errors": dict(self.live.errors_by_kind),
        }

    # ---- the run -------------------------------------------------------------------------
    async def execute(self) -> str:
        """Run until every call is done, or until cancelled; returns the final status."""
        run_id = self.run.id
        await self.store.claim_run(run_id, self.owner)
        settings = self.settings
        await self._record_changed_settings()
        test = self._client(settings.base_url, settings.api_key, settings.concurrency)
        grader = self._client(
            settings.effective_grader_base_url, settings.effective_grader_api_key, settings.effective_grader_concurrency
        )
        # Calls that got no answer (timeouts, refused connections, 5xx, 429 after every retry) are
        # work still missing, so a resume asks them again; refusals and unparseable verdicts are
        # answers, kept until `regrade-errors` asks for them.
        await self.store.reset_errors(run_id, TRANSIENT_KINDS, owner=self.owner)
        await self.store.refresh_summaries(run_id)
        work = await self.store.pending_work(run_id)
        # The work list (every prompt of the run) lives until the end: moved out of the cyclic
        # collector's sight, it is not rescanned by every full collection, whose pauses stalled
        # the event loop (measured at 256 in flight: 93-97% of the ideal before, 97-98% after).
        gc.collect()
        gc.freeze()
        progress = await self.store.progress(run_id)
        self.emit(RunStarted(run_id, self.run.name, progress.conversations_total, progress.criteria_total,
                             progress.conversations_generated + progress.conversations_failed, progress.criteria_done,
                             await self.store.conversation_scores(run_id)))
        writer = asyncio.create_task(self._writer(), name="hbtui-writer")
        heartbeat = asyncio.create_task(self._heartbeat(), name="hbtui-heartbeat")
        drive = asyncio.create_task(self._drive(work, test, grader), name="hbtui-drive")
        self._drive_task = drive
        # A database that stops taking writes (disk full, read-only) stops the calls at once:
        # answers that cannot be stored would be paid for again on resume.
        writer.add_done_callback(lambda task: drive.cancel() if not task.cancelled() and task.exception() else None)
        status, error = "finished", None
        try:
            await drive
            if self._fatal is not None:
                status, error = "failed", str(self._fatal)
        except asyncio.CancelledError:
            if self._fatal is not None and not self._cancelled_from_outside():
                status, error = "failed", str(self._fatal)
            else:
                status = self.cancel_status
        except Exception as exc:  # noqa: BLE001 - the run must end with a status, whatever broke
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            # Shielded: a second cancel (Ctrl-C twice, the app stopping a run it just cancelled)
            # must not cut the final writes and leave the run marked as running.
            status = await asyncio.shield(self._close(writer, heartbeat, status, error))
        return status

    async def _close(self, writer: asyncio.Task, heartbeat: asyncio.Task, status: str, error: str | None) -> str:
        """Flush what completed, close the clients, decide the final status and record it."""
        run_id = self.run.id
        gc.unfreeze()
        heartbeat.cancel()
        await asyncio.gather(heartbeat, return_exceptions=True)
        if not writer.done():
            # Whatever completed reaches the database before the run is closed, even on Ctrl-C,
            # with the final live figures for monitors in other processes.
            self._writes.put_nowait(("heartbeat", self.live_snapshot()))
            await self._writes.put(None)
            await asyncio.gather(asyncio.shield(writer), return_exceptions=True)
        for client in self._clients.values():
            await client.aclose()
        store_error = writer.exception() if not writer.cancelled() else None
        report = None
        if store_error is not None:
            status = "failed"
            error = (f"cannot write to the database {self.store.path}: {store_error}; the run stopped and"
                     f" resumes with `hbtui resume {run_id}` once that is fixed")
        elif status == "finished":
            progress = await self.store.progress(run_id)
            left = progress.criteria_total - progress.criteria_done
            if left or progress.conversations_generated + progress.conversations_failed < progress.conversations_total:
                # Never call a run finished while work is missing, whatever stopped it.
                status, error = "interrupted", f"{left} criteria were left ungraded; `hbtui resume {run_id}` does them"
            else:
                await self.store.refresh_summaries(run_id)
                report = await compute_report(self.store, run_id)
        self.error = error
        try:
            await self.store.finish_run(run_id, status, error=error, report=report)
            if status == "finished":
                folder = await write_run_folder(self.store, await self.store.get_run(run_id), self.runs_root)
                await self.store.set_folder(run_id, str(folder))
        except sqlite3.Error:
            pass  # the same fault: the stale heartbeat will show the run as interrupted
        score = report["overall_score"] if report else None
        self.emit(RunFinished(run_id, status, score, error))
        return status

    async def _drive(self, work: list[WorkItem], test: ChatClient, grader: ChatClient) -> None:
        queue: asyncio.Queue[WorkItem] = asyncio.Queue()
        for item in work:
            queue.put_nowait(item)
        grading: set[asyncio.Task] = set()
        failures: list[BaseException] = []

        def graded(task: asyncio.Task) -> None:
            grading.discard(task)
            # A grading task that broke must stop the run, not vanish with its criteria pending.
            if not task.cancelled() and task.exception() is not None and not failures:
                failures.append(task.exception())
                for other in [*workers, *grading]:
                    other.cancel()

        async def worker() -> None:
            while not queue.empty() and self._fatal is None:
                item = queue.get_nowait()
                if item.reply is None:
                    reply = await self._generate(test, item)
                    if reply is None:
                        continue
                    item.reply = reply
                task = asyncio.create_task(self._grade_conversation(grader, item))
                grading.add(task)
                task.add_done_callback(graded)

        workers = [asyncio.create_task(worker()) for _ in range(max(1, self.settings.concurrency))]
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
        if failures:
            raise failures[0]

    async def _generate(self, client: ChatClient, item: WorkItem) -> str | None:
        await self._unpaused.wait()
        settings = self.settings
        try:
            result = await client.complete(
                settings.model_test,
                item.prompt,
                temperature=settings.temperature_test,
                max_tokens=settings.max_tokens_test,
                reasoning_effort=settings.reasoning_test,
                priority=GENERATION,
            )
        except ChatError as exc:
            if self._check_fatal(exc):
                return None
            message = exc.message if exc.kind != CONTEXT_LENGTH else f"context too long: {exc.message}"
            self._writes.put_nowait(("reply", (
                "failed", None, None, None, message, exc.kind, exc.attempts, None, None, None, time.time(),
                item.conversation_id,
            )))
            self.emit(GenerationFailed(self.run.id, item.conversation_id, exc.kind, message))
            return None
        self._writes.put_nowait(("reply", (
            "generated", result.content, result.reasoning, result.finish_reason, None, None, result.attempts,
            result.latency_ms, result.prompt_tokens, result.completion_tokens, time.time(), item.conversation_id,
        )))
        if result.invalid_text:
            self._note_invalid_text(f"reply of conversation {item.position + 1}")
        self.emit(ReplyGenerated(self.run.id, item.conversation_id, result.latency_ms, result.prompt_tokens,
                                 result.completion_tokens, result.finish_reason == "length"))
        return result.content

    async def _grade_conversation(self, client: ChatClient, item: WorkItem) -> None:
        statuses = {idx: status for idx, _, _, status in item.all_criteria}
        rendered = graded_conversation(item.prompt, item.reply or "")
        await asyncio.gather(*(self._grade_one(client, item, rendered, idx, text, points, statuses)
                               for idx, text, points in item.criteria))
        if self._fatal is not None and any(s == "pending" for s in statuses.values()):
            return
        criteria = [
            scoring.GradedCriterion(points, tags, True if statuses[idx] == MET else False if statuses[idx] == NOT_MET else None)
            for idx, points, tags, _ in item.all_criteria
        ]
        errors = sum(1 for s in statuses.values() if s == ERROR)
        metrics = scoring.conversation_metrics(item.example_tags, criteria)
        score = metrics.score if metrics else None
        n_met = sum(1 for c in criteria if c.met and c.points > 0)
        penalties = sum(1 for c in criteria if c.met and c.points < 0)
        self._writes.put_nowait(("summary", (score, n_met, errors, penalties, item.conversation_id)))
        self.emit(ConversationScored(self.run.id, item.conversation_id, score))

    async def _grade_one(self, client: ChatClient, item: WorkItem, rendered: str, idx: int, text: str,
                         points: float, statuses: dict[int, str]) -> None:
        await self._unpaused.wait()
        if self._fatal is not None:
            return
        settings = self.settings
        prompt = fill_template(self._template, rendered, points, text)
        try:
            outcome = await grade_criterion(
                client,
                settings.model_grader,
                prompt,
                temperature=settings.temperature_grader,
                max_tokens=settings.max_tokens_grader,
                reasoning_effort=settings.reasoning_grader,
                parse_attempts=settings.grader_parse_attempts,
            )
        except ChatError as exc:
            if self._check_fatal(exc):
                return
            statuses[idx] = ERROR
            self._writes.put_nowait(("verdict", (
                ERROR, None, None, None, exc.message, exc.kind, exc.attempts, None, None, None, time.time(),
                item.conversation_id, idx,
            )))
            self.emit(CriterionGraded(self.run.id, item.conversation_id, idx, None, exc.kind, 0.0, 0, 0, exc.message))
            return
        verdict = outcome.verdict
        if outcome.invalid_text:
            self._note_invalid_text(f"grader's answer on criterion {idx + 1} of conversation {item.position + 1}")
        if outcome.unparsed:
            self.live.errors_by_kind[UNPARSEABLE] = self.live.errors_by_kind.get(UNPARSEABLE, 0) + outcome.unparsed
        status = ERROR if verdict is None else MET if verdict.criteria_met else NOT_MET
        statuses[idx] = status
        self._writes.put_nowait(("verdict", (
            status, verdict.explanation if verdict else None, outcome.raw_output, outcome.reasoning, outcome.error,
            outcome.error_kind, outcome.attempts, outcome.latency_ms, outcome.prompt_tokens, outcome.completion_tokens,
            time.time(), item.conversation_id, idx,
        )))
        self.emit(CriterionGraded(self.run.id, item.conversation_id, idx, verdict.criteria_met if verdict else None,
                                  outcome.error_kind, outcome.latency_ms, outcome.prompt_tokens,
                                  outcome.completion_tokens, outcome.error))

    def _check_fatal(self, exc: ChatError) -> bool:
        """True (and the run stops) on what every later call would hit too.

        A wrong key or model, and an endpoint that has not answered once since the run started
        (wrong URL, server down): recording every conversation as failed would only hide that.
        The conversation stays pending, for a resume once that is fixed.
        """
        stats = self.live.endpoints.get(exc.endpoint or "")
        if exc.kind == CONNECTION and stats is not None and stats.successes == 0:
            unreachable = ChatError(CONNECTION, f"cannot reach {exc.endpoint}: {exc.message}", exc.status, exc.attempts)
            self._stop(unreachable, stop_calls=True)
            return True
        if exc.fatal:
            self._stop(exc)
            return True
        return False

    def _stop(self, exc: ChatError, stop_calls: bool = False) -> None:
        """The run stops: no new calls. ``stop_calls``: an endpoint never reached, whose calls in
        flight or waiting their turn would each retry the same failure (5 conversations took
        56 s to give up) are stopped now, unless calls to another endpoint are in flight: those
        are paid for and are let finish (so are the calls of any other fatal error, a 401 or an
        unknown model, which fail at once anyway). What was not answered stays pending."""
        if self._fatal is None:
            self._fatal = exc
            self._note(f"stopping: {exc}")
            others_busy = any(limiter.in_flight for url, limiter in self._limiters.items() if url != exc.endpoint)
            if stop_calls and not others_busy and self._drive_task is not None:
                self._drive_task.cancel()

    def _cancelled_from_outside(self) -> bool:
        """Whether the task running the engine was cancelled too (Ctrl-C, the app), not just the drive."""
        current = asyncio.current_task()
        return current is not None and current.cancelling() > 0

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            self._writes.put_nowait(("heartbeat", self.live_snapshot()))

    async def _writer(self) -> None:
        """Group commit: everything queued since the last commit goes in one transaction."""
        done = False
        while not done:
            first = await self._writes.get()
            batch = [first]
            while not self._writes.empty():
                batch.append(self._writes.get_nowait())
            replies, verdicts, summaries, log = [], [], [], []
            heartbeat = None
            for entry in batch:
                if entry is None:
                    done = True
                    continue
                kind, row = entry
                if kind == "reply":
                    replies.append(row)
                elif kind == "verdict":
                    verdicts.append(row)
                elif kind == "summary":
                    summaries.append(row)
                elif kind == "log":
                    log.append(row)
                else:
                    heartbeat = row
            if replies or verdicts or summaries or log:
                await self.store.write_batch(replies, verdicts, summaries, log)
            if heartbeat is not None:
                await self.store.heartbeat(self.run.id, self.owner, heartbeat)


async def compute_report(store: Store, run_id: int) -> dict:
    inputs = await store.scoring_inputs(run_id)
    # The bootstraps take a quarter of a second for 5,000 conversations: off the event loop, so
    # a screen (or the engine's own calls) keeps going meanwhile.
    return await asyncio.to_thread(lambda: scoring.run_report(inputs).as_json())
