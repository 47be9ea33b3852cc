"""The SQLite store: the hub that the engine writes and every screen and command reads.

WAL mode lets readers (a monitor in another SSH session, the browser) read while the engine
writes. Writes come in batches from the engine's writer task (group commit): each batch is one
transaction, so what is committed is always whole, and a killed run loses at most the calls
whose answers had not reached the database yet.

The rows it hands out are in rows.py, its queries in reads.py and its writes in writes.py (both
over connection.py); this module opens the file, checks and migrates its schema, and puts the
reads and writes together as Store.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import aiosqlite

from hbtui import schema
from hbtui.store.reads import StoreReads
from hbtui.store.rows import (
    ConversationDetail,
    ConversationFilter,
    ConversationSummary,
    ERROR,
    HEARTBEAT_STALE_SECONDS,
    MET,
    NOT_MET,
    PENDING,
    PlannedConversation,
    Progress,
    RunBusy,
    RunNotFound,
    RunRow,
    RunTakenOver,
    StoreError,
    VerdictRow,
    WorkItem,
    owner_alive,
)
from hbtui.store.writes import StoreWrites

# How long one statement waits for another connection's write lock before SQLite gives up with
# "database is locked". The engine's writer then keeps what it holds and tries again (see
# Engine._writer); settable for tests that hold a lock (HBTUI_BUSY_TIMEOUT, seconds).
BUSY_TIMEOUT_SECONDS = float(os.environ.get("HBTUI_BUSY_TIMEOUT") or 10.0)

__all__ = [
    "Store", "ConversationDetail", "ConversationFilter", "ConversationSummary", "ERROR",
    "HEARTBEAT_STALE_SECONDS", "MET", "NOT_MET", "PENDING", "PlannedConversation", "Progress",
    "RunBusy", "RunNotFound", "RunRow", "RunTakenOver", "StoreError", "VerdictRow", "WorkItem", "owner_alive",
]


class Store(StoreReads, StoreWrites):
    """An open hbtui database: ``await Store.open(path)``, then its reads and writes."""

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
            connection = await aiosqlite.connect(path, timeout=BUSY_TIMEOUT_SECONDS)
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
            await db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
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
