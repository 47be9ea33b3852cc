"""The store's writes: creating runs, owning them, and the engine's batched results.

Longer than most modules (about 710 lines) because every write of the store, over one connection:
creating a run, claiming its lease, the engine's group commit, the run's end, a regrade's copy and
a takeover share one transaction discipline, the lease's fence, which each of them must take as the
others do.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any

from hbtui.core.errors import UNPARSEABLE
from hbtui.core.invocation import invoked_as
from hbtui.core.live import LiveSnapshot
from hbtui.core.run_kinds import IMPORTED, MODEL_RUN
from hbtui.core.run_records import ImportedFrom, RequestsRecord
from hbtui.core.verdicts import AWAITING_BATCH
from hbtui.store.connection import Connection
from hbtui.store.owners import GONE, REMOTE, STOPPED, owner_state, parse_owner
from hbtui.store.rows import (
    HEARTBEAT_STALE_SECONDS,
    MET,
    NOT_MET,
    RunBusy,
    RunNotFound,
    RunTakenOver,
    StoreError,
    conversation_outcome,
)
from hbtui.store.run_report import StoredReport
from hbtui.store.work import PlannedConversation, ReplyResult, ResultBatch, RunClaim, VerdictResult

# What a call spent, as a reply and a verdict both record it: attempts and tokens add up over
# retries (regrade, resume), since all of them were spent.
SPENT_COLUMNS = (
    "error = ?, error_kind = ?, attempts = attempts + ?, latency_ms = ?,"
    " prompt_tokens = coalesce(prompt_tokens, 0) + coalesce(?, 0),"
    " completion_tokens = coalesce(completion_tokens, 0) + coalesce(?, 0)"
)
SPENT = ("error", "error_kind", "attempts", "latency_ms", "prompt_tokens", "completion_tokens")
# The records' fields in the order of the statements' parameters in write_batch.
REPLY_PARAMS = attrgetter(
    "status", "reply", "reasoning", "finish_reason", *SPENT, "generated_at", "endpoint", "conversation_id"
)
VERDICT_PARAMS = attrgetter(
    "status",
    "explanation",
    "raw_output",
    "reasoning",
    *SPENT,
    "graded_at",
    "cache_key",
    "from_cache",
    "endpoint",
    "conversation_id",
    "idx",
)
# A verdict paid for (met or not met, not served from the cache) is also kept in the cache, for
# any later run that asks the same request: its row, from the verdict's own fields.
CACHE_PARAMS = attrgetter(
    "cache_key",
    "status",
    "explanation",
    "raw_output",
    "reasoning",
    "attempts",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "graded_at",
)
# A reply and a verdict as the engine's results store them (REPLY_PARAMS, VERDICT_PARAMS), and a
# paid verdict kept in the cache (CACHE_PARAMS).
REPLY_UPDATE = (
    f"UPDATE conversations SET status = ?, reply = ?, reasoning = ?, finish_reason = ?, {SPENT_COLUMNS},"
    " generated_at = ?, endpoint = ? WHERE id = ?"
)
VERDICT_UPDATE = (
    f"UPDATE verdicts SET status = ?, explanation = ?, raw_output = ?, reasoning = ?, {SPENT_COLUMNS},"
    " graded_at = ?, cache_key = coalesce(?, cache_key), from_cache = ?, endpoint = ?"
    " WHERE conversation_id = ? AND idx = ?"
)
CACHE_INSERT = (
    "INSERT OR IGNORE INTO verdict_cache (key, status, explanation, raw_output, reasoning, attempts,"
    " latency_ms, prompt_tokens, completion_tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# A conversation's summary, as the engine writes it after its last verdict, a refresh recomputes
# it and an import stores it: ConversationOutcome.as_row's parameters.
SUMMARY_UPDATE = "UPDATE conversations SET score = ?, n_met = ?, n_errors = ?, penalties = ? WHERE id = ?"
LOG_PARAMS = attrgetter("run_id", "at", "level", "message")


def driver_in_the_way(run_id: int, current: str | None, mine: str | None, heartbeat: float | None) -> str | None:
    """Why another process still drives the run (so it may not be taken over), or None.

    On this host a driver that exists is alive, stopped or not, whatever its heartbeat: taking
    over a stopped driver had two processes drive one run once it went on (87% of calls paid
    twice). On another host a heartbeat older than its patience is all that says it is gone.
    """
    if not current or current == mine:
        return None
    state = owner_state(current)
    owner = parse_owner(current)
    label = owner.label if owner else current
    silent = "" if heartbeat is None else f" (heartbeat {time.time() - heartbeat:.0f} s ago)"
    if state == STOPPED:
        return (
            f"run {run_id} is driven by process {label}, which is stopped (Ctrl-Z):"
            f" `fg` it, or end it (kill {owner.pid if owner else '?'}), first"
        )
    if state == GONE or (state == REMOTE and (heartbeat is None or time.time() - heartbeat > HEARTBEAT_STALE_SECONDS)):
        return None
    return f"run {run_id} is being driven by process {label}{silent}"


class StoreWrites(Connection):
    """Changing a run: its creation, its owner and heartbeat, its results, its end."""

    async def create_run(
        self,
        *,
        name: str | None,
        name_base: str = "run",
        dataset_name: str,
        dataset_path: str | None,
        dataset_sha256: str,
        model_test: str,
        model_grader: str,
        settings: dict,
        plan: dict,
        conversations: Sequence[PlannedConversation],
        repeats: int = 1,
        claim: RunClaim | None = None,
        on_created: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> int:
        """The run, its conversations and one pending verdict row per criterion, in one transaction.

        ``repeats``: the planned conversations are all planned again that many times, each time
        after the others (the reference repeats the whole sampled list), their positions and
        repeats counted on; the plan need not hold a run's every conversation.

        Without a ``name``, the first of ``name_base``, ``name_base-2``... that is free: chosen
        inside the transaction, so runs started in the same second by other processes never
        take it first.

        ``claim``: the run is created running, driven by its owner under its lease, with what its
        requests are. ``on_created(run_id, first_conversation_id)`` is awaited inside the
        transaction as soon as the run's row exists, before its conversations are written: the
        conversation at position ``p`` gets the id ``first_conversation_id + p``.
        """
        async with self._transaction():
            run_id = await self._insert_run(
                name,
                name_base,
                (dataset_name, dataset_path, dataset_sha256, model_test, model_grader),
                settings,
                plan,
                conversations,
                repeats=repeats,
                claim=claim,
                on_created=on_created,
            )
        return run_id

    async def import_run(
        self,
        *,
        name: str | None,
        name_base: str,
        dataset_name: str,
        dataset_path: str | None,
        dataset_sha256: str,
        model_test: str,
        model_grader: str,
        settings: dict,
        plan: dict,
        conversations: Sequence[PlannedConversation],
        imported: ImportedFrom,
        report_of: Callable[[int], Awaitable[StoredReport]],
        created_at: float | None = None,
    ) -> int:
        """A run of kind imported: its conversations with their replies and verdicts as another
        harness recorded them (``PlannedConversation.imported``), scored by ``report_of`` (hbtui's
        own scoring, reading what was just written), all in one transaction: an import that
        fails anywhere leaves nothing behind."""
        db = self.db
        async with self._transaction():
            run_id = await self._insert_run(
                name,
                name_base,
                (dataset_name, dataset_path, dataset_sha256, model_test, model_grader),
                settings,
                plan,
                conversations,
                kind=IMPORTED,
                imported=imported,
                created_at=created_at,
            )
            ids = dict(await self._all("SELECT position, id FROM conversations WHERE run_id = ?", (run_id,)))
            replies = [(c.imported, ids[c.position]) for c in conversations if c.imported is not None]
            await db.executemany(
                "UPDATE conversations SET status = ?, reply = ?, reasoning = ?, finish_reason = ?, error = ?,"
                " error_kind = ? WHERE id = ?",
                (
                    (r.status, r.reply, r.reasoning, r.finish_reason, r.error, r.error_kind, conv_id)
                    for r, conv_id in replies
                ),
            )
            await db.executemany(
                "UPDATE verdicts SET status = ?, explanation = ?, error = ?, error_kind = ?"
                " WHERE conversation_id = ? AND idx = ?",
                (
                    (v.status, v.explanation, v.error, v.error_kind, conv_id, idx)
                    for r, conv_id in replies
                    for idx, v in enumerate(r.verdicts)
                ),
            )
            await db.executemany(
                SUMMARY_UPDATE,
                [
                    conversation_outcome(
                        (points, v.status) for (_, points, _), v in zip(c.criteria, c.imported.verdicts)
                    ).as_row(ids[c.position])
                    for c in conversations
                    if c.imported is not None
                ],
            )
            report = await report_of(run_id)  # reads this transaction's own rows
            complete = report.conversations.scored == report.conversations.total
            await db.execute(
                "UPDATE runs SET status = ?, finished_at = ?, report_json = ?, score = ? WHERE id = ?",
                (
                    "finished" if complete else "incomplete",
                    time.time(),
                    json.dumps(report.to_json()),
                    report.score,
                    run_id,
                ),
            )
        return run_id

    async def _insert_run(
        self,
        name: str | None,
        name_base: str,
        described: tuple[str, str | None, str, str, str],
        settings: dict,
        plan: dict,
        conversations: Sequence[PlannedConversation],
        *,
        repeats: int = 1,
        kind: str = MODEL_RUN,
        imported: ImportedFrom | None = None,
        created_at: float | None = None,
        claim: RunClaim | None = None,
        on_created: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> int:
        """Inside the caller's transaction: the run row, its records, conversations and pending
        verdicts. ``described``: (dataset name, dataset path, dataset sha256, model under test,
        grader). ``repeats``, ``claim`` and ``on_created``: see create_run."""
        db = self.db
        name = await self._free_name(name, name_base)
        now = time.time()
        cursor = await db.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_path, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria, kind, import_json, owner, lease,"
            " heartbeat_at, requests_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                name,
                "pending" if claim is None else "running",
                now if created_at is None else created_at,
                *described,
                json.dumps(settings),
                json.dumps(plan),
                len(conversations) * repeats,
                sum(len(c.criteria) for c in conversations) * repeats,
                kind,
                json.dumps(imported) if imported is not None else None,
                *(
                    (None, None, None, None)
                    if claim is None
                    else (claim.owner, claim.lease, now, json.dumps(claim.requests))
                ),
            ),
        )
        run_id = cursor.lastrowid
        assert run_id is not None  # an INSERT always gives a rowid
        # The conversations' ids given rather than left to SQLite: known before they are written
        # (see on_created). The write lock is held since the transaction began: nothing takes them.
        first_id = (await self._one("SELECT coalesce(max(id), 0) + 1 FROM conversations"))[0]
        if on_created is not None:
            await on_created(run_id, first_id)
        # Every record in two statements: one INSERT and one SELECT a record were 1,500 round
        # trips to SQLite's thread for the 738 records of the main subset.
        records = {c.record_sha256: (c.prompt_id, c.record_sha256, c.record_body) for c in conversations}
        await db.executemany(
            "INSERT OR IGNORE INTO records (prompt_id, sha256, body) VALUES (?, ?, ?)", list(records.values())
        )
        record_ids: dict[str, int] = dict(
            await self._all(
                "SELECT sha256, id FROM records WHERE sha256 IN (SELECT value FROM json_each(?))",
                (json.dumps(list(records)),),
            )
        )
        size = len(conversations)
        for again in range(repeats):
            await db.executemany(
                "INSERT INTO conversations (id, run_id, position, repeat, prompt_id, record_id, theme, example_tags,"
                " preview, n_criteria, status, reply, generated_at, completion_group, completion)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        first_id + c.position + again * size,
                        run_id,
                        c.position + again * size,
                        c.repeat + again,
                        c.prompt_id,
                        record_ids[c.record_sha256],
                        c.theme,
                        json.dumps(list(c.example_tags)),
                        c.preview,
                        len(c.criteria),
                        # A record's own completion is its reply from the start: there is nothing to generate.
                        "pending" if c.completion_text is None else "generated",
                        c.completion_text,
                        None if c.completion_text is None else now,
                        c.completion_group,
                        c.completion,
                    )
                    for c in conversations
                ],
            )
        tags_json: dict[tuple[str, ...], str] = {}  # a few dozen tag sets among thousands of criteria

        def tags_text(tags: Sequence[str]) -> str:
            key = tuple(tags)
            text = tags_json.get(key)
            if text is None:
                text = tags_json[key] = json.dumps(list(tags))
            return text

        for again in range(repeats):
            await db.executemany(
                "INSERT INTO verdicts (run_id, conversation_id, idx, criterion, points, tags) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        run_id,
                        first_id + c.position + again * size,
                        idx,
                        text,
                        points,
                        tags_text(tags),
                    )
                    for c in conversations
                    for idx, (text, points, tags) in enumerate(c.criteria)
                ],
            )
        return run_id

    async def _insert_regrade_run(
        self,
        source_id: int,
        name: str,
        model_grader: str,
        settings: dict,
        *,
        kind: str | None,
        model_test: str | None = None,
    ) -> int:
        """The runs row of a regrade of ``source_id`` (in the caller's transaction): the source's
        dataset, plan and counts, linked to it, with its own name, grader and settings. ``kind``
        and ``model_test``: None keeps the source's (a meta-eval's regrade is a meta-eval; a
        model run's regrade of an import is a model run)."""
        cursor = await self.db.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_path, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria, kind, source_run_id)"
            " SELECT ?, 'pending', ?, dataset_name, dataset_path, dataset_sha256, coalesce(?, model_test), ?, ?,"
            # Not the source's batches: a regrade is answered by calls, or by batches of its own.
            " json_remove(plan_json, '$.batch_api', '$.batch_files'), n_conversations, n_criteria,"
            " coalesce(?, kind), id FROM runs WHERE id = ?",
            (name, time.time(), model_test, model_grader, json.dumps(settings), kind, source_id),
        )
        run_id = cursor.lastrowid
        assert run_id is not None
        return run_id

    async def _free_name(self, name: str | None, name_base: str) -> str:
        """``name`` if free, else a StoreError; without one, the first free of ``name_base``,
        ``name_base-2``...; inside the caller's transaction."""
        if name is None:
            name, suffix = name_base, 2
            while await self._one("SELECT 1 FROM runs WHERE name = ?", (name,)):
                name, suffix = f"{name_base}-{suffix}", suffix + 1
        elif await self._one("SELECT 1 FROM runs WHERE name = ?", (name,)):
            raise StoreError(f"a run named {name!r} exists already; choose another name (--name)")
        return name

    async def create_regrade(
        self,
        source_id: int,
        *,
        name: str | None,
        name_base: str,
        model_grader: str,
        settings: dict,
        unanswered_kinds: Sequence[str] = (),
    ) -> int:
        """A new run that grades ``source_id``'s replies again: its conversations with their
        replies copied (no generation call: what the model said is the source's), its criteria
        pending. A conversation that got no reply there is left without one here, never generated."""
        db = self.db
        async with self._transaction():
            name = await self._free_name(name, name_base)
            run_id = await self._insert_regrade_run(source_id, name, model_grader, settings, kind=MODEL_RUN)
            await db.execute(
                "INSERT INTO conversations (run_id, position, repeat, prompt_id, record_id, theme, example_tags,"
                " preview, n_criteria, status, reply, reasoning, finish_reason, error, error_kind, generated_at,"
                " completion_group, completion)"
                " SELECT ?, position, repeat, prompt_id, record_id, theme, example_tags, preview, n_criteria,"
                " CASE WHEN status = 'generated' THEN 'generated' ELSE 'failed' END, reply, reasoning, finish_reason,"
                " CASE WHEN status = 'generated' THEN NULL ELSE 'no reply in run ' || ? || ': '"
                " || coalesce(error, status) END,"
                # A refusal is an answer and stays one; a reply that never came is missing here too.
                f" CASE WHEN status = 'generated' THEN NULL WHEN status = 'failed' AND error_kind IS NOT NULL"
                f" AND error_kind NOT IN ({','.join('?' * len(unanswered_kinds)) or 'NULL'}) THEN error_kind"
                " ELSE 'no_source_reply' END, generated_at, completion_group, completion"
                " FROM conversations WHERE run_id = ? ORDER BY position",
                (run_id, source_id, *unanswered_kinds, source_id),
            )
            await db.execute(
                "INSERT INTO verdicts (run_id, conversation_id, idx, criterion, points, tags)"
                " SELECT ?, mine.id, v.idx, v.criterion, v.points, v.tags FROM verdicts v"
                " JOIN conversations theirs ON theirs.id = v.conversation_id"
                " JOIN conversations mine ON mine.run_id = ? AND mine.position = theirs.position"
                " WHERE v.run_id = ? ORDER BY mine.id, v.idx",
                (run_id, run_id, source_id),
            )
        assert run_id is not None  # an INSERT always gives a rowid
        return run_id

    async def claim_run(self, run_id: int, owner: str, only_from: str | None = None) -> str:
        """Make ``owner`` the one process driving the run, unless another live one does.

        Returns the run's new lease: every later write of this driver is made on condition that
        the run still holds it, so a driver that was taken over cannot write another result.
        ``only_from``: only while the run's status is this one (a batch run's next look, while it
        awaits its batches: not once it was cancelled meanwhile); RunBusy otherwise.
        """
        db = self.db
        # First without the write lock: a driver stopped (Ctrl-Z) in the middle of a commit holds
        # it, and the user should hear that the driver is stopped, not that the file is locked.
        row = await self._one("SELECT owner, heartbeat_at FROM runs WHERE id = ?", (run_id,))
        if row is not None:
            current, heartbeat = row
            busy = driver_in_the_way(run_id, current, owner, heartbeat)
            if busy:
                raise RunBusy(busy + ("" if "stopped" in busy else f"; watch it with {invoked_as()} monitor instead"))
        async with self._transaction():
            row = await self._one("SELECT owner, heartbeat_at, status FROM runs WHERE id = ?", (run_id,))
            if row is None:
                raise RunNotFound(f"no run with id {run_id}")
            current, heartbeat, status = row
            if only_from is not None and status != only_from:
                raise RunBusy(f"run {run_id} is {status} now, no longer {only_from}")
            busy = driver_in_the_way(run_id, current, owner, heartbeat)
            if busy:
                raise RunBusy(busy + ("" if "stopped" in busy else f"; watch it with {invoked_as()} monitor instead"))
            lease = secrets.token_hex(16)
            await db.execute(
                # A new driver starts running: a pause or cancel asked of the one before is spent.
                "UPDATE runs SET owner = ?, lease = ?, heartbeat_at = ?, status = 'running', error = NULL,"
                " finished_at = NULL, control = NULL WHERE id = ?",
                (owner, lease, time.time(), run_id),
            )
        return lease

    async def _fence(self, run_id: int, lease: str, live: LiveSnapshot | None = None) -> None:
        """Inside the caller's transaction: refresh the heartbeat if ``lease`` still holds the run.

        Being a write, it takes the database's write lock, so no takeover can come between this
        check and the commit of what follows it.
        """
        if live is None:
            cursor = await self.db.execute(
                "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND lease = ?", (time.time(), run_id, lease)
            )
        else:
            cursor = await self.db.execute(
                "UPDATE runs SET heartbeat_at = ?, live_json = ? WHERE id = ? AND lease = ?",
                (time.time(), json.dumps(live), run_id, lease),
            )
        if cursor.rowcount == 0:
            row = await self._one("SELECT owner FROM runs WHERE id = ?", (run_id,))
            owner = parse_owner(row[0] if row else None)
            by = f"process {owner.label}" if owner else "another process"
            raise RunTakenOver(f"run {run_id} was taken over by {by}; this process stopped and kept nothing more")

    async def request_control(self, run_id: int, control: str | None) -> bool:
        """Ask the process driving a running run, whichever it is, to pause (``'paused'``), to go
        on (None) or to stop (``'cancelled'``); it reads this about twice a second. A cancel
        stays asked for. False when the run is not running (ended, or never started)."""
        cursor = await self.db.execute(
            "UPDATE runs SET control = ? WHERE id = ? AND status = 'running' AND control IS NOT 'cancelled'",
            (control, run_id),
        )
        await self.db.commit()
        return cursor.rowcount == 1

    async def heartbeat(self, run_id: int, lease: str, live: LiveSnapshot) -> None:
        async with self._transaction(immediate=False):
            await self._fence(run_id, lease, live)

    async def finish_run(
        self,
        run_id: int,
        status: str,
        *,
        error: str | None = None,
        report: StoredReport | None = None,
        folder: str | None = None,
        lease: str | None = None,
        requests: RequestsRecord | None = None,
    ) -> None:
        """The run's end. With ``lease``, only while the run still holds it (else RunTakenOver)."""
        score = report.score if report else None
        async with self._transaction(immediate=False):
            if lease is not None:
                await self._fence(run_id, lease)
            await self.db.execute(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?, report_json = COALESCE(?, report_json),"
                " score = COALESCE(?, score), folder = COALESCE(?, folder), owner = NULL, lease = NULL,"
                " heartbeat_at = NULL, requests_json = COALESCE(?, requests_json) WHERE id = ?",
                (
                    status,
                    error,
                    None if status == AWAITING_BATCH else time.time(),  # awaiting: not ended
                    json.dumps(report.to_json()) if report else None,
                    score,
                    folder,
                    json.dumps(requests) if requests else None,
                    run_id,
                ),
            )

    async def update_run_settings(self, run_id: int, settings: dict, model_test: str, model_grader: str) -> None:
        """The settings a resume runs with (flags changed them): what the run records from now on."""
        await self.db.execute(
            "UPDATE runs SET settings_json = ?, model_test = ?, model_grader = ? WHERE id = ?",
            (json.dumps(settings), model_test, model_grader, run_id),
        )
        await self.db.commit()

    async def set_requests(self, run_id: int, requests: RequestsRecord) -> None:
        """What the run's requests are (hbtui.core.fidelity), recorded as it starts or resumes."""
        await self.db.execute("UPDATE runs SET requests_json = ? WHERE id = ?", (json.dumps(requests), run_id))
        await self.db.commit()

    async def seed_cache(self, rows: Sequence[tuple[str, int, int]]) -> int:
        """(key, conversation id, idx): the verdict there goes in the cache under that key."""
        db = self.db
        async with self._transaction():
            await db.executemany(
                "INSERT OR IGNORE INTO verdict_cache (key, status, explanation, raw_output, reasoning, attempts,"
                " latency_ms, prompt_tokens, completion_tokens, created_at) SELECT ?, status, explanation, raw_output,"
                " reasoning, attempts, latency_ms, prompt_tokens, completion_tokens, coalesce(graded_at, 0)"
                " FROM verdicts WHERE conversation_id = ? AND idx = ?",
                rows,
            )
            await db.executemany("UPDATE verdicts SET cache_key = ? WHERE conversation_id = ? AND idx = ?", rows)
        return len(rows)

    async def set_plan_entry(self, run_id: int, key: str, value: Any) -> None:
        """One more entry in the run's plan (a batch-files run's folder, label and token)."""
        async with self._transaction():
            await self.db.execute(
                "UPDATE runs SET plan_json = json_set(plan_json, '$.' || ?, json(?)) WHERE id = ?",
                (key, json.dumps(value), run_id),
            )

    async def reset_batch_failures(
        self, run_id: int, kinds: Iterable[str], max_reply_attempts: int, max_verdict_attempts: int
    ) -> tuple[int, int]:
        """A batch-files run's replies and verdicts that failed for one of ``kinds`` (no answer that
        counts: a 5xx, an expired batch's line, an unparsed verdict) back in its next request
        files, while they have attempts left (``max_reply_attempts``, MAX_ATTEMPTS, for every
        line but a verdict that did not parse: ``max_verdict_attempts``); (replies, verdicts)."""
        kinds = list(kinds)
        marks = ",".join("?" * len(kinds))
        async with self._transaction():
            replies = await self.db.execute(
                f"UPDATE conversations SET status = 'pending', error = NULL, error_kind = NULL"
                f" WHERE run_id = ? AND status = 'failed' AND error_kind IN ({marks}) AND attempts < ?",
                (run_id, *kinds, max_reply_attempts),
            )
            # A verdict with no answer gets MAX_ATTEMPTS, as a call does; one that did not parse,
            # GRADER_PARSE_ATTEMPTS, as the grader is asked again when it gives none.
            verdicts = await self.db.execute(
                f"UPDATE verdicts SET status = 'pending' WHERE run_id = ? AND status = 'error'"
                f" AND ((error_kind IN ({marks}) AND error_kind != ? AND attempts < ?)"
                f" OR (error_kind = ? AND attempts < ?))",
                (run_id, *kinds, UNPARSEABLE, max_reply_attempts, UNPARSEABLE, max_verdict_attempts),
            )
            await self.db.execute(
                "UPDATE conversations SET n_errors = 0, score = NULL WHERE run_id = ? AND id IN"
                " (SELECT conversation_id FROM verdicts WHERE run_id = ? AND status = 'pending')",
                (run_id, run_id),
            )
        return replies.rowcount, verdicts.rowcount

    async def set_folder(self, run_id: int, folder: str) -> None:
        await self.db.execute("UPDATE runs SET folder = ? WHERE id = ?", (folder, run_id))
        await self.db.commit()

    async def set_driver_log(self, run_id: int, path: str) -> None:
        await self.db.execute("UPDATE runs SET driver_log = ? WHERE id = ?", (path, run_id))
        await self.db.commit()

    async def reset_errors(
        self, run_id: int, kinds: Iterable[str] | None = None, owner: str | None = None
    ) -> tuple[int, int]:
        """Put failed verdicts (and transiently failed replies) back in the queue; nothing is deleted.

        ``kinds``: only what failed for those reasons (a resume: what got no answer); without, every
        failed verdict and the replies that got no answer or never parsed (regrade-errors).

        Refused while another live process drives the run (its work list is already made, so it
        would leave them pending); ``owner`` is the caller's own owner id, which may.
        """
        from hbtui.core.errors import TRANSIENT_KINDS, UNPARSEABLE

        retry_kinds = set(kinds) if kinds else TRANSIENT_KINDS | {UNPARSEABLE}
        marks = ",".join("?" * len(retry_kinds))
        db = self.db
        async with self._transaction():
            current, heartbeat = await self._one("SELECT owner, heartbeat_at FROM runs WHERE id = ?", (run_id,))
            busy = driver_in_the_way(run_id, current, owner, heartbeat)
            if busy:
                raise RunBusy(f"{busy}; retry its errors once it stops")
            if kinds:
                verdicts = await db.execute(
                    f"UPDATE verdicts SET status = 'pending' WHERE run_id = ? AND status = 'error'"
                    f" AND (error_kind IN ({marks}) OR error_kind IS NULL)",
                    (run_id, *retry_kinds),
                )
            else:  # asked for by the user (regrade-errors, R): every verdict that failed, whatever why
                verdicts = await db.execute(
                    "UPDATE verdicts SET status = 'pending' WHERE run_id = ? AND status = 'error'", (run_id,)
                )
            replies = await db.execute(
                f"UPDATE conversations SET status = 'pending', error = NULL, error_kind = NULL"
                f" WHERE run_id = ? AND status = 'failed' AND error_kind IN ({marks})",
                (run_id, *retry_kinds),
            )
            await db.execute(
                "UPDATE conversations SET n_errors = 0, score = NULL WHERE run_id = ? AND id IN"
                " (SELECT conversation_id FROM verdicts WHERE run_id = ? AND status = 'pending')",
                (run_id, run_id),
            )
        return verdicts.rowcount, replies.rowcount

    async def refresh_summaries(self, run_id: int) -> int:
        """Recompute every conversation's score from its verdicts.

        The engine writes a conversation's summary after its last verdict; a kill between the two
        commits, or a regrade, would leave it stale. Scores come from the same scoring function as
        reports, so the list, the histogram and `show` always agree.
        """
        if not await self._one("SELECT 1 FROM verdicts WHERE run_id = ? AND status != 'pending' LIMIT 1", (run_id,)):
            # Nothing graded (a run starting): every summary is still the empty one it was made with
            # (a met criterion, the one thing n_met counts, is never put back to pending).
            return 0
        per_conversation: dict[int, list[tuple[float, str]]] = {}
        for conv_id, points, status in await self._all(
            "SELECT conversation_id, points, status FROM verdicts WHERE run_id = ? ORDER BY conversation_id, idx",
            (run_id,),
        ):
            per_conversation.setdefault(conv_id, []).append((points, status))
        rows = [conversation_outcome(items).as_row(conv_id) for conv_id, items in per_conversation.items()]
        # Only what differs is written: on a run whose summaries are right (the usual case) this
        # is a read, not 5,000 updates.
        stored = {
            row[-1]: row
            for row in await self._all(
                "SELECT score, coalesce(n_met, 0), n_errors, penalties, id FROM conversations WHERE run_id = ?",
                (run_id,),
            )
        }
        changed = [row for row in rows if stored.get(row[-1]) != row]
        if changed:
            await self.db.executemany(SUMMARY_UPDATE, changed)
            await self.db.commit()
        return len(changed)

    async def recover_answers(
        self, replies: Sequence[ReplyResult], verdicts: Sequence[VerdictResult], *, run_id: int, lease: str
    ) -> int:
        """Answers an earlier process of the run received and never committed (its answer
        journal, hbtui.store.answer_journal), stored under ``lease``: RunTakenOver, and nothing
        stored, when the run no longer holds it. Returns how many were stored.

        An answer is stored only where its row is still pending and holds no answer as recent:
        one that was committed (the kill came between the commit and the journal's emptying) is
        there already, or was put back to pending since by a resume or `regrade-errors`, which
        keep its time. Storing it again would count its attempts twice, or undo the retry asked
        for. So a record of any lease of the run is stored at most once, whichever process
        received it: an answer it paid for, to the run's own request.
        """
        db = self.db
        stored = 0
        async with self._transaction(immediate=False):
            await self._fence(run_id, lease)
            if replies:
                cursor = await db.executemany(
                    f"{REPLY_UPDATE} AND run_id = ? AND status = 'pending' AND coalesce(generated_at, -1) < ?",
                    [(*REPLY_PARAMS(item), run_id, item.generated_at) for item in replies],
                )
                stored += cursor.rowcount
            if verdicts:
                cursor = await db.executemany(
                    f"{VERDICT_UPDATE} AND run_id = ? AND status = 'pending' AND coalesce(graded_at, -1) < ?",
                    [(*VERDICT_PARAMS(item), run_id, item.graded_at) for item in verdicts],
                )
                stored += cursor.rowcount
            await self._cache_paid(verdicts)
        return stored

    async def _cache_paid(self, verdicts: Sequence[VerdictResult]) -> None:
        """The paid verdicts (met or not, asked of the grader, not the cache) into the verdict
        cache, inside the caller's transaction."""
        paid = [v for v in verdicts if v.cache_key and not v.from_cache and v.status in (MET, NOT_MET)]
        if paid:
            await self.db.executemany(CACHE_INSERT, [CACHE_PARAMS(item) for item in paid])

    async def write_batch(
        self,
        batch: ResultBatch,
        *,
        run_id: int | None = None,
        lease: str | None = None,
        live: LiveSnapshot | None = None,
    ) -> None:
        """One transaction for everything that completed since the last batch.

        With ``lease``, the batch is written only while the run still holds it (RunTakenOver
        otherwise, and nothing of the batch is written).
        """
        db = self.db
        async with self._transaction(immediate=False):
            if lease is not None and run_id is not None:
                await self._fence(run_id, lease, live)
            if batch.replies:
                await db.executemany(REPLY_UPDATE, [REPLY_PARAMS(item) for item in batch.replies])
            if batch.verdicts:
                await db.executemany(VERDICT_UPDATE, [VERDICT_PARAMS(item) for item in batch.verdicts])
            await self._cache_paid(batch.verdicts)
            if batch.scores:
                await db.executemany(SUMMARY_UPDATE, [item.as_row() for item in batch.scores])
            if batch.log:
                await db.executemany(
                    "INSERT INTO run_log (run_id, at, level, message) VALUES (?, ?, ?, ?)",
                    [LOG_PARAMS(item) for item in batch.log],
                )
