"""The SQLite store: the hub that the engine writes and every screen and command reads.

WAL mode lets readers (a monitor in another SSH session, the browser) read while the engine
writes. Writes come in batches from the engine's writer task (group commit): each batch is one
transaction, so what is committed is always whole, and a killed run loses at most the calls
whose answers had not reached the database yet.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import aiosqlite

from hbtui import schema
from hbtui.scoring import ConversationInput, GradedCriterion

HEARTBEAT_STALE_SECONDS = 15.0
MET, NOT_MET, PENDING, ERROR = "met", "not_met", "pending", "error"


class StoreError(Exception):
    """A database that cannot be used; the message names the file."""


class RunNotFound(StoreError):
    pass


class RunBusy(StoreError):
    """Another live process drives this run."""


@dataclass(slots=True)
class RunRow:
    id: int
    name: str
    status: str
    created_at: float
    finished_at: float | None
    dataset_name: str
    dataset_path: str | None
    dataset_sha256: str
    model_test: str
    model_grader: str
    settings: dict
    plan: dict
    n_conversations: int
    n_criteria: int
    error: str | None
    score: float | None
    report: dict | None
    folder: str | None
    heartbeat_at: float | None
    owner: str | None
    live: dict | None

    @property
    def ci95(self) -> tuple[float, float] | None:
        metric = (self.report or {}).get("metrics", {}).get("overall_score")
        return tuple(metric["ci95"]) if metric else None

    @property
    def n_scored(self) -> int | None:
        return (self.report or {}).get("conversations", {}).get("scored")

    def shown_status(self, now: float | None = None) -> str:
        """`running` only while its process keeps the heartbeat; a silent one was interrupted."""
        if self.status == "running" and (self.heartbeat_stale(now) or not owner_alive(self.owner)):
            return "interrupted"
        return self.status

    def stopped_ago(self, now: float | None = None) -> str | None:
        """How long ago an interrupted run's process went silent, e.g. "3 min ago"."""
        moment = self.heartbeat_at if self.status == "running" else self.finished_at
        if self.shown_status(now) != "interrupted" or moment is None:
            return None
        seconds = (time.time() if now is None else now) - moment
        for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
            if seconds >= size:
                return f"{seconds / size:.0f} {unit} ago"
        return f"{seconds:.0f} s ago"

    def heartbeat_stale(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.heartbeat_at is None or now - self.heartbeat_at > HEARTBEAT_STALE_SECONDS


RUN_COLUMNS = (
    "id, name, status, created_at, finished_at, dataset_name, dataset_path, dataset_sha256, model_test,"
    " model_grader, settings_json, plan_json, n_conversations, n_criteria, error, score, report_json, folder,"
    " heartbeat_at, owner, live_json"
)


def _run_row(row: Sequence[Any]) -> RunRow:
    values = list(row)
    for i in (10, 11):
        values[i] = json.loads(values[i])
    for i in (16, 20):
        values[i] = json.loads(values[i]) if values[i] else None
    return RunRow(*values)


@dataclass(slots=True)
class PlannedConversation:
    position: int
    repeat: int
    prompt_id: str
    record_body: str
    record_sha256: str
    theme: str | None
    example_tags: Sequence[str]
    preview: str
    criteria: Sequence[tuple[str, float, Sequence[str]]]  # (criterion, points, tags)


@dataclass(slots=True)
class WorkItem:
    """A conversation that still needs a reply, or verdicts, when a run starts or resumes."""

    conversation_id: int
    position: int
    prompt: list[dict]
    reply: str | None
    criteria: list[tuple[int, str, float]]  # (idx, criterion, points) still to grade
    all_criteria: list[tuple[int, float, tuple[str, ...], str]]  # (idx, points, tags, status)
    example_tags: list[str]


@dataclass(slots=True)
class ConversationFilter:
    theme: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    has_errors: bool = False
    has_penalties: bool = False
    text: str | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses, args = [], []
        if self.theme:
            clauses.append("theme = ?")
            args.append(self.theme)
        if self.min_score is not None:
            clauses.append("score >= ?")
            args.append(self.min_score)
        if self.max_score is not None:
            clauses.append("score <= ?")
            args.append(self.max_score)
        if self.has_errors:
            clauses.append("(n_errors > 0 OR status = 'failed')")
        if self.has_penalties:
            clauses.append("penalties > 0")
        if self.text:
            pattern = "%" + self.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            clauses.append("(preview LIKE ? ESCAPE '\\' OR reply LIKE ? ESCAPE '\\' OR prompt_id LIKE ? ESCAPE '\\')")
            args.extend([pattern, pattern, pattern])
        return (" AND " + " AND ".join(clauses)) if clauses else "", args


SORTS = {
    "position": "position",
    "score": "score IS NULL, score, position",
    "-score": "score IS NULL, score DESC, position",
}


@dataclass(slots=True)
class ConversationSummary:
    id: int
    position: int
    repeat: int
    prompt_id: str
    theme: str | None
    preview: str
    status: str
    score: float | None
    n_criteria: int
    n_met: int | None
    n_errors: int
    penalties: int
    error_kind: str | None
    n_positive: int = 0  # criteria worth positive points: what n_met counts against


@dataclass(slots=True)
class VerdictRow:
    idx: int
    criterion: str
    points: float
    tags: list[str]
    status: str
    explanation: str | None
    raw_output: str | None
    reasoning: str | None
    error: str | None
    error_kind: str | None
    attempts: int
    latency_ms: float | None


@dataclass(slots=True)
class ConversationDetail:
    summary: ConversationSummary
    prompt: list[dict]
    example_tags: list[str]
    reply: str | None
    reasoning: str | None
    finish_reason: str | None
    error: str | None
    verdicts: list[VerdictRow] = field(default_factory=list)


@dataclass(slots=True)
class Progress:
    conversations_total: int
    conversations_generated: int
    conversations_failed: int
    conversations_scored: int
    criteria_total: int
    criteria_done: int
    criteria_met: int
    criteria_errors: int
    errors_by_kind: dict[str, int]
    prompt_tokens_test: int
    completion_tokens_test: int
    prompt_tokens_grader: int
    completion_tokens_grader: int


SUMMARY_COLUMNS = (
    "id, position, repeat, prompt_id, theme, preview, status, score, n_criteria, n_met, n_errors, penalties, error_kind,"
    " (SELECT count(*) FROM verdicts v WHERE v.conversation_id = conversations.id AND v.points > 0)"
)


class Store:
    def __init__(self, connection: aiosqlite.Connection, path: Path) -> None:
        self.db = connection
        self.path = path

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    async def open(cls, path: str | Path, *, create: bool = True) -> "Store":
        path = Path(path)
        if not path.exists():
            if not create:
                raise StoreError(f"{path}: no such database")
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                # Created owner-only before SQLite touches it: a run's prompts and replies are private.
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise StoreError(f"{path}: cannot create the database ({exc.strerror})") from None
        elif path.is_dir():
            raise StoreError(f"{path}: is a directory, not a database file")
        try:
            connection = await aiosqlite.connect(path, timeout=10)
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: cannot open ({exc})") from None
        store = cls(connection, path)
        try:
            await store._prepare()
        except BaseException:
            await connection.close()
            raise
        return store

    async def _prepare(self) -> None:
        db = self.db
        try:
            version = (await (await db.execute("PRAGMA user_version")).fetchone())[0]
            app_id = (await (await db.execute("PRAGMA application_id")).fetchone())[0]
            tables = (await (await db.execute("SELECT count(*) FROM sqlite_master")).fetchone())[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not an hbtui database ({exc})") from None
        if tables and app_id != schema.APPLICATION_ID:
            raise StoreError(f"{self.path}: an SQLite file, but not an hbtui database")
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this hbtui understands "
                f"({schema.SCHEMA_VERSION}); upgrade hbtui"
            )
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=10000")
            if version < schema.SCHEMA_VERSION:
                await self._migrate(version, fresh=not tables)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"{self.path}: {exc}") from None

    async def _migrate(self, version: int, fresh: bool) -> None:
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            if fresh:
                for statement in schema.statements(schema.SCHEMA_V1):
                    await db.execute(statement)
                await db.execute(f"PRAGMA application_id={schema.APPLICATION_ID}")
                version = 1
            while version < schema.SCHEMA_VERSION:
                for statement in schema.statements(schema.MIGRATIONS[version]):
                    await db.execute(statement)
                version += 1
            await db.execute(f"PRAGMA user_version={version}")
            await db.commit()
        except BaseException:
            await db.rollback()
            raise

    async def close(self) -> None:
        await self.db.close()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        cursor = await self.db.execute(sql, args)
        rows = await cursor.fetchall()
        await cursor.close()
        return list(rows)

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> tuple | None:
        cursor = await self.db.execute(sql, args)
        row = await cursor.fetchone()
        await cursor.close()
        return row

    # ---- runs ----------------------------------------------------------------------------
    async def create_run(
        self,
        *,
        name: str,
        dataset_name: str,
        dataset_path: str | None,
        dataset_sha256: str,
        model_test: str,
        model_grader: str,
        settings: dict,
        plan: dict,
        conversations: Sequence[PlannedConversation],
    ) -> int:
        """The run, its conversations and one pending verdict row per criterion, in one transaction."""
        db = self.db
        now = time.time()
        await db.execute("BEGIN IMMEDIATE")
        try:
            if await self._one("SELECT 1 FROM runs WHERE name = ?", (name,)):
                raise StoreError(f"a run named {name!r} exists already; choose another --name")
            cursor = await db.execute(
                "INSERT INTO runs (name, status, created_at, dataset_name, dataset_path, dataset_sha256, model_test,"
                " model_grader, settings_json, plan_json, n_conversations, n_criteria)"
                " VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    name, now, dataset_name, dataset_path, dataset_sha256, model_test, model_grader,
                    json.dumps(settings), json.dumps(plan), len(conversations),
                    sum(len(c.criteria) for c in conversations),
                ),
            )
            run_id = cursor.lastrowid
            record_ids: dict[str, int] = {}
            for conv in conversations:
                if conv.record_sha256 not in record_ids:
                    await db.execute(
                        "INSERT OR IGNORE INTO records (prompt_id, sha256, body) VALUES (?, ?, ?)",
                        (conv.prompt_id, conv.record_sha256, conv.record_body),
                    )
                    row = await self._one("SELECT id FROM records WHERE sha256 = ?", (conv.record_sha256,))
                    record_ids[conv.record_sha256] = row[0]
            conv_rows = [
                (run_id, c.position, c.repeat, c.prompt_id, record_ids[c.record_sha256], c.theme,
                 json.dumps(list(c.example_tags)), c.preview, len(c.criteria))
                for c in conversations
            ]
            await db.executemany(
                "INSERT INTO conversations (run_id, position, repeat, prompt_id, record_id, theme, example_tags,"
                " preview, n_criteria) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                conv_rows,
            )
            ids = dict(await self._all("SELECT position, id FROM conversations WHERE run_id = ?", (run_id,)))
            await db.executemany(
                "INSERT INTO verdicts (run_id, conversation_id, idx, criterion, points, tags) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (run_id, ids[c.position], idx, text, points, json.dumps(list(tags)))
                    for c in conversations
                    for idx, (text, points, tags) in enumerate(c.criteria)
                ),
            )
            await db.commit()
        except BaseException:
            await db.rollback()
            raise
        return run_id

    async def list_runs(self) -> list[RunRow]:
        return [_run_row(r) for r in await self._all(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC")]

    async def get_run(self, run_id: int) -> RunRow:
        row = await self._one(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise RunNotFound(f"no run with id {run_id} in {self.path}")
        return _run_row(row)

    async def resolve_run(self, ref: str | int) -> RunRow:
        """A run by id, unique name, or ``latest``."""
        text = str(ref).strip()
        if text == "latest":
            row = await self._one(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT 1")
            if row is None:
                raise RunNotFound(f"no runs in {self.path} yet")
            return _run_row(row)
        row = await self._one(f"SELECT {RUN_COLUMNS} FROM runs WHERE name = ?", (text,))
        if row is None and text.isdigit():
            row = await self._one(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (int(text),))
        if row is None:
            raise RunNotFound(f"no run {text!r} in {self.path} (give an id, a name, or latest; see `hbtui runs`)")
        return _run_row(row)

    async def claim_run(self, run_id: int, owner: str) -> None:
        """Make ``owner`` the one process driving the run, unless another live one does."""
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            row = await self._one("SELECT owner, heartbeat_at, status FROM runs WHERE id = ?", (run_id,))
            if row is None:
                raise RunNotFound(f"no run with id {run_id}")
            current, heartbeat, status = row
            live = heartbeat and time.time() - heartbeat <= HEARTBEAT_STALE_SECONDS and owner_alive(current)
            if current and current != owner and live:
                raise RunBusy(
                    f"run {run_id} is being driven by process {current} (heartbeat {time.time() - heartbeat:.0f} s ago);"
                    " watch it with `hbtui monitor` instead"
                )
            await db.execute(
                "UPDATE runs SET owner = ?, heartbeat_at = ?, status = 'running', error = NULL, finished_at = NULL"
                " WHERE id = ?",
                (owner, time.time(), run_id),
            )
            await db.commit()
        except BaseException:
            await db.rollback()
            raise

    async def heartbeat(self, run_id: int, owner: str, live: dict) -> None:
        await self.db.execute(
            "UPDATE runs SET heartbeat_at = ?, live_json = ? WHERE id = ? AND owner = ?",
            (time.time(), json.dumps(live), run_id, owner),
        )
        await self.db.commit()

    async def finish_run(
        self, run_id: int, status: str, *, error: str | None = None, report: dict | None = None, folder: str | None = None
    ) -> None:
        score = report.get("overall_score") if report else None
        await self.db.execute(
            "UPDATE runs SET status = ?, error = ?, finished_at = ?, report_json = COALESCE(?, report_json),"
            " score = COALESCE(?, score), folder = COALESCE(?, folder), owner = NULL, heartbeat_at = NULL"
            " WHERE id = ?",
            (status, error, time.time(), json.dumps(report) if report else None, score, folder, run_id),
        )
        await self.db.commit()

    async def set_folder(self, run_id: int, folder: str) -> None:
        await self.db.execute("UPDATE runs SET folder = ? WHERE id = ?", (folder, run_id))
        await self.db.commit()

    async def log(self, run_id: int, level: str, message: str) -> None:
        await self.db.execute(
            "INSERT INTO run_log (run_id, at, level, message) VALUES (?, ?, ?, ?)", (run_id, time.time(), level, message)
        )
        await self.db.commit()

    async def pending_work(self, run_id: int) -> list[WorkItem]:
        """Conversations without a reply, or with verdicts still pending, in plan order."""
        conversations = await self._all(
            "SELECT c.id, c.position, c.status, c.reply, c.example_tags, r.body FROM conversations c"
            " JOIN records r ON r.id = c.record_id WHERE c.run_id = ? AND c.status != 'failed'"
            " AND (c.status = 'pending' OR EXISTS (SELECT 1 FROM verdicts v WHERE v.conversation_id = c.id"
            " AND v.status = 'pending')) ORDER BY c.position",
            (run_id,),
        )
        if not conversations:
            return []
        verdicts: dict[int, list[tuple]] = {}
        for conv_id, idx, text, points, tags, status in await self._all(
            "SELECT conversation_id, idx, criterion, points, tags, status FROM verdicts WHERE run_id = ?"
            " AND conversation_id IN (SELECT c.id FROM conversations c WHERE c.run_id = ? AND c.status != 'failed'"
            " AND (c.status = 'pending' OR EXISTS (SELECT 1 FROM verdicts v WHERE v.conversation_id = c.id"
            " AND v.status = 'pending'))) ORDER BY conversation_id, idx",
            (run_id, run_id),
        ):
            verdicts.setdefault(conv_id, []).append((idx, text, points, tuple(json.loads(tags)), status))
        items = []
        for conv_id, position, status, reply, example_tags, body in conversations:
            rows = verdicts.get(conv_id, [])
            items.append(
                WorkItem(
                    conversation_id=conv_id,
                    position=position,
                    prompt=json.loads(body)["prompt"],
                    reply=reply if status == "generated" else None,
                    criteria=[(idx, text, points) for idx, text, points, _, st in rows if st == PENDING],
                    all_criteria=[(idx, points, tags, st) for idx, _, points, tags, st in rows],
                    example_tags=json.loads(example_tags),
                )
            )
        return items

    async def reset_errors(self, run_id: int, kinds: Iterable[str] | None = None, owner: str | None = None
                           ) -> tuple[int, int]:
        """Put failed verdicts (and transiently failed replies) back in the queue; nothing is deleted.

        Refused while another live process drives the run (its work list is already made, so it
        would leave them pending); ``owner`` is the caller's own owner id, which may.
        """
        from hbtui.client import TRANSIENT_KINDS, UNPARSEABLE

        retry_kinds = set(kinds) if kinds else TRANSIENT_KINDS | {UNPARSEABLE}
        marks = ",".join("?" * len(retry_kinds))
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            current, heartbeat = await self._one("SELECT owner, heartbeat_at FROM runs WHERE id = ?", (run_id,))
            if (current and current != owner and heartbeat and time.time() - heartbeat <= HEARTBEAT_STALE_SECONDS
                    and owner_alive(current)):
                raise RunBusy(f"run {run_id} is being driven by process {current}; retry its errors once it stops")
            verdicts = await db.execute(
                f"UPDATE verdicts SET status = 'pending' WHERE run_id = ? AND status = 'error'"
                f" AND (error_kind IN ({marks}) OR error_kind IS NULL)",
                (run_id, *retry_kinds),
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
            await db.commit()
        except BaseException:
            await db.rollback()
            raise
        return verdicts.rowcount, replies.rowcount

    async def refresh_summaries(self, run_id: int) -> int:
        """Recompute every conversation's score from its verdicts.

        The engine writes a conversation's summary after its last verdict; a kill between the two
        commits, or a regrade, would leave it stale. Scores come from the same scoring function as
        reports, so the list, the histogram and `show` always agree.
        """
        from hbtui.scoring import conversation_score

        per_conversation: dict[int, list[tuple[float, str]]] = {}
        for conv_id, points, status in await self._all(
            "SELECT conversation_id, points, status FROM verdicts WHERE run_id = ? ORDER BY conversation_id, idx",
            (run_id,),
        ):
            per_conversation.setdefault(conv_id, []).append((points, status))
        rows = []
        for conv_id, items in per_conversation.items():
            statuses = [s for _, s in items]
            complete = all(s in (MET, NOT_MET) for s in statuses)
            score = conversation_score([p for p, _ in items], [s == MET for _, s in items]) if complete else None
            n_met = sum(1 for p, s in items if s == MET and p > 0)
            penalties = sum(1 for p, s in items if s == MET and p < 0)
            rows.append((score, n_met, statuses.count(ERROR), penalties, conv_id))
        await self.db.executemany(
            "UPDATE conversations SET score = ?, n_met = ?, n_errors = ?, penalties = ? WHERE id = ?", rows
        )
        await self.db.commit()
        return len(rows)

    # ---- batched writes from the engine --------------------------------------------------
    async def write_batch(
        self,
        replies: Sequence[tuple] = (),
        verdicts: Sequence[tuple] = (),
        summaries: Sequence[tuple] = (),
        log: Sequence[tuple] = (),
    ) -> None:
        """One transaction for everything that completed since the last batch.

        replies: (status, reply, reasoning, finish_reason, error, error_kind, attempts, latency_ms,
                  prompt_tokens, completion_tokens, generated_at, conversation_id)
        Attempts and tokens add up over retries (regrade, resume): all of them were spent.
        verdicts: (status, explanation, raw_output, reasoning, error, error_kind, attempts, latency_ms,
                   prompt_tokens, completion_tokens, graded_at, conversation_id, idx)
        summaries: (score, n_met, n_errors, penalties, conversation_id)
        log: (run_id, at, level, message)
        """
        db = self.db
        try:
            if replies:
                await db.executemany(
                    "UPDATE conversations SET status = ?, reply = ?, reasoning = ?, finish_reason = ?, error = ?,"
                    " error_kind = ?, attempts = attempts + ?, latency_ms = ?,"
                    " prompt_tokens = coalesce(prompt_tokens, 0) + coalesce(?, 0),"
                    " completion_tokens = coalesce(completion_tokens, 0) + coalesce(?, 0),"
                    " generated_at = ? WHERE id = ?",
                    replies,
                )
            if verdicts:
                await db.executemany(
                    "UPDATE verdicts SET status = ?, explanation = ?, raw_output = ?, reasoning = ?, error = ?,"
                    " error_kind = ?, attempts = attempts + ?, latency_ms = ?,"
                    " prompt_tokens = coalesce(prompt_tokens, 0) + coalesce(?, 0),"
                    " completion_tokens = coalesce(completion_tokens, 0) + coalesce(?, 0),"
                    " graded_at = ? WHERE conversation_id = ? AND idx = ?",
                    verdicts,
                )
            if summaries:
                await db.executemany(
                    "UPDATE conversations SET score = ?, n_met = ?, n_errors = ?, penalties = ? WHERE id = ?",
                    summaries,
                )
            if log:
                await db.executemany("INSERT INTO run_log (run_id, at, level, message) VALUES (?, ?, ?, ?)", log)
            await db.commit()
        except BaseException:
            if db.in_transaction:
                await db.rollback()
            raise

    # ---- reading for reports, screens and exports ----------------------------------------
    async def scoring_inputs(self, run_id: int) -> list[ConversationInput]:
        conversations = await self._all(
            "SELECT id, status, example_tags FROM conversations WHERE run_id = ? ORDER BY position", (run_id,)
        )
        criteria: dict[int, list[GradedCriterion]] = {}
        errors: dict[int, int] = {}
        for conv_id, points, tags, status in await self._all(
            "SELECT conversation_id, points, tags, status FROM verdicts WHERE run_id = ? ORDER BY conversation_id, idx",
            (run_id,),
        ):
            met = True if status == MET else False if status == NOT_MET else None
            criteria.setdefault(conv_id, []).append(GradedCriterion(points, tuple(json.loads(tags)), met))
            if status == ERROR:
                errors[conv_id] = errors.get(conv_id, 0) + 1
        return [
            ConversationInput(
                example_tags=json.loads(tags),
                criteria=criteria.get(conv_id, []),
                excluded=status == "failed",
                errors=errors.get(conv_id, 0),
            )
            for conv_id, status, tags in conversations
        ]

    async def progress(self, run_id: int) -> Progress:
        conv = dict(
            await self._all("SELECT status, count(*) FROM conversations WHERE run_id = ? GROUP BY status", (run_id,))
        )
        scored = (await self._one(
            "SELECT count(*) FROM conversations WHERE run_id = ? AND score IS NOT NULL", (run_id,)
        ))[0]
        verdict_counts = dict(
            await self._all("SELECT status, count(*) FROM verdicts WHERE run_id = ? GROUP BY status", (run_id,))
        )
        # Criteria of a conversation that got no reply will never be graded: they are not work left.
        unreachable = (await self._one(
            "SELECT coalesce(sum(n_criteria), 0) FROM conversations WHERE run_id = ? AND status = 'failed'", (run_id,)
        ))[0]
        kinds: dict[str, int] = {}
        for kind, count in await self._all(
            "SELECT error_kind, count(*) FROM verdicts WHERE run_id = ? AND status = 'error' GROUP BY error_kind",
            (run_id,),
        ):
            kinds[kind or "unknown"] = kinds.get(kind or "unknown", 0) + count
        for kind, count in await self._all(
            "SELECT error_kind, count(*) FROM conversations WHERE run_id = ? AND status = 'failed' GROUP BY error_kind",
            (run_id,),
        ):
            key = f"reply {kind or 'unknown'}"
            kinds[key] = kinds.get(key, 0) + count
        test_tokens = await self._one(
            "SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM conversations"
            " WHERE run_id = ?",
            (run_id,),
        )
        grader_tokens = await self._one(
            "SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM verdicts WHERE run_id = ?",
            (run_id,),
        )
        total_conv = sum(conv.values())
        total_criteria = sum(verdict_counts.values())
        return Progress(
            conversations_total=total_conv,
            conversations_generated=conv.get("generated", 0),
            conversations_failed=conv.get("failed", 0),
            conversations_scored=scored,
            criteria_total=total_criteria,
            criteria_done=total_criteria - verdict_counts.get(PENDING, 0) + unreachable,
            criteria_met=verdict_counts.get(MET, 0),
            criteria_errors=verdict_counts.get(ERROR, 0),
            errors_by_kind=kinds,
            prompt_tokens_test=test_tokens[0],
            completion_tokens_test=test_tokens[1],
            prompt_tokens_grader=grader_tokens[0],
            completion_tokens_grader=grader_tokens[1],
        )

    async def recent_latencies(self, run_id: int, limit: int = 500) -> list[float]:
        rows = await self._all(
            "SELECT latency_ms FROM verdicts WHERE run_id = ? AND graded_at IS NOT NULL AND latency_ms IS NOT NULL"
            " ORDER BY graded_at DESC LIMIT ?",
            (run_id, limit),
        )
        return [r[0] for r in rows]

    async def calls_since(self, run_id: int, since: float) -> int:
        verdicts = await self._one(
            "SELECT count(*) FROM verdicts WHERE run_id = ? AND graded_at > ?", (run_id, since)
        )
        replies = await self._one(
            "SELECT count(*) FROM conversations WHERE run_id = ? AND generated_at > ?", (run_id, since)
        )
        return verdicts[0] + replies[0]

    async def recent_errors(self, run_id: int, limit: int = 20) -> list[tuple[float, str, str]]:
        rows = await self._all(
            "SELECT graded_at, error_kind, error FROM verdicts WHERE run_id = ? AND status = 'error'"
            " UNION ALL SELECT generated_at, error_kind, error FROM conversations WHERE run_id = ? AND status = 'failed'"
            " ORDER BY 1 DESC LIMIT ?",
            (run_id, run_id, limit),
        )
        return [(r[0] or 0.0, r[1] or "unknown", r[2] or "") for r in rows]

    async def conversation_scores(self, run_id: int) -> list[float]:
        return [r[0] for r in await self._all(
            "SELECT score FROM conversations WHERE run_id = ? AND score IS NOT NULL ORDER BY position", (run_id,)
        )]

    async def themes(self, run_id: int) -> list[str]:
        return [r[0] for r in await self._all(
            "SELECT DISTINCT theme FROM conversations WHERE run_id = ? AND theme IS NOT NULL ORDER BY theme", (run_id,)
        )]

    async def count_conversations(self, run_id: int, flt: ConversationFilter | None = None) -> int:
        where, args = (flt or ConversationFilter()).where()
        return (await self._one(f"SELECT count(*) FROM conversations WHERE run_id = ?{where}", (run_id, *args)))[0]

    async def conversation_page(
        self, run_id: int, flt: ConversationFilter | None = None, sort: str = "position", offset: int = 0, limit: int = 100
    ) -> list[ConversationSummary]:
        where, args = (flt or ConversationFilter()).where()
        rows = await self._all(
            f"SELECT {SUMMARY_COLUMNS} FROM conversations WHERE run_id = ?{where} ORDER BY {SORTS[sort]}"
            " LIMIT ? OFFSET ?",
            (run_id, *args, limit, offset),
        )
        return [ConversationSummary(*r) for r in rows]

    async def conversation_ids(self, run_id: int, flt: ConversationFilter | None = None, sort: str = "position") -> list[int]:
        """Ids in list order, for next/previous conversation without reloading pages."""
        where, args = (flt or ConversationFilter()).where()
        return [r[0] for r in await self._all(
            f"SELECT id FROM conversations WHERE run_id = ?{where} ORDER BY {SORTS[sort]}", (run_id, *args)
        )]

    async def conversation_detail(self, conversation_id: int) -> ConversationDetail:
        row = await self._one(
            f"SELECT {SUMMARY_COLUMNS}, example_tags, reply, reasoning, finish_reason, error, record_id"
            " FROM conversations WHERE id = ?",
            (conversation_id,),
        )
        if row is None:
            raise StoreError(f"no conversation {conversation_id}")
        summary = ConversationSummary(*row[:14])
        example_tags, reply, reasoning, finish_reason, error, record_id = row[14:]
        body = (await self._one("SELECT body FROM records WHERE id = ?", (record_id,)))[0]
        verdicts = [
            VerdictRow(idx, text, points, json.loads(tags), status, explanation, raw, vreason, verror, kind, attempts, latency)
            for idx, text, points, tags, status, explanation, raw, vreason, verror, kind, attempts, latency in await self._all(
                "SELECT idx, criterion, points, tags, status, explanation, raw_output, reasoning, error, error_kind,"
                " attempts, latency_ms FROM verdicts WHERE conversation_id = ? ORDER BY idx",
                (conversation_id,),
            )
        ]
        return ConversationDetail(
            summary=summary,
            prompt=json.loads(body)["prompt"],
            example_tags=json.loads(example_tags),
            reply=reply,
            reasoning=reasoning,
            finish_reason=finish_reason,
            error=error,
            verdicts=verdicts,
        )

    async def export_rows(self, run_id: int):
        """Conversations with their verdicts in plan order, one at a time (an export never holds a run whole)."""
        cursor = await self.db.execute(
            "SELECT c.id, c.position, c.repeat, c.prompt_id, c.example_tags, c.status, c.reply, c.reasoning,"
            " c.finish_reason, c.error, c.error_kind, c.score, r.body FROM conversations c"
            " JOIN records r ON r.id = c.record_id WHERE c.run_id = ? ORDER BY c.position",
            (run_id,),
        )
        rows = await cursor.fetchall()
        await cursor.close()
        for row in rows:
            verdicts = await self._all(
                "SELECT idx, criterion, points, tags, status, explanation, error, error_kind FROM verdicts"
                " WHERE conversation_id = ? ORDER BY idx",
                (row[0],),
            )
            yield row, verdicts


def owner_alive(owner: str | None) -> bool:
    """False when the owner ran on this machine and its process is gone (killed, crashed).

    A heartbeat alone would make a user wait out its staleness before resuming a run whose
    process they just killed; on another machine, the heartbeat is all we can go by.
    """
    if not owner or ":" not in owner:
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
