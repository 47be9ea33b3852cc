"""A database as an older hbtui left it, to test a migration on its own.

Tests name the migration, not a version number: branches merged in any order renumber versions,
and "the schema before" must keep meaning the one this migration upgrades.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hbtui.store import schema


def version_before(migration: str) -> int:
    """The schema version that ``migration`` (one of schema's MIGRATE_* texts) upgrades from."""
    (version,) = [version for version, script in schema.MIGRATIONS.items() if script is migration]
    return version


def make_database_before(path: Path, migration: str) -> int:
    """Write at ``path`` an hbtui database of the schema ``migration`` upgrades; return its version."""
    before = version_before(migration)
    _build(path, before)
    return before


def database_at(path: Path, version: int) -> Path:
    """A database of schema ``version`` holding one finished run named ``old``, made as that
    version's hbtui made it (the first schema and the migrations up to it)."""
    _build(path, version)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " ('old', 'finished', 0, 'd', 'x', 'm', 'g', '{}', '{}', 0, 0)"
        )
    conn.close()
    return path


def _build(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        for statement in schema.statements(schema.SCHEMA_V1):
            conn.execute(statement)
        for step in range(1, version):
            for statement in schema.statements(schema.MIGRATIONS[step]):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={version}")
    conn.close()
