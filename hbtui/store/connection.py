"""The connection the store's reads and writes share, and their two ways of fetching."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite


class Connection:
    def __init__(self, connection: aiosqlite.Connection, path: Path) -> None:
        self.db = connection
        self.path = path

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        cursor = await self.db.execute(sql, args)
        rows = await cursor.fetchall()
        await cursor.close()
        return list(rows)

    async def database_version(self) -> tuple[int, int]:
        """What changes with the database: another connection's commit (SQLite's data_version)
        or a row this one changed. The same twice: nothing was written in between."""
        (version,) = await self._one("PRAGMA data_version")
        return version, self.db.total_changes

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        cursor = await self.db.execute(sql, args)
        row = await cursor.fetchone()
        await cursor.close()
        return row

    @asynccontextmanager
    async def _transaction(self, *, immediate: bool = True) -> AsyncIterator[None]:
        """One transaction: committed when the block ends, rolled back whatever stops it (a
        cancel included). ``immediate`` takes the write lock first (BEGIN IMMEDIATE), so that the
        block's reads see what its writes are based on; otherwise the first write begins it."""
        if immediate:
            await self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            await self.db.commit()
        except BaseException:
            if self.db.in_transaction:
                await self.db.rollback()
            raise
