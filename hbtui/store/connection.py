"""The connection the store's reads and writes share, and their two ways of fetching."""

from __future__ import annotations

from collections.abc import Sequence
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

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        cursor = await self.db.execute(sql, args)
        row = await cursor.fetchone()
        await cursor.close()
        return row
