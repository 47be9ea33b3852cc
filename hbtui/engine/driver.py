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
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hbtui import scoring
from hbtui.client import (
    CONNECTION,
    CONTEXT_LENGTH,
    TRANSIENT_KINDS,
    UNPARSEABLE,
    CallRecord,
    ChatClient,
    ChatError,
    Endpoint,
)
from hbtui.config import Settings, SettingsError, attribute_key
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
from hbtui.fidelity import describe_requests
from hbtui.grading import (
    VERDICT_FORMAT,
    fill_template,
    grade_criterion,
    graded_conversation,
    load_template,
)
from hbtui.limiter import GENERATION, AdaptiveLimiter
from hbtui.store import (
    ERROR,
    MET,
    NOT_MET,
    PlannedConversation,
    RunRow,
    RunTakenOver,
    Store,
    StoreError,
    VerdictResult,
    WorkItem,
)
from hbtui.store.owners import this_owner
from hbtui.verdict_cache import RequestKeys, conversation_digest

HEARTBEAT_SECONDS = 2.0
# No new call goes out unless a write confirmed, this recently, that this process still holds
# the run's lease. A driver stopped (Ctrl-Z) and taken over meanwhile then sends nothing new
# when it goes on: it learns of the takeover first, and only its calls in flight were paid twice.
LEASE_CONFIRM_SECONDS = 3 * HEARTBEAT_SECONDS
CACHE_WRITE_CHUNK = 2048  # verdicts served from the cache between two chances for the writer to run
INCOMPLETE = "incomplete"  # ended, scored on what is there, with replies or verdicts missing
TAKEN_OVER = "taken over"  # this process lost the run to another: no status of its own to write


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
        model_test=settings.model_test or "",  # require_models() above: both are set
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
        plan={"limit": limit, "seed": seed, "repeats": repeats, "records": len(chosen)},
        conversations=planned,
    )


# What a regrade may set: everything about the grader and how it is reached; the model under
# test and its settings stay the source's, since its replies are reused as they are.
GRADER_SETTINGS = (
    "model_grader",
    "grader_base_url",
    "grader_template",
    "temperature_grader",
    "max_tokens_grader",
    "reasoning_grader",
    "system_message_grader",
    "grader_json_schema",
    "grader_concurrency",
    "timeout",
    "max_attempts",
    "grader_parse_attempts",
    "unreachable_patience",
    "db_write_patience",
)


async def plan_regrade(store: Store, source: RunRow, settings: Settings, name: str | None = None) -> int:
    """A new run, linked to ``source``, that grades its replies again with ``settings``' grader."""
    check_run_name(name)
    status = source.shown_status()
    if status == "running":
        raise SettingsError(f"run {source.id} is still running; regrade it once it has stopped")
    if status not in ("finished", "incomplete"):
        # Its conversations without a reply yet would be left without one, and the regrade would
        # score a part of the run as if it were the whole.
        raise SettingsError(
            f"run {source.id} is {status}, its replies not all there: finish it first"
            f" (hbtui resume {source.id}), then regrade it"
        )
    if not (await store.progress(source.id)).conversations_generated:
        raise SettingsError(f"run {source.id} has no replies to grade again (it got none)")
    settings.require_models()
    model = (settings.model_grader or "grader").split("/")[-1]
    await seed_cache(store, source, settings.cache_dir)
    return await store.create_regrade(
        source.id,
        name=name,
        name_base=f"{source.name}-regrade-{model}",
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
        unanswered_kinds=sorted(TRANSIENT_KINDS),
    )


async def seed_cache(store: Store, run: RunRow, cache_dir: str) -> int:
    """Put ``run``'s verdicts in the cache under the keys of its own requests, where they are not
    yet (a run made before the cache existed): a regrade with the same grader then asks nothing."""
    if not await store.has_uncached_verdicts(run.id):
        return 0
    settings = replace(settings_for_run(run, Settings(db_path=store.path.as_posix())), cache_dir=cache_dir)
    try:
        template = load_template(settings.grader_template, settings.cache_dir)
    except Exception:  # noqa: BLE001 - its prompt cannot be had (a file since moved): nothing to seed
        return 0
    keys = RequestKeys(settings, template)
    rows = []
    for conversation_id, prompt, reply, repeat, verdicts in await store.graded_for_cache(run.id):
        rows += [
            (key, conversation_id, idx)
            for (idx, _, _), key in zip(verdicts, keys.keys(keys.digest(prompt, reply), repeat, verdicts))
        ]
    return await store.seed_cache(rows)


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
        pairs.append(
            (
                "GRADER_BASE_URL",
                "GRADER_API_KEY",
                current.effective_grader_base_url,
                merged.effective_grader_base_url,
                current.effective_grader_api_key,
            )
        )
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

# What a run measures. A resume may change how the run is reached (endpoint, keys, concurrency,
# timeouts, patience), never these: that would put two models' replies, or two graders'
# verdicts, under one label. (The sample is not a setting: a resume cannot change it at all.)
MEASURED_TEST = ("model_test", "temperature_test", "max_tokens_test", "reasoning_test", "system_message_test")
MEASURED_GRADER = (
    "model_grader",
    "grader_template",
    "temperature_grader",
    "max_tokens_grader",
    "reasoning_grader",
    "system_message_grader",
    "grader_json_schema",
)


async def refuse_measured_changes(store: Store, run: RunRow, settings: Settings) -> None:
    """Raise SettingsError, in one line, when ``settings`` would change what ``run`` measures.

    One correction is allowed: a model name, while none of that model's calls has been answered
    (a run that stopped on "model not found" at once is corrected with --model-test NAME).
    """
    replies, verdicts = await store.answered_calls(run.id)
    for names, answered in ((MEASURED_TEST, replies), (MEASURED_GRADER, verdicts)):
        for name in names:
            if name not in run.settings:
                continue  # a setting added to hbtui since the run was made
            before, now = run.settings[name], getattr(settings, name)
            if before == now or (name in ("model_test", "model_grader") and not answered):
                continue
            key = attribute_key(name)
            raise SettingsError(
                f"{key} {now!r}: run {run.id} was made with {before!r}, and a resume may change how a run is"
                f" reached (endpoint, keys, concurrency, timeouts), not what it measures; start a new run"
                f" (hbtui run) for {now!r}"
            )


def resume_hint(run_id: int, error: str | None) -> str:
    """What to do about a run that stopped on ``error``, as one line naming the command.

    A resume keeps the run's endpoint and model names (they are part of what the run is), so
    fixing BASE_URL in .env does not move it: the hint says which flag does.
    """
    kind = (error or "").split(":", 1)[0]
    if kind == "connection":
        return (
            f"once the server answers: hbtui resume {run_id} (a run keeps its endpoint; to move it:"
            f" hbtui resume {run_id} --base-url URL, or --grader-base-url URL)"
        )
    if kind == "auth":
        return f"set the key (API_KEY, or GRADER_API_KEY, in .env or the environment), then: hbtui resume {run_id}"
    if kind == "not_found":
        return (
            f"a run keeps its endpoint and model names; while none of a model's calls has been answered its"
            f" name may be corrected: hbtui resume {run_id} --model-test NAME"
            " (or --model-grader NAME, or --base-url URL if the address lacks its /v1)"
        )
    return f"fix the cause, then: hbtui resume {run_id}"


@dataclass
class EndpointStats:
    """Live figures of one endpoint, for the monitor of this process and the heartbeat row."""

    in_flight: int = 0
    limit: int = 0
    calls: int = 0
    failures: int = 0
    successes: int = 0
    failing_since: float | None = None  # monotonic time of the first connection failure since the last answer


@dataclass
class LiveStats:
    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    endpoints: dict[str, EndpointStats] = field(default_factory=dict)


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
    ) -> None:
        self.store = store
        self.run = run
        self.settings = settings
        self.observers = list(observers)
        self.backoff_base = backoff_base
        self.owner = this_owner()
        self.lease: str | None = None  # given by claim_run: every write is fenced by it
        self.live = LiveStats()
        self._writes: asyncio.Queue = asyncio.Queue()
        self._unpaused = asyncio.Event()
        self._unpaused.set()
        # Calls go out only while this is set: not paused, and the database keeps up. While the
        # writer cannot commit (another process holds a lock) answers wait in memory; past this
        # many unwritten, no new call is sent until they are stored (calls in flight finish).
        self._calls_open = asyncio.Event()
        self._calls_open.set()
        self._unwritten = 0
        self._confirmed_at = time.monotonic()  # of the last write made under the lease
        self._confirming = False
        self.max_unwritten = max(32, 2 * (settings.concurrency + settings.effective_grader_concurrency))
        self.taken_over = False
        # Verdicts found in the cache for this run's pending criteria (see hbtui.verdict_cache):
        # served without a call. Regrades, resumes and retries look; a fresh run only when asked.
        self.use_cache = use_cache
        self._cached: dict[str, tuple] = {}
        self._looked_up: set[int] = set()  # conversations whose criteria the first lookup covered
        self._key_of: dict[tuple[int, int], str] = {}  # (conversation id, idx) -> key, from that lookup
        self._fatal: ChatError | None = None
        self._drive_task: asyncio.Task | None = None  # cancelled by a fatal error: see _stop
        self._clients: dict[str, ChatClient] = {}
        self._limiters: dict[str, AdaptiveLimiter] = {}
        self._template = load_template(settings.grader_template, settings.cache_dir)
        self.keys = RequestKeys(settings, self._template)
        # What hbtui's negotiation changed in the requests (see hbtui.fidelity), for the run's record.
        self.deviations: set[str] = set((run.requests or {}).get("deviations", []))
        self.cancel_status = "interrupted"
        self.error: str | None = None
        # Run folders (results.jsonl, description.md) go beside the database, as the old harness had them.
        self.runs_root = Path(settings.db_path).parent

    # ---- control from a display --------------------------------------------------------
    def pause(self) -> None:
        self._unpaused.clear()
        self._update_gate()

    def resume(self) -> None:
        self._unpaused.set()
        self._update_gate()

    def _update_gate(self) -> None:
        unconfirmed = time.monotonic() - self._confirmed_at > LEASE_CONFIRM_SECONDS
        if unconfirmed and not self._confirming:
            self._confirming = True
            self._writes.put_nowait(("heartbeat", self.live_snapshot()))  # the writer confirms the lease
        if self._unpaused.is_set() and self._unwritten < self.max_unwritten and not unconfirmed:
            self._calls_open.set()
        else:
            self._calls_open.clear()

    def _store_verdict(self, verdict: VerdictResult) -> None:
        self._store_result("verdict", verdict.as_row())

    def _store_result(self, kind: str, row: tuple) -> None:
        """A paid answer (reply or verdict) for the writer: counted until it is committed."""
        self._unwritten += 1
        self._writes.put_nowait((kind, row))
        self._update_gate()

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
                gate=self._calls_open,
            )
        return self._clients[base_url]

    def sent_messages(self, prompt: list[dict]) -> list[dict]:
        """What the model under test is sent: its system message, if any, then the conversation."""
        return self.keys.sent_messages(prompt)

    def _pending_keys(self, work: list[WorkItem]) -> list[str]:
        """The cache keys of every criterion still to grade whose reply exists (in a thread),
        kept by (conversation, criterion) so that grading does not compute them again."""
        for item in work:
            if item.reply is not None and item.criteria:
                digest = self.keys.digest(item.prompt, item.reply)
                for (idx, _, _), key in zip(item.criteria, self.keys.keys(digest, item.repeat, item.criteria)):
                    self._key_of[(item.conversation_id, idx)] = key
        return list(self._key_of.values())

    def requests_record(self) -> dict:
        """What this run's requests were, from the settings and what the providers made of them."""
        for client in self._clients.values():
            for model, quirks in client.quirks.items():
                where = f"{model} at {client.endpoint.base_url}"
                if not quirks.json_schema and self.settings.grader_json_schema:
                    self.deviations.add(f"response_format refused by {where}")
                self.deviations.update(f"{param} left out for {where} (refused)" for param in quirks.dropped)
                if quirks.max_tokens_key != "max_tokens":
                    self.deviations.add(f"max_tokens sent as {quirks.max_tokens_key} to {where}")
        return describe_requests(self.settings, self._template.name, self._template.sha256, self.deviations)

    async def _record_changed_settings(self) -> None:
        """A resume given other settings (--base-url, --model-test...) records them on the run,
        and says what changed: its description and summary then name what answered."""
        now = self.settings.public_dict()
        before = self.run.settings
        # Only what the run recorded: a setting added to hbtui since is no change of the user's.
        changed = [
            (name, before[name], value)
            for name, value in now.items()
            if name in before and name not in UNRECORDED_SETTINGS and before[name] != value
        ]
        if not changed:
            return
        await self.store.update_run_settings(
            self.run.id, now, self.settings.model_test or "", self.settings.model_grader or ""
        )
        self.run = await self.store.get_run(self.run.id)
        self._note(
            "settings changed for this resume: " + "; ".join(f"{name} {old!r} -> {new!r}" for name, old, new in changed)
        )

    def _note(self, message: str) -> None:
        self._writes.put_nowait(("log", (self.run.id, time.time(), "info", message)))
        self.emit(Noted(self.run.id, "info", message))

    def _note_invalid_text(self, what: str) -> None:
        self._note(f"{what} held invalid characters (lone surrogates), stored with U+FFFD")

    def _on_call(self, record: CallRecord) -> None:
        stats = self.live.endpoints[record.endpoint]
        stats.calls += 1
        stats.successes += record.ok
        if record.ok or record.kind != CONNECTION:
            stats.failing_since = None
        else:
            now = time.monotonic()
            stats.failing_since = stats.failing_since or now
            patience = self.settings.unreachable_patience
            if stats.successes and now - stats.failing_since >= patience:
                # The endpoint answered before and has failed every call since, for that long: stop
                # (resumable) instead of burning every remaining conversation's attempts.
                self._stop(
                    ChatError(
                        CONNECTION,
                        f"{record.endpoint} stopped answering: every call failed to connect"
                        f" for {now - stats.failing_since:.0f} s (UNREACHABLE_PATIENCE {patience:g} s):"
                        f" {record.message}",
                    ),
                    stop_calls=True,
                    endpoint=record.endpoint,
                )
        if not record.ok:
            stats.failures += 1
            kind = record.kind or "unknown"
            self.live.errors_by_kind[kind] = self.live.errors_by_kind.get(kind, 0) + 1
            self.emit(CallFailed(self.run.id, record.endpoint, kind, record.message))

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
        self.lease = await self.store.claim_run(run_id, self.owner)
        self._confirmed_at = time.monotonic()
        settings = self.settings
        await self._record_changed_settings()
        await self.store.set_requests(run_id, self.requests_record())
        test = self._client(settings.base_url or "", settings.api_key, settings.concurrency)
        grader = self._client(
            settings.effective_grader_base_url or "",
            settings.effective_grader_api_key,
            settings.effective_grader_concurrency,
        )
        # Calls that got no answer (timeouts, refused connections, 5xx, 429 after every retry) are
        # work still missing, so a resume asks them again; refusals and unparseable verdicts are
        # answers, kept until `regrade-errors` asks for them.
        await self.store.reset_errors(run_id, TRANSIENT_KINDS, owner=self.owner)
        await self.store.refresh_summaries(run_id)
        work = await self.store.pending_work(run_id)
        if self.use_cache:  # one lookup for every criterion whose reply exists already
            keys = await asyncio.to_thread(self._pending_keys, work)
            self._cached = await self.store.cached_verdicts(keys)
            self._looked_up = {item.conversation_id for item in work if item.reply is not None}
        # The work list (every prompt of the run) lives until the end: moved out of the cyclic
        # collector's sight, it is not rescanned by every full collection, whose pauses stalled
        # the event loop (measured at 256 in flight: 93-97% of the ideal before, 97-98% after).
        gc.collect()
        gc.freeze()
        progress = await self.store.progress(run_id)
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
        if isinstance(store_error, RunTakenOver):
            # Another process drives the run now: its status, owner and results are its own.
            self.taken_over = True
            self.error = str(store_error)
            self.emit(RunFinished(run_id, TAKEN_OVER, None, self.error))
            return TAKEN_OVER
        if isinstance(store_error, StoreError):
            status, error = "failed", str(store_error)
        elif store_error is not None:
            status = "failed"
            error = (
                f"cannot write to the database {self.store.path}: {store_error}; the run stopped and"
                f" resumes with `hbtui resume {run_id}` once that is fixed"
            )
        elif status == "finished":
            status, error, report = await self._settle(run_id)
        self.error = error
        try:
            await self.store.finish_run(
                run_id, status, error=error, report=report, lease=self.lease, requests=self.requests_record()
            )
            if report is not None:
                folder = await write_run_folder(self.store, await self.store.get_run(run_id), self.runs_root)
                await self.store.set_folder(run_id, str(folder))
        except RunTakenOver as exc:
            self.taken_over, self.error = True, str(exc)
            self.emit(RunFinished(run_id, TAKEN_OVER, None, self.error))
            return TAKEN_OVER
        except sqlite3.Error:
            pass  # the same fault: the stale heartbeat will show the run as interrupted
        score = report["overall_score"] if report else None
        self.emit(RunFinished(run_id, status, score, error))
        return status

    async def _settle(self, run_id: int) -> tuple[str, str | None, dict | None]:
        """The status of a run whose calls all ended: (status, error, report).

        Finished only when nothing is missing. Replies that never came for a transient reason
        (connection, timeout, 5xx, 429 after every retry) and criteria whose grading failed make
        it incomplete: scored on what is there, and completed by `regrade-errors`. Refusals
        (context too long, a content filter) are answers and leave it finished.
        """
        progress = await self.store.progress(run_id)
        if progress.criteria_left or progress.conversations_left:
            # Never call a run finished while work is missing, whatever stopped it.
            return (
                "interrupted",
                f"{progress.criteria_left} criteria were left ungraded; `hbtui resume {run_id}` does them",
                None,
            )
        # Every summary is fresh here: those of earlier processes were refreshed as this one
        # started, and this one wrote its own with the verdicts they sum up.
        report = await compute_report(self.store, run_id)
        no_reply, unfinished = await self.store.gaps(run_id, TRANSIENT_KINDS | {NO_SOURCE_REPLY})
        if no_reply or unfinished:
            return INCOMPLETE, incomplete_message(run_id, no_reply, unfinished, self.run.source_run_id), report
        if progress.conversations_total and not report["conversations"]["scored"]:
            # Every reply refused (a request no conversation could pass): nothing was measured.
            return (
                INCOMPLETE,
                f"no conversation could be scored: all {progress.conversations_failed} replies were"
                " refused (see `hbtui show` for why)",
                report,
            )
        return "finished", None, report

    async def _drive(self, work: list[WorkItem], test: ChatClient, grader: ChatClient) -> None:
        queue: asyncio.Queue[WorkItem] = asyncio.Queue()
        for item in work:
            queue.put_nowait(item)
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
        self._update_gate()
        await self._calls_open.wait()
        settings = self.settings
        try:
            result = await client.complete(
                settings.model_test or "",
                self.sent_messages(item.prompt),
                temperature=settings.temperature_test,
                max_tokens=settings.max_tokens_test,
                reasoning_effort=settings.reasoning_test,
                priority=GENERATION,
            )
        except ChatError as exc:
            if self._check_fatal(exc):
                return None
            message = exc.message if exc.kind != CONTEXT_LENGTH else f"context too long: {exc.message}"
            self._store_result(
                "reply",
                (
                    "failed",
                    None,
                    None,
                    None,
                    message,
                    exc.kind,
                    exc.attempts,
                    None,
                    None,
                    None,
                    time.time(),
                    item.conversation_id,
                ),
            )
            self.emit(GenerationFailed(self.run.id, item.conversation_id, exc.kind, message, len(item.all_criteria)))
            return None
        self._store_result(
            "reply",
            (
                "generated",
                result.content,
                result.reasoning,
                result.finish_reason,
                None,
                None,
                result.attempts,
                result.latency_ms,
                result.prompt_tokens,
                result.completion_tokens,
                time.time(),
                item.conversation_id,
            ),
        )
        if result.invalid_text:
            self._note_invalid_text(f"reply of conversation {item.position + 1}")
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
        return result.content

    async def _grade_conversation(self, client: ChatClient, item: WorkItem) -> None:
        statuses = {idx: status for idx, _, _, status in item.all_criteria}
        # The grader sees the messages the model under test was sent (its system message first,
        # as the reference renders them), then the reply.
        rendered = graded_conversation(self.sent_messages(item.prompt), item.reply or "")
        found = [self._key_of.pop((item.conversation_id, idx), None) for idx, _, _ in item.criteria]
        known = [key for key in found if key is not None]
        if len(known) < len(found):  # not looked up as the run started: hashed here, once
            known = self.keys.keys(conversation_digest(rendered), item.repeat, item.criteria)
        keys = {idx: key for (idx, _, _), key in zip(item.criteria, known)}
        if self.use_cache and item.conversation_id not in self._looked_up:
            # A reply generated just now: its criteria may still be asked already (--reuse-verdicts).
            self._cached.update(await self.store.cached_verdicts(list(keys.values())))
        # Verdicts served from the cache need no task of their own: a regrade of 60,000 from the
        # cache spent a second creating and gathering tasks that never awaited anything.
        asked = [
            (idx, text, points)
            for idx, text, points in item.criteria
            if not self._serve_cached(item, idx, keys[idx], statuses)
        ]
        if not asked and self._unwritten >= CACHE_WRITE_CHUNK:
            # Served without a call, nothing here awaits: let the writer take what piled up, so
            # that SQLite writes one chunk while the next is served (rather than all at the end).
            await asyncio.sleep(0)
        await asyncio.gather(
            *(
                self._grade_one(client, item, rendered, keys[idx], idx, text, points, statuses)
                for idx, text, points in asked
            )
        )
        if self._fatal is not None and any(s == "pending" for s in statuses.values()):
            return
        criteria = [
            scoring.GradedCriterion(
                points, tags, True if statuses[idx] == MET else False if statuses[idx] == NOT_MET else None
            )
            for idx, points, tags, _ in item.all_criteria
        ]
        errors = sum(1 for s in statuses.values() if s == ERROR)
        metrics = scoring.conversation_metrics(item.example_tags, criteria)
        score = metrics.score if metrics else None
        n_met = sum(1 for c in criteria if c.met and c.points > 0)
        penalties = sum(1 for c in criteria if c.met and c.points < 0)
        self._writes.put_nowait(("summary", (score, n_met, errors, penalties, item.conversation_id)))
        self.emit(ConversationScored(self.run.id, item.conversation_id, score))

    def _serve_cached(self, item: WorkItem, idx: int, key: str, statuses: dict[int, str]) -> bool:
        """Store the cached verdict of this request, if there is one; True when there was."""
        cached = self._cached.get(key)  # get: two identical criteria of one conversation share a key
        if cached is None:
            return False
        status, explanation, raw, reasoning, _, _ = cached
        statuses[idx] = status
        # Paid for by an earlier run: no attempt, no tokens, no latency of this run's own.
        self._store_verdict(
            VerdictResult(
                status, item.conversation_id, idx, key, explanation, raw, reasoning, graded_at=time.time(), from_cache=1
            )
        )
        self.emit(CriterionGraded(self.run.id, item.conversation_id, idx, status == MET, None, 0.0, 0, 0))
        return True

    async def _grade_one(
        self,
        client: ChatClient,
        item: WorkItem,
        rendered: str,
        key: str,
        idx: int,
        text: str,
        points: float,
        statuses: dict[int, str],
    ) -> None:
        self._update_gate()
        await self._calls_open.wait()
        if self._fatal is not None:
            return
        settings = self.settings
        prompt = fill_template(self._template, rendered, points, text)
        try:
            outcome = await grade_criterion(
                client,
                settings.model_grader or "",
                prompt,
                temperature=settings.temperature_grader,
                max_tokens=settings.max_tokens_grader,
                reasoning_effort=settings.reasoning_grader,
                parse_attempts=settings.grader_parse_attempts,
                system=settings.system_message_grader,
                response_format=VERDICT_FORMAT if settings.grader_json_schema else None,
            )
        except ChatError as exc:
            if self._check_fatal(exc):
                return
            statuses[idx] = ERROR
            self._store_verdict(
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
            self.emit(CriterionGraded(self.run.id, item.conversation_id, idx, None, exc.kind, 0.0, 0, 0, exc.message))
            return
        verdict = outcome.verdict
        if outcome.enlarged:
            self.deviations.add("a cut-off verdict was asked again with a larger token budget")
        if outcome.invalid_text:
            self._note_invalid_text(f"grader's answer on criterion {idx + 1} of conversation {item.position + 1}")
        if outcome.unparsed:
            self.live.errors_by_kind[UNPARSEABLE] = self.live.errors_by_kind.get(UNPARSEABLE, 0) + outcome.unparsed
        status = ERROR if verdict is None else MET if verdict.criteria_met else NOT_MET
        statuses[idx] = status
        now = time.time()
        self._store_verdict(
            VerdictResult(
                status,
                item.conversation_id,
                idx,
                key,
                verdict.explanation if verdict else None,
                outcome.raw_output,
                outcome.reasoning,
                outcome.error,
                outcome.error_kind,
                outcome.attempts,
                outcome.latency_ms,
                outcome.prompt_tokens,
                outcome.completion_tokens,
                now,
            )
        )
        if verdict is not None:  # a verdict paid for, for any later run that asks the same
            self._writes.put_nowait(
                (
                    "cache",
                    (
                        key,
                        status,
                        verdict.explanation,
                        outcome.raw_output,
                        outcome.reasoning,
                        outcome.attempts,
                        outcome.latency_ms,
                        outcome.prompt_tokens,
                        outcome.completion_tokens,
                        now,
                    ),
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
            )
        )

    def _check_fatal(self, exc: ChatError) -> bool:
        """True (and the run stops) on what every later call would hit too.

        A wrong key or model, and an endpoint that has not answered once since the run started
        (wrong URL, server down): recording every conversation as failed would only hide that.
        The conversation stays pending, for a resume once that is fixed.
        """
        if self._fatal is not None and exc.kind in TRANSIENT_KINDS:
            return True  # the run is stopping: no answer came, so the work stays pending for a resume
        stats = self.live.endpoints.get(exc.endpoint or "")
        if exc.kind == CONNECTION and stats is not None and stats.successes == 0:
            unreachable = ChatError(CONNECTION, f"cannot reach {exc.endpoint}: {exc.message}", exc.status, exc.attempts)
            self._stop(unreachable, stop_calls=True)
            return True
        if exc.fatal:
            self._stop(exc)
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
            failing = endpoint or exc.endpoint
            others_busy = any(limiter.in_flight for url, limiter in self._limiters.items() if url != failing)
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
        """Group commit: everything queued since the last commit goes in one transaction.

        Each transaction is fenced by the run's lease (a takeover stops this driver at its next
        write). While another connection holds the database's write lock past the busy timeout,
        the batch is kept and tried again, growing with what arrives meanwhile; the gate keeps
        new calls from going out (see _update_gate). Only after ``db_write_patience`` seconds of
        that does the run stop, saying how many answers it could not store.
        """
        batch = WriteBatch()
        locked_since: float | None = None
        while True:
            if batch.empty and not batch.done:
                batch.add(await self._writes.get())
            while not self._writes.empty():
                batch.add(self._writes.get_nowait())
            if batch.empty:
                return
            attempt_started = time.monotonic()
            try:
                await self.store.write_batch(
                    batch.replies,
                    batch.verdicts,
                    batch.summaries,
                    batch.log,
                    batch.cache,
                    run_id=self.run.id,
                    lease=self.lease,
                    live=batch.heartbeat,
                )
            except sqlite3.OperationalError as exc:
                if not database_locked(exc):
                    raise
                locked_since = locked_since or attempt_started
                waited = time.monotonic() - locked_since
                if waited >= self.settings.db_write_patience:
                    raise StoreError(
                        f"the database {self.store.path} stayed locked by another connection for {waited:.0f} s"
                        f" (DB_WRITE_PATIENCE {self.settings.db_write_patience:g} s); {batch.results} answers"
                        " received meanwhile could not be stored and will be asked again on resume"
                    ) from None
                if batch.lock_noted is False:
                    batch.lock_noted = True
                    message = (
                        f"the database is locked by another connection: keeping {batch.results} answers in"
                        f" memory, no new calls until they are stored (gives up after"
                        f" {self.settings.db_write_patience:g} s)"
                    )
                    batch.log.append((self.run.id, time.time(), "warning", message))
                    self.emit(Noted(self.run.id, "warning", message))
                await asyncio.sleep(0.2)
                continue
            locked_since = None
            self._confirmed_at, self._confirming = time.monotonic(), False
            self._unwritten -= batch.results
            self._update_gate()
            if batch.done:
                return
            batch = WriteBatch()


def database_locked(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock; trying later may work."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


@dataclass
class WriteBatch:
    """What the writer commits in one transaction; kept whole while the database is locked."""

    replies: list[tuple] = field(default_factory=list)
    verdicts: list[tuple] = field(default_factory=list)
    summaries: list[tuple] = field(default_factory=list)
    log: list[tuple] = field(default_factory=list)
    cache: list[tuple] = field(default_factory=list)
    heartbeat: dict | None = None  # only the newest counts
    done: bool = False  # the engine is closing: this is the last batch
    lock_noted: bool = False

    @property
    def results(self) -> int:
        return len(self.replies) + len(self.verdicts)

    @property
    def empty(self) -> bool:
        return not (
            self.replies or self.verdicts or self.summaries or self.log or self.cache or self.heartbeat is not None
        )

    def add(self, entry: tuple[str, Any] | None) -> None:
        if entry is None:
            self.done = True
            return
        kind, row = entry
        if kind == "heartbeat":
            self.heartbeat = row
        else:
            {
                "reply": self.replies,
                "verdict": self.verdicts,
                "summary": self.summaries,
                "log": self.log,
                "cache": self.cache,
            }[kind].append(row)


async def compute_report(store: Store, run_id: int) -> dict:
    inputs = await store.scoring_inputs(run_id)
    # The bootstraps take a quarter of a second for 5,000 conversations: off the event loop, so
    # a screen (or the engine's own calls) keeps going meanwhile.
    report = await asyncio.to_thread(lambda: scoring.run_report(inputs).as_json())
    report["criteria"]["from_cache"] = await store.count_from_cache(run_id)  # verdicts no call of this run paid for
    return report
