"""A database as hbtui left it just before one migration, to test that migration on its own.

Tests name the migration, not a version number: branches merged in any order renumber versions,
and "the schema before" must keep meaning the one this migration upgrades.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hbtui import schema


def version_before(migration: str) -> int:
    """The schema version that ``migration`` (one of schema's MIGRATE_* texts) upgrades from."""
    (version,) = [version for version, script in schema.MIGRATIONS.items() if script is migration]
    return version


def make_database_before(path: Path, migration: str) -> int:
    """Write at ``path`` an hbtui database of the schema ``migration`` upgrades; return its version."""
    before = version_before(migration)
    with sqlite3.connect(path) as conn:
        for statement in schema.statements(schema.SCHEMA_V1):
            conn.execute(statement)
        for version in range(1, before):
            for statement in schema.statements(schema.MIGRATIONS[version]):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={before}")
    conn.close()
    return before
