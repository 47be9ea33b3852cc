"""The connection the store's reads and writes share, and their two ways of fetching."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import aiosqlite

Version = tuple[int, int]  # Connection.database_version
ReadT = TypeVar("ReadT")


class ReadsByVersion(Generic[ReadT]):
    """Reads kept until the database changes: each under its key, with the database version it
    was read at; the ``kept`` keys last asked for."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._reads: OrderedDict[Hashable, tuple[Version, ReadT]] = OrderedDict()

    def get(self, key: Hashable, version: Version) -> ReadT | None:
        """What was read under ``key`` at ``version``; None if it was not, or at another."""
        found = self._reads.get(key)
        if found is None or found[0] != version:
            return None
        self._reads.move_to_end(key)
        return found[1]

    def put(self, key: Hashable, version: Version, read: ReadT) -> None:
        self._reads[key] = (version, read)
        self._reads.move_to_end(key)
        while len(self._reads) > self.kept:
            self._reads.popitem(last=False)


class Connection:
    def __init__(self, connection: aiosqlite.Connection, path: Path) -> None:
        self.db = connection
        self.path = path

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        cursor = await self.db.execute(sql, args)
        rows = await cursor.fetchall()
        await cursor.close()
        return list(rows)

    async def _all_named(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows as mappings from each column's name (its ``AS`` name) to its value: for
        rows read into records by field name (rows.select_list names the columns so)."""
        cursor = await self.db.execute(sql, args)
        names = [column[0] for column in cursor.description]
        rows = await cursor.fetchall()
        await cursor.close()
        return [dict(zip(names, row, strict=True)) for row in rows]

    async def _one_named(self, sql: str, args: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = await self._all_named(sql, args)
        return rows[0] if rows else None

    async def database_version(self) -> Version:
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
