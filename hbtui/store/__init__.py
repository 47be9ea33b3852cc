"""The SQLite store: the hub that the engine writes and every screen and command reads.

WAL mode lets readers (a monitor in another SSH session, the browser) read while the engine
writes. Writes come in batches from the engine's writer task (group commit): each batch is one
transaction, so what is committed is always whole, and a killed run loses at most the calls
whose answers had not reached the database yet.

The rows it hands out are in rows.py, the engine's work and results in work.py, its queries in
reads.py and its writes in writes.py (both over connection.py); this module opens the file,
checks and migrates its schema, and puts the reads and writes together as Store.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import aiosqlite

from hbtui.core.verdicts import ERROR, MET, NOT_MET, PENDING
from hbtui.store import schema
from hbtui.store.batch_submissions import StoreBatchSubmissions, Submission
from hbtui.store.browse_reads import (
    CriterionStats,
    IdealCompletions,
    RepeatGroup,
    ReviewPosition,
    StoreBrowse,
)
from hbtui.store.meta_eval import INSERT_CHUNK, MetaEvalResult, MetaEvalRowView, MetaEvalWork, StoreMetaEval
from hbtui.store.owners import owner_alive
from hbtui.store.reads import StoreReads
from hbtui.store.review_store import NothingToReview, StoreReviews
from hbtui.store.rows import (
    HEARTBEAT_STALE_SECONDS,
    ConversationDetail,
    ConversationFilter,
    ConversationOutcome,
    ConversationSummary,
    ImportedReply,
    ImportedVerdict,
    Progress,
    RunBusy,
    RunNotFound,
    RunRow,
    RunTakenOver,
    StoreError,
    VerdictRow,
    conversation_outcome,
    verdict_met,
)
from hbtui.store.run_actions import Deleted, RunInUse, StoreRunActions
from hbtui.store.search_hits import SearchMatches
from hbtui.store.work import (
    CachedVerdict,
    ConversationScore,
    LogLine,
    PlannedConversation,
    ReplyResult,
    ResultBatch,
    RunClaim,
    VerdictResult,
    WorkItem,
)

# How long one statement waits for another connection's write lock before SQLite gives up with
# "database is locked". The engine's writer then keeps what it holds and tries again (see
# hbtui.engine.result_writer); settable for tests that hold a lock (HBTUI_BUSY_TIMEOUT, seconds).
BUSY_TIMEOUT_SECONDS = float(os.environ.get("HBTUI_BUSY_TIMEOUT") or 10.0)


class NoRunsYet(StoreError):
    """A database file that does not exist or is empty: reading it finds no runs."""


class ReadOnlyDatabase(StoreError):
    """SQLite cannot write beside the database: its folder or the file is read-only."""


def _problem(path: Path, exc: sqlite3.Error, otherwise: str) -> str:
    """What to tell about an SQLite error on ``path``; a read-only place raises ReadOnlyDatabase.

    SQLite reports a WAL database in a read-only folder as "unable to open database file" (it
    cannot create the -shm file) or SQLITE_READONLY_DIRECTORY, which reads like a broken file.
    """
    folder = path.parent
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
        if name == "SQLITE_READONLY_DIRECTORY" or not os.access(folder, os.W_OK):
            raise ReadOnlyDatabase(f"{path}: the folder {folder} is read-only ({exc})")
        if not os.access(path, os.W_OK):
            raise ReadOnlyDatabase(f"{path}: the file is read-only ({exc})")
    return f"{path}: {otherwise}"


def _refused_as_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds what this one asked for."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(exc)


def _read_only_uri(path: Path) -> str:
    """An SQLite URI that reads ``path`` without writing beside it.

    With a -wal file, a read-only connection reads it (and what it holds: the newest commits).
    Without one, nothing can be writing (a writer would have to create it, in a folder nobody
    can write to), so the file is read as immutable, which needs no -shm either.
    """
    # Imported here: urllib.request (with http.client and email) was 15 ms of every command's start.
    from urllib.request import pathname2url

    uri = "file:" + pathname2url(str(path.resolve()))
    return uri + ("?mode=ro" if Path(f"{path}-wal").exists() else "?immutable=1")


__all__ = [
    "ERROR",
    "HEARTBEAT_STALE_SECONDS",
    "INSERT_CHUNK",
    "MET",
    "NOT_MET",
    "PENDING",
    "CachedVerdict",
    "ConversationDetail",
    "ConversationFilter",
    "ConversationOutcome",
    "ConversationScore",
    "ConversationSummary",
    "CriterionStats",
    "Deleted",
    "IdealCompletions",
    "ImportedReply",
    "ImportedVerdict",
    "LogLine",
    "MetaEvalResult",
    "MetaEvalRowView",
    "MetaEvalWork",
    "NoRunsYet",
    "NothingToReview",
    "PlannedConversation",
    "Progress",
    "ReadOnlyDatabase",
    "RepeatGroup",
    "ReplyResult",
    "ResultBatch",
    "ReviewPosition",
    "RunBusy",
    "RunClaim",
    "RunInUse",
    "RunNotFound",
    "RunRow",
    "RunTakenOver",
    "SearchMatches",
    "Store",
    "StoreError",
    "Submission",
    "VerdictResult",
    "VerdictRow",
    "WorkItem",
    "conversation_outcome",
    "owner_alive",
    "verdict_met",
]


class Store(StoreReads, StoreBrowse, StoreMetaEval, StoreRunActions, StoreReviews, StoreBatchSubmissions):
    """An open hbtui database: ``await Store.open(path)``, then its reads and writes."""

    @classmethod
    async def open(cls, path: str | Path, *, create: bool = True, read_only: bool = False) -> Store:
        """``create``: a missing file or an empty database gets the schema (a run is starting).
        Otherwise both are NoRunsYet, and nothing is written. ``read_only``: a database in a
        read-only folder or file is opened for reading rather than refused."""
        path = Path(path)
        if path.is_dir():
            raise StoreError(f"{path}: is a directory, not a database file")
        if not path.exists():
            if not create:
                raise NoRunsYet(f"{path}: no such database")
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                # Created owner-only before SQLite touches it: a run's prompts and replies are private.
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise StoreError(f"{path}: cannot create the database ({exc.strerror})") from None
        try:
            return await cls._connect(path, str(path), create=create, writable=True)
        except ReadOnlyDatabase:
            if not read_only:
                raise
        return await cls._connect(path, _read_only_uri(path), create=False, writable=False)

    @classmethod
    async def _connect(cls, path: Path, target: str, *, create: bool, writable: bool) -> Store:
        try:
            connection = await aiosqlite.connect(target, timeout=BUSY_TIMEOUT_SECONDS, uri=target.startswith("file:"))
        except sqlite3.Error as exc:
            raise StoreError(_problem(path, exc, f"cannot open ({exc})")) from None
        store = cls(connection, path)
        try:
            await store._prepare(create, writable)
        except BaseException:
            await connection.close()
            raise
        return store

    async def _header(self) -> tuple[int, int, int]:
        """(schema version, application id, number of tables)."""
        # One statement, so one snapshot: read apart, another process creating the schema between
        # the reads made a new file look like a stranger's (tables, but no application id yet).
        version, application_id, tables = await self._one(
            "SELECT (SELECT user_version FROM pragma_user_version),"
            " (SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_master)"
        )
        return version, application_id, tables

    async def _prepare(self, create: bool, writable: bool) -> None:
        db = self.db
        version, tables = await self._check_header(create)
        try:
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
            if not writable:
                if version < schema.SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path}: schema version {version} needs an upgrade to"
                        f" {schema.SCHEMA_VERSION}, which cannot be written here (read-only)"
                    )
                return
            await self._set_up_for_writing(create, version, tables)
        except sqlite3.OperationalError as exc:
            raise StoreError(_problem(self.path, exc, str(exc))) from None

    async def _check_header(self, create: bool) -> tuple[int, int]:
        """(schema version, number of tables) of a file that is hbtui's, or empty and ``create``."""
        try:
            version, app_id, tables = await self._header()
        except sqlite3.DatabaseError as exc:
            raise StoreError(_problem(self.path, exc, f"not an hbtui database ({exc})")) from None
        if tables and app_id != schema.APPLICATION_ID:
            raise StoreError(f"{self.path}: an SQLite file, but not an hbtui database")
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this hbtui understands "
                f"({schema.SCHEMA_VERSION}); upgrade hbtui"
            )
        if not tables and not create:
            raise NoRunsYet(f"{self.path}: holds no runs yet (an empty database)")
        return version, tables

    async def _set_up_for_writing(self, create: bool, version: int, tables: int) -> None:
        """WAL mode, then the schema made or migrated, however many processes open a new file.

        SQLite's busy timeout does not cover every step of that: while other processes switch a
        new file from its rollback journal to WAL, a switch or a read can be refused at once with
        "database is locked" (CI saw 5 of 30 processes opening one new file refused so). Such a
        refusal is tried again, the header read anew, until the busy timeout has passed.
        """
        db = self.db
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                # Already WAL (every file but a new one): nothing to switch, no lock to take.
                (mode,) = await self._one("PRAGMA journal_mode")
                if str(mode).lower() != "wal":
                    await db.execute("PRAGMA journal_mode=WAL")
                await db.execute("PRAGMA synchronous=NORMAL")
                if not tables and await self._create_schema():
                    return
                if version < schema.SCHEMA_VERSION:
                    await self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if not _refused_as_busy(exc) or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(0.02)
            version, tables = await self._check_header(create)

    async def _create_schema(self) -> bool:
        """The whole schema of a new file in one script, one hand-over to SQLite's thread rather
        than one a statement (some sixty: 30-50 ms of a run's start while other threads want the
        interpreter too). False if another process created it first: its CREATE TABLE then
        fails here, and _migrate reads what that process left."""
        db = self.db
        try:
            await db.executescript(f"BEGIN IMMEDIATE;\n{schema.fresh_schema_script()}\nCOMMIT;")
        except sqlite3.OperationalError:
            if db.in_transaction:
                await db.rollback()
            return False
        return True

    async def _migrate(self) -> None:
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process opening the same new file may
            # have created or upgraded the schema since this one looked.
            version, _, tables = await self._header()
            if not tables:
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

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
