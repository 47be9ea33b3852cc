"""A database as an older hbtui left it, for the tests of its migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hbtui import schema


def database_at(path: Path, version: int) -> Path:
    """A database of schema ``version`` holding one finished run named ``old``, made as that
    version's hbtui made it (the first schema and the migrations up to it)."""
    with sqlite3.connect(path) as conn:
        for statement in schema.statements(schema.SCHEMA_V1):
            conn.execute(statement)
        for step in range(1, version):
            for statement in schema.statements(schema.MIGRATIONS[step]):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={version}")
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " ('old', 'finished', 0, 'd', 'x', 'm', 'g', '{}', '{}', 0, 0)"
        )
    return path
